"""The public test helpers: warehouses of real tables, and exact statistics of live data."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform

from lakestats.formats.registry import open_table
from lakestats.testing import IcebergWarehouse, exact_stats


def test_exact_stats_of_live_rows(tmp_path: Path) -> None:
    warehouse = IcebergWarehouse(tmp_path)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("score", pa.float64()),
            ("amount", pa.decimal128(9, 2)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("addr", pa.struct([("city", pa.string())])),
            ("tags", pa.list_(pa.string())),
        ]
    )
    warehouse.create_table("t", schema)
    at = dt.datetime(2024, 5, 6, 7, 8, tzinfo=dt.UTC)
    warehouse.append(
        "t",
        {
            "id": [1, 2, 3, 4],
            "score": [float("nan"), 2.5, None, -1.0],
            "amount": [Decimal("1.10"), None, Decimal("-2.00"), Decimal("9.99")],
            "at": [at, None, at + dt.timedelta(days=1), at],
            "addr": [{"city": "Oslo"}, None, {"city": None}, {"city": "Bergen"}],
            "tags": [["a"], [], None, ["b"]],
        },
    )
    warehouse.delete("t", "id = 4")

    stats = exact_stats(warehouse.table("t"))

    assert stats["record_count"] == 3
    columns = stats["columns"]
    assert set(columns) == {"id", "score", "amount", "at", "addr.city"}  # no list columns
    assert columns["score"] == {"null_count": 1, "nan_count": 1, "min": 2.5, "max": 2.5}
    assert columns["amount"] == {
        "null_count": 1,
        "nan_count": None,
        "min": Decimal("-2.00"),
        "max": Decimal("1.10"),
    }
    assert columns["at"]["max"] == at + dt.timedelta(days=1)
    assert columns["addr.city"] == {
        "null_count": 2,
        "nan_count": None,
        "min": "Oslo",
        "max": "Oslo",
    }


def test_exact_stats_of_an_older_snapshot_and_of_no_rows(tmp_path: Path) -> None:
    warehouse = IcebergWarehouse(tmp_path)
    warehouse.create_table("t", pa.schema([("u", pa.uuid()), ("n", pa.int32())]))
    value = uuid.UUID(int=7)
    first = warehouse.append("t", {"u": [value.bytes], "n": [1]})
    warehouse.delete("t", "n = 1")

    assert exact_stats(warehouse.table("t"))["columns"]["n"] == {
        "null_count": 0,
        "nan_count": None,
        "min": None,
        "max": None,
    }
    older = exact_stats(warehouse.table("t"), snapshot_id=first)
    assert older["record_count"] == 1
    assert older["columns"]["u"]["min"] == value


def test_warehouse_tables_open_by_location_and_by_catalog(tmp_path: Path) -> None:
    warehouse = IcebergWarehouse(tmp_path, catalog_name="c", namespace="ns")
    warehouse.create_table(
        "events",
        pa.schema([("kind", pa.string()), ("n", pa.int64())]),
        partition_by=[("kind", IdentityTransform())],
    )
    snapshot = warehouse.append("events", {"kind": ["a", "b"], "n": [1, 2]})
    name, properties, identifier = warehouse.catalog_args("events")

    by_path = open_table(warehouse.location("events"))
    by_catalog = open_table(catalog=name, catalog_properties=properties, identifier=identifier)

    assert identifier == "ns.events"
    assert Path(warehouse.location("events")).is_dir()
    assert by_path.table_id == by_catalog.table_id
    assert by_path.current_snapshot_id() == by_catalog.current_snapshot_id() == snapshot
    assert warehouse.lineage("events") == [snapshot]
    (commit,) = by_path.commits_since(None)
    assert {f.partition.as_dict()["kind"] for f in commit.added_files} == {"a", "b"}


def test_overwrite_with_a_filter(tmp_path: Path) -> None:
    warehouse = IcebergWarehouse(tmp_path)
    warehouse.create_table("t", pa.schema([("n", pa.int64())]))
    warehouse.append("t", {"n": [1, 2, 3]})
    warehouse.overwrite("t", {"n": [20]}, where="n >= 2")

    assert exact_stats(warehouse.table("t"))["columns"]["n"]["max"] == 20
    assert exact_stats(warehouse.table("t"))["record_count"] == 2
    with pytest.raises(ValueError, match="Snapshot with ID 1 does not exist"):
        warehouse.expire_snapshots("t", [1])
