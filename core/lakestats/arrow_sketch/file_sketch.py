"""One Parquet file's column statistics with pyarrow and numpy: what the SQL job's
``pipeline._column_sketch`` returns for the same file, computed inside one Spark task.

Columns are matched as Spark's Parquet reader matches them in the SQL job: a leaf by its
Parquet field id (``PARQUET:field_id``) when the job matches by field id and the file has
ids, else by name; struct parents likewise where the column carries their ids
(``Column.parent_ids``), else by name; names case-insensitively when not exact
(``spark.sql.caseSensitive`` is off). A column missing from the file reads as all NULL; a
narrower physical type than the schema's (int written, long in schema; float → double; a
narrower decimal) is cast up, as Spark's reader does.
Anything else this module cannot read exactly as Spark would — another physical type, an
ambiguous name, a timestamp unit other than micros or millis — *declines* the file
(``Declined``): the caller sketches it with the SQL job, which reads it (or fails) as today.

Statistics (``pipeline`` module docstring has the units): the theta sketch of the distinct
values' spec hashes (``spec_hashes``), KLL over the value as a double (dates in days,
timestamps in micros, NaN left out), null/NaN counts, min/max with NaN left out and -0.0
ordered before 0.0, lengths in characters (strings) or bytes (binary), true/false counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.arrow_sketch.column_stream import (
    ColumnAccumulator,
    batch_rows_for,
    uncompressed_bytes,
)
from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.key_sketch import ArrowKey, KeyAccumulator
from lakestats.locations import filesystem_from_uri, local_path
from lakestats.model import Column, ColumnSketch
from lakestats.sketches.spec import TypeSpec, decimal_precision_scale
from lakestats.values import is_decimal

FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class ArrowColumn:
    """One planned column: its field id, name path, statistics, and whether min/max are
    scanned (``pipeline._Planned.scan_bounds``)."""

    field_id: int
    path: tuple[str, ...]
    spec: TypeSpec
    scan_bounds: bool
    parent_ids: tuple[int, ...] = ()  # ``Column.parent_ids``: structs found by id, if any

    @classmethod
    def of(cls, column: Column, spec: TypeSpec, scan_bounds: bool) -> ArrowColumn:
        """The planned read of a schema column."""
        return cls(column.field_id, column.parts, spec, scan_bounds, column.parent_ids)


@dataclass(frozen=True)
class ArrowJob:
    columns: tuple[ArrowColumn, ...]
    kll_k: int
    theta_lg_k: int
    match_by: Literal["field_id", "name"]
    value_samples: bool = False
    frequent_items: int = 0  # items tracked; 0: none
    key: ArrowKey | None = None  # a primary key's sketches (``key_sketch``)
    extra: tuple[ArrowColumn, ...] = ()  # read for the key, not sketched (the row kind)
    batch_rows: int = 0  # rows read and sketched at a time; 0: ``batch_rows_for`` the file


class Declined(Exception):  # noqa: N818 - a verdict, not a failure: the SQL job takes the file
    """This file is not one the engine reads exactly as Spark would."""


class UnreadableFileError(RuntimeError):
    """A data file that cannot be read: fails the task with a marked message (``MARK``)."""


# "<mark>:<what>:<length of the path>:<path>:<first line of pyarrow's message>"
MARK = "lakestats-arrow-data-file"


@contextmanager
def reading_file(path: str) -> Iterator[None]:
    """pyarrow's errors reading ``path`` as the task failure the driver turns into the
    ``DataFileError`` naming it (``engine.marked_error``); ``Declined`` passes through."""
    try:
        yield
    except Declined:
        raise
    except FileNotFoundError as exc:
        raise UnreadableFileError(_marked("not found", path, exc)) from exc
    except Exception as exc:  # pyarrow's errors of a corrupt or unreadable file
        raise UnreadableFileError(_marked("unreadable", path, exc)) from exc


def _marked(what: str, path: str, exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{MARK}:{what}:{len(path)}:{path}:{first}"


def open_parquet(path: str) -> pq.ParquetFile:
    """A local path, ``file:`` URI or any URI pyarrow's file systems open."""
    local = local_path(path, percent_encoded=False)
    if local is not None:
        return pq.ParquetFile(str(local))
    filesystem, inner = filesystem_from_uri(path)
    return pq.ParquetFile(filesystem.open_input_file(inner))


@dataclass(frozen=True)
class _FilePlan:
    """Where each column a job reads is in one file (``None``: not in it) and the file's
    top-level columns that hold them."""

    schema: pa.Schema
    read: tuple[ArrowColumn, ...]
    located: Mapping[int, tuple[int, ...] | None]
    tops: tuple[int, ...]

    @property
    def names(self) -> list[str]:
        return [self.schema.field(i).name for i in self.tops]


def _plan(parquet: pq.ParquetFile, job: ArrowJob) -> _FilePlan:
    schema = parquet.schema_arrow
    by_id = job.match_by == "field_id" and any(_field_id(f) is not None for f in schema)
    read = (*job.columns, *job.extra)
    located = {c.field_id: _locate(schema, c, by_id) for c in read}
    tops = tuple(sorted({loc[0] for loc in located.values() if loc is not None}))
    return _FilePlan(schema, read, located, tops)


def _convert(table: pa.Table | None, plan: _FilePlan, rows: int) -> dict[int, pa.Array]:
    """Each column the plan reads from ``table`` (``rows`` of the file), in its
    ``arrow_type``; all NULL where the file lacks it."""
    out: dict[int, pa.Array] = {}
    for column in plan.read:
        loc = plan.located[column.field_id]
        target = arrow_type(column.spec)
        if loc is None or table is None:
            out[column.field_id] = pa.nulls(rows, target)
        else:
            values = _extract(table, plan.schema, loc)
            out[column.field_id] = _as_type(values, target, column.spec.type)
    return out


def read_columns(parquet: pq.ParquetFile, job: ArrowJob) -> dict[int, pa.Array] | None:
    """Each planned column of the whole file in its ``arrow_type`` (all NULL where the file
    lacks it); ``None`` for a file with no rows (the caller gives it empty sketches, as the
    SQL job's ``groupBy`` does). Raises ``Declined``, and pyarrow's errors of a bad file."""
    rows = parquet.metadata.num_rows
    if not rows:
        return None
    plan = _plan(parquet, job)
    table = parquet.read(columns=plan.names, use_threads=False)
    if table.num_rows != rows:
        raise Declined("the footer's row count is not the data's")
    return _convert(table, plan, rows)


def planned_bytes(parquet: pq.ParquetFile, job: ArrowJob) -> int:
    """The footer's uncompressed size of the file's columns that ``job`` reads."""
    return uncompressed_bytes(parquet, list(_plan(parquet, job).tops))


@dataclass(frozen=True)
class InputFooter:
    """What a task plans from an input's footer: its rows and the uncompressed bytes of
    the columns its job reads."""

    path: str
    rows: int
    column_bytes: int


def read_footer(path: str, job: ArrowJob) -> InputFooter:
    """The input's ``InputFooter``, the file closed again; read failures as the sketch
    tasks'."""
    with reading_file(path):
        parquet = open_parquet(path)
        try:
            return InputFooter(path, parquet.metadata.num_rows, planned_bytes(parquet, job))
        finally:
            parquet.close()


def read_batches(
    parquet: pq.ParquetFile, job: ArrowJob
) -> Iterator[tuple[int, dict[int, pa.Array]]]:
    """``(rows, columns)``: ``read_columns`` a batch of rows at a time
    (``column_stream.batch_rows_for``), in file order; nothing for a file with no rows.
    ``Declined`` after the last batch when the batches hold other than the footer's row
    count."""
    rows = parquet.metadata.num_rows
    if not rows:
        return
    plan = _plan(parquet, job)
    size = job.batch_rows or batch_rows_for(parquet, list(plan.tops))
    seen = 0
    if not plan.tops:  # none of the columns is in the file: NULL rows, nothing to read
        while seen < rows:
            n = min(size, rows - seen)
            seen += n
            yield n, _convert(None, plan, n)
        return
    for batch in parquet.iter_batches(batch_size=size, columns=plan.names, use_threads=False):
        seen += batch.num_rows
        yield batch.num_rows, _convert(pa.Table.from_batches([batch]), plan, batch.num_rows)
    if seen != rows:
        raise Declined("the footer's row count is not the data's")


def file_batches(path: str, job: ArrowJob) -> Iterator[tuple[int, dict[int, pa.Array]]]:
    """``read_batches`` of the file at ``path``, its read failures as ``reading_file``
    makes them (what the caller does with a batch is not a read failure)."""
    with reading_file(path):
        batches = read_batches(open_parquet(path), job)
    while True:
        with reading_file(path):
            batch = next(batches, None)
        if batch is None:
            return
        yield batch


def positioned_batches(
    paths: Sequence[str], job: ArrowJob, named: Sequence[tuple[str, ArrowColumn]]
) -> Iterator[pa.Table]:
    """Every file's rows a batch at a time (``file_batches``; one file open at a time): the
    ``named`` columns under their names, and each row's ``input`` (its file's number in
    ``paths``) and ``position`` in its file."""
    for number, path in enumerate(paths):
        start = 0
        for rows, columns in file_batches(path, job):
            batch = {name: columns[c.field_id] for name, c in named}
            batch["input"] = pa.array(np.full(rows, number, dtype=np.int32))
            batch["position"] = pa.array(np.arange(start, start + rows, dtype=np.int64))
            start += rows
            yield pa.table(batch)


def read_file_columns(
    path: str, columns: Sequence[ArrowColumn], match_by: Literal["field_id", "name"]
) -> dict[int, pa.Array] | None:
    """``columns`` of the file at ``path`` as the sketch job reads them (``read_columns``:
    ``None`` for a file with no rows), its failures as ``reading_file`` makes them."""
    with reading_file(path):
        return read_columns(open_parquet(path), reading_job(columns, match_by))


def reading_job(columns: Sequence[ArrowColumn], match_by: Literal["field_id", "name"]) -> ArrowJob:
    """A job that reads ``columns`` and sketches nothing (its sketch sizes are never used)."""
    return ArrowJob(tuple(columns), kll_k=8, theta_lg_k=4, match_by=match_by)


def sketch_file(
    path: str, job: ArrowJob, dead: DeadRows | None
) -> tuple[dict[int, ColumnSketch] | None, int]:
    """``({field_id: ColumnSketch}, live rows)`` of the file at ``path`` without the rows
    ``dead`` holds (``dead_rows``: positions past the end delete nothing), and its key's
    sketches under their ids
    (``model.KEY_SKETCH_ID`` …) when the job has a key; ``(None, 0)`` when no row lives.
    Read and sketched a batch at a time (``column_stream``). Reading fails as
    ``reading_file`` says; ``Declined`` and anything else is the SQL job's to try."""
    columns = {c.field_id: ColumnAccumulator(c, job) for c in job.columns}
    key = None if job.key is None else KeyAccumulator(job.key, job.theta_lg_k)
    start = live = 0
    for n, batch in file_batches(path, job):
        living, kept = _live(batch, dead, start, n)
        start += n
        if not kept:
            continue
        live += kept
        for field_id, accumulator in columns.items():
            accumulator.add(living[field_id])
        if key is not None:
            key.add(living)
    if not live:
        return None, 0
    out = {field_id: accumulator.result() for field_id, accumulator in columns.items()}
    if key is not None:
        out |= key.result()
    return out, live


def _live(
    batch: dict[int, pa.Array], gone: DeadRows | None, start: int, n: int
) -> tuple[dict[int, pa.Array], int]:
    """The batch (rows ``start`` … ``start + n`` of the file) without the rows ``gone``
    holds, and how many rows live."""
    dead = None if gone is None else gone.mask(start, n)
    if dead is None:
        return batch, n
    keep = ~dead
    live = int(keep.sum())
    if not live:
        return batch, 0
    mask = pa.array(keep)
    return {fid: values.filter(mask) for fid, values in batch.items()}, live


def arrow_type(spec: TypeSpec) -> pa.DataType:
    """The Arrow type the engine computes a column's statistics in."""
    t = spec.type
    simple: dict[str, pa.DataType] = {
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us"),
        "timestamptz": pa.timestamp("us", tz="UTC"),
        "string": pa.string(),
        "binary": pa.binary(),
        "uuid": pa.binary(16),
    }
    if t in simple:
        return simple[t]
    if is_decimal(t):
        return pa.decimal128(*decimal_precision_scale(t))
    if t.startswith("fixed"):
        return pa.binary(int(t[t.index("[") + 1 : t.index("]")]))
    raise Declined(f"no Arrow type for {t}")


# -- matching and reading --------------------------------------------------------------------


def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(FIELD_ID)
    return None if raw is None else int(raw)


def _by_name(fields: Sequence[pa.Field], name: str) -> int | None:
    exact = [i for i, f in enumerate(fields) if f.name == name]
    if len(exact) == 1:
        return exact[0]
    folded = [i for i, f in enumerate(fields) if f.name.lower() == name.lower()]
    if len(exact) > 1 or len(folded) > 1:
        raise Declined(f"column name {name!r} is ambiguous in the file")
    return folded[0] if folded else None


def _locate(schema: pa.Schema, column: ArrowColumn, by_id: bool) -> tuple[int, ...] | None:
    """Child indices from the top level down to the column's leaf; ``None``: not in the file."""
    fields: Sequence[pa.Field] = list(schema)
    loc: list[int] = []
    for depth, name in enumerate(column.path):
        leaf = depth == len(column.path) - 1
        wanted = column.field_id if leaf else _at(column.parent_ids, depth)
        if by_id and wanted is not None:
            hits = [i for i, f in enumerate(fields) if _field_id(f) == wanted]
            if len(hits) > 1:
                raise Declined(f"field id {wanted} appears twice in the file")
            index = hits[0] if hits else None
        else:
            index = _by_name(fields, name)
        if index is None:
            return None
        loc.append(index)
        field_type = fields[index].type
        if not leaf:
            if not pa.types.is_struct(field_type):
                raise Declined(f"{name!r} is not a struct in the file")
            fields = [field_type.field(i) for i in range(field_type.num_fields)]
    return tuple(loc)


def _at(ids: tuple[int, ...], depth: int) -> int | None:
    return ids[depth] if depth < len(ids) else None


def _extract(table: pa.Table, schema: pa.Schema, loc: tuple[int, ...]) -> pa.Array:
    chunked = table.column(schema.field(loc[0]).name)
    if len(loc) > 1:
        # struct_field gives NULL under a NULL parent, as Spark's reader does
        chunked = pc.struct_field(chunked, list(loc[1:]))
    values = chunked.combine_chunks() if isinstance(chunked, pa.ChunkedArray) else chunked
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if isinstance(values.type, pa.BaseExtensionType):  # arrow.uuid: its fixed bytes
        values = values.storage
    return values


def _as_type(values: pa.Array, target: pa.DataType, type_str: str) -> pa.Array:
    """``values`` in the engine's type for the column: as read, or cast up where Spark's
    reader widens; ``Declined`` otherwise."""
    have = values.type
    if have == target:
        return values
    if type_str == "string" and pa.types.is_large_string(have):
        return values
    if type_str == "binary" and pa.types.is_large_binary(have):
        return values
    if type_str == "timestamptz" and pa.types.is_timestamp(have) and have.tz is not None:
        # micros since the epoch whatever zone the writer's Arrow schema named
        values = values.cast(pa.timestamp(have.unit, tz="UTC"))
        have = values.type
        if have == target:
            return values
    widen = (
        (type_str == "int" and have in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()))
        or (type_str == "long" and have in _LONG_FROM)
        or (type_str == "double" and have == pa.float32())
        or (type_str == "timestamp" and have == pa.timestamp("ms"))
        or (type_str == "timestamptz" and have == pa.timestamp("ms", tz="UTC"))
        or (is_decimal(type_str) and _decimal_widens(have, target))
    )
    if not widen:
        raise Declined(f"the file holds {type_str} as {have}")
    return values.cast(target)


_LONG_FROM = (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32())


def _decimal_widens(have: pa.DataType, target: pa.DataType) -> bool:
    return bool(
        pa.types.is_decimal(have)
        and have.scale <= target.scale
        and have.precision - have.scale <= target.precision - target.scale
    )
