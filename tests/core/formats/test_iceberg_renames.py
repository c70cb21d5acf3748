"""Iceberg files without Parquet field ids (added with ``add_files``, or migrated from Hive;
readers find their columns through the table's name mapping) and a column renamed after
they were added: when such a file is read again — its deletes, or every live file listed
again after a type promotion — its columns are found by the names of the schema it was
written with, not read as null under the new ones. The oracle is pyiceberg's read of the
table, counted with pyarrow.compute; incremental runs must equal a from-scratch one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.types import LongType

from cli_runs import analyzed_stats
from lakestats.formats.iceberg.opening import open_iceberg_location
from lakestats.formats.iceberg.testing_deletes import add_position_deletes
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int32())])


def with_migrated_file(tmp_path: Path) -> tuple[IcebergWarehouse, str]:
    """A table whose first file has no field ids (``add_files``: pyiceberg sets the name
    mapping)."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    location = wh.location("t")
    data = Path(location.removeprefix("file://")) / "data"
    data.mkdir(parents=True, exist_ok=True)
    rows = {"id": list(range(100)), "k": [f"k{i % 30}" for i in range(100)], "v": list(range(100))}
    pq.write_table(pa.table(rows, schema=SCHEMA), data / "migrated.parquet")
    assert not pq.read_schema(data / "migrated.parquet").field("k").metadata  # no field id
    wh.table("t").add_files([str(data / "migrated.parquet")])
    return wh, location


def rename_and_append(wh: IcebergWarehouse) -> None:
    wh.rename_column("t", "k", "k2")
    wh.append("t", {"id": list(range(100, 120)), "k2": [f"z{i}" for i in range(20)], "v": [1] * 20})


def added_without_field_ids(tmp_path: Path) -> tuple[IcebergWarehouse, str]:
    """``with_migrated_file``, analyzed, then ``k`` renamed to ``k2``, a file appended and
    analyzed again."""
    wh, location = with_migrated_file(tmp_path)
    analyzed_stats(location, tmp_path / "inc")
    rename_and_append(wh)
    analyzed_stats(location, tmp_path / "inc")
    return wh, location


def assert_k2_exact(doc: dict[str, Any], rows: pa.Table) -> None:
    got, values = doc["columns"]["k2"], rows.column("k2")
    assert got["null_count"] == values.null_count == 0
    assert (got["min"], got["max"]) == (pc.min(values).as_py(), pc.max(values).as_py())
    distinct = pc.count_distinct(values).as_py()
    assert abs(got["ndv"] - distinct) <= max(1, 3 * THETA_RSE * distinct)


@pytest.mark.parametrize("change", ["position deletes", "promotion"])
def test_a_file_without_field_ids_is_read_by_the_names_it_was_written_with(
    spark: Any, tmp_path: Path, change: str
) -> None:
    wh, location = added_without_field_ids(tmp_path)
    if change == "position deletes":
        table = wh.table("t")
        (migrated,) = (
            task.file.file_path
            for task in table.scan().plan_files()
            if task.file.file_path.endswith("migrated.parquet")
        )
        add_position_deletes(table, {migrated: [0, 1, 2]})
    else:
        with wh.table("t").update_schema() as update:
            update.update_column("v", LongType())
        wh.append("t", {"id": [500], "k2": ["p"], "v": [7]})

    rows = wh.table("t").scan().to_arrow()
    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    assert_k2_exact(after, rows)
    assert_k2_exact(scratch, rows)
    assert after["columns"]["k2"] == scratch["columns"]["k2"]


def test_only_a_table_with_a_name_mapping_says_how_its_files_were_named(tmp_path: Path) -> None:
    """Readers read id-less files only through a name mapping; a table without one (every
    file written with ids) says nothing of its renames, so no footer is read for them."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", {"id": [1], "k": ["a"], "v": [1]})
    wh.rename_column("t", "k", "k2")
    wh.append("t", {"id": [2], "k2": ["b"], "v": [2]})
    assert "schema.name-mapping.default" not in wh.table("t").metadata.properties
    commits = open_iceberg_location(wh.location("t")).commits_since(None)
    assert [f.written_as for c in commits for f in c.added_files] == [(), ()]

    mapped, location = with_migrated_file(tmp_path / "mapped")
    rename_and_append(mapped)
    first, second = open_iceberg_location(location).commits_since(None)
    k = mapped.table("t").schema().find_field("k2").field_id
    assert [f.written_as for f in first.added_files] == [((k, "k", "string"),)]
    assert [f.written_as for f in second.added_files] == [()]
