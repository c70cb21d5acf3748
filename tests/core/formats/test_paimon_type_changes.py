"""Paimon column type changes (``DOUBLE`` → ``INT``, ``BOOLEAN`` → ``STRING``, ``INT`` →
``STRING``) in append-only and deletion-vector tables: the files written before are read
with their own types and cast to the current ones in the one sketch job
(``written_types``), deletion vectors still applied to them by row position.

The oracle is pypaimon's reader of the table (which casts as Paimon does), compared with
pyarrow: counts, null counts, min, max and string lengths exact, NDV within the theta
bound. The commit after a type change lists every live file again, so the incremental
stats equal a from-scratch run's.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pypaimon import CatalogFactory
from pypaimon.schema.data_types import AtomicType, PyarrowFieldParser
from pypaimon.schema.schema_change import SchemaChange

from lakestats.analyze import analyze_table
from lakestats.config import Config
from lakestats.formats.paimon import open_paimon_location
from lakestats.formats.paimon.testing import write_arrow
from lakestats.read import read_stats
from lakestats.sketching import SparkSketcher
from lakestats.tables import open_configured
from lakestats.values import to_json
from paimon_fixtures import copy_fixture, needs_paimon_fixtures, read_rows
from paimon_tables import PaimonWarehouse, one_table_config

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12
DV_TABLE = "pk_table_scan_and_read_dv"


def analyze(config: Config) -> dict[str, Any]:
    analyze_table(
        open_configured(config.table[0], config), config=config, sketcher=SparkSketcher(config)
    )
    return read_stats(config.table[0].name, config=config)


def assert_describes(doc: dict[str, Any], rows: pa.Table) -> None:
    """Every column of ``rows`` (pypaimon's read) against ``doc``'s stats of it."""
    assert doc["merged_record_count"] == rows.num_rows
    assert set(doc["columns"]) == set(rows.column_names)
    for column, got in doc["columns"].items():
        values = rows.column(column)
        assert got["null_count"] == values.null_count, column
        present = values.drop_null()
        low, high = pc.min_max(present).values()
        assert (got["min"], got["max"]) == (to_json(low.as_py()), to_json(high.as_py())), column
        assert got["min_max_exact"] is True, column
        distinct = len(pc.unique(present))
        assert abs(got["ndv"] - distinct) <= max(1, 3 * THETA_RSE * distinct), column
        if pa.types.is_string(values.type):
            lengths = pc.utf8_length(present)
            assert got["max_len"] == pc.max(lengths).as_py(), column
            assert got["avg_len"] == pytest.approx(pc.mean(lengths).as_py()), column


# -- append-only ---------------------------------------------------------------------------

BEFORE = {
    "id": [1, 2, 3, 4, 5],
    "d": [1.5, -2.7, None, 99.99, 7.0],
    "b": [True, False, None, True, True],
    "i": [10, None, -3, 10, 123456],
    "s": ["a", "bb", None, "a", "ccc"],
    "m": [Decimal("1.25"), Decimal("-999.99"), None, Decimal("0.00"), Decimal("999.99")],
}
AFTER = {  # written with the new types
    "id": [6, 7, 8],
    "d": [-40, None, 2],
    "b": ["maybe", "false", None],
    "i": ["abc", "10", None],
    "s": ["dd", None, "a"],
    "m": [Decimal("0.1234"), None, Decimal("-5.0000")],
}
# DECIMAL(5, 2) -> DECIMAL(10, 4) widens the scale: the old files' bounds are the same
# numbers at the new scale (their encoding failed: "scale of value does not match")
CHANGES = (("d", "INT"), ("b", "STRING"), ("i", "STRING"), ("m", "DECIMAL(10, 4)"))


@pytest.fixture(scope="module")
def append_only(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Written, analyzed, retyped, written with the new types, analyzed again; and once
    from scratch."""
    root = tmp_path_factory.mktemp("append")
    warehouse = PaimonWarehouse(root / "wh")
    columns = [
        ("id", "long"),
        ("d", "double"),
        ("b", "boolean"),
        ("i", "int"),
        ("s", "string"),
        ("m", "decimal(5, 2)"),
    ]
    location = warehouse.create("t", columns, options={"bucket": "-1"})
    warehouse.write("t", {k: v[:3] for k, v in BEFORE.items()})
    warehouse.write("t", {k: v[3:] for k, v in BEFORE.items()})
    incremental = one_table_config("t", location, root / "inc")
    before = analyze(incremental)
    warehouse.alter("t", *(SchemaChange.update_column_type(c, AtomicType(t)) for c, t in CHANGES))
    warehouse.write("t", AFTER)
    read = warehouse.table("t").new_read_builder()
    return {
        "before": before,
        "after": analyze(incremental),
        "scratch": analyze(one_table_config("t", location, root / "scratch")),
        "rows": read.new_read().to_arrow(read.new_scan().plan().splits()),
        "location": location,
    }


def test_append_only_files_written_before_a_type_change_are_cast(
    append_only: dict[str, Any],
) -> None:
    rows = append_only["rows"]
    # pypaimon's cast of the old files: DOUBLE -> INT truncates toward zero, BOOLEAN and
    # INT -> STRING are their text
    assert rows.sort_by("id").column("d").to_pylist() == [1, -2, None, 99, 7, -40, None, 2]
    assert rows.sort_by("id").column("b").to_pylist()[:3] == ["true", "false", None]
    assert rows.sort_by("id").column("i").to_pylist()[:3] == ["10", None, "-3"]
    doc = append_only["scratch"]
    assert doc["record_count"] == 8
    assert {c: doc["columns"][c]["type"] for c in ("d", "b", "i", "m")} == {
        "d": "int",
        "b": "string",
        "i": "string",
        "m": "decimal(10, 4)",
    }
    assert_describes(doc, rows)


def test_append_only_incremental_equals_from_scratch_across_the_change(
    append_only: dict[str, Any],
) -> None:
    after, scratch = append_only["after"], append_only["scratch"]
    assert after["columns"] == scratch["columns"]
    assert after["record_count"] == scratch["record_count"] == 8
    # before the change the same files were doubles and booleans
    assert append_only["before"]["columns"]["d"]["max"] == 99.99
    assert append_only["before"]["columns"]["b"]["type"] == "boolean"


def test_the_commit_after_a_type_change_lists_every_live_file_again(
    append_only: dict[str, Any],
) -> None:
    table = open_paimon_location(str(append_only["location"]))
    first, second, third = table.commits_since(None)
    # files of the first schema say how they were written (field ids 1, 2, 3, 5)
    assert {f.written_as for f in (*first.added_files, *second.added_files)} == {
        ((1, "d", "double"), (2, "b", "boolean"), (3, "i", "int"), (5, "m", "decimal(5, 2)"))
    }
    old = {f.path for f in (*first.added_files, *second.added_files)}
    assert {f.path for f in third.removed_files} == old
    assert {f.path for f in third.added_files} == old | {
        f.path for f in third.added_files if not f.written_as
    }
    assert len(third.added_files) == 3
    assert table.commits_since(3) == []


# -- deletion vectors ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def with_vectors(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Java fixture with deletion vectors (f3 DOUBLE), analyzed; f3 changed to INT by
    pypaimon and a row written (a level-0 file: invisible until compacted, but the first
    commit of the new schema); analyzed again, incrementally (that commit re-reads every
    visible file with the new type: what a from-scratch run reads)."""
    root = tmp_path_factory.mktemp("dv")
    location = copy_fixture(DV_TABLE, root)
    incremental = one_table_config(DV_TABLE, location, root / "inc")
    before = analyze(incremental)
    catalog = CatalogFactory.create({"warehouse": str(root)})
    identifier = f"{DV_TABLE}.{DV_TABLE}"
    catalog.alter_table(identifier, [SchemaChange.update_column_type("f3", AtomicType("INT"))])
    table = catalog.get_table(identifier)
    schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
    write_arrow(table, pa.table({"f0": ["Zed"], "f1": [20], "f2": [1], "f3": [9]}, schema=schema))
    return {
        "before": before,
        "after": analyze(incremental),
        "rows": read_rows(DV_TABLE, root),
        "location": location,
    }


@needs_paimon_fixtures
def test_deletion_vectors_apply_to_files_read_with_their_old_types(
    with_vectors: dict[str, Any],
) -> None:
    rows = with_vectors["rows"]
    # 8 live rows; the vectors delete old Alice (11.1) and Tony (14.1)
    assert sorted(rows.column("f3").to_pylist()) == [11, 12, 13, 14, 16, 17, 18, 19]
    assert with_vectors["before"]["columns"]["f3"]["max"] == 19.1
    doc = with_vectors["after"]
    assert doc["snapshot_id"] == 7
    assert doc["columns"]["f3"]["type"] == "int"
    assert (doc["record_count"], doc["merged_record_count"]) == (10, 8)
    assert doc["row_deletes"]["deleted_records"] == 2
    assert_describes(doc, rows)


@needs_paimon_fixtures
def test_deletion_vector_files_are_listed_again_with_their_vectors(
    with_vectors: dict[str, Any],
) -> None:
    table = open_paimon_location(str(with_vectors["location"]))
    (retyped,) = table.commits_since(6)
    visible = {f.path: f for f in table.live_files(6)}
    assert {f.path for f in retyped.removed_files} == set(visible)
    assert {f.path for f in retyped.added_files} == set(visible)  # the new file: level 0
    for data_file in retyped.added_files:
        assert data_file.written_as == ((3, "f3", "double"),)
        assert data_file.deletes == visible[data_file.path].deletes
    assert sum(len(f.deletes) for f in retyped.added_files) == 2


def test_decimal_bounds_written_at_a_smaller_scale_read_at_the_current_one(
    tmp_path: Path,
) -> None:
    """A file's manifest bounds of a DECIMAL(5, 2) widened to DECIMAL(10, 4) are the same
    numbers, at the column's new scale (as its other values show), not the old one."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("m", "decimal(5, 2)")])  # full stats
    warehouse.write("t", {"id": [1, 2], "m": [Decimal("12.25"), Decimal("-0.50")]})
    warehouse.alter("t", SchemaChange.update_column_type("m", AtomicType("DECIMAL(10, 4)")))
    table = open_paimon_location(str(location))
    (commit,) = table.commits_since(None)
    (data_file,) = commit.added_files
    (m,) = (c.field_id for c in table.schema().columns if c.name == "m")
    metrics = data_file.columns[m]
    assert (metrics.lower, metrics.upper) == (Decimal("-0.50"), Decimal("12.25"))
    assert (to_json(metrics.lower), to_json(metrics.upper)) == ("-0.5000", "12.2500")
