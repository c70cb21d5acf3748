"""The sketch step of the commit path: one Spark job per batch, on the process-wide session.

``Sketcher`` is what the commit path needs (paths + schema → block sketches per file);
``SparkSketcher`` is the real one. pyspark is imported on first use: it takes seconds to
import, and metadata-only runs need none.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from lakestats.config import Config
from lakestats.locations import LocationMap
from lakestats.model import ColumnSketch, TableSchema
from lakestats.plan import BatchPlan, Sketches
from lakestats.sketches.spark import SparkSettings, get_spark


class Sketcher(Protocol):
    """Reads data files and returns block-level sketches: path → field id → sketch."""

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]: ...


class SparkSketcher:
    """The sketch pipeline on the process-wide SparkSession, started on first use."""

    def __init__(self, config: Config) -> None:
        self._config = config

    def _settings(self) -> SparkSettings:
        return SparkSettings(master=self._config.spark.master, conf=self._config.spark.conf)

    def warm(self) -> None:
        """Start Spark now (the daemon does this at start, so the first commit is fast)."""
        get_spark(self._settings())

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        from lakestats.pipeline import sketch_files  # noqa: PLC0415

        spark = get_spark(self._settings())
        return sketch_files(
            spark, paths, schema, self._config.sketch.settings(), bounds_for=bounds_for
        )


def make_sketcher(config: Config) -> SparkSketcher:
    return SparkSketcher(config)


class MappedSketcher:
    """Reads each file at its mapped location; results keep the paths of the metadata."""

    def __init__(self, inner: Sketcher, mapping: LocationMap) -> None:
        self.inner = inner
        self.mapping = mapping

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        mapped = {path: self.mapping.apply(path) for path in paths}
        sketches = self.inner(list(dict.fromkeys(mapped.values())), schema, bounds_for)
        return {path: sketches[where] for path, where in mapped.items() if where in sketches}


def with_location_map(sketcher: Sketcher | None, mapping: LocationMap) -> Sketcher | None:
    """``sketcher`` reading files where ``mapping`` says they are (itself if no mapping)."""
    if sketcher is None or not mapping:
        return sketcher
    return MappedSketcher(sketcher, mapping)


def sketch_batch(
    sketcher: Sketcher | None, batch: BatchPlan, schema: TableSchema
) -> tuple[Sketches, float]:
    """The batch's block sketches and the seconds the job took. A batch that adds no data
    file (deletes, compactions' removals) reads no data."""
    if sketcher is None or not batch.paths:
        return {}, 0.0
    started = time.perf_counter()
    sketches = dict(sketcher(batch.paths, schema, batch.bounds_for))
    return sketches, time.perf_counter() - started
