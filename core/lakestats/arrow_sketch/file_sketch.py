"""One Parquet file's column statistics with pyarrow and numpy: what the SQL job's
``pipeline._column_sketch`` returns for the same file, computed inside one Spark task.

Columns are matched as Spark's Parquet reader matches them in the SQL job: a leaf by its
Parquet field id (``PARQUET:field_id``) when the job matches by field id and the file has
ids, else by name; struct parents by name (the read schema carries no parent ids); names
case-insensitively when not exact (``spark.sql.caseSensitive`` is off). A column missing
from the file reads as all NULL; a narrower physical type than the schema's (int written,
long in schema; float → double; a narrower decimal) is cast up, as Spark's reader does.
Anything else this module cannot read exactly as Spark would — another physical type, an
ambiguous name, a timestamp unit other than micros or millis — *declines* the file
(``Declined``): the caller sketches it with the SQL job, which reads it (or fails) as today.

Statistics (``pipeline`` module docstring has the units): the theta sketch of the distinct
values' spec hashes (``spec_hashes``), KLL over the value as a double (dates in days,
timestamps in micros, NaN left out), null/NaN counts, min/max with NaN left out and -0.0
ordered before 0.0, lengths in characters (strings) or bytes (binary), true/false counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.arrow_sketch.key_sketch import ArrowKey, key_sketches
from lakestats.arrow_sketch.spec_hashes import (
    distinct,
    distinct_counted,
    keyed_hashes,
    smallest,
    theta_sketch,
)
from lakestats.locations import filesystem_from_uri, local_path
from lakestats.model import ColumnSketch
from lakestats.sketches import sample_codec
from lakestats.sketches.frequent import frequent_items_of_counts
from lakestats.sketches.spec import TypeSpec, decimal_precision_scale
from lakestats.values import from_physical, is_decimal

FIELD_ID = b"PARQUET:field_id"
_TIME_TYPES = ("date", "timestamp", "timestamptz")


@dataclass(frozen=True)
class ArrowColumn:
    """One planned column: its field id, name path, statistics, and whether min/max are
    scanned (``pipeline._Planned.scan_bounds``)."""

    field_id: int
    path: tuple[str, ...]
    spec: TypeSpec
    scan_bounds: bool


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


class Declined(Exception):  # noqa: N818 - a verdict, not a failure: the SQL job takes the file
    """This file is not one the engine reads exactly as Spark would."""


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
        raise RuntimeError(_marked("not found", path, exc)) from exc
    except Exception as exc:  # pyarrow's errors of a corrupt or unreadable file
        raise RuntimeError(_marked("unreadable", path, exc)) from exc


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


def read_columns(parquet: pq.ParquetFile, job: ArrowJob) -> dict[int, pa.Array] | None:
    """Each planned column of the file in its ``arrow_type`` (all NULL where the file lacks
    it); ``None`` for a file with no rows (the caller gives it empty sketches, as the SQL
    job's ``groupBy`` does). Raises ``Declined``, and pyarrow's errors of a bad file."""
    rows = parquet.metadata.num_rows
    if not rows:
        return None
    schema = parquet.schema_arrow
    by_id = job.match_by == "field_id" and any(_field_id(f) is not None for f in schema)
    read = (*job.columns, *job.extra)
    located = {c.field_id: _locate(schema, c, by_id) for c in read}
    tops = sorted({loc[0] for loc in located.values() if loc is not None})
    table = parquet.read(columns=[schema.field(i).name for i in tops], use_threads=False)
    if table.num_rows != rows:
        raise Declined("the footer's row count is not the data's")
    out: dict[int, pa.Array] = {}
    for column in read:
        loc = located[column.field_id]
        target = arrow_type(column.spec)
        if loc is None:
            out[column.field_id] = pa.nulls(rows, target)
        else:
            values = _extract(table, schema, loc)
            out[column.field_id] = _as_type(values, target, column.spec.type)
    return out


def read_file_columns(
    path: str, columns: Sequence[ArrowColumn], match_by: Literal["field_id", "name"]
) -> dict[int, pa.Array] | None:
    """``columns`` of the file at ``path`` as the sketch job reads them (``read_columns``:
    ``None`` for a file with no rows), its failures as ``reading_file`` makes them."""
    job = ArrowJob(tuple(columns), kll_k=8, theta_lg_k=4, match_by=match_by)  # sketches nothing
    with reading_file(path):
        return read_columns(open_parquet(path), job)


def sketch_columns(columns: Mapping[int, pa.Array], job: ArrowJob) -> dict[int, ColumnSketch]:
    """``{field_id: ColumnSketch}`` of one file's columns (``read_columns``), and its key's
    sketches under their ids (``model.KEY_SKETCH_ID`` …) when the job has a key."""
    out = {c.field_id: column_sketch(columns[c.field_id], c, job) for c in job.columns}
    if job.key is not None:
        out |= key_sketches(columns, job.key, job.theta_lg_k)
    return out


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
        if leaf and by_id:
            hits = [i for i, f in enumerate(fields) if _field_id(f) == column.field_id]
            if len(hits) > 1:
                raise Declined(f"field id {column.field_id} appears twice in the file")
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


# -- statistics --------------------------------------------------------------------------------


def column_sketch(values: pa.Array, column: ArrowColumn, job: ArrowJob) -> ColumnSketch:
    """The statistics of one column of one file (``values`` in ``arrow_type``)."""
    spec, t = column.spec, column.spec.type
    out: dict[str, Any] = {"null_count": values.null_count}
    present = values.drop_null()
    frequent = bool(spec.kll and job.frequent_items)
    sampled = bool(spec.kll and spec.theta and job.value_samples)
    # the distinct values (with their rows when frequent items need them) and their theta
    # hashes: one pass serves the theta sketch, the value sample and the frequent items
    keys, counts = distinct_counted(present, t) if frequent else (distinct(present, t), None)
    hashes = keyed_hashes(keys, t) if spec.theta else None
    bottom = None if hashes is None else smallest(hashes, job.theta_lg_k)
    if hashes is not None and bottom is not None:
        out["theta"] = theta_sketch(hashes[bottom], job.theta_lg_k)
    numeric = present
    if spec.nan:
        is_nan = pc.is_nan(present)
        out["nan_count"] = int(pc.sum(is_nan).as_py() or 0)
        numeric = present.filter(pc.invert(is_nan))
    if spec.kll:
        from datasketches import kll_doubles_sketch  # noqa: PLC0415 - heavy; worker-side

        kll = kll_doubles_sketch(job.kll_k)
        if len(numeric):
            kll.update(_as_doubles(numeric, t))
        out["kll"] = bytes(kll.serialize())
    if frequent or sampled:
        # each distinct value as its KLL double; NaN (a float key) is no value
        typed = keys.view(pa.float32() if t == "float" else pa.float64()) if spec.nan else keys
        key_doubles = _as_doubles(typed, t) if len(typed) else np.zeros(0)
        real = ~np.isnan(key_doubles)
        if frequent and counts is not None:
            out["frequent_items"] = frequent_items_of_counts(
                key_doubles[real], counts[real], job.frequent_items
            )
        if sampled and hashes is not None and bottom is not None:
            # the theta sketch's smallest hashes unless a NaN key is among the column's
            chosen = bottom if real.all() else smallest(np.where(real, hashes, 0), job.theta_lg_k)
            out["value_sample"] = sample_codec.from_entries(
                hashes[chosen], key_doubles[chosen], job.theta_lg_k
            )
    if column.scan_bounds:
        out["min"], out["max"] = _bounds(numeric, t)
    if spec.lengths:
        lengths = pc.utf8_length(present) if t == "string" else pc.binary_length(present)
        out["len_sum"] = int(pc.sum(lengths).as_py() or 0)
        longest = pc.max(lengths).as_py()
        out["len_max"] = None if longest is None else int(longest)
    if spec.booleans:
        trues = int(pc.sum(present.cast(pa.int64())).as_py() or 0)
        falses = len(present) - trues
        out["true_count"], out["false_count"] = trues, falses
        out["min"] = False if falses else (True if trues else None)
        out["max"] = True if trues else (False if falses else None)
    return ColumnSketch(**out)


def _as_doubles(values: pa.Array, type_str: str) -> np.ndarray:
    if pa.types.is_decimal(values.type):
        return decimal_doubles(values)
    if type_str == "date":
        values = values.view(pa.int32())
    elif type_str in ("timestamp", "timestamptz"):
        values = values.view(pa.int64())
    # a writable, contiguous copy: what the datasketches binding accepts
    doubles = values.cast(pa.float64(), safe=False)  # rounds, as CAST(x AS DOUBLE)
    return np.array(doubles.to_numpy(zero_copy_only=False), np.float64)


_EXACT_DOUBLE = 1 << 53
_EXACT_POWER_OF_TEN = 22  # 10**22 is the largest power of ten a double holds exactly


def decimal_doubles(values: pa.Array) -> np.ndarray:
    """Each decimal as the nearest double, as Spark's ``CAST(d AS DOUBLE)`` gives it (Java's
    ``BigDecimal.doubleValue``, correctly rounded; Arrow's own cast is not). An unscaled
    value below 2**53 and a scale up to 22 are both exact doubles, so one division rounds
    correctly; any other value divides as Python ints, which rounds correctly too."""
    t = values.type
    if not pa.types.is_decimal128(t):
        values = values.cast(pa.decimal128(t.precision, t.scale))
    n = len(values)
    words = np.frombuffer(values.buffers()[1], dtype="<i8")[
        2 * values.offset : 2 * (values.offset + n)
    ]
    low, high = words[0::2], words[1::2]
    fits = (high == (low >> 63)) & (np.abs(low) < _EXACT_DOUBLE)
    out = np.empty(n, dtype=np.float64)
    if t.scale <= _EXACT_POWER_OF_TEN:
        out[fits] = low[fits].astype(np.float64) / (10.0**t.scale)
    else:
        fits[:] = False
    slow = np.flatnonzero(~fits)
    if len(slow):
        raw = np.frombuffer(values.buffers()[1], dtype=np.uint8)[16 * values.offset :]
        power = 10**t.scale
        for i in slow:
            unscaled = int.from_bytes(raw[16 * i : 16 * i + 16].tobytes(), "little", signed=True)
            out[i] = unscaled / power
    return out


def _bounds(values: pa.Array, type_str: str) -> tuple[Any, Any]:
    """(min, max) of the non-null, non-NaN values, as the SQL job gives them."""
    if not len(values):
        return None, None
    if type_str in _TIME_TYPES:
        physical = values.view(pa.int32() if type_str == "date" else pa.int64())
        bounds = pc.min_max(physical)
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        return from_physical(type_str, lo), from_physical(type_str, hi)
    # binaries compare as unsigned bytes in Arrow, as in Spark
    bounds = pc.min_max(values)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if type_str in ("float", "double"):
        # Iceberg orders -0.0 before 0.0; Arrow's min/max need not tell them apart
        bits = values.view(pa.int32() if type_str == "float" else pa.int64())
        negative_zero = -(1 << 31) if type_str == "float" else -(1 << 63)
        if lo == 0.0:
            lo = -0.0 if pc.any(pc.equal(bits, negative_zero)).as_py() else 0.0
        if hi == 0.0:
            hi = 0.0 if pc.any(pc.equal(bits, 0)).as_py() else -0.0
    if type_str == "uuid":
        return uuid.UUID(bytes=lo), uuid.UUID(bytes=hi)
    return lo, hi
