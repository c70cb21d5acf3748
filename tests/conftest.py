"""Session-wide fixtures: one real local SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from object_store import S3Server, export_environment

# Before any Spark starts: its Python workers inherit the S3 endpoint (tests/object_store.py)
export_environment()

# The in-process CLI tests share this process with the session's SparkSession, so the CLI
# warns that its own Spark settings are ignored. Keeping structlog's default output (stdout,
# looked up per message) here leaves stderr to what those tests assert on; the CLI's own
# routing of log events to stderr is tested in a subprocess (tests/core/test_cli_ops.py).
structlog.configure(logger_factory=structlog.PrintLoggerFactory())


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The process-wide SparkSession (local[2], UI off, few shuffle partitions)."""
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark

    session = get_spark(
        SparkSettings(
            master="local[2]",
            conf={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
            },
        )
    )
    yield session
    stop_spark()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """An S3 server on 127.0.0.1 (moto: AWS cannot exist here), started on first use."""
    server = S3Server()
    yield server
    server.stop()
