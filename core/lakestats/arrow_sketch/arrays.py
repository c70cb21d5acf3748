"""Array helpers the Arrow engine's tasks and the driver share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for integers (sorted, distinct) at the cost of a sort: numpy 2's
    ``unique`` hashes, ~5-10× slower than a sort on 10^5 uint64 hashes or int64 positions
    (docs/benchmarks.md, "Deletion vectors on the driver"). Nothing is sorted when
    ``values`` are sorted and distinct already, as a deletion vector's positions are."""
    if len(values) < 2 or bool((values[1:] > values[:-1]).all()):
        return values
    ordered = np.sort(values)
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    out: np.ndarray = ordered[first]
    return out


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it loses no bits
_NULL = np.uint64(0x2545F4914F6CDD1D)


# rows hashed at a time: a string's bytes take ~50 bytes each while hashed (as uint64 terms,
# offsets, powers), so a million 15-byte keys at once peaked 0.6 GiB
_HASH_ROWS = 1 << 16


def key_hashes(keys: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """One hash per row of its key (the key's columns): equal keys, NULLs included, hash
    equally from every input (a key merge's shares, an equality-delete lookup). Not the
    spec hash: fixed-width values are mixed as integers and strings as a polynomial over
    their bytes, which costs a fraction of murmur3 and only has to spread keys."""
    columns = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in keys]
    rows = len(columns[0]) if columns else 0
    out: np.ndarray = np.empty(rows, dtype=np.uint64)
    for start in range(0, rows, _HASH_ROWS):
        chunk = np.zeros(min(_HASH_ROWS, rows - start), dtype=np.uint64)
        for values in columns:
            chunk = (chunk ^ _value_hashes(values.slice(start, _HASH_ROWS))) * _MIX
        out[start : start + len(chunk)] = chunk ^ (chunk >> np.uint64(29))
    return out


def _value_hashes(values: pa.Array) -> np.ndarray:
    """A hash of each value of ``values`` (NULL: ``_NULL``, which a value can only meet
    by chance: a share is then bigger, never wrong)."""
    t = values.type
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_boolean(t):
        words = np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), np.uint64)
    elif pa.types.is_decimal(t):
        words = _byte_hashes(values.cast(pa.string()))
    elif pa.types.is_fixed_size_binary(t):
        words = _byte_hashes(values.cast(pa.binary()))
    elif (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or (pa.types.is_large_binary(t))
    ):
        words = _byte_hashes(values)
    else:  # integers, dates, timestamps: their bits
        width = t.bit_width // 8
        integers = values.view(pa.int32() if width == 4 else pa.int64()).fill_null(0)
        words = np.asarray(integers.to_numpy(zero_copy_only=False)).astype(np.uint64)
    hashes: np.ndarray = np.where(valid, (words ^ _NULL) * _MIX, _NULL)
    return hashes


_POWERS = np.cumprod(np.full(64, 0x100000001B3, dtype=np.uint64))  # FNV's prime, wrapping


def _byte_hashes(values: pa.Array) -> np.ndarray:
    """Σ byte × P^(i mod 64) over each value's bytes (mod 2^64)."""
    large = pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type)
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[values.offset : values.offset + n + 1].astype(np.int64)
    buffer = values.buffers()[2]
    if buffer is None or offsets[-1] == offsets[0]:
        return np.diff(offsets).astype(np.uint64)
    data = np.frombuffer(buffer, dtype=np.uint8)[offsets[0] : offsets[-1]].astype(np.uint64)
    lengths = np.diff(offsets)
    within = np.arange(len(data)) - np.repeat(offsets[:-1] - offsets[0], lengths)
    terms = data * _POWERS[within % 64]
    sums = np.zeros(n, dtype=np.uint64)
    present = lengths > 0
    sums[present] = np.add.reduceat(terms, (offsets[:-1] - offsets[0])[present])
    return sums + lengths.astype(np.uint64)
