"""A file's column statistics built one record batch at a time.

The Arrow engine's task once read a file's planned columns whole and then sketched them, so
a worker held the whole file's columns, and every column's hash, double and distinct arrays
in turn: about 60 bytes per row and column, 500 MiB for a file of 4 million rows of five
columns (``docs/benchmarks.md``, "Daemon memory against the table's size"). Files of 512 MiB,
Iceberg's default target, hold tens of millions of rows. Here a task reads a batch of rows
(``batch_rows_for``: 128 Ki rows, fewer when the planned columns hold more than 32 MiB of
uncompressed data in that many, down to 32 Ki),
folds it into one accumulator per column and drops it.

The result is what the one-batch computation gives, not an approximation of it:

* theta and value-sample sketches keep a bottom-k of the distinct hashes: the ``2**lg_k + 1``
  smallest hashes of the whole file are among the union of each batch's smallest, so
  keeping those and building the sketch at the end gives the same sketch, byte for byte;
* KLL is one sketch updated with every batch's values in file order, as the one update;
* counts, sums, lengths and min/max combine exactly (min/max through each batch's two
  extremes, so -0.0 stays ordered before 0.0);
* frequent items (of the KLL double, or of a string column's strings) come from exact
  counts within a batch; across batches the counts of the
  same value add, and when more values are kept than the sketch's map holds the least
  frequent are cut and the largest count cut is added to the offset. Every count then stays
  within the stored form's promise (a listed count is a lower bound and count + offset an
  upper one; an unlisted value has at most the offset), with an offset that may be larger
  than one batch's. A file that fits in one batch is computed exactly as before.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.arrow_sketch.arrays import sorted_unique
from lakestats.arrow_sketch.spec_hashes import (
    distinct,
    distinct_counted,
    keyed_hashes,
    smallest,
    theta_sketch,
)
from lakestats.arrow_sketch.strings import as_bytes, char_lengths, python_string, python_strings
from lakestats.model import ColumnSketch
from lakestats.sketches import sample_codec
from lakestats.sketches.frequent import (
    DOUBLES,
    STRINGS,
    ItemKind,
    frequent_capacity,
    frequent_items_of_counts,
    most_frequent,
    summed_counts,
)
from lakestats.values import bound_from_physical

if TYPE_CHECKING:  # file_sketch imports this module
    from lakestats.arrow_sketch.file_sketch import ArrowColumn, ArrowJob

_TIME_TYPES = ("date", "timestamp", "timestamptz")

# A batch's sketching takes ~35× its columns' uncompressed Parquet size at its peak (hash
# tables, hashes, doubles, one column at a time; measured: a 4-million-row file of five
# columns, 15 bytes a row, peaked 500 MiB above the worker's base read in batches of 1 Mi
# rows, 130 MiB in batches of 128 Ki, and took no longer): 128 Ki rows, fewer for wide rows.
BATCH_BYTES = 32 << 20  # uncompressed bytes of the planned columns in a batch, at most
MIN_BATCH_ROWS = 1 << 15
MAX_BATCH_ROWS = 1 << 17


def batch_rows_for(parquet: pq.ParquetFile, columns: list[int]) -> int:
    """Rows per batch: ``MAX_BATCH_ROWS``, or as many as hold ``BATCH_BYTES`` of the
    top-level ``columns`` (schema indices) uncompressed by the footer's sizes, not fewer
    than ``MIN_BATCH_ROWS``."""
    meta = parquet.metadata
    if not meta.num_rows or not meta.num_row_groups:
        return MAX_BATCH_ROWS
    per_row = max(1.0, uncompressed_bytes(parquet, columns) / meta.num_rows)
    return int(min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, BATCH_BYTES / per_row)))


def uncompressed_bytes(parquet: pq.ParquetFile, columns: list[int]) -> int:
    """The footer's uncompressed size of the top-level ``columns`` (schema indices)."""
    meta = parquet.metadata
    wanted = {parquet.schema_arrow.field(i).name for i in columns}
    size = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.path_in_schema.split(".", 1)[0] in wanted:
                size += chunk.total_uncompressed_size
    return size


class SmallestHashes:
    """The ``2**lg_k + 1`` smallest distinct nonzero hashes added (each with its smallest
    value when values are kept): all a bottom-k sketch of everything added needs."""

    def __init__(self, lg_k: int, *, with_values: bool = False) -> None:
        self._limit = (1 << lg_k) + 1
        self._with_values = with_values
        self._hashes: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._held = 0

    def add(self, hashes: np.ndarray, values: np.ndarray | None = None) -> None:
        self._hashes.append(hashes)
        if self._with_values:
            assert values is not None
            self._values.append(values)
        self._held += len(hashes)
        if self._held > 4 * self._limit:
            self._reduce()

    def _reduce(self) -> None:
        hashes = np.concatenate(self._hashes) if self._hashes else np.zeros(0, np.uint64)
        values = np.concatenate(self._values) if self._with_values and self._values else None
        keep = hashes != 0
        hashes = hashes[keep]
        if values is not None:
            values = values[keep]
            order = np.lexsort((values, hashes))  # by hash, then the smallest value first
            hashes, values = hashes[order], values[order]
            first = np.ones(len(hashes), dtype=bool)
            first[1:] = hashes[1:] != hashes[:-1]
            hashes, values = hashes[first][: self._limit], values[first][: self._limit]
        else:
            hashes = sorted_unique(hashes)[: self._limit]
        self._hashes = [hashes]
        self._values = [] if values is None else [values]
        self._held = len(hashes)

    def hashes(self) -> np.ndarray:
        """Distinct, smallest first when more than one batch was added."""
        if len(self._hashes) > 1:
            self._reduce()  # the same value in two batches: one hash
        return self._hashes[0] if self._hashes else np.zeros(0, np.uint64)

    def values(self) -> np.ndarray:
        """The value of each of ``hashes()``."""
        if len(self._hashes) > 1:
            self._reduce()
        return self._values[0] if self._values else np.zeros(0, np.float64)


class ValueCounts:
    """Exact counts of each value within a batch, added across batches; cut to the
    frequent-items map's capacity when more are kept (the offset grows by the largest count
    cut). One batch alone is kept as given, so its sketch is the one-pass one."""

    def __init__(self, items_tracked: int, kind: ItemKind = DOUBLES) -> None:
        self._items = items_tracked
        self._kind = kind
        self._capacity = frequent_capacity(items_tracked)
        self._values = np.zeros(0, object if kind == STRINGS else np.float64)
        self._counts = np.zeros(0, np.int64)
        self._batches = 0
        self._total = 0
        self._offset = 0

    def add_strings(self, keys: pa.Array, counts: np.ndarray) -> None:
        """A batch's distinct strings and their counts: cut to the map's capacity while
        still in Arrow (the offset grows by the largest count cut, as the sketch's own cut
        would), so a column of distinct values never becomes Python strings."""
        rows = int(counts.sum())
        if len(counts) > self._capacity:
            kept, left_out = most_frequent(counts, self._capacity)
            self._offset += left_out
            keys, counts = keys.take(pa.array(kept)), counts[kept]
        values = np.empty(len(keys), object)
        values[:] = python_strings(keys)
        self.add(values, counts, rows=rows)

    def add(self, values: np.ndarray, counts: np.ndarray, *, rows: int | None = None) -> None:
        """A batch's distinct values and their counts (``rows``: the rows they stand for,
        when the least frequent were cut already)."""
        self._total += int(counts.sum()) if rows is None else rows
        self._batches += 1
        if self._batches == 1:
            self._values, self._counts = values, counts
            return
        self._values, self._counts = summed_counts(
            np.concatenate((self._values, values)),
            np.concatenate((self._counts, counts)),
            self._kind,
        )
        if len(self._values) > self._capacity:
            kept, left_out = most_frequent(self._counts, self._capacity)
            self._offset += left_out
            self._values, self._counts = self._values[kept], self._counts[kept]

    def sketch(self) -> bytes:
        return frequent_items_of_counts(
            self._values,
            self._counts,
            self._items,
            total=self._total,
            offset=self._offset,
            exact=self._batches <= 1,
            kind=self._kind,
        )


class ColumnAccumulator:
    """One column's statistics over a file's batches (``add`` each batch's live values in
    the engine's type, then ``result``); one ``add`` of the whole column gives what the
    engine computed before it read files in batches."""

    def __init__(self, column: ArrowColumn, job: ArrowJob) -> None:
        self._column = column
        self._job = job
        spec = column.spec
        self._type = spec.type
        frequent = spec.frequent if job.frequent_items else None
        sampled = bool(spec.kll and spec.theta and job.value_samples)
        self._theta = SmallestHashes(job.theta_lg_k) if spec.theta else None
        self._sample = SmallestHashes(job.theta_lg_k, with_values=True) if sampled else None
        self._counts = ValueCounts(job.frequent_items, frequent) if frequent else None
        self._kll: Any = None
        if spec.kll:
            from datasketches import kll_doubles_sketch  # noqa: PLC0415 - heavy; worker-side

            self._kll = kll_doubles_sketch(job.kll_k)
        self._nulls = 0
        self._nans = 0
        self._extremes: list[pa.Array] = []
        self._len_sum = 0
        self._len_max: int | None = None
        self._trues = 0
        self._falses = 0

    def add(self, values: pa.Array) -> None:
        spec, t, job = self._column.spec, self._type, self._job
        self._nulls += values.null_count
        present = values.drop_null()
        if self._counts is not None:
            keys, counts = distinct_counted(present, t)
        else:
            keys, counts = distinct(present, t), None
        hashes = keyed_hashes(keys, t) if spec.theta else None
        bottom = None if hashes is None else smallest(hashes, job.theta_lg_k)
        if self._theta is not None and hashes is not None and bottom is not None:
            self._theta.add(hashes[bottom])
        numeric = present
        if spec.nan:
            is_nan = pc.is_nan(present)
            self._nans += int(pc.sum(is_nan).as_py() or 0)
            numeric = present.filter(pc.invert(is_nan))
        if self._kll is not None and len(numeric):
            self._kll.update(as_doubles(numeric, t))
        if self._counts is not None and counts is not None and spec.frequent == STRINGS:
            self._counts.add_strings(keys, counts)
        elif self._counts is not None or self._sample is not None:
            # each distinct value as its KLL double; NaN (a float key) is no value
            typed = keys.view(pa.float32() if t == "float" else pa.float64()) if spec.nan else keys
            key_doubles = as_doubles(typed, t) if len(typed) else np.zeros(0)
            real = ~np.isnan(key_doubles)
            if self._counts is not None and counts is not None:
                self._counts.add(key_doubles[real], counts[real])
            if self._sample is not None and hashes is not None and bottom is not None:
                # the theta sketch's smallest hashes unless a NaN key is among them
                chosen = (
                    bottom if real.all() else smallest(np.where(real, hashes, 0), job.theta_lg_k)
                )
                self._sample.add(hashes[chosen], key_doubles[chosen])
        if self._column.scan_bounds and len(numeric):
            self._extremes.append(extremes(numeric, t))
        if spec.lengths and len(present):
            lengths = (
                char_lengths(present) if t == "string" else pc.binary_length(present).to_numpy()
            )
            self._len_sum += int(np.sum(lengths))
            self._len_max = max(self._len_max or 0, int(np.max(lengths)))
        if spec.booleans:
            trues = int(pc.sum(present.cast(pa.int64())).as_py() or 0)
            self._trues += trues
            self._falses += len(present) - trues

    def result(self) -> ColumnSketch:
        spec, t, job = self._column.spec, self._type, self._job
        out: dict[str, Any] = {"null_count": self._nulls}
        if self._theta is not None:
            out["theta"] = theta_sketch(self._theta.hashes(), job.theta_lg_k)
        if spec.nan:
            out["nan_count"] = self._nans
        if self._kll is not None:
            out["kll"] = bytes(self._kll.serialize())
        if self._counts is not None:
            out["frequent_items"] = self._counts.sketch()
        if self._sample is not None:
            out["value_sample"] = sample_codec.from_entries(
                self._sample.hashes(), self._sample.values(), job.theta_lg_k
            )
        if self._column.scan_bounds:
            out["min"], out["max"] = (
                bounds(pa.concat_arrays(self._extremes), t) if self._extremes else (None, None)
            )
        if spec.lengths:
            out["len_sum"], out["len_max"] = self._len_sum, self._len_max
        if spec.booleans:
            trues, falses = self._trues, self._falses
            out["true_count"], out["false_count"] = trues, falses
            out["min"] = False if falses else (True if trues else None)
            out["max"] = True if trues else (False if falses else None)
        return ColumnSketch(**out)


# -- values as the statistics see them -------------------------------------------------


def as_doubles(values: pa.Array, type_str: str) -> np.ndarray:
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


def extremes(values: pa.Array, type_str: str) -> pa.Array:
    """``[min, max]`` of non-empty ``values`` (non-null, non-NaN) in their own type, which
    ``bounds`` of several batches' extremes turns into the bounds of all of them."""
    lo, hi = bounds(values, type_str, as_values=False)
    if type_str in _TIME_TYPES:  # as their physical numbers
        physical = pa.int32() if type_str == "date" else pa.int64()
        return pa.array([lo, hi], physical).view(values.type)
    if type_str == "string":
        return pa.array([lo, hi], as_bytes(values).type).view(values.type)
    return pa.array([lo, hi], values.type)


def bounds(values: pa.Array, type_str: str, *, as_values: bool = True) -> tuple[Any, Any]:
    """(min, max) of the non-null, non-NaN values, as the SQL job gives them
    (``as_values=False``: in the form ``extremes`` puts back into an array — dates and
    timestamps as their numbers, uuids as their bytes)."""
    if not len(values):
        return None, None
    if type_str in _TIME_TYPES:
        physical = values.view(pa.int32() if type_str == "date" else pa.int64())
        found = pc.min_max(physical)
        lo, hi = found["min"].as_py(), found["max"].as_py()
        if not as_values:
            return lo, hi
        return bound_from_physical(type_str, lo), bound_from_physical(type_str, hi)
    # binaries compare as unsigned bytes in Arrow, as in Spark; strings by their bytes too,
    # which need not be UTF-8
    found = pc.min_max(as_bytes(values) if type_str == "string" else values)
    lo, hi = found["min"].as_py(), found["max"].as_py()
    if type_str == "string" and as_values:
        return python_string(lo), python_string(hi)
    if type_str in ("float", "double"):
        # Iceberg orders -0.0 before 0.0; Arrow's min/max need not tell them apart
        bits = values.view(pa.int32() if type_str == "float" else pa.int64())
        negative_zero = -(1 << 31) if type_str == "float" else -(1 << 63)
        if lo == 0.0:
            lo = -0.0 if pc.any(pc.equal(bits, negative_zero)).as_py() else 0.0
        if hi == 0.0:
            hi = 0.0 if pc.any(pc.equal(bits, 0)).as_py() else -0.0
    if type_str == "uuid" and as_values:
        return uuid.UUID(bytes=lo), uuid.UUID(bytes=hi)
    return lo, hi
