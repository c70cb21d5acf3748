"""``MemoryTable``'s writer API: what the contract suite does not cover (misuse, deletes)."""

from __future__ import annotations

import pytest

from lakestats.exceptions import ExpiryError, MetadataError
from lakestats.formats.base import SupportsSnapshotExpiry, TableFormat
from lakestats.formats.memory import MemoryTable
from lakestats.model import FileContent, PartitionField, PartitionKey


@pytest.fixture
def table() -> MemoryTable:
    return MemoryTable([("id", "long"), ("name", "string")], name="t")


def test_is_a_table_format_with_snapshot_expiry(table: MemoryTable) -> None:
    assert isinstance(table, TableFormat)
    assert isinstance(table, SupportsSnapshotExpiry)
    assert table.location == "memory://t"
    assert [(c.field_id, c.name, c.type) for c in table.schema().columns] == [
        (1, "id", "long"),
        (2, "name", "string"),
    ]


def test_data_file_metrics_by_column_name(table: MemoryTable) -> None:
    key = PartitionKey(spec_id=1, values=(("id", 3),), fields=(PartitionField(1000, "long"),))

    data_file = table.data_file(
        "memory://t/a.parquet", 5, bounds={"id": (1, 9)}, null_counts={"name": 2}, partition=key
    )

    assert data_file.record_count == 5
    assert data_file.partition == key
    assert data_file.field_ids == frozenset({1, 2})
    assert (data_file.columns[1].lower, data_file.columns[1].upper) == (1, 9)
    assert data_file.columns[2].null_count == 2
    assert data_file.columns[2].lower is None
    with pytest.raises(ValueError, match="no column"):
        table.data_file("memory://t/b.parquet", 1, bounds={"nope": (1, 2)})


def test_overwrite_with_delete_files_sorts_them_by_content(table: MemoryTable) -> None:
    data = table.data_file("memory://t/a.parquet", 3)
    first = table.append(data)
    deletes = table.data_file(
        "memory://t/a-deletes.parquet", 1, content=FileContent.POSITION_DELETES
    )
    second = table.commit(added=[deletes])
    rewritten = table.data_file("memory://t/b.parquet", 2)

    third = table.commit(added=[rewritten], removed=[data.path, deletes.path])

    commits = table.commits_since(first)
    assert [c.snapshot_id for c in commits] == [second, third]
    assert commits[0].added_delete_files == (deletes,)
    assert commits[0].operation == "append"
    assert commits[1].operation == "overwrite"
    assert commits[1].removed_files == (data,)
    assert commits[1].removed_delete_files == (deletes,)
    assert [f.path for f in table.live_files(third)] == [rewritten.path]
    assert [f.path for f in table.live_files(second)] == [data.path, deletes.path]


def test_misuse_of_the_writer_is_refused(table: MemoryTable) -> None:
    data = table.data_file("memory://t/a.parquet", 1)
    first = table.append(data)
    with pytest.raises(ValueError, match="already live"):
        table.append(data)
    with pytest.raises(ValueError, match="not live"):
        table.remove("memory://t/nope.parquet")
    second = table.append(table.data_file("memory://t/b.parquet", 1))
    table.rollback(first)
    with pytest.raises(ValueError, match="not an ancestor"):
        table.rollback(second)
    with pytest.raises(ValueError, match="no column 'nope'"):
        table.rename_column("nope", "x")
    with pytest.raises(ExpiryError, match="current snapshot"):
        table.expire_snapshots([first])


def test_unreadable_metadata_names_the_current_metadata_file(table: MemoryTable) -> None:
    table.append(table.data_file("memory://t/a.parquet", 1))
    table.make_unreadable("bad magic")

    for read in (table.refresh, table.current_snapshot_id, lambda: table.commits_since(None)):
        with pytest.raises(
            MetadataError,
            match=r"^metadata file memory://t/metadata/v\d+\.metadata\.json is unreadable "
            r"\(bad magic\)$",
        ):
            read()

    table.make_readable()
    assert len(table.commits_since(None)) == 1


def test_new_columns_never_reuse_a_dropped_field_id(table: MemoryTable) -> None:
    table.drop_column("name")
    added = table.add_column("name", "string")
    assert [(c.field_id, c.name) for c in added.columns] == [(1, "id"), (3, "name")]
    assert added.schema_id == 2
    assert table.schema(0).columns[1].field_id == 2
