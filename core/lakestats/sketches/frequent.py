"""Frequent values: a mergeable frequent-items sketch per file and column (issue 14 item 3).

Spark 4.3's ``approx_top_k_accumulate(value, maxItemsTracked)`` keeps a DataSketches
``ItemsSketch<Double>`` (Misra-Gries with a hash map of ``maxMapSize`` slots) of the column's
KLL double (``pipeline._kll_input_sql``); its ``sketch`` field is the Java serialization with
``ArrayOfDoublesSerDe``, which Python's ``frequent_items_sketch.deserialize(b,
PyDoublesSerDe())`` reads (tested byte for byte). Counts are within the sketch's *maximum
error* (``epsilon × rows``, ``epsilon = 3.5 / maxMapSize``): every reported count is at
most the true count plus nothing and at least it minus that error (``lower``/``upper``).
Merged sketches (files, partitions) keep that error relative to the merged row count.

Stored form (``frequent_items_v1``): that serialization as Python's DataSketches writes it
(the same format; Spark's bytes are re-serialized). NULL values (NaN floats, as for KLL)
are not counted.

String columns keep the same sketch of their values themselves (``STRINGS``: Spark's
``approx_top_k_accumulate`` over the string, Java's ``ArrayOfStringsSerDe`` — each item its
UTF-8 length as a little-endian u32 and its bytes — which datasketches-cpp's
``frequent_strings_sketch`` reads and writes alike; stored as ``frequent_strings_v1``).
Python's ``PyStringsSerDe`` is not that format (it writes one byte per character), so it is
never used. A blob does not say which kind it is: the column's type does (``kind_of``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from datasketches import (
    PyDoublesSerDe,
    frequent_items_error_type,
    frequent_items_sketch,
    frequent_strings_sketch,
)

FREQUENT_ITEMS_VERSION = 1
ItemKind = Literal["doubles", "strings"]
DOUBLES: ItemKind = "doubles"  # a KLL column's double (days, micros, the decimal's double)
STRINGS: ItemKind = "strings"  # a string column's value
# what ``sketch.frequent_items`` accepts besides 0 (off); Spark allows 1 … 1,000
# (APPROX_TOP_K_MAX_ITEMS_TRACKED_EXCEEDS_LIMIT), a map below 16 slots lists nothing useful
MIN_ITEMS_TRACKED = 8
MAX_ITEMS_TRACKED = 1000


def lg_map_size(items_tracked: int) -> int:
    """Spark's map for ``items_tracked``: the power of two at or above ``items / 0.75``
    (measured: 256 → 512 slots, 1000 → 2048), at least 8. Its epsilon is 3.5 / slots:
    0.68 % of the rows at 256, 0.17 % at 1000."""
    return max(3, math.ceil(math.log2(items_tracked / 0.75)))


def kind_of(type_str: str) -> ItemKind | None:
    """What a column of this type's frequent-items sketch counts; None: it has none."""
    from lakestats.sketches.spec import type_spec  # noqa: PLC0415 - spec imports this module

    spec = type_spec(type_str)
    return None if spec is None else spec.frequent


def _serde() -> Any:
    # a new instance per use: a module-level one is still alive when nanobind checks for
    # leaks at exit, and it prints "leaked instances" into the daemon's JSON log
    return PyDoublesSerDe()


def _new(lg_slots: int, kind: ItemKind) -> Any:
    if kind == STRINGS:
        return frequent_strings_sketch(lg_slots)
    return frequent_items_sketch(lg_slots)


def _serialize(sketch: Any, kind: ItemKind) -> bytes:
    return bytes(sketch.serialize() if kind == STRINGS else sketch.serialize(_serde()))


def _load(blob: bytes, kind: ItemKind) -> Any:
    if kind == STRINGS:
        return frequent_strings_sketch.deserialize(blob)
    return frequent_items_sketch.deserialize(blob, _serde())


def empty_frequent_items(items_tracked: int, kind: ItemKind = DOUBLES) -> bytes:
    return _serialize(_new(lg_map_size(items_tracked), kind), kind)


def normalize_frequent_items(
    blob: bytes | None, items_tracked: int, kind: ItemKind = DOUBLES
) -> bytes:
    """Spark's sketch (``None`` for no rows) in the stored form."""
    if blob is None:
        return empty_frequent_items(items_tracked, kind)
    stored = _serialize(_load(blob, kind), kind)
    if kind == STRINGS and len(stored) > STRING_BYTES:  # within the strings' budget
        p = _parse(stored, kind)
        return _write_sketch(p.lg_slots, p.values, p.counts, p.total, p.offset, kind=kind)
    return stored


def repeated_frequent_items(
    value: float | str | None, copies: int, items_tracked: int, kind: ItemKind = DOUBLES
) -> bytes:
    """The sketch of ``copies`` rows holding ``value`` (a partition column's constant): a
    KLL double (NaN or None: no value) or a string."""
    lg_slots = lg_map_size(items_tracked)
    if value is None or (isinstance(value, float) and math.isnan(value)) or copies <= 0:
        return _serialize(_new(lg_slots, kind), kind)
    values = np.empty(1, object if kind == STRINGS else np.float64)
    values[0] = value if kind == STRINGS else float(value)
    return _write_sketch(lg_slots, values, np.array([copies], np.int64), copies, 0, kind=kind)


_HEADER = struct.Struct("<BBBBBBHIIQQ")  # a non-empty sketch's preamble (``_write_sketch``)
_LENGTH = struct.Struct("<I")  # a string item's UTF-8 length
_LOAD_FACTOR = 0.75  # of the library's map: it purges past this many items per slot
# UTF-8 bytes of the strings one sketch keeps, at most: 384 items of 85 bytes. A column of
# long values (JSON, log lines) would otherwise store the map's capacity of them per file
STRING_BYTES = 32 << 10


def frequent_capacity(items_tracked: int) -> int:
    """How many values the sketch's map holds without a purge."""
    return int(_LOAD_FACTOR * (1 << lg_map_size(items_tracked)))


def most_frequent(counts: np.ndarray, capacity: int) -> tuple[np.ndarray, int]:
    """Where the ``capacity`` largest of more than ``capacity`` counts are, and the largest
    count left out: what a cut to the map's capacity adds to the offset."""
    order = np.argpartition(-counts, capacity)
    return order[:capacity], int(counts[order[capacity:]].max())


def frequent_items_of_counts(
    values: np.ndarray,
    counts: np.ndarray,
    items_tracked: int,
    *,
    total: int | None = None,
    offset: int = 0,
    exact: bool = True,
    kind: ItemKind = DOUBLES,
) -> bytes:
    """The sketch of one file's values (KLL doubles, no NaN; or strings, an object array)
    from their exact ``counts``, in the stored form: the most frequent values the map holds
    without a purge, each with its exact count, and as the offset (every count's maximum
    error) the largest count left out. Counts already cut down (``column_stream.ValueCounts``)
    pass the rows they stand for as ``total`` and the error their cuts left as ``offset``,
    which the one here adds to.

    What a Misra-Gries pass over the rows promises holds with the tighter error: a listed
    value's count is its lower bound and count + offset its upper; a value not listed has at
    most the offset. Strings with ``exact`` counts (each listed count the value's true one,
    as within one batch; not once batches were cut and added) that were counted no more than
    the offset are left out too: such a value says no more than its absence does, and a
    column of distinct strings (a comment) then stores an empty list, not the map's capacity
    of strings counted once. Doubles keep them: two of their keys may be one value (next),
    whose count is then a lower bound only. Written as the library serializes a sketch
    (``_write_sketch``). A double may come twice (two decimals that round to it; -0.0 and
    0.0, which the library's float keys do not tell apart, nor does the stored form of
    Spark's sketch): the two are added, and a value half cut still has its true count
    between its bounds."""
    lg_slots = lg_map_size(items_tracked)
    if not len(values):
        return empty_frequent_items(items_tracked, kind)
    total = int(counts.sum()) if total is None else total
    capacity = frequent_capacity(items_tracked)
    if len(counts) > capacity:
        kept, left_out = most_frequent(counts, capacity)
        offset += left_out
        values, counts = values[kept], counts[kept]
    keys, where = np.unique(values, return_inverse=True)
    if len(keys) < len(values):
        counts = np.bincount(where, weights=counts).astype(np.int64)
        values = keys
    if kind == STRINGS and exact and offset:
        above = counts > offset
        values, counts = values[above], counts[above]
    return _write_sketch(lg_slots, values, counts, total, offset, kind=kind)


def _write_sketch(
    lg_slots: int,
    values: np.ndarray,
    counts: np.ndarray,
    total: int,
    offset: int,
    *,
    kind: ItemKind = DOUBLES,
) -> bytes:
    """The library's serialization of a sketch (datasketches-cpp
    ``frequent_items_sketch::serialize``, doubles through ``PyDoublesSerDe``, strings as
    ``frequent_strings_sketch`` writes them): preamble longs 4, serial version 1, family 10,
    log2 of the map's most and current slots, flags, 2 unused bytes; the item count, 4
    unused bytes, stream length, offset; the counts as u64, then the items (f64, or a u32
    byte length and the UTF-8 bytes), little-endian. No rows: the library's empty sketch.
    The current map is the smallest the library grows to for this many items: at least 8
    slots, ``_LOAD_FACTOR`` of them used. The items' order (the library's is its map's)
    does not matter to a reader: tested against the library's own bytes in
    tests/core/sketches/test_frequent.py."""
    if not total:
        return _serialize(_new(lg_slots, kind), kind)
    if kind == STRINGS:
        encoded = [str(v).encode() for v in values]
        encoded, counts, offset = _within_string_bytes(encoded, np.asarray(counts), offset)
    n = len(counts)
    lg_current = 3
    while int(_LOAD_FACTOR * (1 << lg_current)) < n:
        lg_current += 1
    head = _HEADER.pack(4, 1, 10, lg_slots, lg_current, 0, 0, n, 0, total, offset)
    body = np.asarray(counts, "<u8").tobytes()
    if kind == STRINGS:
        return head + body + b"".join(_LENGTH.pack(len(b)) + b for b in encoded)
    return head + body + np.asarray(values, "<f8").tobytes()


def _within_string_bytes(
    encoded: list[bytes], counts: np.ndarray, offset: int
) -> tuple[list[bytes], np.ndarray, int]:
    """The most frequent strings that fit in ``STRING_BYTES``: past it, the least frequent
    are left out down to a count ``c`` — every string counted ``c`` or less — and the offset
    grows by ``c``. A string left out had at most ``c`` + the old offset rows, a listed one
    still at most its count + the new offset: the sketch's promise holds, with the error
    of a smaller map."""
    sizes = np.array([len(b) for b in encoded], np.int64)
    if int(sizes.sum()) <= STRING_BYTES:
        return encoded, counts, offset
    order = np.argsort(-counts, kind="stable")
    fits = np.cumsum(sizes[order]) <= STRING_BYTES
    cut = int(counts[order[~fits]].max())  # the largest count of a string that did not fit
    kept = np.flatnonzero(counts > cut)
    return [encoded[i] for i in kept], counts[kept], offset + cut


def merge_frequent_items(blobs: Iterable[bytes | None], kind: ItemKind = DOUBLES) -> bytes | None:
    """Merge into a map as large as the largest input's (files sketched at different
    ``sketch.frequent_items`` keep the finer one's precision where it is theirs).

    The mergeable Misra-Gries summary (Agarwal et al., "Mergeable summaries"), in numpy:
    counts of equal values add up, offsets add up; past the map's capacity the
    (capacity + 1)-th largest count is subtracted from every count, the values left at 0
    or less are dropped, and the offset grows by it. Every value keeps ``count ≤ true ≤
    count + offset``, and all subtractions together stay below ``rows / (capacity + 1)``,
    under the sketch's ``ε × rows`` (tests/core/sketches/test_frequent.py, against exact
    counts and the library). The library's own merge (a Python serde call per item) cost
    ~0.14 s per 100 files × 11 columns, paid by every re-merge after a removal."""
    parsed = [_parse(blob, kind) for blob in blobs if blob is not None]
    if not parsed:
        return None
    lg_slots = max(p.lg_slots for p in parsed)
    total = sum(p.total for p in parsed)
    offset = sum(p.offset for p in parsed)
    values = np.concatenate([p.values for p in parsed])
    counts = np.concatenate([p.counts for p in parsed])
    if not total:
        return _serialize(_new(lg_slots, kind), kind)
    keys, summed = summed_counts(values, counts, kind)
    capacity = int(_LOAD_FACTOR * (1 << lg_slots))
    if len(keys) > capacity:
        cut = int(-np.partition(-summed, capacity)[capacity])  # the (capacity + 1)-th largest
        summed -= cut
        offset += cut
        kept = summed > 0
        keys, summed = keys[kept], summed[kept]
    return _write_sketch(lg_slots, keys, summed, total, offset, kind=kind)


def summed_counts(
    values: np.ndarray, counts: np.ndarray, kind: ItemKind
) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct value once, with its counts added up. Strings through a dict: numpy
    sorts an object array by Python comparisons, ~15× slower for 384,000 strings."""
    if kind == STRINGS:
        added: dict[str, int] = {}
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            added[value] = added.get(value, 0) + count
        keys = np.empty(len(added), object)
        keys[:] = list(added)
        return keys, np.fromiter(added.values(), np.int64, len(added))
    keys, where = np.unique(values, return_inverse=True)
    return keys, np.bincount(where, weights=counts, minlength=len(keys)).astype(np.int64)


@dataclass(frozen=True)
class _Parsed:
    lg_slots: int
    total: int
    offset: int
    values: np.ndarray  # float64, or str objects
    counts: np.ndarray  # int64


def _offset(blob: bytes) -> int:
    """A stored sketch's offset, from its preamble alone (an empty sketch has none)."""
    return 0 if blob[0] == 1 else int(_HEADER.unpack_from(blob)[-1])


def _parse(blob: bytes, kind: ItemKind = DOUBLES) -> _Parsed:
    """A stored sketch's map size, stream length, offset, values and counts (the layout
    ``_write_sketch`` writes, the library's; an empty sketch has only its first 8 bytes)."""
    lg_slots = blob[3]
    dtype = object if kind == STRINGS else np.float64
    if blob[0] == 1:  # one preamble long: empty
        return _Parsed(lg_slots, 0, 0, np.zeros(0, dtype), np.zeros(0, np.int64))
    *_, n, _unused, total, offset = _HEADER.unpack_from(blob)
    start = _HEADER.size
    counts = np.frombuffer(blob, "<u8", n, start).astype(np.int64)
    at = start + 8 * n
    if kind == STRINGS:
        values = np.empty(n, object)
        for i in range(n):
            (length,) = _LENGTH.unpack_from(blob, at)
            values[i] = blob[at + 4 : at + 4 + length].decode()
            at += 4 + length
    else:
        values = np.frombuffer(blob, "<f8", n, at).astype(np.float64)
    return _Parsed(lg_slots, int(total), int(offset), values, counts)


@dataclass(frozen=True)
class FrequentValue:
    value: float | str  # KLL units, or a string column's value
    count: int  # the sketch's estimate
    lower: int  # the true count is within [lower, upper]
    upper: int


@dataclass(frozen=True)
class FrequentValues:
    values: tuple[FrequentValue, ...]  # most frequent first
    maximum_error: int  # rows: any count's error; a value not listed has at most 2× this
    complete: bool  # every value surely above the error is listed (the list was not cut)
    epsilon: float
    rows: int


def frequent_values(blob: bytes, limit: int, kind: ItemKind = DOUBLES) -> FrequentValues:
    """Values surely more frequent than the sketch's error (no false positives), at most
    ``limit``, most frequent first."""
    sketch = _load(blob, kind)
    error = _offset(blob)  # the library's maximum error: any count's
    found = sketch.get_frequent_items(frequent_items_error_type.NO_FALSE_POSITIVES)
    ranked = sorted(found, key=lambda item: (-item[1], item[0]))
    values = tuple(
        FrequentValue(
            str(item) if kind == STRINGS else float(item), int(estimate), int(lower), int(upper)
        )
        for item, estimate, lower, upper in ranked[:limit]
    )
    return FrequentValues(
        values, error, len(ranked) <= limit, float(sketch.epsilon), int(sketch.total_weight)
    )
