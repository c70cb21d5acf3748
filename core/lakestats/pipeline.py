"""The sketch pipeline: one Spark job over new data files → per-file, per-column sketches.

One call reads exactly the given Parquet files, matched to the table schema by field id,
groups rows by file and computes every column's statistics in one ``agg``: Spark's
DataSketches aggregates (``theta_sketch_agg``, ``kll_sketch_agg_double``) plus plain counts,
min/max and lengths. The per-row work stays in the JVM; Python only receives one row per
file. Each file is one Spark partition, read whole by one task (Spark would split files
over 128 MiB between tasks): rows are grouped by partition id, not by path (see
``_FILE_ROWS``).

*One job*: the query runs in a private child session of the caller's SparkSession with
adaptive query execution off (AQE submits each shuffle map stage as a separate job) and
parallel file listing off (it would be another job for many paths), so each call is exactly
one Spark job of two stages (scan + partial aggregate, final aggregate), tagged with job
group ``JOB_GROUP``. Calls are serialized by a lock: they set per-call conf on that session.

Units and conventions of the results (``ColumnSketch``):

* ``theta``: uncompressed compact theta sketch, hashed as the Iceberg Puffin spec says
  (``sketches/hashing.py``); empty strings/binaries are not hashed (as in Iceberg).
* ``kll``: KLL doubles sketch of the value as a double: numbers and decimals as their
  value (decimals and longs beyond 2^53 round), dates as days since 1970-01-01, timestamps
  as microseconds since the epoch (UTC; ``timestamp`` wall-clock micros). NaN is left out;
  ±inf are kept.
* ``min``/``max``: Python values of the column type, NaN excluded (Iceberg's rule), -0.0
  ordered below 0.0 (Iceberg's float order). Computed for the field ids in ``bounds_for``
  (every supported column when it is ``None``): the caller asks only where the manifest's
  bounds are missing or may be truncated, and saves two aggregates per other column.
* ``len_sum``/``len_max``: string lengths in *characters* (Unicode code points, as Hive's
  and Spark's avgColLen of strings), binary lengths in bytes; over non-null values.
* A column whose field id is absent from a file reads as all nulls there
  (``null_count`` = rows). Files with zero rows come back with empty sketches and zero counts.
* Columns of types ``spec.type_spec`` does not support are omitted from the result.
* ``schema.key`` (a primary key, ``model.KeySketch``): each file also gets a theta sketch
  of its rows' keys as one value (``sketches/key.py``) under ``KEY_SKETCH_ID``, and of
  the keys of its retracting rows under ``RETRACTED_KEY_SKETCH_ID`` — in the same job.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

import structlog

from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.engine import (
    ENGINES,
    ArrowDeletes,
    Engine,
    arrow_job,
    pyarrow_can_open,
    run_arrow,
    run_equality,
    run_key_winners,
    worker_cannot_run,
    worker_ready,
)
from lakestats.arrow_sketch.file_sketch import ArrowJob
from lakestats.exceptions import ConfigError, DataFileError, SketchError, SparkUnavailableError
from lakestats.field_ids import (
    SPARK_FIELD_ID_KEY,
    has_field_ids,
    spark_column,
    split_by_field_ids,
)
from lakestats.locations import is_local, local_path
from lakestats.model import (
    KEY_SKETCH_ID,
    RETRACTED_KEY_SKETCH_ID,
    Column,
    ColumnSketch,
    KeySketch,
    SketchSettings,
    TableSchema,
)
from lakestats.sketches.frequent import empty_frequent_items, normalize_frequent_items
from lakestats.sketches.hashing import ANSI_OFF, theta_input_sql
from lakestats.sketches.key import key_sql
from lakestats.sketches.merge import empty_kll, empty_theta, kll_count, normalize_theta
from lakestats.sketches.spark import first_line as spark_first_line
from lakestats.sketches.spark import stop_reason
from lakestats.sketches.spec import (
    TypeSpec,
    decimal_precision_scale,
    type_spec,
    validate_sketch_settings,
)
from lakestats.sketches.value_sample import (
    empty_value_sample,
    normalize_value_sample,
    sample_carries_theta,
    theta_of_value_sample,
)
from lakestats.values import at_scale, bound_from_physical, is_decimal
from lakestats.written_types import (
    WrittenAs,
    by_written_as,
    read_by_field_id,
    read_cast,
    read_name,
    written_spark_type,
)

_log = structlog.get_logger(__name__)

JOB_GROUP = "lakestats-sketch"
_DOUBLE_NEG_ZERO_BITS = -(1 << 63)
_FLOAT_NEG_ZERO_BITS = -(1 << 31)

_JOB_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": str(2**31 - 1),
    "spark.sql.files.ignoreMissingFiles": "false",
    "spark.sql.files.ignoreCorruptFiles": "false",
    # Iceberg writes proleptic Gregorian dates; never "rebase" or refuse ancient values.
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    **ANSI_OFF,  # the spec hashing of decimals (sketches/hashing.py)
    # Every data file is one scan partition, never split and never packed with another
    # (each file "costs" more than a partition holds), so a file's rows are exactly one
    # Spark partition's: see _FILE_ROWS.
    "spark.sql.files.maxPartitionBytes": str((1 << 40) - 1),
    "spark.sql.files.openCostInBytes": str(1 << 40),
}
# Spark re-packs partitions past this many (unset by default): never, here.
_JOB_CONF_UNSET = ("spark.sql.files.maxPartitionNum",)
# The job groups rows by Spark partition id (an int), one partition per file, and takes
# the file's path from the partition's first row only. Grouping by the path itself had
# Spark copy and hash the path string for every row: measured, the largest per-row cost
# of a job after the sketches themselves (docs/benchmarks.md, "Full build").
_FIRST_ROW_OF_PARTITION = f"(monotonically_increasing_id() & {(1 << 33) - 1}) = 0"
_FILE_ROWS = (
    "spark_partition_id() AS __part",
    f"CASE WHEN {_FIRST_ROW_OF_PARTITION} THEN _metadata.file_path END AS __path",
)

_lock = threading.Lock()
_job_sessions: dict[int, tuple[Any, Any]] = {}


@dataclass(frozen=True)
class JobLimits:
    """When a running sketch job is cancelled: after ``timeout_s``, or after
    ``executor_wait_s`` without any executor (cluster mode; Spark itself would wait for
    resources forever)."""

    timeout_s: float = 3600.0
    executor_wait_s: float = 60.0
    poll_s: float = 0.5


@dataclass(frozen=True)
class JobProgress:
    """Tasks of the running sketch job, for progress displays."""

    tasks_done: int
    tasks_total: int
    seconds: float


ProgressFn = Callable[[JobProgress], None]


class RowFilter(Protocol):
    """Drops rows before the aggregate (row-level deletes, ``lakestats.deletes``).

    ``apply`` gets the scan with ``__path`` (and ``__row_index`` when asked for) and
    returns it with dead rows removed; ``aggregates`` are extra ``(name, sql)`` per file
    over its ``columns`` that ``check`` inspects on the job's rows; ``live_rows`` is filled
    with each requested path's surviving row count.
    """

    needs_row_index: bool
    columns: Sequence[str]
    aggregates: Sequence[tuple[str, str]]
    live_rows: dict[str, int]

    def apply(self, session: Any, df: Any) -> Any: ...

    def arrow_deletes(self) -> ArrowDeletes | None:
        """What this filter removes as the Arrow engine removes it (paths as given to
        ``sketch_files``): dead positions, and first jobs that find more of them; ``None``
        when only the SQL job removes those rows exactly."""
        ...

    def check(self, rows: Sequence[Any]) -> None: ...


@dataclass(frozen=True)
class _Planned:
    index: int
    column: Column
    spec: TypeSpec
    bounds: bool = True  # scan min/max (the metadata's may be missing or truncated)

    @property
    def scan_bounds(self) -> bool:
        # booleans derive their bounds from the true/false counts
        return self.bounds and self.spec.bounds and not self.spec.booleans


@dataclass(frozen=True)
class _PlannedKey:
    """The key sketch of ``schema.key``: its value SQL and, where rows can retract their
    key, the row-kind column and the kinds that retract."""

    key: KeySketch
    value_sql: str

    @property
    def retracts(self) -> bool:
        return RETRACTED_KEY_SKETCH_ID in self.key.sketch_ids


def _plan_key(schema: TableSchema, planned: Sequence[_Planned]) -> _PlannedKey | None:
    """``None`` without a key, or when a key column has no hash input (no sketch then)."""
    if schema.key is None or not schema.key.field_ids:
        return None
    by_id = {p.column.field_id: p for p in planned}
    if any(fid not in by_id for fid in schema.key.field_ids):
        return None
    value = key_sql(
        [
            (by_id[fid].spec.type, spark_column(*by_id[fid].column.parts))
            for fid in schema.key.field_ids
        ]
    )
    return None if value is None else _PlannedKey(schema.key, value)


def sketch_files(
    spark: Any,
    paths: Sequence[str],
    schema: TableSchema,
    settings: SketchSettings,
    *,
    match_by: Literal["field_id", "name"] = "field_id",
    bounds_for: Collection[int] | None = None,
    limits: JobLimits | None = None,
    on_progress: ProgressFn | None = None,
    file_format: Literal["PARQUET", "ORC"] = "PARQUET",
    row_filter: RowFilter | None = None,
    written_as: Mapping[str, WrittenAs] | None = None,
    engine: Engine = "auto",
) -> dict[str, dict[int, ColumnSketch]]:
    """Sketch every supported column of every Parquet file in ``paths`` in one Spark job.

    Returns ``{path: {field_id: ColumnSketch}}`` keyed by the paths exactly as given (a
    manifest's ``file:///x/y.parquet`` and Spark's ``file:/x/y.parquet`` are the same file).
    ``match_by="name"`` is for files written without Parquet field ids. ``bounds_for``
    limits the scan's min/max to those field ids (``None``: all). ``file_format="ORC"``
    reads ORC files instead, by column name (Spark's ORC reader has no field-id matching).

    Raises ``DataFileError`` naming the file when a data file is missing or unreadable,
    ``SparkUnavailableError`` when the job was cancelled by ``limits`` or Spark stopped,
    ``SketchError`` for any other failure of the job, ``ConfigError`` for bad settings.
    ``on_progress`` hears the job's finished tasks about every ``limits.poll_s``.
    ``row_filter`` removes dead rows inside the job (its ``live_rows`` get the counts).
    ``written_as`` (path → its ``DataFile.written_as``) names files written with other
    column names or types: they are read with those and cast and renamed to the schema's
    (``written_types``).
    ``engine`` (config ``sketch.engine``): ``"auto"`` sketches plain jobs with the Arrow
    engine (``lakestats.arrow_sketch``: pyarrow in a few Spark tasks per core, the same
    results), ``"sql"`` always with the SQL aggregate.
    """
    settings = validate_sketch_settings(settings)
    if engine not in ENGINES:
        raise ConfigError(f"sketch.engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if not paths:
        return {}
    keys = {p: _input_key(p) for p in paths}
    unique: dict[str, str] = {}  # key -> first spelling; Spark must read each file once
    for p, key in keys.items():
        unique.setdefault(key, p)
    _check_local_files_exist(unique.values())

    planned = [
        _Planned(i, c, s, bounds_for is None or c.field_id in bounds_for)
        for i, c in enumerate(schema.columns)
        if (s := type_spec(c.type)) is not None
    ]
    key_plan = _plan_key(schema, planned)
    written = _as_read(
        {_input_key(p): w for p, w in (written_as or {}).items() if w},
        unique,
        {c.field_id: (c.name, c.type) for c in schema.columns}
        if match_by == "field_id" and file_format == "PARQUET"
        else None,
    )
    dead: dict[str, DeadRows] | None = None
    deletes: ArrowDeletes | None = None  # the row filter's deletes, as the Arrow engine's
    arrow_may_filter = engine == "auto" and file_format == "PARQUET"
    if row_filter is not None and arrow_may_filter and not _arrow_unusable_on(spark):
        deletes = row_filter.arrow_deletes()  # reads the position-delete files
    arrow = _arrow_plan(
        engine,
        planned,
        settings,
        match_by,
        file_format,
        row_filter is None or deletes is not None,
        written,
        key_plan,
        unique,
    )
    if arrow is not None and _arrow_unusable_on(spark):
        arrow = None
    with _lock:
        session = _job_session(spark)
        job_limits = limits or JobLimits()
        unique_paths = list(unique.values())
        rows: list[Any] = []
        sketched: dict[str, dict[int, ColumnSketch]] = {}
        arrow_live: dict[str, int] = {}
        if arrow is not None and deletes is not None:
            dead = _dead_rows(session, deletes, match_by, job_limits, on_progress, unique)
            arrow = None if dead is None else arrow
        if arrow is not None:
            sketched, arrow_live, unique_paths = _run_arrow(
                session, unique_paths, arrow, job_limits, on_progress, dead
            )
            if deletes is not None and deletes.winners and unique_paths:
                # The SQL job's merge attributes rows to every file of the job at once: one
                # file it must read means it reads them all.
                sketched, arrow_live, unique_paths = {}, {}, list(unique.values())
        try:
            if not unique_paths:
                pass  # the Arrow engine sketched every file
            elif file_format == "ORC":
                rows = _run(
                    session,
                    unique_paths,
                    planned,
                    settings,
                    "name",
                    job_limits,
                    on_progress,
                    source="orc",
                    row_filter=row_filter,
                    key=key_plan,
                    written=written,
                )
            else:
                if match_by == "field_id" and not split_by_field_ids(unique_paths[:1])[0]:
                    # the first file has no field ids (Delta without column mapping, Hive
                    # migrations): one footer read spares a Spark job that would fail
                    raise _NoFieldIdsError
                rows = _run(
                    session,
                    unique_paths,
                    planned,
                    settings,
                    match_by,
                    job_limits,
                    on_progress,
                    row_filter=row_filter,
                    key=key_plan,
                    written=written,
                )
        except _NoFieldIdsError:
            # Files written without Parquet field ids (Hive migrations, Impala): Iceberg
            # reads them by name. Found only when a read fails, so other tables pay nothing.
            by_id, by_name = split_by_field_ids(unique_paths)
            rows = (
                _run(
                    session,
                    by_id,
                    planned,
                    settings,
                    "field_id",
                    job_limits,
                    on_progress,
                    row_filter=row_filter,
                    key=key_plan,
                    written=written,
                )
                if by_id
                else []
            )
            rows += _run(
                session,
                by_name,
                planned,
                settings,
                "name",
                job_limits,
                on_progress,
                row_filter=row_filter,
                key=key_plan,
                written=written,
            )

    by_key: dict[str, dict[int, ColumnSketch]] = {}
    for row in rows:
        if row["__path"] is None or _spark_key(row["__path"]) in by_key:
            # one partition per file is Spark's documented packing; never guess otherwise
            raise SketchError("Spark did not read each data file as one partition")
        by_key[_spark_key(row["__path"])] = {
            **{p.column.field_id: _column_sketch(row, p, settings) for p in planned},
            **_key_sketches(row, key_plan),
        }
    by_key.update({_input_key(p): s for p, s in sketched.items()})
    empty = {p.column.field_id: _empty_sketch(p.spec, settings) for p in planned}
    if key_plan is not None:
        empty |= {
            i: ColumnSketch(theta=empty_theta(settings.theta_lg_k), null_count=0)
            for i in key_plan.key.sketch_ids
        }
    result: dict[str, dict[int, ColumnSketch]] = {}
    for p, key in keys.items():
        # groupBy emits no row for a file with no rows; it still gets (empty) sketches.
        result[p] = dict(by_key.get(key, empty))
    unknown = set(by_key) - set(keys.values())
    if unknown:  # would mean the path normalisation is wrong: never drop data silently
        raise SketchError(f"Spark reported files that were not requested: {sorted(unknown)}")
    if row_filter is not None:
        row_filter.check(rows)
        counted = {_spark_key(row["__path"]): int(row["__rows"]) for row in rows}
        counted |= {_input_key(p): n for p, n in arrow_live.items()}
        row_filter.live_rows.update({p: counted.get(key, 0) for p, key in keys.items()})
    return result


def _dead_by_unique_path(
    by_path: Mapping[str, list[DeadRows]], unique: Mapping[str, str]
) -> dict[str, DeadRows]:
    """Each file's dead rows (of every kind found) keyed by the spelling the job reads it
    under (two spellings of one file pool theirs)."""
    pooled: dict[str, list[DeadRows]] = {}
    for path, parts in by_path.items():
        pooled.setdefault(_input_key(path), []).extend(parts)
    return {unique[key]: DeadRows.union(parts) for key, parts in pooled.items() if key in unique}


def _as_read(
    written: Mapping[str, WrittenAs],
    unique: Mapping[str, str],
    current: Mapping[int, tuple[str, str]] | None,
) -> dict[str, WrittenAs]:
    """``written`` (input key → how the file was written) as the job must read each file:
    by field id (Parquet; ``current``: field id → (name, type); ``None`` when reading by
    name), a file with ids needs only its other types, so renames cost no cast and no SQL
    job."""
    if current is None:
        return dict(written)
    out = {}
    for key, as_written in written.items():
        needed = as_written
        by_id = read_by_field_id(as_written, current)
        path = unique.get(key)
        if by_id != as_written and path is not None and has_field_ids(path):
            needed = by_id  # a footer read only where it may spare the SQL job
        if needed:
            out[key] = needed
    return out


# -- the Arrow engine ---------------------------------------------------------------------


def _arrow_plan(  # noqa: PLR0917 - private, called once with sketch_files' own inputs
    engine: Engine,
    planned: Sequence[_Planned],
    settings: SketchSettings,
    match_by: Literal["field_id", "name"],
    file_format: str,
    rows_filtered_in_task: bool,
    written: Mapping[str, WrittenAs],
    key_plan: _PlannedKey | None,
    unique: Mapping[str, str],
) -> ArrowJob | None:
    """The Arrow engine's plan when the job is plain (docs/sketches.md, "The Arrow engine"):
    Parquet, no deletes but those it applies (``rows_filtered_in_task``: row positions,
    equality deletes, primary-key merges it makes), no file written with other column names
    or types (``_as_read``), every column and key column of a type the engine implements,
    files pyarrow opens; else ``None`` and the SQL job runs."""
    plain = engine == "auto" and file_format == "PARQUET" and rows_filtered_in_task and not written
    if not plain or not pyarrow_can_open(list(unique.values())):
        return None
    columns = [(p.column, p.spec, p.scan_bounds) for p in planned]
    return arrow_job(columns, settings, match_by, None if key_plan is None else key_plan.key)


# SparkContexts whose Python workers failed to run the Arrow engine (id → (context, why))
_arrow_unusable: dict[int, tuple[Any, str]] = {}


def _arrow_unusable_on(spark: Any) -> bool:
    entry = _arrow_unusable.get(id(spark.sparkContext))
    return entry is not None and entry[0] is spark.sparkContext


WARM_GROUP = "lakestats-warm"


def warm_arrow_workers(spark: Any, timeout_s: float) -> bool:
    """Start Spark's Python workers now, with one one-task job that imports the Arrow
    engine's dependencies, so the first commit's job does not pay for it (the worker daemon
    then lives as long as the context: seconds on a busy machine). Best effort, never
    raises: workers that cannot run the engine mark the context for the SQL job at once
    (``arrow_engine_unavailable``, as a failing sketch job would); any other failure is
    logged and left to the first real job. ``True`` when the workers answered."""
    sc = spark.sparkContext
    if _arrow_unusable_on(spark):
        return False
    sc.setJobGroup(WARM_GROUP, "lakestats: start the Python workers (Arrow engine)", True)
    timed_out = threading.Event()

    def give_up() -> None:
        timed_out.set()
        sc.cancelJobGroup(WARM_GROUP)

    cancel = threading.Timer(timeout_s, give_up)
    cancel.daemon = True
    started = time.perf_counter()
    cancel.start()
    try:
        pids = sc.parallelize([0], 1).mapPartitions(worker_ready).collect()
    except Exception as exc:
        if worker_cannot_run(str(exc)):
            _mark_arrow_unusable(sc, exc)
        else:
            error = (
                f"no Python worker answered within {timeout_s:g}s (spark.executor_wait_s); "
                "the first sketch job starts them"
                if timed_out.is_set()
                else spark_first_line(exc)[:300]
            )
            _log.warning("arrow_workers_not_warmed", error=error)
        return False
    finally:
        cancel.cancel()
        _clear_job_group(sc)
    _log.info("arrow_workers_ready", seconds=round(time.perf_counter() - started, 3), pid=pids[0])
    return True


def _mark_arrow_unusable(sc: Any, exc: BaseException) -> None:
    # never fail where the SQL job works: this context's workers get no more tries
    _arrow_unusable[id(sc)] = (sc, str(exc).strip().splitlines()[0][:300])
    _log.warning(
        "arrow_engine_unavailable",
        reason=_arrow_unusable[id(sc)][1],
        note="the Python workers cannot run the Arrow engine; using the SQL job "
        "(install lakestats in the executors' Python, or set sketch.engine = 'sql')",
    )


_T = TypeVar("_T")


def _in_arrow_job(
    session: Any, description: str, paths: list[str], run: Callable[[Any], _T]
) -> _T | None:
    """``run(sc)`` as one of the Arrow engine's Spark jobs, under the sketch job group;
    ``None`` when the workers cannot run the engine (the SQL job takes over for good)."""
    sc = session.sparkContext
    sc.setJobGroup(JOB_GROUP, description, False)
    try:
        return run(sc)
    except (DataFileError, SparkUnavailableError):
        raise
    except Exception as exc:
        if getattr(sc, "_jsc", None) is None:  # the context was stopped under the job
            raise SparkUnavailableError(_stopped_while_running(str(exc))) from exc
        if worker_cannot_run(str(exc)):
            _mark_arrow_unusable(sc, exc)
            return None
        raise _convert_error(exc, paths) from exc
    finally:
        _clear_job_group(sc)


def _dead_rows(  # noqa: PLR0917 - private, called once with sketch_files' own inputs
    session: Any,
    deletes: ArrowDeletes,
    match_by: Literal["field_id", "name"],
    limits: JobLimits,
    on_progress: ProgressFn | None,
    unique: Mapping[str, str],
) -> dict[str, DeadRows] | None:
    """Every dead row of the job's files (keyed as the job reads each file): the
    known ones and those the first jobs find; ``None`` when the SQL job must find them."""
    found: dict[str, list[DeadRows]] = {p: [d] for p, d in deletes.dead.items()}
    groups, tasks = list(deletes.winners), list(deletes.equality)
    first_jobs: list[tuple[str, list[str], Callable[[Any, Callable[[], Any]], Any]]] = []
    if groups:
        first_jobs.append(
            (
                f"primary-key merge of {len(groups)} buckets",
                [p for g in groups for p in g.inputs],
                lambda sc, monitor: run_key_winners(sc, groups, monitor),
            )
        )
    if tasks:
        first_jobs.append(
            (
                f"equality deletes of {len(tasks)} data files",
                [p for t in tasks for p in (t.path, *(d for _, ds in t.groups for d in ds))],
                lambda sc, monitor: run_equality(sc, tasks, match_by, monitor),
            )
        )
    for description, paths, run in first_jobs:

        def monitored(sc: Any, run: Callable[[Any, Callable[[], Any]], Any] = run) -> Any:
            return run(sc, lambda: _JobMonitor(sc, limits, on_progress))

        result = _in_arrow_job(
            session, f"lakestats: {description} (Arrow)", list(dict.fromkeys(paths)), monitored
        )
        if result is None:
            return None
        if isinstance(result, str):
            _log.info("arrow_deletes_declined", job=description, reason=result)
            return None
        for path, positions in result.items():
            found.setdefault(path, []).append(positions)
    return _dead_by_unique_path(found, unique)


def _run_arrow(  # noqa: PLR0917 - private, called once with sketch_files' own inputs
    session: Any,
    paths: list[str],
    job: ArrowJob,
    limits: JobLimits,
    on_progress: ProgressFn | None,
    dead: Mapping[str, DeadRows] | None,
) -> tuple[dict[str, dict[int, ColumnSketch]], dict[str, int], list[str]]:
    """(path → sketches of the files the Arrow engine sketched, path → their live rows,
    the files it declined)"""
    result = _in_arrow_job(
        session,
        f"lakestats: sketch {len(paths)} data files (Arrow)",
        paths,
        lambda sc: run_arrow(sc, paths, job, lambda: _JobMonitor(sc, limits, on_progress), dead),
    )
    if result is None:
        return {}, {}, paths
    sketched, live, declined = result
    _log.debug(
        "arrow_engine_sketched", files=len(sketched), declined=len(declined), deletes=bool(dead)
    )
    if declined:
        first = next(iter(declined))
        _log.info("arrow_engine_declined", files=len(declined), first=first, reason=declined[first])
    return sketched, live, [p for p in paths if p in declined]


# -- Spark job -------------------------------------------------------------------------


def _job_session(spark: Any) -> Any:
    """A child session (shared SparkContext, own SQL conf) so per-job conf never leaks."""
    entry = _job_sessions.get(id(spark))
    if entry is not None and entry[0] is spark:
        return entry[1]
    child = spark.newSession()
    for key, value in _JOB_CONF.items():
        child.conf.set(key, value)
    for key in _JOB_CONF_UNSET:
        child.conf.unset(key)
    _job_sessions[id(spark)] = (spark, child)
    return child


def _run(  # noqa: PLR0917 - private, called once
    session: Any,
    paths: list[str],
    planned: list[_Planned],
    settings: SketchSettings,
    match_by: str,
    limits: JobLimits,
    on_progress: ProgressFn | None,
    *,
    source: str = "parquet",
    row_filter: RowFilter | None = None,
    key: _PlannedKey | None = None,
    written: Mapping[str, WrittenAs] | None = None,
) -> list[Any]:
    sc = session.sparkContext
    partitions = max(1, min(len(paths), sc.defaultParallelism))
    session.conf.set("spark.sql.shuffle.partitions", str(partitions))
    projections, aggregates = _plan_sql(planned, settings, key)
    sc.setJobGroup(JOB_GROUP, f"lakestats: sketch {len(paths)} data files", False)
    view = f"lakestats_sketch_{uuid.uuid4().hex}"
    groups = by_written_as(paths, {p: (written or {}).get(_input_key(p), ()) for p in paths})
    as_written = list(groups) != [()]
    try:
        # The whole plan goes over Py4J as one SQL string: building ~150 Column objects one
        # call at a time cost ~0.3 s per job, a third of a small commit's update.
        # _metadata is a hidden column of the file scan: it must be selected before the view
        if row_filter is None and not as_written:
            reader = session.read.schema(_read_schema(planned, match_by == "field_id", key))
            df = reader.orc(*paths) if source == "orc" else reader.parquet(*paths)
            df.selectExpr(*_FILE_ROWS, "*").createOrReplaceTempView(view)
            group_by, extra = "__part", ["__part"]
        else:
            # deletes are anti-joined by file and row: every row needs its path, and after
            # the join (or the union of differently typed reads, ``written_types``) a Spark
            # partition no longer holds exactly one file's rows
            hidden = ["_metadata.file_path AS __path"]
            if row_filter is not None and row_filter.needs_row_index:
                hidden.append("_metadata.row_index AS __row_index")
            scan = _scan(session, groups, planned, match_by, key, source, hidden)
            extra = []
            if row_filter is not None:
                scan = row_filter.apply(session, scan)
                aggregates = [*aggregates, *row_filter.aggregates]
                extra = list(row_filter.columns)
            scan.createOrReplaceTempView(view)
            group_by = "__path"
        projected = ", ".join(
            [*extra, "__path", *[f"{sql} AS {name}" for name, sql in projections]]
        )
        aggregated_columns = ", ".join(
            [
                "max(__path) AS __path",
                "count(1) AS __rows",
                *[f"{sql} AS {name}" for name, sql in aggregates],
            ]
        )
        aggregated = session.sql(
            f"SELECT {aggregated_columns} FROM (SELECT {projected} FROM {view}) GROUP BY {group_by}"  # noqa: S608 - our own expressions; column names are quoted
        )
        with _JobMonitor(sc, limits, on_progress) as monitor:
            try:
                rows = list(aggregated.collect())
            except Exception as exc:
                if monitor.reason is not None:
                    raise SparkUnavailableError(monitor.reason) from exc
                raise
        if monitor.reason is not None:  # past the limit even if it finished meanwhile
            raise SparkUnavailableError(monitor.reason)
        return rows
    except SparkUnavailableError:
        raise
    except Exception as exc:
        if getattr(sc, "_jsc", None) is None:  # the context was stopped under the job
            raise SparkUnavailableError(_stopped_while_running(str(exc))) from exc
        if match_by == "field_id" and _NO_FIELD_IDS in str(exc):
            raise _NoFieldIdsError from exc
        raise _convert_error(exc, paths) from exc
    finally:
        try:
            session.catalog.dropTempView(view)
        except Exception as exc:  # a stopped context: the view went with it
            _log.debug("temp_view_not_dropped", error=str(exc).splitlines()[0][:200])
        _clear_job_group(sc)


def _clear_job_group(sc: Any) -> None:
    """Forget this thread's job group and description (set for one job)."""
    try:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    except Exception as exc:  # stopped meanwhile: the job's own error is the one to raise
        _log.debug("job_group_not_cleared", error=str(exc).splitlines()[0][:200])


class _JobMonitor:
    """Watches the running sketch job from a thread: cancels its job group past the time
    limit or when no executor is left (the reason is kept for the error), and reports the
    finished tasks."""

    def __init__(self, sc: Any, limits: JobLimits, on_progress: ProgressFn | None) -> None:
        self._sc = sc
        self._limits = limits
        self._on_progress = on_progress
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lakestats-job-monitor")
        self._thread.daemon = True
        self.reason: str | None = None

    def __enter__(self) -> _JobMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        started = time.monotonic()
        local = str(self._sc.master).startswith("local")
        without_executors_since: float | None = None
        while not self._done.wait(self._limits.poll_s):
            now = time.monotonic()
            try:
                jsc = self._sc._jsc.sc()
                if jsc.isStopped():
                    self.reason = "the SparkContext was stopped while the sketch job ran"
                    return
                executors = None if local else len(jsc.statusTracker().getExecutorInfos()) - 1
                self._report(now - started)
            except Exception as exc:  # the gateway went away: the job fails by itself
                _log.debug("job_monitor_error", error=str(exc).splitlines()[0][:200])
                return
            if executors is not None and executors <= 0:
                without_executors_since = without_executors_since or now
                waited = now - without_executors_since
                if waited >= self._limits.executor_wait_s:
                    self._cancel(
                        f"no Spark executor for {waited:.0f}s while the sketch job ran (Spark: "
                        "Initial job has not accepted any resources; workers lost or the "
                        f"master gone; limit spark.executor_wait_s = "
                        f"{self._limits.executor_wait_s:g}s)"
                    )
                    return
            else:
                without_executors_since = None
            if now - started >= self._limits.timeout_s:
                self._cancel(
                    f"the sketch job did not finish within {self._limits.timeout_s:g}s "
                    "(spark.job_timeout_s); it was cancelled"
                )
                return

    def _report(self, seconds: float) -> None:
        if self._on_progress is None:
            return
        tracker = self._sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(JOB_GROUP) or []:
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else []:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        if total:
            self._on_progress(JobProgress(done, total, seconds))

    def _cancel(self, reason: str) -> None:
        self.reason = reason
        _log.warning("sketch_job_cancelled", reason=reason)
        # the job may not be submitted yet (planning): cancel until the call returns
        while True:
            try:
                self._sc.cancelJobGroup(JOB_GROUP)
            except Exception as exc:  # nothing left to cancel
                _log.debug("cancel_failed", error=str(exc).splitlines()[0][:200])
                return
            if self._done.wait(self._limits.poll_s):
                return


def _plan_sql(
    planned: list[_Planned], settings: SketchSettings, key: _PlannedKey | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(projection, aggregate) SQL per column. Heavy per-row expressions (hash inputs,
    java_method) go in the projection: it is code-generated, while the input expressions of
    the object-hash aggregate behind the sketch functions are interpreted row by row."""
    projections: list[tuple[str, str]] = []
    aggregates: list[tuple[str, str]] = []
    for p in planned:
        i, spec, v = p.index, p.spec, spark_column(*p.column.parts)
        projections.append((f"v{i}", v))
        if not _counted_by_kll(spec):
            aggregates.append((f"nn{i}", f"count(v{i})"))
        theta = theta_input_sql(spec.type, v)
        if theta is not None:
            projections.append((f"h{i}", theta))
        if theta is not None and not sample_carries_theta(spec, settings):
            # otherwise the theta sketch is the value sample's keys (_column_sketch)
            aggregates.append((f"theta{i}", f"theta_sketch_agg(h{i}, {settings.theta_lg_k})"))
        if spec.kll:
            projections.append((f"k{i}", _kll_input_sql(spec, v)))
            aggregates.append((f"kll{i}", f"kll_sketch_agg_double(k{i}, {settings.kll_k})"))
        if spec.frequent and settings.frequent_items:
            # frequent values (sketches/frequent.py) of the KLL double or the string;
            # NULLs (NaN) are not counted
            items, counted = settings.frequent_items, f"k{i}" if spec.kll else f"v{i}"
            if spec.nan:
                # -0.0 as 0.0: Spark's sketch keeps them as two items, each with the
                # map's error, which the stored form (one double key) cannot tell apart
                projections.append((f"z{i}", f"CASE WHEN k{i} = 0 THEN 0.0D ELSE k{i} END"))
                counted = f"z{i}"
            aggregates.append((f"fi{i}", f"approx_top_k_accumulate({counted}, {items}).sketch"))
        if spec.kll and theta is not None and settings.value_samples:
            # the theta sketch's keys carrying their value: NDV by value range
            # (sketches/value_sample.py); NULL values (NaN) are skipped, as by KLL
            aggregates.append(
                (
                    f"vs{i}",
                    f"tuple_sketch_agg_double(h{i}, k{i}, {settings.theta_lg_k}, 'min')",
                )
            )
        if spec.nan:
            aggregates.append((f"nan{i}", f"count_if(isnan(v{i}))"))
        if spec.nan and p.scan_bounds:
            bits = f"h{i}" if spec.type == "double" else f"h{i}[0]"
            neg = _DOUBLE_NEG_ZERO_BITS if spec.type == "double" else _FLOAT_NEG_ZERO_BITS
            aggregates.append((f"negz{i}", f"bool_or({bits} = {neg})"))
            aggregates.append((f"posz{i}", f"bool_or({bits} = 0)"))
        if p.scan_bounds:
            projections.append((f"m{i}", _bound_input_sql(spec, v)))
            aggregates.append((f"min{i}", f"min(m{i})"))
            aggregates.append((f"max{i}", f"max(m{i})"))
        if spec.lengths:
            # projected once: the aggregate's own inputs would compute it twice, interpreted
            projections.append((f"len{i}", f"length({v})"))
            aggregates.append((f"lsum{i}", f"sum(len{i})"))
            aggregates.append((f"lmax{i}", f"max(len{i})"))
        if spec.booleans:
            aggregates.append((f"t{i}", f"count_if(v{i})"))
            aggregates.append((f"f{i}", f"count_if(NOT v{i})"))
    if key is not None:
        lg_k = settings.theta_lg_k
        projections.append(("hkey", key.value_sql))
        keyed = "hkey"
        if key.key.row_kind_column is not None:
            # the key is built once per row (above); the aggregates pick rows by their kind
            projections.append(("rowkind", spark_column(key.key.row_kind_column)))
            if key.key.non_add_kinds:
                kinds = _kinds_sql(key.key.non_add_kinds)
                keyed = f"CASE WHEN rowkind IN ({kinds}) THEN NULL ELSE hkey END"
            if key.retracts:
                retracted = (
                    f"CASE WHEN rowkind IN ({_kinds_sql(key.key.retract_kinds)}) THEN hkey END"
                )
                aggregates.append(("thetaretract", f"theta_sketch_agg({retracted}, {lg_k})"))
        aggregates.append(("thetakey", f"theta_sketch_agg({keyed}, {lg_k})"))
    return projections, aggregates


def _counted_by_kll(spec: TypeSpec) -> bool:
    """Whether the KLL sketch's n is the non-null count: its input is NULL exactly where the
    value is (no NaN to leave out), so a ``count(v)`` per row would count it again."""
    return spec.kll and not spec.nan


def _kinds_sql(kinds: Sequence[int]) -> str:
    return ", ".join(str(int(k)) for k in kinds)


def _kll_input_sql(spec: TypeSpec, v: str) -> str:
    if spec.type == "date":
        return f"CAST(unix_date({v}) AS DOUBLE)"
    if spec.type == "timestamp":
        return f"CAST(unix_micros(CAST({v} AS TIMESTAMP)) AS DOUBLE)"
    if spec.type == "timestamptz":
        return f"CAST(unix_micros({v}) AS DOUBLE)"
    if spec.nan:
        return f"CASE WHEN isnan({v}) THEN NULL ELSE CAST({v} AS DOUBLE) END"
    return f"CAST({v} AS DOUBLE)"


def _bound_input_sql(spec: TypeSpec, v: str) -> str:
    """What min/max run over: physical ints for dates/timestamps (time-zone free to collect),
    NaN-free floats (Spark orders NaN above +inf, Iceberg keeps it out of bounds)."""
    if spec.type == "date":
        return f"unix_date({v})"
    if spec.type == "timestamp":
        return f"unix_micros(CAST({v} AS TIMESTAMP))"
    if spec.type == "timestamptz":
        return f"unix_micros({v})"
    if spec.nan:
        return f"CASE WHEN isnan({v}) THEN NULL ELSE {v} END"
    return v


def _spark_type(spec: TypeSpec) -> Any:
    from pyspark.sql import types as T  # noqa: N812, PLC0415 - lazy; pyspark's own name

    simple: dict[str, Any] = {
        "boolean": T.BooleanType(),
        "int": T.IntegerType(),
        "bigint": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "date": T.DateType(),
        "timestamp_ntz": T.TimestampNTZType(),
        "timestamp": T.TimestampType(),
        "string": T.StringType(),
        "binary": T.BinaryType(),
    }
    if spec.spark_type in simple:
        return simple[spec.spark_type]
    m = re.fullmatch(r"decimal\((\d+),(\d+)\)", spec.spark_type)
    if m is None:
        raise SketchError(f"no Spark type for {spec.type!r}")
    return T.DecimalType(int(m.group(1)), int(m.group(2)))


def _read_schema(
    planned: list[_Planned],
    by_id: bool,
    key: _PlannedKey | None = None,
    written: WrittenAs = (),
) -> Any:
    """The read schema: leaves carry their field id, and so do struct parents where the
    format gives theirs (``Column.parent_ids``; else they are matched by name). A key
    sketch adds the row-kind column, if any (by field id where the format gives one: its
    name is no column's). ``written``: the names and types files were written with, where
    they differ from the schema's."""
    from pyspark.sql import types as T  # noqa: N812, PLC0415 - lazy; pyspark's own name

    as_written = {field_id: (name, type_str) for field_id, name, type_str in written}
    tree: dict[str, Any] = {}
    struct_ids: dict[tuple[str, ...], int] = {}
    for p in planned:
        parts = p.column.parts
        node = tree
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SketchError(f"column {p.column.name!r} nests under a primitive column")
            node = child
            if depth < len(p.column.parent_ids):
                struct_ids[tuple(parts[: depth + 1])] = p.column.parent_ids[depth]
        if parts[-1] in node:
            raise SketchError(f"column {p.column.name!r} appears twice in the schema")
        node[parts[-1]] = p

    def build(node: dict[str, Any], path: tuple[str, ...] = ()) -> Any:
        fields = []
        for name, child in node.items():
            if isinstance(child, dict):
                struct_id = struct_ids.get((*path, name)) if by_id else None
                metadata = {} if struct_id is None else {SPARK_FIELD_ID_KEY: struct_id}
                fields.append(T.StructField(name, build(child, (*path, name)), True, metadata))
            else:
                metadata = {SPARK_FIELD_ID_KEY: child.column.field_id} if by_id else {}
                was = as_written.get(child.column.field_id)
                if was is None:
                    fields.append(T.StructField(name, _spark_type(child.spec), True, metadata))
                else:  # by the name the file knows it by, where files have no field ids
                    # written names are dotted; a top-level name may hold dots itself
                    leaf = was[0] if len(path) == 0 else was[0].rsplit(".", 1)[-1]
                    written_name = read_name(child.column.field_id, leaf)
                    spark_type = written_spark_type(was[1])
                    fields.append(T.StructField(written_name, spark_type, True, metadata))
        return T.StructType(fields)

    schema = build(tree)
    if key is not None and key.key.row_kind_column is not None:
        kind_id = key.key.row_kind_field_id
        metadata = {SPARK_FIELD_ID_KEY: kind_id} if by_id and kind_id is not None else {}
        schema = schema.add(T.StructField(key.key.row_kind_column, T.ByteType(), True, metadata))
    return schema


def _scan(  # noqa: PLR0917 - private, called once
    session: Any,
    groups: Mapping[WrittenAs, Sequence[str]],
    planned: list[_Planned],
    match_by: str,
    key: _PlannedKey | None,
    source: str,
    hidden: Sequence[str],
) -> Any:
    """The scan with ``hidden`` first; files written with other names or types than the
    schema's read with those, cast and renamed (``written_types``)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    by_id = match_by == "field_id"
    if list(groups) == [()]:
        reader = session.read.schema(_read_schema(planned, by_id, key))
        df = reader.orc(*groups[()]) if source == "orc" else reader.parquet(*groups[()])
        return df.selectExpr(*hidden, "*")
    return read_cast(
        session,
        groups,
        lambda written: _read_schema(planned, by_id, key, written),
        hidden=[F.expr(sql) for sql in hidden],
        source=source,
    )


# -- results ---------------------------------------------------------------------------


def _column_sketch(row: Any, p: _Planned, settings: SketchSettings) -> ColumnSketch:
    i, spec, t = p.index, p.spec, p.spec.type
    rows = int(row["__rows"])
    kll = bytes(row[f"kll{i}"]) if spec.kll else None
    non_null = kll_count(kll) if kll is not None and _counted_by_kll(spec) else int(row[f"nn{i}"])
    values: dict[str, Any] = {"null_count": rows - non_null}
    if spec.theta and sample_carries_theta(spec, settings):
        values["theta"] = theta_of_value_sample(bytes(row[f"vs{i}"]))
    elif spec.theta:
        values["theta"] = normalize_theta(bytes(row[f"theta{i}"]))
    if kll is not None:
        values["kll"] = kll
    if spec.frequent and settings.frequent_items:
        sketch = row[f"fi{i}"]
        values["frequent_items"] = normalize_frequent_items(
            None if sketch is None else bytes(sketch), settings.frequent_items, spec.frequent
        )
    if spec.kll and spec.theta and settings.value_samples:
        values["value_sample"] = normalize_value_sample(bytes(row[f"vs{i}"]), settings.theta_lg_k)
    if spec.nan:
        values["nan_count"] = int(row[f"nan{i}"])
    if p.scan_bounds:
        lo, hi = row[f"min{i}"], row[f"max{i}"]
        if spec.nan:
            # Spark treats -0.0 == 0.0 when ordering; Iceberg orders -0.0 first.
            if lo == 0.0 and lo is not None and row[f"negz{i}"]:
                lo = -0.0
            if hi == 0.0 and hi is not None:
                hi = 0.0 if row[f"posz{i}"] else -0.0
        values["min"], values["max"] = _to_value(t, lo), _to_value(t, hi)
    if spec.lengths:
        values["len_sum"] = int(row[f"lsum{i}"] or 0)
        lmax = row[f"lmax{i}"]
        values["len_max"] = None if lmax is None else int(lmax)
    if spec.booleans:
        trues, falses = int(row[f"t{i}"]), int(row[f"f{i}"])
        values["true_count"], values["false_count"] = trues, falses
        values["min"] = False if falses else (True if trues else None)
        values["max"] = True if trues else (False if falses else None)
    return ColumnSketch(**values)


def _key_sketches(row: Any, key: _PlannedKey | None) -> dict[int, ColumnSketch]:
    if key is None:
        return {}
    out = {KEY_SKETCH_ID: ColumnSketch(theta=normalize_theta(bytes(row["thetakey"])), null_count=0)}
    if key.retracts:
        theta = normalize_theta(bytes(row["thetaretract"]))
        out[RETRACTED_KEY_SKETCH_ID] = ColumnSketch(theta=theta, null_count=0)
    return out


def _to_value(type_str: str, value: Any) -> Any:
    if value is None:
        return None
    if type_str in ("date", "timestamp", "timestamptz"):
        return bound_from_physical(type_str, int(value))
    if type_str == "uuid":
        return uuid.UUID(bytes=bytes(value))
    if type_str == "binary" or type_str.startswith("fixed"):
        return bytes(value)  # pyspark hands BINARY over as bytearray
    if is_decimal(type_str):
        # at the column's scale, as the Arrow engine gives it (pyspark hands a decimal over
        # with the scale Spark's BigDecimal had: 1.00E-10 of a decimal(38, 10))
        return at_scale(value, decimal_precision_scale(type_str)[1])
    return value  # numbers and strings arrive as their Python values


def _empty_sketch(spec: TypeSpec, settings: SketchSettings) -> ColumnSketch:
    return ColumnSketch(
        theta=empty_theta(settings.theta_lg_k) if spec.theta else None,
        kll=empty_kll(settings.kll_k) if spec.kll else None,
        frequent_items=(
            empty_frequent_items(settings.frequent_items, spec.frequent)
            if spec.frequent and settings.frequent_items
            else None
        ),
        value_sample=(
            empty_value_sample(settings.theta_lg_k)
            if spec.kll and spec.theta and settings.value_samples
            else None
        ),
        null_count=0,
        nan_count=0 if spec.nan else None,
        len_sum=0 if spec.lengths else None,
        true_count=0 if spec.booleans else None,
        false_count=0 if spec.booleans else None,
    )


# -- paths and errors ------------------------------------------------------------------


def canonical_path(path: str) -> str:
    """One spelling per file of a path as a manifest (or a delete file) writes it."""
    return _input_key(path)


def _input_key(path: str) -> str:
    """Canonical form of a path as a manifest lists it (not URL-encoded: Hadoop reads
    ``file:///a b.parquet`` as the file named ``a b.parquet``)."""
    local = local_path(path, percent_encoded=False)
    if local is not None:
        return "file:" + os.path.normpath(local.absolute())
    parts = urlsplit(path)
    return f"{parts.scheme}://{parts.netloc}{os.path.normpath(parts.path)}"


def _spark_key(path: str) -> str:
    """Canonical form of Spark's ``_metadata.file_path`` (a URI: ``file:/a%20b.parquet``)."""
    parts = urlsplit(path)
    if is_local(path):
        return "file:" + os.path.normpath(unquote(parts.path))
    return f"{parts.scheme}://{parts.netloc}{os.path.normpath(unquote(parts.path))}"


_NO_FIELD_IDS = "Parquet file schema doesn't contain any field Ids"


class _NoFieldIdsError(Exception):
    """A file of the read has no Parquet field ids: it must be read by column name."""


def _missing_locally(path: str) -> bool:
    local = local_path(path, percent_encoded=False)
    return local is not None and not local.is_file()


def _check_local_files_exist(paths: Any) -> None:
    missing = [
        p
        for p in paths
        if (lp := local_path(p, percent_encoded=False)) is not None and not lp.is_file()
    ]
    if missing:
        raise DataFileError(f"data file not found: {', '.join(missing)}")


_NO_FILESYSTEM = re.compile(r'No FileSystem for scheme "?([\w+.-]+)"?')
_FILE_IN_MESSAGE = re.compile(r"(?:reading file|Path does not exist:|File) (\S+?)[.,;]?(?:\s|$)")


def _stopped_while_running(spark_message: str) -> str:
    """Spark's own words say only that the context is gone; the supervisor knows why."""
    reason = stop_reason()
    said = spark_message.strip().splitlines() or ["the SparkContext was stopped"]
    cause = f"stopped because {reason}" if reason else said[0]
    return f"Spark stopped while the sketch job ran: {cause}"


def _convert_error(exc: Exception, paths: list[str]) -> Exception:
    message = str(exc)
    first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
    by_key = {_input_key(p): p for p in paths}
    named = [
        by_key.get(_spark_key(m.group(1)), m.group(1)) for m in _FILE_IN_MESSAGE.finditer(message)
    ]
    named = [n for n in dict.fromkeys(named) if _spark_key(n) in by_key or n in paths]
    not_found = any(
        marker in message
        for marker in ("PATH_NOT_FOUND", "FileNotFoundException", "FILE_NOT_EXIST")
    )
    if not_found:
        gone = [
            p
            for p in paths
            if (lp := local_path(p, percent_encoded=False)) is not None and not lp.is_file()
        ]
        files = gone or named or paths
        return DataFileError(f"data file not found: {', '.join(files)}")
    if any(m in message for m in ("SparkContext was shut down", "stopped SparkContext")):
        return SparkUnavailableError(_stopped_while_running(first))
    if scheme := _NO_FILESYSTEM.search(message):
        return SketchError(
            f"Spark cannot read {scheme.group(1)}:// files: its Hadoop has no file system for "
            "that scheme (put the connector on Spark's classpath and map the scheme to it, "
            'e.g. [spark.conf] "spark.jars.packages" and "spark.hadoop.fs.s3.impl" for S3: '
            'docs/operations.md, "Tables on object storage")'
        )
    if "FAILED_READ_FILE" in message or "CANNOT_READ_FILE_FOOTER" in message:
        files = named or paths
        return DataFileError(f"cannot read data file {', '.join(files)}: {first}")
    return SketchError(f"sketch job failed: {first}")
