"""Paimon renames and the files written before them: pypaimon writes no Parquet field ids,
so lakestats reads such a file by the names of the schema it was written with
(``DataFile.written_as``), as Paimon's readers do, never by the table's current names. Two
columns whose names are swapped must not swap the older files' values; a rename followed
by another column's type change (which lists every live file again) must not lose them.

pypaimon's default stats mode writes no value bounds, so min/max come from the sketch job's
read of the files. The oracle is pypaimon's read of the table, counted with pyarrow.compute;
incremental runs must agree with a from-scratch one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from cli_runs import analyzed_stats
from paimon_tables import PaimonWarehouse

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12
ROWS = 50


def assert_exact(doc: dict[str, Any], rows: pa.Table) -> None:
    assert doc["record_count"] == rows.num_rows
    for name in rows.column_names:
        got, values = doc["columns"][name], rows.column(name)
        if values.type == pa.string_view():  # pypaimon's read; pyarrow has no min over it
            values = values.cast(pa.string())
        assert got["null_count"] == values.null_count, name
        assert (got["min"], got["max"]) == (pc.min(values).as_py(), pc.max(values).as_py()), name
        distinct = pc.count_distinct(values).as_py()
        assert abs(got["ndv"] - distinct) <= max(1, 3 * THETA_RSE * distinct), name


def test_swapped_names_do_not_swap_older_files_values(spark: Any, tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = str(warehouse.create("t", [("x", "int"), ("y", "int")], options={}))
    warehouse.write("t", {"x": list(range(ROWS)), "y": list(range(1000, 1000 + ROWS))})
    analyzed_stats(location, tmp_path / "inc")
    warehouse.rename_column("t", "x", "tmp")
    warehouse.rename_column("t", "y", "x")
    warehouse.rename_column("t", "tmp", "y")
    warehouse.write("t", {"x": list(range(2000, 2000 + ROWS)), "y": list(range(3000, 3000 + ROWS))})

    rows = warehouse.read("t")
    assert pc.min(rows.column("x")).as_py() == 1000  # the old y's values, now x's
    scratch = analyzed_stats(location, tmp_path / "scratch")
    after = analyzed_stats(location, tmp_path / "inc")
    assert_exact(scratch, rows)
    assert_exact(after, rows)
    for name in ("x", "y"):
        assert scratch["columns"][name]["quantiles"] == after["columns"][name]["quantiles"]


def test_a_renamed_column_survives_another_columns_type_change(spark: Any, tmp_path: Path) -> None:
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = str(warehouse.create("t", [("name", "string"), ("a", "int")], options={}))
    warehouse.write("t", {"name": [f"old{i:02d}" for i in range(ROWS)], "a": list(range(ROWS))})
    analyzed_stats(location, tmp_path / "inc")
    warehouse.rename_column("t", "name", "label")
    warehouse.write("t", {"label": [f"new{i:02d}" for i in range(ROWS)], "a": list(range(ROWS))})
    analyzed_stats(location, tmp_path / "inc")
    warehouse.alter("t", SchemaChange.update_column_type("a", AtomicType("BIGINT")))
    warehouse.write("t", {"label": [f"z{i:02d}" for i in range(ROWS)], "a": list(range(ROWS))})

    rows = warehouse.read("t")
    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    assert_exact(after, rows)
    assert_exact(scratch, rows)
    assert after["columns"]["label"]["null_count"] == 0


def test_a_column_dropped_and_added_again_with_another_type(spark: Any, tmp_path: Path) -> None:
    """The older file's ``g`` (a string) is another column than the new ``g`` (a long):
    readers give null for it there; lakestats must not read it by its name, from scratch
    (where the older commit's file is read with its own schema) nor incrementally."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = str(warehouse.create("t", [("id", "long"), ("g", "string")], options={}))
    warehouse.write("t", {"id": list(range(ROWS)), "g": [f"g{i}" for i in range(ROWS)]})
    analyzed_stats(location, tmp_path / "inc")
    warehouse.drop_column("t", "g")
    warehouse.add_column("t", "g", "long")
    warehouse.write("t", {"id": list(range(ROWS, 2 * ROWS)), "g": [i * 10 for i in range(ROWS)]})

    rows = warehouse.read("t")
    assert rows.column("g").null_count == ROWS  # the older rows' g
    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    assert_exact(after, rows)
    assert_exact(scratch, rows)
