"""Iceberg single-value bytes of Arrow arrays, hashed; the theta sketch Spark's aggregate
builds from them.

``spec_hashes`` turns the distinct non-null values of one column (an Arrow array in the
engine's read type, ``file_sketch.arrow_type``) into the theta hashes of their single-value
serialization — the table of ``sketches/hashing.py``: ints and dates 4 bytes little-endian,
longs and timestamps 8, floats and doubles their raw IEEE bits (NaN payloads and -0.0 kept
apart), booleans one byte, decimals the minimal big-endian two's complement of the unscaled
value, strings their UTF-8 bytes, binaries/fixed/uuid the bytes; empty strings and binaries
are no key (DataSketches refuses them).

``theta_sketch`` is what ``theta_sketch_agg`` returns for one file once re-serialized
(``merge.normalize_theta``): the ``2**lg_k`` smallest hashes and, past them, theta the next
one. Byte-identical to Spark's on every type (tests/core/sketches/test_arrow_engine.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.arrow_sketch.murmur import hash_bytes, hash_matrix, hash_words
from lakestats.sketches.sample_codec import MAX_THETA, SEED_HASH, ParsedSample, theta_bytes

_LONG_DECIMAL_DIGITS = 18
_DECIMAL_BYTES = 16


def spec_hashes(values: pa.Array, type_str: str) -> np.ndarray:
    """The theta hashes (uint64, nonzero) of ``values`` (no nulls) as Iceberg type
    ``type_str``; empty strings and binaries give none."""
    return _drop_zero(keyed_hashes(values, type_str))


def keyed_hashes(values: pa.Array, type_str: str) -> np.ndarray:
    """One theta hash per value of ``values`` (no nulls), in order: 0 where the value is no
    key (an empty string or binary; DataSketches never keeps hash 0 either)."""
    t = values.type
    if type_str == "boolean":
        return hash_words(values.cast(pa.uint8()).to_numpy(zero_copy_only=False), 1)
    if type_str in ("int", "date"):
        return hash_words(_fixed_width(values, np.uint32), 4)
    if type_str in ("long", "timestamp", "timestamptz"):
        return hash_words(_fixed_width(values, np.uint64), 8)
    if type_str == "float":
        return hash_words(_fixed_width(values, np.uint32), 4)
    if type_str == "double":
        return hash_words(_fixed_width(values, np.uint64), 8)
    if pa.types.is_decimal(t):
        return _decimal_hashes(values)
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        data = _data_buffer(values, width * len(values), width * values.offset)
        starts = np.arange(len(values), dtype=np.int64) * width
        return hash_bytes(data, starts, np.full(len(values), width, np.int64))
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return _varlen_hashes(values, np.int64)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _varlen_hashes(values, np.int32)
    raise TypeError(f"no spec hashing for {type_str} read as {t}")


def smallest(hashes: np.ndarray, lg_k: int) -> np.ndarray:
    """Indices of the ``2**lg_k + 1`` smallest nonzero ``hashes`` (all nonzero ones if
    fewer), in ascending hash order: all a bottom-k sketch of nominal size ``2**lg_k``
    keeps, and its theta. A partition, then a sort of those alone."""
    nonzero = np.flatnonzero(hashes)
    limit = (1 << lg_k) + 1
    if len(nonzero) > limit:
        nonzero = nonzero[np.argpartition(hashes[nonzero], limit - 1)[:limit]]
    ordered: np.ndarray = nonzero[np.argsort(hashes[nonzero], kind="stable")]
    return ordered


def theta_sketch(hashes: np.ndarray, lg_k: int) -> bytes:
    """The stored-form compact theta sketch of one file's distinct hashes, or of their
    ``smallest`` (ascending)."""
    hashes = hashes[smallest(hashes, lg_k)]
    nominal = 1 << lg_k
    theta = MAX_THETA
    if len(hashes) > nominal:
        theta, hashes = int(hashes[nominal]), hashes[:nominal]
    return theta_bytes(ParsedSample(theta, not len(hashes), SEED_HASH, hashes, np.zeros(0)))


def _drop_zero(hashes: np.ndarray) -> np.ndarray:
    # DataSketches never retains hash 0 (and the caller's empty keys hash to 0 here)
    nonzero: np.ndarray = hashes[hashes != 0]
    return nonzero


def _fixed_width(values: pa.Array, dtype: type[np.unsignedinteger]) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return _data_buffer(values, width * len(values), width * values.offset).view(dtype)


def _data_buffer(values: pa.Array, size: int, start: int) -> np.ndarray:
    buffer = values.buffers()[1]
    return np.frombuffer(buffer, dtype=np.uint8)[start : start + size] if size else _EMPTY


_EMPTY = np.zeros(0, dtype=np.uint8)


def _varlen_hashes(values: pa.Array, offset_type: type[np.signedinteger]) -> np.ndarray:
    n = len(values)
    if not n:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(values.buffers()[1], dtype=offset_type)[
        values.offset : values.offset + n + 1
    ].astype(np.int64)
    data_buffer = values.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else _EMPTY
    return hash_bytes(data, offsets[:-1], np.diff(offsets))


def _decimal_hashes(values: pa.Array) -> np.ndarray:
    """BigInteger.toByteArray() of each unscaled value, hashed."""
    t = values.type
    if not pa.types.is_decimal128(t):
        values = values.cast(pa.decimal128(t.precision, t.scale))
    n = len(values)
    raw = _data_buffer(values, _DECIMAL_BYTES * n, _DECIMAL_BYTES * values.offset)
    words = raw.view("<i8").reshape(n, 2)  # little-endian: low word, then high
    if t.precision <= _LONG_DECIMAL_DIGITS:
        unscaled = words[:, 0]
        length = np.ones(n, dtype=np.uint64)
        for size in range(1, 8):
            limit = 1 << (8 * size - 1)
            length += ((unscaled < -limit) | (unscaled >= limit)).astype(np.uint64)
        with np.errstate(over="ignore"):
            shift = np.uint64(64) - np.uint64(8) * length
            big_endian = unscaled.view(np.uint64).byteswap() >> shift
        return hash_words(big_endian, length)
    # up to 16 bytes: the big-endian 16-byte form, leading sign bytes dropped while the next
    # byte still carries the sign (what makes the two's complement minimal)
    be16 = raw.reshape(n, _DECIMAL_BYTES)[:, ::-1]
    sign = np.where(words[:, 1] < 0, np.uint8(0xFF), np.uint8(0)).astype(np.uint8)
    dropping = np.ones(n, dtype=bool)
    drop = np.zeros(n, dtype=np.int64)
    for i in range(_DECIMAL_BYTES - 1):
        dropping &= (be16[:, i] == sign) & ((be16[:, i + 1] & 0x80) == (sign & 0x80))
        drop += dropping
    return hash_matrix(be16, _DECIMAL_BYTES - drop)


def distinct(values: pa.Array, type_str: str) -> pa.Array:
    """The distinct non-null values of ``values`` as the spec sees them: floats by their raw
    bits (Arrow's own unique would fold -0.0 into 0.0 and every NaN into one)."""
    unique = pc.unique(_as_keys(values, type_str))
    return unique.combine_chunks() if isinstance(unique, pa.ChunkedArray) else unique


def distinct_counted(values: pa.Array, type_str: str) -> tuple[pa.Array, np.ndarray]:
    """``distinct`` with each value's rows (one hash pass, as ``pc.value_counts`` makes it)."""
    counted = pc.value_counts(_as_keys(values, type_str))
    if isinstance(counted, pa.ChunkedArray):
        counted = counted.combine_chunks()
    counts = counted.field("counts").to_numpy(zero_copy_only=False)
    return counted.field("values"), np.asarray(counts, dtype=np.int64)


def _as_keys(values: pa.Array, type_str: str) -> pa.Array:
    """The non-null values, floats as their bits: what tells two keys of the spec apart."""
    values = values.drop_null()
    if type_str == "float":
        return values.view(pa.int32())
    if type_str == "double":
        return values.view(pa.int64())
    return values
