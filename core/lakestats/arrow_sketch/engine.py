"""The Arrow engine's Spark side: when ``sketch_files`` may use it, and the job that runs it.

The job is ``sc.parallelize(paths, tasks).mapPartitions(...)``: each Spark task reads its
files one after the other with pyarrow (``file_sketch``) and returns each file's
``ColumnSketch``es. Files are packed into at most ``_TASKS_PER_CORE`` tasks per core: a
PySpark task's round trip costs ~0.1 s of wall time on a small machine, which one task per
file paid 100 times over for 100 small files (docs/benchmarks.md, "the Arrow engine");
with a few tasks per core the slowest task still ends close to the others. The job runs
under the SQL job's job group, so ``pipeline._JobMonitor`` reports its progress (tasks
done) and cancels it past the time limit, exactly as the SQL job. A file the engine does
not read exactly as Spark would comes back *declined*; ``sketch_files`` sketches the
declined files with the SQL job. A job with row-level deletes gets each file's dead rows
(``dead_rows.DeadRows``) with its path — known on the driver (position deletes, deletion
vectors) or found by a first job (primary-key winners, equality deletes): the task drops
those rows before it sketches, and reports the file's live rows.

A missing or unreadable file fails the task with a marked message (``file_sketch.MARK``) that the
driver turns into the same ``DataFileError`` the SQL job raises.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.equality import EqualityTask, equality_partition
from lakestats.arrow_sketch.file_sketch import (
    MARK,
    ArrowColumn,
    ArrowJob,
    Declined,
    UnreadableFileError,
    sketch_file,
)
from lakestats.arrow_sketch.key_sketch import ArrowKey, key_type_supported
from lakestats.arrow_sketch.key_winners import WinnerGroup, winners_partition
from lakestats.arrow_sketch.spill import SHARE_BYTES
from lakestats.exceptions import DataFileError, SparkUnavailableError
from lakestats.locations import filesystem_from_uri, local_path
from lakestats.model import Column, ColumnSketch, KeySketch, SketchSettings
from lakestats.sketches.spec import TypeSpec, type_spec

# Iceberg types the engine computes exactly as the SQL job (proven type by type against it
# in tests/core/sketches/test_arrow_engine.py); a job with any other column type is SQL.
ARROW_TYPES = frozenset(
    {"int", "long", "date", "string", "boolean", "float", "double"}
    | {"timestamp", "timestamptz", "binary", "uuid"}
)
_FIXED = re.compile(r"^fixed\[\d+\]$")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_MAX_DECIMAL_DIGITS = 38
_MARKED = re.compile(f"{MARK}:(not found|unreadable):([0-9]+):")
_TASKS_PER_CORE = 4

Engine = Literal["auto", "sql"]
ENGINES: tuple[Engine, ...] = ("auto", "sql")


def arrow_type_supported(spec: TypeSpec) -> bool:
    t = spec.type
    if t in ARROW_TYPES or _FIXED.match(t):
        return True
    m = _DECIMAL.match(t)
    return m is not None and int(m.group(1)) <= _MAX_DECIMAL_DIGITS


def pyarrow_can_open(paths: Sequence[str]) -> bool:
    """Local paths and ``file:`` URIs always; other schemes when pyarrow has a file system
    for them here (checked once per scheme, without touching the files)."""
    tried: dict[str, bool] = {}
    for path in paths:
        if local_path(path, percent_encoded=False) is not None:
            continue
        scheme = path.split(":", 1)[0].lower()
        if scheme not in tried:
            try:
                filesystem_from_uri(path)
                tried[scheme] = True
            except Exception:  # any failure here means "not pyarrow's": the SQL job reads it
                tried[scheme] = False
        if not tried[scheme]:
            return False
    return True


def arrow_job(
    columns: Sequence[tuple[Column, TypeSpec, bool]],
    settings: SketchSettings,
    match_by: Literal["field_id", "name"],
    key: KeySketch | None = None,
) -> ArrowJob | None:
    """The engine's plan for ``(column, spec, scan_bounds)`` columns and a primary ``key``
    to sketch, or ``None`` when a column's type is not one the engine implements, the
    names collide, or the key is not one it builds (``key_sketch``)."""
    if not all(arrow_type_supported(spec) for _, spec, _ in columns):
        return None
    arrow_key: ArrowKey | None = None
    extra: tuple[ArrowColumn, ...] = ()
    if key is not None:
        keyed = _arrow_key(key, {column.field_id: spec.type for column, spec, _ in columns})
        if keyed is None:
            return None
        arrow_key, extra = keyed
    planned = tuple(ArrowColumn.of(column, spec, bounds) for column, spec, bounds in columns)
    paths = [c.path for c in planned]
    if len(set(paths)) != len(paths) or any(
        other[: len(path)] == path for path in paths for other in paths if other != path
    ):
        return None  # the SQL job's read schema refuses these: let it say so
    return ArrowJob(
        planned,
        settings.kll_k,
        settings.theta_lg_k,
        match_by,
        value_samples=settings.value_samples,
        frequent_items=settings.frequent_items,
        key=arrow_key,
        extra=extra,
    )


def _arrow_key(
    key: KeySketch, types: Mapping[int, str]
) -> tuple[ArrowKey, tuple[ArrowColumn, ...]] | None:
    """The key's plan and the row-kind column to read with it (by its field id in files
    with ids: a kind column without one is matched by name, which only the SQL job does)."""
    if not key.field_ids or any(
        f not in types or not key_type_supported(types[f]) for f in key.field_ids
    ):
        return None
    extra: tuple[ArrowColumn, ...] = ()
    kind_id = None
    if key.row_kind_column is not None:
        kind_spec = type_spec("int")
        if key.row_kind_field_id is None or kind_spec is None:
            return None
        kind_id = key.row_kind_field_id
        extra = (ArrowColumn(kind_id, (key.row_kind_column,), kind_spec, False),)
    columns = tuple((f, types[f]) for f in key.field_ids)
    return ArrowKey(columns, kind_id, key.non_add_kinds, key.retract_kinds), extra


# -- the Spark job ------------------------------------------------------------------------------


def sketch_partition(
    job: ArrowJob, files: Iterator[tuple[str, DeadRows | None]]
) -> Iterator[tuple[str, str, dict[int, ColumnSketch] | str | None, int]]:
    """Runs in the Spark task, for ``(path, its dead rows or None)`` pairs:
    ``(path, "ok", sketches | None, live rows)`` or ``(path, "declined", why, 0)`` per
    file. ``None`` sketches: no live rows (the caller gives the empty ones)."""
    for path, dead in files:
        try:
            sketches, rows = sketch_file(path, job, dead)
        except UnreadableFileError:
            raise  # the driver names the file (``marked_error``)
        except Declined as why:
            yield path, "declined", str(why), 0
            continue
        except Exception as exc:  # never fail where the SQL job works: it takes the file
            yield path, "declined", f"{type(exc).__name__}: {exc}", 0
            continue
        yield path, "ok", sketches, rows


def worker_ready(_: Iterator[int]) -> Iterator[int]:
    """Runs in a Spark task: imports what the engine's tasks import (``warm_arrow_workers``),
    and answers with the worker's process id."""
    import os  # noqa: PLC0415 - worker-side

    import datasketches  # noqa: F401, PLC0415 - worker-side: the import is the check

    yield os.getpid()


def run_arrow(
    sc: Any,
    paths: Sequence[str],
    job: ArrowJob,
    monitor: Callable[[], Any],
    dead: Mapping[str, DeadRows] | None = None,
) -> tuple[dict[str, dict[int, ColumnSketch]], dict[str, int], dict[str, str]]:
    """Sketch ``paths`` in one Spark job: (path → sketches, path → live rows, path → why
    declined). ``dead``: path → its dead rows (``dead_rows``: deletes of any kind, applied
    in the task). Files with no live rows have no sketches (theirs are the
    empty ones) and 0 live rows. ``monitor`` makes the context manager that watches the job
    (``pipeline._JobMonitor``); the caller has set the job group and converts other
    failures."""
    files = [(path, (dead or {}).get(path)) for path in paths]
    rdd = sc.parallelize(files, _tasks(sc, len(files)))
    results = _collect(rdd.mapPartitions(functools.partial(sketch_partition, job)), monitor)
    done: dict[str, dict[int, ColumnSketch]] = {}
    live: dict[str, int] = {}
    declined: dict[str, str] = {}
    for path, status, payload, rows in results:
        if status == "declined":
            declined[path] = str(payload)
            continue
        live[path] = int(rows)
        if isinstance(payload, Mapping):
            done[path] = dict(payload)
    return done, live, declined


@dataclass(frozen=True)
class ArrowDeletes:
    """The row-level deletes of a job as the Arrow engine applies them: positions known on
    the driver (position deletes, deletion vectors), and what a first Spark job finds as
    dead rows — primary-key merge winners or equality-delete matches."""

    dead: Mapping[str, DeadRows]
    winners: Sequence[WinnerGroup] = ()
    equality: Sequence[EqualityTask] = ()


def run_equality(
    sc: Any,
    tasks: Sequence[EqualityTask],
    match_by: Literal["field_id", "name"],
    monitor: Callable[[], Any],
    share_bytes: int = SHARE_BYTES,
) -> dict[str, DeadRows] | str:
    """The dead rows equality deletes leave in each task's data file (``equality``; a
    delete set's lookup past ``share_bytes`` spills), or why a file is left to the SQL job.
    ``monitor`` as for ``run_arrow``."""
    partition = functools.partial(equality_partition, match_by, share_bytes=share_bytes)
    return _dead_rows_job(sc, tasks, partition, monitor)


def run_key_winners(
    sc: Any,
    groups: Sequence[WinnerGroup],
    monitor: Callable[[], Any],
    share_bytes: int = SHARE_BYTES,
) -> dict[str, DeadRows] | str:
    """The dead rows of the requested files of primary-key merge ``groups``
    (``key_winners``; a bucket's merge past ``share_bytes`` spills), one Spark task per few
    groups; or why a group is left to the SQL job. ``monitor`` as for ``run_arrow``."""
    partition = functools.partial(winners_partition, share_bytes=share_bytes)
    return _dead_rows_job(sc, groups, partition, monitor)


def _dead_rows_job(
    sc: Any,
    items: Sequence[Any],
    partition: Callable[[Iterator[Any]], Iterator[tuple[str, str, Any]]],
    monitor: Callable[[], Any],
) -> dict[str, DeadRows] | str:
    """A first job: ``partition`` yields ``(path, "ok", DeadRows)`` or
    ``(path, "declined", why)``; all the dead rows, or the first reason."""
    rdd = sc.parallelize(list(items), _tasks(sc, len(items)))
    dead: dict[str, DeadRows] = {}
    for path, status, payload in _collect(rdd.mapPartitions(partition), monitor):
        if status == "declined":
            return f"{path}: {payload}" if path else str(payload)
        dead[path] = payload
    return dead


def _tasks(sc: Any, items: int) -> int:
    return max(1, min(items, max(1, int(sc.defaultParallelism)) * _TASKS_PER_CORE))


def _collect(rdd: Any, monitor: Callable[[], Any]) -> list[Any]:
    """``rdd.collect()`` under the job monitor: its time limit and Spark's loss are
    ``SparkUnavailableError``; a task's marked failure the ``DataFileError`` it stands for."""
    with monitor() as watching:
        try:
            results: list[Any] = rdd.collect()
        except Exception as exc:
            if watching.reason is not None:
                raise SparkUnavailableError(watching.reason) from exc
            data_file_error = marked_error(str(exc))
            if data_file_error is not None:
                raise data_file_error from exc
            raise
    if watching.reason is not None:  # past the limit even if it finished meanwhile
        raise SparkUnavailableError(watching.reason)
    return results


# What a failed task says when the workers' Python cannot run the engine at all (a
# cluster's executors without lakestats or its dependencies, no such interpreter)
_WORKER_LACKS = ("ModuleNotFoundError", "No module named", "ImportError", "Cannot run program")


def worker_cannot_run(message: str) -> bool:
    """Whether a failed Arrow job failed because the Python workers lack the engine."""
    return MARK not in message and any(m in message for m in _WORKER_LACKS)


def marked_error(message: str) -> DataFileError | None:
    """The ``DataFileError`` a task's marked failure stands for, if it is one."""
    m = _MARKED.search(message)
    if m is None:
        return None
    what, length = m.group(1), int(m.group(2))
    path = message[m.end() : m.end() + length]
    detail = message[m.end() + length + 1 :].split("\n", 1)[0].strip()
    if what == "not found":
        return DataFileError(f"data file not found: {path}")
    return DataFileError(f"cannot read data file {path}: {detail}")
