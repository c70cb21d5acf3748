"""Identity-partition columns take their value from the partition tuple, for every stat.

Iceberg readers fill an identity-partition column from the file's partition value, and
files of tables migrated from Hive do not even store the column. The sketches of such a
column are built from the value and the row count (``sketches/constant.py``); they must be
the very sketches Spark's job computes over a file that does store the value.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform

from foreign import fixture_path, map_args, needs_fixtures
from lakestats.cli import main
from lakestats.formats.iceberg import open_iceberg_location
from lakestats.locations import local_path
from lakestats.model import SketchSettings
from lakestats.pipeline import sketch_files
from lakestats.sketches.constant import constant_sketch, repeated_kll, single_value_theta
from lakestats.sketches.frequent import frequent_values
from lakestats.sketches.hashing import theta_hash
from lakestats.sketches.merge import kll_count, kll_quantiles, theta_estimate
from lakestats.sketches.spec import type_spec
from lakestats.testing import IcebergWarehouse
from lakestats.values import encode_bound

SETTINGS = SketchSettings(frequent_items=256, value_samples=True)  # the defaults of a config
PARTITIONED = pa.schema(
    [
        ("id", pa.int64()),
        ("p_string", pa.string()),
        ("p_date", pa.date32()),
        ("p_long", pa.int64()),
        ("p_int", pa.int32()),
        ("p_double", pa.float64()),
        ("p_decimal", pa.decimal128(6, 3)),
        ("p_bool", pa.bool_()),
    ]
)
VALUES: dict[str, Any] = {
    "p_string": "Zürich é",
    "p_date": dt.date(2022, 2, 22),
    "p_long": -(2**40),
    "p_int": 7,
    "p_double": 2.222,
    "p_decimal": Decimal("123.321"),
    "p_bool": False,
}


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def test_a_single_value_theta_retains_the_spec_hash_of_the_value() -> None:
    from datasketches import compact_theta_sketch

    blob = single_value_theta("long", 11, 12)
    (retained,) = list(compact_theta_sketch.deserialize(blob, 9001))
    assert retained == theta_hash(encode_bound("long", 11) or b"")
    assert theta_estimate(single_value_theta("string", "", 12)) == 0  # never hashed
    assert theta_estimate(single_value_theta("string", None, 12)) == 0


def test_a_repeated_kll_counts_every_copy_and_every_quantile_is_the_value() -> None:
    blob = repeated_kll(3.5, 1_000_003, 200)
    assert kll_count(blob) == 1_000_003
    assert set(kll_quantiles(blob, [0.0, 0.3, 1.0]).values()) == {3.5}


def test_a_null_partition_value_is_all_nulls() -> None:
    sketch = constant_sketch("string", None, 5, SETTINGS)
    assert sketch is not None
    assert (sketch.null_count, sketch.min, sketch.max, sketch.len_sum) == (5, None, None, 0)


@pytest.mark.spark
def test_constant_sketches_equal_sparks_over_a_file_holding_the_value(
    spark: Any, tmp_path: Path
) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", PARTITIONED, partition_by=[(name, IdentityTransform()) for name in VALUES])
    rows = 1000
    wh.append("t", {"id": list(range(rows)), **{k: [v] * rows for k, v in VALUES.items()}})
    table = open_iceberg_location(wh.location("t"))
    (commit,) = table.commits_since(None)
    (data_file,) = commit.added_files
    schema = table.schema()
    types = {c.field_id: c.type for c in schema.columns}
    names = {c.field_id: c.name for c in schema.columns}
    assert {names[f]: v for f, v in data_file.constants.items()} == VALUES
    path = data_file.path
    scanned = sketch_files(spark, [path], schema, SETTINGS)[path]
    for field_id, value in data_file.constants.items():
        made = constant_sketch(types[field_id], value, rows, SETTINGS)
        assert made is not None
        got = scanned[field_id]
        name = names[field_id]
        assert made.theta == got.theta, name  # byte for byte: same hash, same layout
        assert (made.min, made.max, made.null_count) == (got.min, got.max, got.null_count), name
        assert (made.len_sum, made.len_max) == (got.len_sum, got.len_max), name
        assert (made.true_count, made.false_count) == (got.true_count, got.false_count), name
        assert made.nan_count == got.nan_count, name
        if got.kll is not None:
            assert made.kll is not None
            assert kll_count(made.kll) == kll_count(got.kll) == rows
            qs = [0.0, 0.5, 1.0]
            assert kll_quantiles(made.kll, qs) == kll_quantiles(got.kll, qs), name
        spec = type_spec(types[field_id])
        assert spec is not None
        if spec.frequent is None:  # booleans have exact counts, binary none
            assert made.frequent_items is None and got.frequent_items is None, name
            continue
        assert made.frequent_items is not None and got.frequent_items is not None, name
        made_values = frequent_values(made.frequent_items, 10, spec.frequent)
        assert made_values == frequent_values(got.frequent_items, 10, spec.frequent), name
        assert [v.count for v in made_values.values] == [rows], name


def _hive_values(path: str) -> dict[str, str]:
    """The partition values Hive wrote into the data file's directory names."""
    return dict(part.split("=", 1) for part in path.split("/") if "=" in part)


@needs_fixtures
@pytest.mark.spark
def test_a_hive_migrated_table_gets_its_partition_columns_from_the_partition_tuple(
    spark: Any, tmp_path: Path
) -> None:
    table = fixture_path("iceberg_alltypes_part")
    state = str(tmp_path / "stats")
    cli("analyze", table, "--state-dir", state, "-q", *map_args())
    doc = json.loads(cli("show", table, "--state-dir", state, "--json", *map_args()))

    (data_file,) = (local_path(table) or Path()).rglob("000000_0")
    hive = _hive_values(str(data_file))  # independent of any Iceberg reader
    assert doc["record_count"] == 2
    columns = doc["columns"]
    expected = {
        "p_bool": True,
        "p_int": 1,
        "p_bigint": 11,
        "p_decimal": "123.321",
        "p_date": "2022-02-22",
        "p_string": "impala",
    }
    assert hive["p_bool"] == "true" and hive["p_string"] == "impala"
    for name, value in expected.items():
        column = columns[name]
        assert (column["min"], column["max"]) == (value, value), name
        assert (column["null_count"], column["ndv"]) == (0, 1), name
        assert column["sketch"]["sketched_files"] == 1, name
    assert str(expected["p_int"]) == hive["p_int"] and hive["p_date"] == "2022-02-22"
    assert columns["p_float"]["min"] == pytest.approx(float(hive["p_float"]), rel=1e-6)
    # exact: pyiceberg 0.12's Cython Avro decoder would read it through float32
    # (2.2219998836517334; formats/iceberg/manifests.py reads such manifests otherwise)
    assert columns["p_double"]["min"] == float(hive["p_double"])
    assert columns["p_string"]["avg_len"] == 6.0
    # the data column itself is read by name (the file has no Parquet field ids)
    assert (columns["i"]["min"], columns["i"]["max"], columns["i"]["ndv"]) == (1, 2, 2)


@needs_fixtures
def test_metadata_only_stats_fill_partition_columns_too(tmp_path: Path) -> None:
    table = fixture_path("iceberg_alltypes_part")
    state = str(tmp_path / "stats")
    cli("analyze", table, "--state-dir", state, "-q", "--no-sketches", *map_args())
    doc = json.loads(cli("show", table, "--state-dir", state, "--json", *map_args()))
    column = doc["columns"]["p_bigint"]
    assert (column["min"], column["max"], column["null_count"]) == (11, 11, 0)
    assert column["min_max_exact"] is True
