"""Published theta blobs hash values as the Puffin spec says, for every published type.

The table is analyzed by the real pipeline (Spark) and published; each column's blob is then
unioned with a sketch built independently from Iceberg's single-value serialization of the
same values. Same hashing → the union estimates the same NDV; different hashing → about
double (the control at the end shows the test can tell).
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from datasketches import compact_theta_sketch, theta_union, update_theta_sketch
from publish_helpers import catalog_config, run_analyze
from pyiceberg.table.puffin import PuffinFile

from lakestats.analyze import make_sketcher
from lakestats.sketches.hashing import THETA_SEED
from lakestats.testing import IcebergWarehouse
from lakestats.values import encode_bound

pytestmark = pytest.mark.spark

LG_K = 12
DISTINCT = 400  # below 2**LG_K: exact mode, so "same NDV" is an equality
SCHEMA = pa.schema(
    [
        pa.field("c_long", pa.int64()),
        pa.field("c_string", pa.string()),
        pa.field("c_int", pa.int32()),
        pa.field("c_date", pa.date32()),
        pa.field("c_decimal", pa.decimal128(10, 2)),
        pa.field("c_double", pa.float64()),
        pa.field("c_float", pa.float32()),
        pa.field("c_timestamp", pa.timestamp("us")),
        pa.field("c_boolean", pa.bool_()),
        pa.field("c_binary", pa.binary()),
    ]
)
TYPES = {
    "c_long": "long",
    "c_string": "string",
    "c_int": "int",
    "c_date": "date",
    "c_decimal": "decimal(10, 2)",
    "c_double": "double",
    "c_float": "float",
    "c_timestamp": "timestamp",
    "c_boolean": "boolean",
    "c_binary": "binary",
}


def values(rng: random.Random, n: int) -> dict[str, list[Any]]:
    keys = [rng.randrange(DISTINCT) for _ in range(n)]
    return {
        "c_long": [k * 7_919 - 10**12 for k in keys],
        "c_string": [f"välue-{k}" for k in keys],
        "c_int": [k * 31 - 5_000 for k in keys],
        "c_date": [dt.date(2000, 1, 1) + dt.timedelta(days=k) for k in keys],
        "c_decimal": [Decimal(k * 1_013 - 200_000).scaleb(-2) for k in keys],
        "c_double": [k / 7 - 20 for k in keys],
        "c_float": [float(k) * 0.5 for k in keys],
        "c_timestamp": [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=k * 61) for k in keys],
        "c_boolean": [k % 2 == 0 for k in keys],
        "c_binary": [k.to_bytes(2, "big") for k in keys],
    }


def jvm_sketch(spark: Any, blobs: list[bytes]) -> compact_theta_sketch:
    """What Iceberg's ThetaSketchAgg builds: datasketches-java, update(ByteBuffer)."""
    jvm = spark.sparkContext._jvm
    sketch = jvm.org.apache.datasketches.theta.UpdateSketch.builder().setNominalEntries(2**LG_K)
    sketch = sketch.build()
    for blob in blobs:
        sketch.update(jvm.java.nio.ByteBuffer.wrap(bytearray(blob)))
    return compact_theta_sketch.deserialize(bytes(sketch.compact().toByteArray()), THETA_SEED)


def reference(spark: Any, column: str, data: list[Any]) -> compact_theta_sketch:
    """An independent sketch of the column's distinct values, hashed per the spec.

    long and string: Python datasketches (``update(int)`` = 8 LE bytes, ``update(str)`` =
    UTF-8 bytes, both the spec's serialization); the other types: the JVM library fed the
    spec bytes from pyiceberg's ``to_bytes``.
    """
    type_str = TYPES[column]
    if type_str in ("long", "string"):
        sketch = update_theta_sketch(LG_K, seed=THETA_SEED)
        for value in set(data):
            sketch.update(value)
        return sketch.compact()
    spec = {encode_bound(type_str, v) for v in data}
    return jvm_sketch(spark, sorted(b for b in spec if b))


def union_estimate(*sketches: compact_theta_sketch) -> float:
    union = theta_union(LG_K, seed=THETA_SEED)
    for sketch in sketches:
        union.update(sketch)
    return float(union.get_result().get_estimate())


def test_published_theta_blobs_union_with_spec_sketches(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(6)
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    batches = [values(rng, 700), values(rng, 500)]
    for data in batches:
        wh.append("t", pa.table(data, schema=SCHEMA))
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    config = config.model_copy(
        update={"spark": config.spark.model_copy(update={"master": "local[2]"})}
    )
    run_analyze(config, opened, make_sketcher(config))

    table = wh.table("t")
    current = table.metadata.current_snapshot_id
    entry = next(s for s in table.metadata.statistics if s.snapshot_id == current)
    with table.io.new_input(entry.statistics_path).open() as stream:
        puffin = PuffinFile(stream.read())
    names = {f.field_id: f.name for f in table.schema().fields}
    published = {
        names[b.fields[0]]: compact_theta_sketch.deserialize(puffin.get_blob_payload(b), THETA_SEED)
        for b in puffin.footer.blobs
    }
    assert set(published) == set(TYPES)  # every type gets a blob
    for column in TYPES:
        data = [v for batch in batches for v in batch[column]]
        exact = len(set(data))
        ours = published[column]
        ref = reference(spark, column, data)
        assert not ours.is_estimation_mode()
        assert ours.get_estimate() == ref.get_estimate() == exact, column
        assert union_estimate(ours, ref) == exact, column  # same hashes: nothing added

    # control: hashing an int as a long (Spark's plain theta_sketch_agg(int)) would double
    ints = [v for batch in batches for v in batch["c_int"]]
    wrong = update_theta_sketch(LG_K, seed=THETA_SEED)
    for value in set(ints):
        wrong.update(value)
    assert union_estimate(published["c_int"], wrong.compact()) == 2 * len(set(ints))
