"""Proof, per Iceberg type, that the pipeline's theta sketches hash like the Puffin spec.

For each type: values → a Parquet file → ``sketch_files`` (the production path). The
sketch's retained hashes must equal, exactly, MurmurHash3(seed 9001) of the Iceberg
single-value bytes (pyiceberg ``to_bytes``) computed in pure Python; and a reference sketch
built the way Iceberg's Spark ThetaSketchAgg does (datasketches-java, Alpha family,
``update(ByteBuffer)`` of the single-value bytes), made through py4j in the same JVM, unions
with ours without adding a single value.
"""

from __future__ import annotations

import datetime as dt
import random
import struct
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketches import compact_theta_sketch, theta_union

from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.sketches.hashing import (
    ANSI_OFF,
    THETA_SEED,
    murmur3_x64_128,
    theta_hash,
    theta_input_sql,
)
from lakestats.values import encode_bound

pytestmark = pytest.mark.spark

_NEG_NAN = struct.unpack("<d", bytes.fromhex("000000000000f8ff"))[0]  # x86's default NaN
_UTC = dt.UTC

CASES: list[tuple[str, pa.DataType, list[Any]]] = [
    ("boolean", pa.bool_(), [True, False, None, True]),
    ("int", pa.int32(), [0, 1, -1, 2**31 - 1, -(2**31), 123456, None, 1]),
    ("long", pa.int64(), [0, 1, -1, 2**63 - 1, -(2**63), 2**40, None]),
    (
        "float",
        pa.float32(),
        [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 3.4e38, None],
    ),
    (
        "double",
        pa.float64(),
        [0.0, -0.0, 0.1, -1e308, float("inf"), float("-inf"), float("nan"), _NEG_NAN, 5e-324],
    ),
    ("date", pa.date32(), [dt.date(1970, 1, 1), dt.date(1, 1, 1), dt.date(2024, 2, 29), None]),
    (
        "timestamp",
        pa.timestamp("us"),
        [dt.datetime(1970, 1, 1), dt.datetime(1900, 1, 1, 0, 0, 0, 1), dt.datetime(2038, 1, 19)],
    ),
    (
        "timestamptz",
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(1970, 1, 1, tzinfo=_UTC), dt.datetime(1969, 12, 31, 23, 59, tzinfo=_UTC)],
    ),
    ("string", pa.string(), ["", "a", "héllo", "日本語", "🦆" * 3, "x" * 5000, None]),
    ("binary", pa.binary(), [b"", b"\x00", b"\xff\x00", bytes(range(256)), None]),
    ("fixed[4]", pa.binary(4), [b"\x00\x00\x00\x00", b"abcd", b"\xff\xfe\xfd\xfc", None]),
    ("uuid", pa.uuid(), [uuid.UUID(int=0), uuid.UUID(int=1), uuid.uuid5(uuid.NAMESPACE_DNS, "x")]),
]

_DECIMAL_UNSCALED = [
    0, 1, -1, 127, 128, -128, -129, 255, 256, -256, 32767, -32768, -32769,
    2**31, -(2**31) - 1, 2**55 - 1, -(2**55), 2**63 - 1, 2**63, -(2**63), -(2**63) - 1,
    2**64 - 1, 2**64, -(2**64), -(2**64) - 1, 2**100, -(2**119), -(2**119) - 1,
    10**38 - 1, -(10**38 - 1),
]  # fmt: skip
# 0, ±1, both sides of every byte-length boundary (±127/128, powers of 256) and the
# largest 15-digit values: where a wrong byte count or a rounding slip would show
_DOUBLE_PATH_UNSCALED = sorted(
    {0, 10**15 - 1, -(10**15 - 1), 10**15 - 7, 123456789012345, -987654321098765}
    | {sign * (b + d) for b in (1, 127, 128, *(256**n for n in range(1, 7))) for d in (-1, 0, 1)
       for sign in (1, -1)}
)  # fmt: skip
DECIMAL_CASES: list[tuple[int, int, list[int]]] = [
    (38, 0, _DECIMAL_UNSCALED),
    (38, 10, [0, 1, -1, 10**10, -(10**37), 10**38 - 1, 2**64, -(2**64) - 1]),
    (20, 2, [0, 1, -1, 2**63, -(2**63) - 1, 10**20 - 1, -(10**20 - 1)]),
    (18, 4, [0, 1, -1, 127, 128, -128, -129, 10**18 - 1, -(10**18 - 1), 2**55, -(2**55) - 1]),
    (9, 2, [0, 5, -5, 12345, -32768, 999_999_999, -999_999_999]),
    (1, 0, [0, 9, -9]),
    # precision <= 15 with a scale: the unscaled value via a double (hashing.py)
    (15, 2, _DOUBLE_PATH_UNSCALED),
    (15, 15, _DOUBLE_PATH_UNSCALED),
    (12, 4, [u for u in _DOUBLE_PATH_UNSCALED if abs(u) < 10**12]),
    (16, 2, [0, 1, -1, 10**15, -(10**15), 10**16 - 1, -(10**16 - 1)]),  # the BD path again
]


def _write(path: Path, arrow_type: pa.DataType, values: list[Any]) -> str:
    field = pa.field("c", arrow_type, metadata={b"PARQUET:field_id": b"1"})
    pq.write_table(pa.table({"c": pa.array(values, type=arrow_type)}, pa.schema([field])), path)
    return str(path)


def _spec_bytes(type_str: str, values: list[Any]) -> list[bytes]:
    out = []
    for v in values:
        raw = encode_bound(type_str, v)
        if raw is not None and raw:  # Iceberg's update(ByteBuffer) skips empty buffers
            out.append(raw)
    return out


def _jvm_reference_sketch(spark: Any, blobs: list[bytes], lg_k: int) -> bytes:
    """What Iceberg's ThetaSketchAgg builds: Alpha family, default seed, update(ByteBuffer)."""
    jvm = spark.sparkContext._jvm
    family = jvm.org.apache.datasketches.common.Family.ALPHA
    builder = jvm.org.apache.datasketches.theta.UpdateSketch.builder()
    sketch = builder.setFamily(family).setNominalEntries(2**lg_k).build()
    for blob in blobs:
        sketch.update(jvm.java.nio.ByteBuffer.wrap(bytearray(blob)))
    return bytes(sketch.compact().toByteArray())


ALL_CASES: list[tuple[str, pa.DataType, list[Any]]] = [
    *CASES,
    *[
        (f"decimal({p}, {s})", pa.decimal128(p, s), [Decimal(f"{u}e-{s}") for u in unscaled])
        for p, s, unscaled in DECIMAL_CASES  # Decimal(str) is exact, unlike scaleb
    ],
]


@pytest.fixture(scope="module")
def sketched(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[int, bytes]:
    """Every case as one column of one file, sketched by one sketch_files call."""
    rows = max(len(values) for _, _, values in ALL_CASES)
    fields, arrays, columns = [], [], []
    for i, (type_str, arrow_type, values) in enumerate(ALL_CASES, start=1):
        meta = {b"PARQUET:field_id": str(i).encode()}
        fields.append(pa.field(f"c{i}", arrow_type, metadata=meta))
        # UUIDs as their 16 bytes: pyarrow < 20 (pypaimon's cap) takes no UUID objects
        arrow_values = [v.bytes if isinstance(v, uuid.UUID) else v for v in values]
        arrays.append(pa.array(arrow_values + [None] * (rows - len(values)), type=arrow_type))
        columns.append(Column(i, f"c{i}", type_str))
    path = str(tmp_path_factory.mktemp("hashing") / "all_types.parquet")
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)
    result = sketch_files(spark, [path], TableSchema(1, tuple(columns)), SketchSettings())
    out = {}
    for field_id, sketch in result[path].items():
        assert sketch.theta is not None
        out[field_id] = sketch.theta
    return out


@pytest.mark.parametrize("case", range(len(ALL_CASES)), ids=[c[0] for c in ALL_CASES])
def test_theta_hashes_iceberg_single_value_bytes(
    spark: Any, sketched: dict[int, bytes], case: int
) -> None:
    type_str, _, values = ALL_CASES[case]
    lg_k = SketchSettings().theta_lg_k
    ours = compact_theta_sketch.deserialize(sketched[case + 1], THETA_SEED)

    spec = _spec_bytes(type_str, values)
    expected = {theta_hash(b) for b in spec}
    assert set(ours) == expected  # exact mode: every hash retained, nothing else

    reference = compact_theta_sketch.deserialize(
        _jvm_reference_sketch(spark, spec, lg_k), THETA_SEED
    )
    assert set(reference) == expected
    union = theta_union(lg_k, seed=THETA_SEED)
    union.update(ours)
    union.update(reference)
    merged = union.get_result()
    assert merged.get_estimate() == ours.get_estimate() == reference.get_estimate()
    assert merged.get_estimate() == len(expected)


def test_estimation_mode_union_does_not_double(spark: Any, tmp_path: Path) -> None:
    """Past exact mode the sketches are built differently (Spark: QuickSelect with partial
    merges; Iceberg: Alpha) but hash alike, so their union estimates the same set."""
    values = [i * 7919 for i in range(3000)]  # each py4j update is a round trip: keep it small
    path = _write(tmp_path / "big.parquet", pa.int32(), values)
    lg_k = 9  # the smallest an Alpha sketch accepts
    ours = sketch_files(
        spark, [path], TableSchema(1, (Column(1, "c", "int"),)), SketchSettings(theta_lg_k=lg_k)
    )[path][1].theta
    assert ours is not None
    reference = _jvm_reference_sketch(spark, _spec_bytes("int", values), lg_k)
    a = compact_theta_sketch.deserialize(ours, THETA_SEED)
    b = compact_theta_sketch.deserialize(reference, THETA_SEED)
    assert a.is_estimation_mode() and b.is_estimation_mode()
    union = theta_union(lg_k, seed=THETA_SEED)
    union.update(a)
    union.update(b)
    merged = union.get_result().get_estimate()
    for single in (a.get_estimate(), b.get_estimate()):
        assert abs(merged - single) / single < 0.1  # a hashing mismatch would give ~2x
    lower, upper = union.get_result().get_lower_bound(3), union.get_result().get_upper_bound(3)
    assert lower <= len(values) <= upper


def test_plain_spark_inputs_are_not_spec_hashed(spark: Any, tmp_path: Path) -> None:
    """Why hashing.py exists: the obvious theta_sketch_agg(col) disagrees with the spec for
    INT (hashed as 8 bytes), FLOAT (as a double) and DOUBLE -0.0 / NaN payloads
    (canonicalised)."""
    checks = [
        ("int", pa.int32(), [1, 2, 3]),
        ("float", pa.float32(), [1.5, 2.5]),
        ("double", pa.float64(), [-0.0, _NEG_NAN]),
    ]
    for type_str, arrow_type, values in checks:
        path = _write(tmp_path / f"{type_str}.parquet", arrow_type, values)
        blob = spark.read.parquet(path).selectExpr("theta_sketch_agg(c)").head()[0]
        naive = set(compact_theta_sketch.deserialize(bytes(blob), THETA_SEED))
        expected = {theta_hash(b) for b in _spec_bytes(type_str, values)}
        assert naive.isdisjoint(expected), type_str


def test_murmur3_reference_matches_datasketches() -> None:
    from datasketches import update_theta_sketch

    sketch = update_theta_sketch(12)
    for value in (1, -5, 2**62):
        sketch.update(value)  # C++ hashes an int64 as its 8 little-endian bytes
    sketch.update("héllo")  # and a string as its UTF-8 bytes
    expected = {theta_hash(struct.pack("<q", v)) for v in (1, -5, 2**62)}
    expected.add(theta_hash("héllo".encode()))
    assert set(sketch.compact()) == expected
    assert theta_hash(b"") is None
    # the 16-byte block path and a 9..15-byte tail
    assert murmur3_x64_128(b"x" * 40) != murmur3_x64_128(b"x" * 41)


@pytest.mark.parametrize(("precision", "scale"), [(15, 2), (15, 7), (15, 15), (10, 3)])
def test_decimal_hash_input_exact_over_random_values(
    spark: Any, tmp_path: Path, precision: int, scale: int
) -> None:
    """The double path of the decimal hash input (precision <= 15) against Python's exact
    minimal two's-complement bytes, over 20,000 random values spread over every magnitude."""
    rng = random.Random(precision * 100 + scale)
    unscaled = [
        rng.choice((1, -1)) * rng.randrange(10 ** rng.randint(0, precision)) for _ in range(20_000)
    ] + [-(256**n) for n in range(7) if 256**n < 10**precision]
    # BigInteger.toByteArray: the fewest bytes holding the value and its sign bit
    expected = [u.to_bytes(((u if u >= 0 else ~u).bit_length() + 8) // 8, "big", signed=True)
                for u in unscaled]  # fmt: skip
    arrow_type = pa.decimal128(precision, scale)
    table = pa.table(
        {
            "v": pa.array([Decimal(f"{u}e-{scale}") for u in unscaled], type=arrow_type),
            "expected": pa.array(expected, type=pa.binary()),
        }
    )
    path = tmp_path / "decimals.parquet"
    pq.write_table(table, path)
    session = spark.newSession()
    for key, value in ANSI_OFF.items():
        session.conf.set(key, value)
    hashed = theta_input_sql(f"decimal({precision}, {scale})", "v")
    wrong = session.read.parquet(str(path)).where(f"NOT ({hashed} <=> expected)").count()
    assert wrong == 0
