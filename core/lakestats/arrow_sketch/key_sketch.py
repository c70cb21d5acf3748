"""A primary key's theta sketches (``model.KeySketch``) in the Arrow engine's tasks.

The SQL job builds each row's key as one BINARY value (``sketches/key.py``): per key column
its hash input as bytes — booleans one byte, ints and dates 4 and longs and timestamps 8
big-endian bytes (Spark's cast of an integer to BINARY), strings their UTF-8 bytes,
binaries, fixed and uuids the bytes — prefixed by its length as 4 big-endian bytes, a NULL
as ``FF FF FF FF``, the parts concatenated in key order. ``key_values`` builds the same
values with numpy; their theta sketch (rows of ``non_add_kinds`` left out) and the sketch
of the retracting rows' keys are then the ones ``theta_sketch_agg`` returns, byte for byte
(tests/core/sketches/test_arrow_key_sketch.py). Key columns of other types (decimals,
floating point) leave the job to the SQL job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakestats.arrow_sketch.arrays import sorted_unique
from lakestats.arrow_sketch.column_stream import SmallestHashes
from lakestats.arrow_sketch.spec_hashes import keyed_hashes, theta_sketch
from lakestats.model import KEY_SKETCH_ID, RETRACTED_KEY_SKETCH_ID, ColumnSketch

_NULL_PREFIX = np.frombuffer(b"\xff\xff\xff\xff", dtype=np.uint8)
_FOUR_BYTES = frozenset({"int", "date"})
_EIGHT_BYTES = frozenset({"long", "timestamp", "timestamptz"})
_BYTES = frozenset({"string", "binary", "uuid"})
KEY_TYPES = _FOUR_BYTES | _EIGHT_BYTES | _BYTES | {"boolean"}


def key_type_supported(type_str: str) -> bool:
    return type_str in KEY_TYPES or type_str.startswith("fixed[")


@dataclass(frozen=True)
class ArrowKey:
    """The key sketch of a job: the key's ``(field id, type)`` columns in key order, the
    row-kind column's field id in the loaded columns (``None``: no row kinds), and which
    kinds add no key and which retract it."""

    columns: tuple[tuple[int, str], ...]
    kind_field_id: int | None
    non_add_kinds: tuple[int, ...]
    retract_kinds: tuple[int, ...]

    @property
    def retracts(self) -> bool:
        return self.kind_field_id is not None and bool(self.retract_kinds)


class KeyAccumulator:
    """``KEY_SKETCH_ID`` (and ``RETRACTED_KEY_SKETCH_ID``) of a file's rows, added a batch
    at a time (``column_stream``): each sketch's smallest hashes are kept, which is all
    the file's sketch needs."""

    def __init__(self, key: ArrowKey, lg_k: int) -> None:
        self._key = key
        self._lg_k = lg_k
        self._adds = SmallestHashes(lg_k)
        self._retracts = SmallestHashes(lg_k)

    def add(self, columns: Mapping[int, pa.Array]) -> None:
        key = self._key
        values = key_values([(columns[f], t) for f, t in key.columns])
        hashes = keyed_hashes(values, "binary")
        kinds = None
        if key.kind_field_id is not None:
            raw = columns[key.kind_field_id]
            # a row without a kind adds its key (Spark: NULL IN (…) is not true)
            kinds = np.asarray(raw.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        adds = np.ones(len(hashes), dtype=bool)
        if kinds is not None and key.non_add_kinds:
            adds = ~np.isin(kinds, key.non_add_kinds)
        self._adds.add(_bottom(hashes[adds], self._lg_k))
        if key.retracts:
            assert kinds is not None
            self._retracts.add(_bottom(hashes[np.isin(kinds, key.retract_kinds)], self._lg_k))

    def result(self) -> dict[int, ColumnSketch]:
        out = {KEY_SKETCH_ID: self._sketch(self._adds)}
        if self._key.retracts:
            out[RETRACTED_KEY_SKETCH_ID] = self._sketch(self._retracts)
        return out

    def _sketch(self, kept: SmallestHashes) -> ColumnSketch:
        hashes = sorted_unique(kept.hashes())
        return ColumnSketch(theta=theta_sketch(hashes, self._lg_k), null_count=0)


def _bottom(hashes: np.ndarray, lg_k: int) -> np.ndarray:
    """The smallest distinct nonzero hashes a bottom-k sketch of ``hashes`` keeps."""
    return sorted_unique(hashes[hashes != 0])[: (1 << lg_k) + 1]


def key_values(columns: Sequence[tuple[pa.Array, str]]) -> pa.Array:
    """Each row's key as ``sketches/key.py`` builds it (a ``large_binary`` array)."""
    n = len(columns[0][0]) if columns else 0
    parts = [_part(values, type_str) for values, type_str in columns]
    widths = [4 + np.where(valid, length, 0) for _, length, _, valid in parts]
    row_bytes = np.sum(widths, axis=0) if widths else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_bytes, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    for lo in range(0, n, _ROWS_AT_A_TIME):
        rows = slice(lo, min(n, lo + _ROWS_AT_A_TIME))
        segment = offsets[rows].copy()
        for part, width in zip(parts, widths, strict=True):
            _copy_part(out, segment, part, rows)
            segment += width[rows]
    return pa.Array.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)]
    )


# rows copied at a time: the copy indexes each byte with int64s (~40 bytes a key byte), so
# a million 35-byte keys at once peaked 0.4 GiB above their own size
_ROWS_AT_A_TIME = 1 << 16


def _copy_part(
    out: np.ndarray,
    segment: np.ndarray,
    part: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    rows: slice,
) -> None:
    """Write one column's part (``_part``) of the keys of ``rows`` (length prefix, then the
    value's bytes) at ``segment`` (where each of those rows' part starts in ``out``)."""
    all_starts, all_lengths, data, all_valid = part
    starts, length, valid = all_starts[rows], all_lengths[rows], all_valid[rows]
    prefix = np.where(valid, length, -1).astype(">i4").view(np.uint8).reshape(len(valid), 4)
    prefix[~valid] = _NULL_PREFIX
    out[(segment[:, None] + np.arange(4)).ravel()] = prefix.ravel()
    copied = np.where(valid, length, 0)
    total = int(copied.sum())
    if total:
        within = np.arange(total) - np.repeat(np.cumsum(copied) - copied, copied)
        out[np.repeat(segment + 4, copied) + within] = data[np.repeat(starts, copied) + within]


def _part(values: pa.Array, type_str: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start of each value in ``data``, its length, ``data``, valid) of one key column."""
    n = len(values)
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if type_str == "boolean":
        data = np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.uint8)
        return np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64), data, valid
    if type_str in _FOUR_BYTES or type_str in _EIGHT_BYTES:
        width = 4 if type_str in _FOUR_BYTES else 8
        integers = values.view(pa.int32() if width == 4 else pa.int64()).fill_null(0)
        numbers = np.asarray(integers.to_numpy(zero_copy_only=False))
        data = numbers.astype(f">i{width}").view(np.uint8)
        return np.arange(n, dtype=np.int64) * width, np.full(n, width, np.int64), data, valid
    t = values.type
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        start = width * values.offset
        data = np.frombuffer(values.buffers()[1], dtype=np.uint8)[start : start + width * n]
        return np.arange(n, dtype=np.int64) * width, np.full(n, width, np.int64), data, valid
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[values.offset : values.offset + n + 1].astype(np.int64)
    buffer = values.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    return offsets[:-1], np.diff(offsets), data, valid
