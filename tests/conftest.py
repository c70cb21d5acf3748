"""Session-wide fixtures: one real local SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from object_store import S3Server, export_environment

# The in-process CLI tests share this process with the session's SparkSession, so the CLI
# warns that its own Spark settings are ignored. Keeping structlog's default output (stdout,
# looked up per message) here leaves stderr to what those tests assert on; the CLI's own
# routing of log events to stderr is tested in a subprocess (tests/core/test_cli_ops.py).
structlog.configure(logger_factory=structlog.PrintLoggerFactory())


def pytest_configure(config: pytest.Config) -> None:
    # Before any Spark starts: its Python workers inherit the S3 endpoint
    # (tests/object_store.py). Under pytest-xdist only the workers run tests, and each
    # needs a port of its own: the controller exports nothing for them to inherit.
    distributing = bool(getattr(config.option, "numprocesses", None))
    if hasattr(config, "workerinput") or not distributing:
        export_environment()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `make test` hands whole files to its workers in collection order
    # (`--dist loadfile --no-loadscope-reorder`): the files with long-running (`slow`)
    # tests go first, so that none is left to run alone at the end while the other
    # workers idle.
    if hasattr(config, "workerinput"):
        slow_files = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow_files)


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
