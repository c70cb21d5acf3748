"""The sketch step of the commit path: one Spark job per batch, on the process-wide session.

``Sketcher`` is what the commit path needs (paths + schema → block sketches per file);
``SparkSketcher`` is the real one. pyspark is imported on first use: it takes seconds to
import, and metadata-only runs need none.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, Protocol

from lakestats.config import Config
from lakestats.exceptions import DataFileError
from lakestats.locations import LocationMap
from lakestats.model import ColumnSketch, SketchSettings, TableSchema
from lakestats.pipeline import ProgressFn
from lakestats.plan import BatchPlan, Sketches
from lakestats.sketches.constant import constant_sketch
from lakestats.sketches.spark import SparkSettings, get_spark, spark_started_since


class Sketcher(Protocol):
    """Reads data files and returns block-level sketches: path → field id → sketch.

    Called with ``file_format="ORC"`` for ORC files (only then: Parquet is the default).
    """

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
        self,
        paths: Sequence[str],
        schema: TableSchema,
        bounds_for: Collection[int],
        file_format: Literal["PARQUET", "ORC"] = "PARQUET",
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
            file_format=file_format,
        )


def make_sketcher(config: Config) -> SparkSketcher:
    return SparkSketcher(config)


class MappedSketcher:
    """Reads each file at its mapped location; results keep the paths of the metadata."""

    def __init__(self, inner: Sketcher, mapping: LocationMap) -> None:
        self.inner = inner
        self.mapping = mapping

    @property
    def startup_s(self) -> float:
        """The inner sketcher's Spark start-up in its last call (``sketch_batch`` reports it)."""
        return float(getattr(self.inner, "startup_s", 0.0))

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int], **kw: Any
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        mapped = {path: self.mapping.apply(path) for path in paths}
        inner: Any = self.inner  # extra keywords (file_format) only when the caller gave them
        sketches = inner(list(dict.fromkeys(mapped.values())), schema, bounds_for, **kw)
        return {path: sketches[where] for path, where in mapped.items() if where in sketches}


def with_location_map(sketcher: Sketcher | None, mapping: LocationMap) -> Sketcher | None:
    """``sketcher`` reading files where ``mapping`` says they are (itself if no mapping)."""
    if sketcher is None or not mapping:
        return sketcher
    return MappedSketcher(sketcher, mapping)


def sketch_batch(
    sketcher: Sketcher | None,
    batch: BatchPlan,
    schema: TableSchema,
    settings: SketchSettings | None = None,
) -> tuple[Sketches, float, float]:
    """The batch's block sketches, the seconds its Spark job took and the seconds spent
    starting Spark first (0 when it was up). A batch that adds no data file (deletes,
    compactions' removals) reads no data.

    With ``settings``, identity-partition columns get the sketches of their partition
    value (``DataFile.constants``), as Iceberg readers fill them, whatever the file holds.
    """
    if sketcher is None or not batch.paths:
        return {}, 0.0, 0.0
    formats = {f.path: f.file_format for c in batch.commits for f in c.added_files}
    avro = [p for p in batch.paths if formats.get(p) == "AVRO"]
    if avro:
        raise DataFileError(
            f"data file {avro[0]} is Avro: lakestats sketches Parquet and ORC data files "
            "only; set `sketches = false` for this table (or analyze with --no-sketches) "
            "for metadata-only stats"
        )
    orc = [p for p in batch.paths if formats.get(p) == "ORC"]
    parquet = [p for p in batch.paths if formats.get(p) != "ORC"]
    started = time.perf_counter()
    startup = 0.0
    sketches: Sketches = {}
    if parquet:
        sketches = dict(sketcher(parquet, schema, batch.bounds_for))
        startup += float(getattr(sketcher, "startup_s", 0.0))
    if orc:
        orc_sketcher: Any = sketcher  # the ORC keyword is asked of the sketcher only here
        sketches = {**sketches, **orc_sketcher(orc, schema, batch.bounds_for, file_format="ORC")}
        startup += float(getattr(sketcher, "startup_s", 0.0))
    if settings is not None:
        sketches = with_constants(sketches, batch, schema, settings)
    total = time.perf_counter() - started
    startup = min(total, startup)
    return sketches, total - startup, startup


def with_constants(
    sketches: Sketches, batch: BatchPlan, schema: TableSchema, settings: SketchSettings
) -> Sketches:
    """``sketches`` with each identity-partition column of each file replaced by the
    sketch of its partition value (``sketches/constant.py``); no data is read for it."""
    types = {c.field_id: c.type for c in schema.columns}
    out: dict[str, Mapping[int, ColumnSketch]] = dict(sketches)
    for commit in batch.commits:
        for data_file in commit.added_files:
            per_file = out.get(data_file.path)
            if per_file is None or not data_file.constants:
                continue
            replaced = dict(per_file)
            for field_id, value in data_file.constants.items():
                type_str = types.get(field_id)
                made = (
                    constant_sketch(type_str, value, data_file.record_count, settings)
                    if type_str is not None
                    else None
                )
                if made is not None:
                    replaced[field_id] = made
            out[data_file.path] = replaced
    return out
