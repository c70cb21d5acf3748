"""STRING values whose bytes are not UTF-8, read by the Arrow engine as Spark reads them:
character lengths and the Python strings, against Spark's own ``length`` and its decoding
on the same bytes (lakestats.arrow_sketch.strings)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakestats.arrow_sketch.strings import char_lengths, python_string, python_strings


def _malformed() -> list[bytes]:
    """Every lone byte after and before ASCII, truncated and overlong sequences, CESU-8
    surrogates, five- and six-byte forms, and random bytes."""
    values = [bytes([b]) + b"x" for b in range(256)] + [b"x" + bytes([b]) for b in range(256)]
    values += [b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80", b"\xc0\x80"]
    values += [b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbfz", b"\xed\xa0", b"\xf4\x90\x80\x80"]
    values += [b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"caf\xe9", "café".encode()]
    rng = random.Random(5)
    values += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(300)]
    return values


def _strings(values: list[bytes]) -> pa.Array:
    binary = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(binary), binary.buffers())


@pytest.fixture(scope="module")
def spark_reads(spark: Any) -> list[tuple[bytes, int, str]]:
    """(bytes, Spark's ``length``, the string Spark gives Python) per value."""
    values = _malformed()
    frame = spark.createDataFrame([(bytearray(v),) for v in values], "b binary")
    rows = frame.selectExpr("b", "cast(b as string) AS s", "length(cast(b as string)) AS n")
    return [(bytes(r["b"]), int(r["n"]), str(r["s"])) for r in rows.collect()]


def test_lengths_are_sparks(spark_reads: list[tuple[bytes, int, str]]) -> None:
    values = [raw for raw, _, _ in spark_reads]
    got = np.asarray(char_lengths(_strings(values)))
    want = np.array([n for _, n, _ in spark_reads])
    wrong = [(values[i], want[i], got[i]) for i in np.flatnonzero(got != want)]
    assert not wrong, wrong[:10]


def test_strings_are_sparks(spark_reads: list[tuple[bytes, int, str]]) -> None:
    wrong = [(raw, s, python_string(raw)) for raw, _, s in spark_reads if python_string(raw) != s]
    assert not wrong, wrong[:10]
    assert python_strings(_strings([raw for raw, _, _ in spark_reads])) == [
        s for _, _, s in spark_reads
    ]


def test_utf8_values_keep_arrows_answers() -> None:
    values = pa.array(["", "abc", "café", "日本語", "😀x", None]).drop_null()
    assert np.asarray(char_lengths(values)).tolist() == [0, 3, 4, 3, 2]
    assert python_strings(values) == ["", "abc", "café", "日本語", "😀x"]


def test_a_slice_and_long_values_are_walked_whole() -> None:
    """A batch's values are a slice of the file's arrays (an offset into shared buffers)
    and may be long: the walk reads each value's own bytes, to its end."""
    values = [b"\xc3x" * 5000, b"ok", b"\xff" * 3 + "é".encode() * 100, b"\xe2\x82"]
    array = _strings([b"before\xff", *values, b"after\xc3"]).slice(1, len(values))
    assert np.asarray(char_lengths(array)).tolist() == [5000, 2, 103, 1]
    wide = pa.array(values, pa.large_binary())
    large = pa.Array.from_buffers(pa.large_string(), len(wide), wide.buffers())
    assert np.asarray(char_lengths(large)).tolist() == [5000, 2, 103, 1]
