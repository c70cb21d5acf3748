"""A STRING column's values when their bytes are not UTF-8, read as Spark reads them.

Parquet does not check that a string is UTF-8, and Hive and Impala write whatever bytes
they were given. Spark reads such values without complaint: ``length`` walks the bytes
with each lead byte's declared width (``UTF8String.numChars``), and a value made a Java
string has each malformed sequence replaced by U+FFFD. The Arrow engine gives the same
statistics as the SQL job for every file, so it reads them the same way here; on valid
UTF-8 both are Arrow's own answers.
"""

from __future__ import annotations

import codecs

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# How many bytes Spark's character walk steps over from a byte (``UTF8String``'s table,
# checked byte by byte against Spark's ``length`` in tests/core/sketches/test_arrow_strings.py):
# a lead byte its sequence's width, whatever follows it; a continuation byte, an ASCII
# byte, and a byte no UTF-8 sequence starts with (0xC0, 0xC1, 0xF5-0xFF) one.
_STEP = np.ones(256, np.int64)
_STEP[0xC2:0xE0] = 2
_STEP[0xE0:0xF0] = 3
_STEP[0xF0:0xF5] = 4


def _as_java_replaces(error: UnicodeError) -> tuple[str, int]:
    """Python's ``replace``, but a UTF-16 surrogate written as UTF-8 (``ED A0..BF``, then
    a continuation byte: CESU-8) is one malformed sequence, as Java's decoder reads it, and
    so are its first two bytes without the third; Python replaces each byte."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    raw, at = error.object, error.start
    if raw[at] != 0xED or not 0xA0 <= _byte(raw, at + 1) <= 0xBF:
        return "\ufffd", error.end
    return "\ufffd", at + (3 if _byte(raw, at + 2) >> 6 == 2 else 2)


def _byte(raw: bytes, at: int) -> int:
    return raw[at] if at < len(raw) else 0


codecs.register_error("lakestats-java", _as_java_replaces)


def python_string(raw: bytes) -> str:
    """A value as Spark gives it to Python: its bytes as UTF-8, each malformed sequence
    replaced by U+FFFD as Java's decoder replaces it."""
    return raw.decode("utf-8", "lakestats-java")


def python_strings(values: pa.Array) -> list[str]:
    """``values.to_pylist()`` (no nulls), each value as ``python_string`` gives it."""
    try:
        return values.to_pylist()  # type: ignore[no-any-return]
    except UnicodeDecodeError:
        return [python_string(raw) for raw in as_bytes(values).to_pylist()]


def char_lengths(values: pa.Array) -> np.ndarray:
    """Each value's length in characters as Spark's ``length`` counts it (no nulls):
    Arrow's ``utf8_length`` where the values are UTF-8, where they agree."""
    try:
        values.validate(full=True)
    except pa.ArrowInvalid:
        return _walked_lengths(values)
    lengths: np.ndarray = pc.utf8_length(values).to_numpy()
    return lengths


def as_bytes(values: pa.Array) -> pa.Array:
    """The strings as the binary array of the same bytes (no copy)."""
    return values.view(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())


def _walked_lengths(values: pa.Array) -> np.ndarray:
    """Spark's walk over each value that is not ASCII, all values one step at a time: as
    many numpy steps as the longest such value has characters."""
    lengths = np.array(pc.binary_length(values), np.int64)
    walked = np.flatnonzero(~np.asarray(pc.string_is_ascii(values), bool))
    if not walked.size:
        return lengths
    binary = as_bytes(values)
    width = np.dtype(np.int64 if pa.types.is_large_binary(binary.type) else np.int32)
    offsets = np.frombuffer(
        binary.buffers()[1], width, len(binary) + 1, binary.offset * width.itemsize
    )
    data = np.frombuffer(binary.buffers()[2], np.uint8)
    at = offsets[walked].astype(np.int64)
    end = offsets[walked + 1].astype(np.int64)
    counted = np.zeros(walked.size, np.int64)
    going = np.flatnonzero(at < end)
    while going.size:
        counted[going] += 1
        at[going] += _STEP[data[at[going]]]
        going = going[at[going] < end[going]]
    lengths[walked] = counted
    return lengths
