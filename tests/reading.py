"""What the sketch step reads: a Spark sketcher that records every data file it is asked
to read, and where a contract-suite driver's table is (``tests/core/formats``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from lakestats.config import Config
from lakestats.model import ColumnSketch, TableSchema
from lakestats.sketching import SparkSketcher


class ReadingSketcher:
    """The Spark sketcher, recording every data file it is asked to read."""

    def __init__(self, config: Config) -> None:
        self.inner = SparkSketcher(config)
        self.read: list[str] = []

    @property
    def startup_s(self) -> float:
        return self.inner.startup_s

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int], **kw: Any
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        self.read.extend(paths)
        return self.inner(paths, schema, bounds_for, **kw)


def location_of(driver: Any) -> str:
    """The table location of a ``test_contract`` driver, as lakestats opens it."""
    if driver.format_name == "iceberg":
        return str(driver.warehouse.location(driver.name))
    if driver.format_name == "delta":
        return str(driver.writer.path)
    return str(driver.location)
