"""The sketch step of the commit path: one Spark job per batch, on the process-wide session.

``Sketcher`` is what the commit path needs (paths + schema → block sketches per file);
``SparkSketcher`` is the real one. pyspark is imported on first use: it takes seconds to
import, and metadata-only runs need none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, Protocol

import structlog

from lakestats.config import Config
from lakestats.exceptions import DataFileError, LakestatsError, SketchError
from lakestats.locations import LocationMap
from lakestats.model import (
    ColumnFile,
    ColumnSketch,
    DataFile,
    DeleteSource,
    DeletionVector,
    EqualityDeletes,
    KeyMerge,
    SketchSettings,
    TableSchema,
)
from lakestats.pipeline import ProgressFn
from lakestats.plan import BatchPlan, BatchSketches, LiveRead, Sketches
from lakestats.sketches.constant import constant_sketch
from lakestats.sketches.spark import SparkSettings, get_spark, spark_started_since
from lakestats.written_types import WrittenAs

_log = structlog.get_logger(__name__)


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
        """Start Spark now (the daemon does this at start, so the first commit is fast), and
        with the Arrow engine on, its Python workers (``pipeline.warm_arrow_workers``)."""
        spark = get_spark(self.settings())
        sketch = self._config.sketch
        if sketch.enabled and sketch.engine == "auto":
            from lakestats.pipeline import warm_arrow_workers  # noqa: PLC0415

            warm_arrow_workers(spark, timeout_s=self._config.spark.executor_wait_s)

    def __call__(
        self,
        paths: Sequence[str],
        schema: TableSchema,
        bounds_for: Collection[int],
        file_format: Literal["PARQUET", "ORC"] = "PARQUET",
        *,
        deletes: Mapping[str, Sequence[DeleteSource]] | None = None,
        location_map: LocationMap | None = None,
        written_as: Mapping[str, WrittenAs] | None = None,
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        """With ``deletes`` (path → its deletes), the files are read with them applied
        (``lakestats.deletes``): the result is a ``LiveSketched`` with each file's live rows.
        ``written_as`` (path → ``DataFile.written_as``): files written with other column
        names or types."""
        from lakestats.pipeline import JobLimits, sketch_files  # noqa: PLC0415

        started = time.perf_counter()
        spark = get_spark(self.settings())
        self.startup_s = time.perf_counter() - started if spark_started_since(started) else 0.0
        limits = JobLimits(
            timeout_s=self._config.spark.job_timeout_s,
            executor_wait_s=self._config.spark.executor_wait_s,
        )
        row_filter = None
        if deletes:
            from lakestats.deletes.plan import plan_live_read  # noqa: PLC0415
            from lakestats.deletes.spark_filter import LiveRowFilter  # noqa: PLC0415

            plan = plan_live_read({p: deletes.get(p, ()) for p in paths})
            row_filter = LiveRowFilter(plan, schema, location_map or LocationMap())
        sketches = sketch_files(
            spark,
            paths,
            schema,
            self._config.sketch.settings(),
            bounds_for=bounds_for,
            limits=limits,
            on_progress=self.on_progress,
            file_format=file_format,
            row_filter=row_filter,
            written_as=written_as,
            engine=self._config.sketch.engine,
        )
        if row_filter is None:
            return sketches
        return LiveSketched(sketches, row_filter.live_rows)


def make_sketcher(config: Config) -> SparkSketcher:
    return SparkSketcher(config)


class LiveSketched(dict[str, Mapping[int, ColumnSketch]]):
    """What a sketcher returns for files read with their deletes: path → sketches, and
    ``live_rows``: path → rows left after the deletes."""

    def __init__(self, sketches: Sketches, live_rows: Mapping[str, int]) -> None:
        super().__init__(sketches)
        self.live_rows = dict(live_rows)


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
        if kw.get("written_as"):
            kw = {**kw, "written_as": {mapped[p]: w for p, w in kw["written_as"].items()}}
        deletes = kw.get("deletes")
        if deletes:
            # delete files are read where they really are; the paths inside position-delete
            # files are mapped by the reader (``location_map``)
            kw = {
                **kw,
                "deletes": {
                    mapped[p]: tuple(_mapped_delete(d, self.mapping) for d in sources)
                    for p, sources in deletes.items()
                },
                "location_map": self.mapping,
            }
        sketches = inner(list(dict.fromkeys(mapped.values())), schema, bounds_for, **kw)
        out = {path: sketches[where] for path, where in mapped.items() if where in sketches}
        if isinstance(sketches, LiveSketched):
            return LiveSketched(
                out,
                {p: sketches.live_rows[w] for p, w in mapped.items() if w in sketches.live_rows},
            )
        return out


StoredSketches = Callable[[Sequence[str]], Mapping[str, Mapping[int, ColumnSketch]]]
"""Paths → the block sketches the store already holds of those of them it holds."""


class ReusingSketcher:
    """Answers from ``stored`` for the files the store already holds sketches of (a walk
    that starts over adds them again), asks ``inner`` for the rest. Files read with their
    deletes always go to ``inner``. ``reused``: the paths answered from the store."""

    def __init__(self, inner: Sketcher, stored: StoredSketches) -> None:
        self.inner = inner
        self.stored = stored
        self.reused: set[str] = set()
        self.startup_s = 0.0  # the inner sketcher's Spark start-up in the last call

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int], **kw: Any
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        inner: Any = self.inner  # extra keywords (file_format) only when the caller gave them
        self.startup_s = 0.0
        found: Mapping[str, Mapping[int, ColumnSketch]] = {}
        if not kw.get("deletes"):
            try:
                found = self.stored(paths)
            except (LakestatsError, OSError) as exc:  # e.g. swept meanwhile: read the files
                _log.warning("stored_sketches_unreadable", error=str(exc))
        rest = [p for p in paths if p not in found]
        if not rest:
            self.reused.update(found)
            return found
        if found and kw.get("written_as"):
            unread = set(rest)
            kw = {**kw, "written_as": {p: w for p, w in kw["written_as"].items() if p in unread}}
        read: Mapping[str, Mapping[int, ColumnSketch]] = inner(rest, schema, bounds_for, **kw)
        self.startup_s = float(getattr(self.inner, "startup_s", 0.0))
        self.reused.update(found)
        if not found:
            return read
        return {**found, **read}


class ColumnFilesSketcher:
    """Sketches files some of whose columns are other files' (``DataFile.column_files``):
    each file with the table's columns, then each of those columns from the file that
    holds it — the same rows in the same order, read with the file's deletes — in place
    of the file's own. ``sources``: path → its column files."""

    def __init__(self, inner: Sketcher, sources: Mapping[str, tuple[ColumnFile, ...]]) -> None:
        self.inner = inner
        self.sources = sources
        self.startup_s = 0.0

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int], **kw: Any
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        inner: Any = self.inner  # extra keywords only when the caller gave them
        result: Mapping[str, Mapping[int, ColumnSketch]] = inner(paths, schema, bounds_for, **kw)
        self.startup_s = float(getattr(self.inner, "startup_s", 0.0))
        reads: dict[tuple[int, ...], list[tuple[str, ColumnFile]]] = {}
        for path in paths:
            if path in result:
                for column_file in self.sources.get(path, ()):
                    reads.setdefault(column_file.field_ids, []).append((path, column_file))
        if not reads:
            return result
        out = {path: dict(sketches) for path, sketches in result.items()}
        deletes = kw.get("deletes") or {}
        common = {k: v for k, v in kw.items() if k not in ("deletes", "written_as")}
        for field_ids, files in reads.items():
            extra = dict(common)
            if deletes:
                extra["deletes"] = {f.path: deletes[p] for p, f in files if p in deletes}
            written_as = {f.path: f.written_as for _, f in files if f.written_as}
            if written_as:
                extra["written_as"] = written_as
            columns = tuple(c for c in schema.columns if c.field_id in field_ids)
            read = inner(
                [f.path for _, f in files],
                replace(schema, columns=columns),
                [i for i in bounds_for if i in field_ids],
                **extra,
            )
            self.startup_s += float(getattr(self.inner, "startup_s", 0.0))
            for path, column_file in files:
                if column_file.path not in read:
                    raise SketchError(f"column file {column_file.path} of {path} was not read")
                got = read[column_file.path]
                out[path].update({i: got[i] for i in field_ids if i in got})
        if isinstance(result, LiveSketched):
            return LiveSketched(out, result.live_rows)
        return out


def _mapped_delete(source: DeleteSource, mapping: LocationMap) -> DeleteSource:
    if isinstance(source, DeletionVector):
        return source
    if isinstance(source, KeyMerge):
        inputs = tuple(replace(i, path=mapping.apply(i.path)) for i in source.inputs)
        return replace(source, inputs=inputs)
    return replace(source, path=mapping.apply(source.path))


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
    *,
    location_map: LocationMap | None = None,
    approximate_equality: bool = False,
) -> tuple[Sketches, float, float]:
    """The batch's block sketches, the seconds its Spark job took and the seconds spent
    starting Spark first (0 when it was up). A batch that adds no data file (deletes,
    compactions' removals) reads no data.

    Files added with row-level deletes (``DataFile.deletes``) are read again with them
    applied, in jobs of their own (``lakestats.deletes``); the result is then a
    ``BatchSketches`` holding their live reads. ORC files with position deletes cannot be
    (Spark gives no row positions for ORC): they are sketched whole and their stats say
    the deletes were not applied.

    With ``settings``, identity-partition columns get the sketches of their partition
    value (``DataFile.constants``), as Iceberg readers fill them, whatever the file holds.

    With ``approximate_equality`` (the table's ``equality_deletes = "approximate"``), a file
    with equality deletes is not re-read for them: re-added by its commit, it is not read
    at all (the caller keeps its earlier stats); new, it is sketched whole. Its stats then
    say its deletes were not applied.

    Without a sketcher (metadata-only) and with ``location_map``, files whose deletes are
    only position deletes and deletion vectors still get exact live row counts, from the
    delete files alone (``deletes.positions.live_rows_from_positions``).
    """
    if sketcher is None:
        return _counted_without_data(batch, location_map), 0.0, 0.0
    if not batch.paths:
        return {}, 0.0, 0.0
    column_files = {
        f.path: f.column_files for c in batch.commits for f in c.added_files if f.column_files
    }
    if column_files:  # one version of a path per batch (``plan.next_batch``)
        sketcher = ColumnFilesSketcher(sketcher, column_files)
    formats = {f.path: f.file_format for c in batch.commits for f in c.added_files}
    avro = [p for p in batch.paths if formats.get(p) == "AVRO"]
    if avro:
        raise DataFileError(
            f"data file {avro[0]} is Avro: lakestats sketches Parquet and ORC data files "
            "only; set `sketches = false` for this table (or analyze with --no-sketches) "
            "for metadata-only stats"
        )
    approximate = {
        (c.snapshot_id, f.path): f.path in {r.path for r in c.removed_files}
        for c in batch.commits
        for f in c.added_files
        if approximate_equality and any(isinstance(d, EqualityDeletes) for d in f.deletes)
    }
    live_files = [
        (c.snapshot_id, f)
        for c in batch.commits
        for f in c.added_files
        if (c.snapshot_id, f.path) not in approximate and _live_readable(f)
    ]
    live_keys = {(sid, f.path) for sid, f in live_files}
    plain = list(
        dict.fromkeys(
            f.path
            for c in batch.commits
            for f in c.added_files
            if (c.snapshot_id, f.path) not in live_keys
            and not approximate.get((c.snapshot_id, f.path), False)
        )
    )
    orc = [p for p in plain if formats.get(p) == "ORC"]
    parquet = [p for p in plain if formats.get(p) != "ORC"]
    started = time.perf_counter()
    startup = 0.0
    sketches: Sketches = {}
    # extra keywords only where needed: other sketchers need not know them
    reader: Any = sketcher
    if parquet:
        sketches = dict(reader(parquet, schema, batch.bounds_for, **_written_as(batch, parquet)))
        startup += float(getattr(sketcher, "startup_s", 0.0))
    if orc:
        extra = {"file_format": "ORC", **_written_as(batch, orc)}
        sketches = {**sketches, **reader(orc, schema, batch.bounds_for, **extra)}
        startup += float(getattr(sketcher, "startup_s", 0.0))
    live: dict[tuple[int, str], LiveRead] = {}
    for group in _live_rounds(live_files):
        live.update(_read_live(sketcher, group, schema, batch))
        startup += float(getattr(sketcher, "startup_s", 0.0))
    if settings is not None:
        sketches = with_constants(sketches, batch, schema, settings)
        live = _live_with_constants(live, batch, schema, settings)
    total = time.perf_counter() - started
    startup = min(total, startup)
    if live:
        return BatchSketches(sketches, live), total - startup, startup
    return sketches, total - startup, startup


def _written_as(batch: BatchPlan, paths: Sequence[str]) -> dict[str, Any]:
    """``written_as=`` for the files of ``paths`` written with other column names or
    types, if any."""
    wanted = set(paths)
    written_as = {
        f.path: f.written_as
        for c in batch.commits
        for f in c.added_files
        if f.written_as and f.path in wanted
    }
    return {"written_as": written_as} if written_as else {}


def _counted_without_data(batch: BatchPlan, location_map: LocationMap | None) -> Sketches:
    if location_map is None:
        return {}
    files = [
        (c.snapshot_id, f)
        for c in batch.commits
        for f in c.added_files
        if f.deletes and not any(isinstance(d, EqualityDeletes | KeyMerge) for d in f.deletes)
    ]
    if not files:
        return {}
    from lakestats.deletes.positions import live_rows_from_positions  # noqa: PLC0415

    live: dict[tuple[int, str], LiveRead] = {}
    for group in _live_rounds(files):
        counted = live_rows_from_positions([f for _, f in group], location_map)
        live.update(
            {(sid, f.path): LiveRead({}, counted[f.path], data_read=False) for sid, f in group}
        )
    return BatchSketches({}, live)


def _live_readable(data_file: DataFile) -> bool:
    """Whether the sketch job can apply the file's deletes; a warning names the file and
    why not (its stats then include deleted rows, and say so)."""
    if not data_file.deletes:
        return False
    reason = _unreadable_deletes(data_file)
    if reason is not None:
        _log.warning("deletes_not_applied", file=data_file.path, reason=reason)
        return False
    return True


def _unreadable_deletes(data_file: DataFile) -> str | None:
    for source in data_file.deletes:
        if isinstance(source, KeyMerge):
            orc = [i.path for i in source.inputs if i.path.lower().endswith(".orc")]
            if data_file.file_format != "PARQUET" or orc:
                return (
                    "the primary-key merge reads Parquet data files only: the stats describe "
                    "every stored version of a key"
                )
            continue
        if isinstance(source, DeletionVector):
            positional = True
        elif isinstance(source, EqualityDeletes):
            positional = False
            if source.file_format.upper() != "PARQUET":
                return f"equality-delete file {source.path} is {source.file_format}: Parquet only"
        else:
            positional = True
            if source.file_format.upper() not in ("PARQUET", "ORC"):
                return f"position-delete file {source.path} is {source.file_format}"
        if positional and data_file.file_format == "ORC":
            return (
                "Spark gives no row positions for ORC data files: their position deletes "
                "and deletion vectors are not applied"
            )
    return None


def _live_rounds(
    files: Sequence[tuple[int, DataFile]],
) -> list[list[tuple[int, DataFile]]]:
    """Jobs for the live reads: each path once per job (a batch may re-add a file with
    more deletes in a later commit), one file format per job."""
    rounds: list[list[tuple[int, DataFile]]] = []
    seen: list[set[tuple[str, str]]] = []
    for sid, f in files:
        key = (f.file_format, f.path)
        for number, keys in enumerate(seen):
            if key not in keys and all(g.file_format == f.file_format for _, g in rounds[number]):
                keys.add(key)
                rounds[number].append((sid, f))
                break
        else:
            seen.append({key})
            rounds.append([(sid, f)])
    return rounds


def _read_live(
    sketcher: Sketcher,
    group: Sequence[tuple[int, DataFile]],
    schema: TableSchema,
    batch: BatchPlan,
) -> dict[tuple[int, str], LiveRead]:
    reader: Any = sketcher  # the deletes keyword is asked of the sketcher only here
    paths = [f.path for _, f in group]
    every_column = frozenset(c.field_id for c in schema.columns)  # bounds of live rows
    extra: dict[str, Any] = {
        "deletes": {f.path: f.deletes for _, f in group},
        **_written_as(batch, paths),
    }
    if group[0][1].file_format == "ORC":
        extra["file_format"] = "ORC"
    result = reader(paths, schema, every_column, **extra)
    if not isinstance(result, LiveSketched):
        raise SketchError("the sketcher does not apply row-level deletes")
    return {
        (sid, f.path): LiveRead(result[f.path], result.live_rows[f.path])
        for sid, f in group
        if f.path in result and f.path in result.live_rows
    }


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
            out[data_file.path] = _constants(
                per_file, data_file, types, data_file.record_count, settings
            )
    return out


def _live_with_constants(
    live: Mapping[tuple[int, str], LiveRead],
    batch: BatchPlan,
    schema: TableSchema,
    settings: SketchSettings,
) -> dict[tuple[int, str], LiveRead]:
    types = {c.field_id: c.type for c in schema.columns}
    out = dict(live)
    for commit in batch.commits:
        for data_file in commit.added_files:
            read = out.get((commit.snapshot_id, data_file.path))
            if read is None or not data_file.constants:
                continue
            sketches = _constants(read.sketches, data_file, types, read.live_rows, settings)
            out[(commit.snapshot_id, data_file.path)] = replace(read, sketches=sketches)
    return out


def _constants(
    per_file: Mapping[int, ColumnSketch],
    data_file: DataFile,
    types: Mapping[int, str],
    rows: int,
    settings: SketchSettings,
) -> dict[int, ColumnSketch]:
    replaced = dict(per_file)
    for field_id, value in data_file.constants.items():
        type_str = types.get(field_id)
        made = constant_sketch(type_str, value, rows, settings) if type_str is not None else None
        if made is not None:
            replaced[field_id] = made
    return replaced
