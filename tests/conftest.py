"""Session-wide fixtures: one real local SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


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
