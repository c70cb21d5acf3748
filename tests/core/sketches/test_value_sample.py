"""Value samples (issue 14 item 2): Spark's tuple sketches read byte for byte, keyed by the
theta sketch's own spec hashes, each entry carrying its value, and range NDVs within the
theta bounds of exact counts.

One Parquet file (6,000 rows: every column past the exact mode of lgK 9), sketched once by
the production ``sketch_files``; exact values from the Python values written.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketches import compact_theta_sketch, compact_tuple_sketch

from lakestats.model import Column, ColumnSketch, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.sketches.constant import constant_sketch
from lakestats.sketches.hashing import THETA_SEED, theta_hash
from lakestats.sketches.value_sample import (
    JavaDoubleSummarySerDe,
    load_value_sample,
    range_ndv,
    sample_hashes,
    union_value_samples,
)
from lakestats.values import encode_bound, to_physical

pytestmark = pytest.mark.spark

ROWS = 6000
LG_K = 9
_DAY0 = dt.date(1990, 1, 1)
_rng = random.Random(2014)
COLUMNS: list[tuple[str, pa.DataType, list[Any]]] = [
    ("int", pa.int32(), [_rng.randint(-50_000, 50_000) for _ in range(ROWS)]),
    ("long", pa.int64(), [_rng.randint(0, 2**40) if i % 7 else None for i in range(ROWS)]),
    ("double", pa.float64(), [_rng.gauss(0, 1e3) if i % 11 else math.nan for i in range(ROWS)]),
    ("float", pa.float32(), [float(_rng.randint(-9000, 9000)) / 4 for _ in range(ROWS)]),
    (
        "decimal(15, 2)",
        pa.decimal128(15, 2),
        [Decimal(_rng.randint(-(10**7), 10**7)).scaleb(-2) for _ in range(ROWS)],
    ),
    (
        "date",
        pa.date32(),
        [_DAY0 + dt.timedelta(days=_rng.randint(0, 20_000)) for _ in range(ROWS)],
    ),
]


def _unit(type_str: str, value: Any) -> float:
    """The value as the sketch job's KLL double (``pipeline._kll_input_sql``)."""
    return float(to_physical(type_str, value)) if type_str == "date" else float(value)


def _present(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


@pytest.fixture(scope="module")
def sketched(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[int, ColumnSketch]:
    fields, arrays, columns = [], [], []
    for i, (type_str, arrow_type, values) in enumerate(COLUMNS, start=1):
        meta = {b"PARQUET:field_id": str(i).encode()}
        fields.append(pa.field(f"c{i}", arrow_type, metadata=meta))
        arrays.append(pa.array(values, type=arrow_type))
        columns.append(Column(i, f"c{i}", type_str))
    path = str(tmp_path_factory.mktemp("value_sample") / "f.parquet")
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)
    settings = SketchSettings(theta_lg_k=LG_K, value_samples=True)
    return sketch_files(spark, [path], TableSchema(1, tuple(columns)), settings)[path]


@pytest.mark.parametrize("case", range(len(COLUMNS)), ids=[c[0] for c in COLUMNS])
def test_entries_are_the_theta_hashes_carrying_their_values(
    sketched: dict[int, ColumnSketch], case: int
) -> None:
    type_str, _, values = COLUMNS[case]
    sketch = sketched[case + 1]
    assert sketch.value_sample is not None and sketch.theta is not None
    theta = compact_theta_sketch.deserialize(sketch.theta, THETA_SEED)
    assert theta.is_estimation_mode()  # the interesting case: a sample, not every value
    by_hash = {theta_hash(encode_bound(type_str, v)): _unit(type_str, v) for v in _present(values)}
    tuple_sketch = compact_tuple_sketch.deserialize(sketch.value_sample, JavaDoubleSummarySerDe())
    # a uniform sample: exactly the spec hashes of the values (NaN excluded) below its theta
    hashes = list(sample_hashes(sketch.value_sample))
    assert hashes == sorted(h for h in by_hash if h < tuple_sketch.theta64)
    if not any(isinstance(v, float) and math.isnan(v) for v in values):
        # the same keys hashed alike and trimmed alike: the theta sketch's own hashes
        assert hashes == sorted(theta)
    # every entry carries the value its hash came from: the 9-byte Java DoubleSummary
    # layout is read right (an 8-byte reading would shift every value after the first)
    sample = load_value_sample(sketch.value_sample)
    assert sorted(by_hash[h] for h in hashes) == list(sample.values)


def test_spark_bytes_are_java_double_summaries(spark: Any) -> None:
    """Spark's raw bytes: a compact tuple sketch preamble, then 8-byte hashes and 9-byte
    summaries (datasketches-java DoubleSummary: LE double + Mode.Min ordinal 1)."""
    row = spark.sql(
        "SELECT tuple_sketch_agg_double(k, CAST(k AS DOUBLE) * 0.5, 12, 'min') AS s "
        "FROM VALUES (3L), (5L), (3L) AS t(k)"
    ).head()
    blob = bytes(row["s"])
    entries = blob[-2 * 17 :]
    assert len(blob) == 16 + 2 * 17  # exact mode: two preamble longs, two entries
    summaries = sorted((entries[8:17], entries[25:34]))
    assert summaries == sorted(
        (
            bytes.fromhex("000000000000f83f01"),  # 1.5, Min
            bytes.fromhex("000000000000044001"),  # 2.5, Min
        )
    )
    assert sorted(load_value_sample(union_value_samples([blob], 12) or b"").values) == [1.5, 2.5]


@pytest.mark.parametrize("case", range(len(COLUMNS)), ids=[c[0] for c in COLUMNS])
def test_range_ndv_within_the_theta_bounds_of_exact_counts(
    sketched: dict[int, ColumnSketch], case: int
) -> None:
    type_str, _, values = COLUMNS[case]
    blob = sketched[case + 1].value_sample
    assert blob is not None
    units = sorted({_unit(type_str, v) for v in _present(values)})
    rng = random.Random(case)
    misses = 0
    for _ in range(40):
        a, b = sorted(rng.sample(units, 2))
        exact = sum(1 for u in units if a < u <= b)
        got = range_ndv(blob, a, b, num_std_devs=3)
        assert got.lower_bound <= got.estimate <= got.upper_bound
        misses += not got.lower_bound <= exact <= got.upper_bound
    assert misses <= 1  # 3 standard deviations: ~0.3 % of ranges may fall outside


def test_a_constant_columns_sample_has_sparks_hash(spark: Any, tmp_path: Path) -> None:
    """Identity-partition columns get their sample without a scan: the same key as Spark's."""
    path = str(tmp_path / "one.parquet")
    field = pa.field("c", pa.decimal128(15, 2), metadata={b"PARQUET:field_id": b"1"})
    pq.write_table(pa.table({"c": [Decimal("12.25")] * 3}, schema=pa.schema([field])), path)
    settings = SketchSettings(value_samples=True)
    scanned = sketch_files(
        spark, [path], TableSchema(1, (Column(1, "c", "decimal(15, 2)"),)), settings
    )[path][1]
    constant = constant_sketch("decimal(15, 2)", Decimal("12.25"), 3, settings)
    assert constant is not None and constant.value_sample == scanned.value_sample
    assert load_value_sample(constant.value_sample or b"").values == (12.25,)
