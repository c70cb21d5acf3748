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
from lakestats.model import ColumnSketch, TableSchema
from lakestats.pipeline import ProgressFn
from lakestats.plan import BatchPlan, Sketches
from lakestats.sketches.spark import SparkSettings, get_spark, spark_started_since


class Sketcher(Protocol):
    """Reads data files and returns block-level sketches: path → field id → sketch."""

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]: ...


class SparkSketcher:
    """The sketch pipeline on the process-wide SparkSession, started on first use.

    ``startup_s`` is the time the last call spent starting Spark (0 when the session was
    already up), so a commit's sketch time never hides a JVM start. ``on_progress`` hears
    the running job's finished tasks; ``jvm_log_path`` and ``log_level`` say where and how
    much the JVM logs (the daemon sends it to a file of its own).
    """

    def __init__(
        self,
        config: Config,
        *,
        jvm_log_path: str | None = None,
        log_level: str = "ERROR",
    ) -> None:
        self._config = config
        self._jvm_log_path = jvm_log_path
        self._log_level = log_level
        self.startup_s = 0.0
        self.on_progress: ProgressFn | None = None

    def settings(self) -> SparkSettings:
        spark = self._config.spark
        return SparkSettings(
            master=spark.master,
            conf=spark.conf,
            executor_wait_s=spark.executor_wait_s,
            jvm_log_path=self._jvm_log_path,
            log_level=self._log_level,
        )

    def warm(self) -> None:
        """Start Spark now (the daemon does this at start, so the first commit is fast)."""
        get_spark(self.settings())

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        from lakestats.pipeline import JobLimits, sketch_files  # noqa: PLC0415

        started = time.perf_counter()
        spark = get_spark(self.settings())
        self.startup_s = time.perf_counter() - started if spark_started_since(started) else 0.0
        limits = JobLimits(
            timeout_s=self._config.spark.job_timeout_s,
            executor_wait_s=self._config.spark.executor_wait_s,
        )
        return sketch_files(
            spark,
            paths,
            schema,
            self._config.sketch.settings(),
            bounds_for=bounds_for,
            limits=limits,
            on_progress=self.on_progress,
        )


def make_sketcher(config: Config) -> SparkSketcher:
    return SparkSketcher(config)


def sketch_batch(
    sketcher: Sketcher | None, batch: BatchPlan, schema: TableSchema
) -> tuple[Sketches, float, float]:
    """The batch's block sketches, the seconds its Spark job took and the seconds spent
    starting Spark first (0 when it was up). A batch that adds no data file (deletes,
    compactions' removals) reads no data."""
    if sketcher is None or not batch.paths:
        return {}, 0.0, 0.0
    started = time.perf_counter()
    sketches = dict(sketcher(batch.paths, schema, batch.bounds_for))
    total = time.perf_counter() - started
    startup = min(total, float(getattr(sketcher, "startup_s", 0.0)))
    return sketches, total - startup, startup
