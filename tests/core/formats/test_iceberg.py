"""The Iceberg adapter against real tables written by pyiceberg in temporary directories."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyiceberg.avro.file as avro_file
import pytest
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, StringType

from file_calls import counting_filesystem
from lakestats.exceptions import (
    ConfigError,
    LineageError,
    MetadataError,
    PartialMetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from lakestats.formats.base import TableFormat
from lakestats.formats.iceberg import (
    IcebergTable,
    is_iceberg_location,
    metadata_files,
    open_iceberg_location,
    opening,
)
from lakestats.formats.iceberg.manifests import _written_schema_id
from lakestats.formats.iceberg.opening import WRITE_GRACE_S, environment_io_properties
from lakestats.formats.registry import detect_format, open_table
from lakestats.locations import resolve_location
from lakestats.model import Commit, DataFile, FileContent, PartitionKey
from lakestats.testing import IcebergWarehouse, exact_stats

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("price", pa.decimal128(10, 2)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("score", pa.float64()),
    ]
)


def rows(ids: list[int], *, day: dt.date = dt.date(2024, 1, 1)) -> dict[str, list[Any]]:
    return {
        "id": ids,
        "name": [f"n{i}" if i % 3 else None for i in ids],
        "price": [Decimal(f"{i}.25") for i in ids],
        "day": [day + dt.timedelta(days=i % 2) for i in ids],
        "ts": [dt.datetime(2024, 1, 1, 12) + dt.timedelta(hours=i) for i in ids],
        "score": [float(i) / 2 for i in ids],
    }


@pytest.fixture
def warehouse(tmp_path: Path) -> IcebergWarehouse:
    return IcebergWarehouse(tmp_path)


@pytest.fixture
def table(warehouse: IcebergWarehouse) -> str:
    warehouse.create_table("t", SCHEMA)
    return "t"


def local(path: str) -> Path:
    return Path(urlparse(path).path)


def paths(files: Iterable[DataFile]) -> set[str]:
    return {f.path for f in files}


def metadata_dir(warehouse: IcebergWarehouse, name: str) -> Path:
    return Path(warehouse.location(name)) / "metadata"


def assert_metrics_match_parquet(data_file: DataFile, columns: dict[str, int]) -> None:
    """The manifest's metrics for a file equal what reading the file itself gives."""
    path = local(data_file.path)
    data = pq.ParquetFile(path).read()  # one file: no hive-partition inference
    assert data_file.record_count == data.num_rows
    assert data_file.file_size_bytes == path.stat().st_size
    for name, field_id in columns.items():
        metrics = data_file.columns[field_id]
        values = data.column(name)
        assert metrics.value_count == data.num_rows
        assert metrics.null_count == values.null_count
        present = values.drop_null()
        if len(present):
            bounds = pc.min_max(present)
            assert metrics.lower == bounds["min"].as_py()
            assert metrics.upper == bounds["max"].as_py()
        else:
            assert metrics.lower is None and metrics.upper is None


class TestAppends:
    def test_each_append_lists_its_own_files_with_metrics_of_the_data(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1, 2, 3]))
        second = warehouse.append(table, rows([4, 5]))
        opened = open_table(warehouse.location(table))
        assert isinstance(opened, TableFormat)

        commits = opened.commits_since(None)

        assert [c.snapshot_id for c in commits] == [first, second]
        assert [c.parent_id for c in commits] == [None, first]
        assert [c.operation for c in commits] == ["append", "append"]
        assert [c.sequence_number for c in commits] == [1, 2]
        assert all(not c.removed_files and not c.is_baseline for c in commits)
        assert paths(commits[0].added_files).isdisjoint(paths(commits[1].added_files))
        by_name = {c.name: c.field_id for c in opened.schema().columns}
        for commit in commits:
            (data_file,) = commit.added_files
            assert data_file.content is FileContent.DATA
            assert data_file.file_format == "PARQUET"
            assert data_file.partition == PartitionKey(spec_id=0)
            assert data_file.field_ids == frozenset(by_name.values())
            assert_metrics_match_parquet(data_file, by_name)

    def test_bounds_decode_to_python_values_of_the_column_type(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        warehouse.append(table, rows([7, 2]))
        opened = open_iceberg_location(warehouse.location(table))
        (commit,) = opened.commits_since(None)
        metrics = {
            c.name: commit.added_files[0].columns[c.field_id] for c in opened.schema().columns
        }

        assert (metrics["id"].lower, metrics["id"].upper) == (2, 7)
        assert (metrics["price"].lower, metrics["price"].upper) == (
            Decimal("2.25"),
            Decimal("7.25"),
        )
        assert metrics["day"].lower == dt.date(2024, 1, 1)
        assert metrics["ts"].upper == dt.datetime(2024, 1, 1, 19)
        assert metrics["score"].lower == 1.0
        assert metrics["name"].lower == "n2"
        assert type(metrics["price"].lower) is Decimal
        assert type(metrics["day"].upper) is dt.date

    def test_commits_since_a_snapshot_lists_only_later_ones(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1]))
        second = warehouse.append(table, rows([2]))
        third = warehouse.append(table, rows([3]))
        opened = open_iceberg_location(warehouse.location(table))

        assert [c.snapshot_id for c in opened.commits_since(first)] == [second, third]
        assert opened.commits_since(third) == []
        assert opened.current_snapshot_id() == third
        assert opened.snapshot_ids() == {first, second, third}

    def test_merged_manifests_still_attribute_files_to_their_commit(
        self, warehouse: IcebergWarehouse
    ) -> None:
        warehouse.create_table(
            "merged",
            SCHEMA,
            properties={
                "commit.manifest-merge.enabled": "true",
                "commit.manifest.min-count-to-merge": "2",
            },
        )
        for ids in ([1], [2], [3], [4]):
            warehouse.append("merged", rows(ids))
        manifests = (
            warehouse.table("merged")
            .current_snapshot()
            .manifests(  # type: ignore[union-attr]
                warehouse.table("merged").io
            )
        )
        assert len(manifests) == 1  # really merged: old files now EXISTING in a new manifest

        commits = open_iceberg_location(warehouse.location("merged")).commits_since(None)

        assert [sum(f.record_count for f in c.added_files) for c in commits] == [1, 1, 1, 1]
        assert len(set().union(*(paths(c.added_files) for c in commits))) == 4

    def test_format_version_1_tables(self, warehouse: IcebergWarehouse) -> None:
        warehouse.create_table("v1", SCHEMA, properties={"format-version": "1"})
        warehouse.append("v1", rows([1, 2]))
        warehouse.append("v1", rows([3]))
        warehouse.delete("v1", "id = 3")
        warehouse.delete("v1", "id = 1")

        commits = open_iceberg_location(warehouse.location("v1")).commits_since(None)

        assert [c.operation for c in commits] == ["append", "append", "delete", "overwrite"]
        assert [c.sequence_number for c in commits] == [0, 0, 0, 0]  # v1 has none
        assert paths(commits[2].removed_files) == paths(commits[1].added_files)
        assert paths(commits[3].removed_files) == paths(commits[0].added_files)
        assert [f.record_count for f in commits[3].added_files] == [1]

    def test_empty_table_has_no_commits(self, warehouse: IcebergWarehouse, table: str) -> None:
        opened = open_iceberg_location(warehouse.location(table))
        assert opened.current_snapshot_id() is None
        assert opened.commits_since(None) == []
        with pytest.raises(LineageError):
            opened.commits_since(42)

    def test_identity(self, warehouse: IcebergWarehouse, table: str) -> None:
        opened = open_iceberg_location(warehouse.location(table))
        assert opened.format_name == "iceberg"
        assert opened.table_id == str(warehouse.table(table).metadata.table_uuid)
        assert opened.location == warehouse.table(table).metadata.location


class TestDeletes:
    def test_delete_of_whole_files_lists_them_as_removed(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1, 2]))
        warehouse.append(table, rows([10, 11]))
        appended = open_iceberg_location(warehouse.location(table)).commits_since(None)
        warehouse.delete(table, "id >= 10")
        opened = open_iceberg_location(warehouse.location(table))

        (delete,) = opened.commits_since(appended[-1].snapshot_id)

        assert delete.operation == "delete"
        assert not delete.added_files
        assert paths(delete.removed_files) == paths(appended[1].added_files)
        (removed,) = delete.removed_files
        assert removed.record_count == 2
        assert removed.columns == appended[1].added_files[0].columns
        assert paths(opened.live_files(delete.snapshot_id)) == paths(appended[0].added_files)
        assert opened.commits_since(first)[-1] == delete

    def test_partial_delete_rewrites_the_file_in_an_overwrite(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        warehouse.append(table, rows([1, 2, 3]))
        (append,) = open_iceberg_location(warehouse.location(table)).commits_since(None)
        warehouse.delete(table, "id = 2")
        opened = open_iceberg_location(warehouse.location(table))

        (rewrite,) = opened.commits_since(append.snapshot_id)

        assert rewrite.operation == "overwrite"
        assert paths(rewrite.removed_files) == paths(append.added_files)
        (added,) = rewrite.added_files
        assert added.record_count == 2
        by_name = {c.name: c.field_id for c in opened.schema().columns}
        assert_metrics_match_parquet(added, by_name)

    def test_overwrite_is_a_delete_then_an_append(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        warehouse.append(table, rows([1]))
        warehouse.append(table, rows([2]))
        before = open_iceberg_location(warehouse.location(table)).commits_since(None)
        warehouse.overwrite(table, rows([9]))
        opened = open_iceberg_location(warehouse.location(table))

        delete, append = opened.commits_since(before[-1].snapshot_id)

        assert (delete.operation, append.operation) == ("delete", "append")
        assert paths(delete.removed_files) == paths(before[0].added_files) | paths(
            before[1].added_files
        )
        assert not append.removed_files
        assert [f.record_count for f in append.added_files] == [1]
        assert paths(opened.live_files(append.snapshot_id)) == paths(append.added_files)

    def test_delete_files_are_listed_apart_from_data_files(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        # pyiceberg cannot write row-level deletes; commit a position-delete entry by hand
        warehouse.append(table, rows([1, 2]))
        pyiceberg_table = warehouse.table(table)
        delete_file = IcebergDataFile.from_args(
            content=DataFileContent.POSITION_DELETES,
            file_path=f"{pyiceberg_table.metadata.location}/data/pos-deletes.parquet",
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=1,
            file_size_in_bytes=100,
        )
        transaction = pyiceberg_table.transaction()
        with transaction.update_snapshot().fast_append() as append:
            append.append_data_file(delete_file)
        transaction.commit_transaction()
        opened = open_iceberg_location(warehouse.location(table))

        commit = opened.commits_since(None)[-1]

        assert not commit.added_files
        (listed,) = commit.added_delete_files
        assert (listed.content, listed.record_count) == (FileContent.POSITION_DELETES, 1)
        live = opened.live_files(commit.snapshot_id)
        assert sorted(f.content.value for f in live) == ["data", "position_deletes"]


class TestSchemaEvolution:
    def test_add_rename_drop_keep_field_ids(self, warehouse: IcebergWarehouse, table: str) -> None:
        warehouse.append(table, rows([1, 2]))
        warehouse.add_column(table, "note", StringType())
        warehouse.append(table, {**rows([3]), "note": ["hello"]})
        warehouse.rename_column(table, "name", "label")
        warehouse.drop_column(table, "score")
        opened = open_iceberg_location(warehouse.location(table))
        schemas = [
            opened.schema(s) for s in sorted({c.schema_id for c in opened.commits_since(None)})
        ]
        old, new = opened.commits_since(None)

        current = opened.schema()
        names = {c.name: c.field_id for c in current.columns}
        assert "label" in names and "name" not in names and "score" not in names
        assert names["label"] == {c.name: c.field_id for c in schemas[0].columns}["name"]
        note_id = names["note"]
        score_id = {c.name: c.field_id for c in schemas[0].columns}["score"]
        # Files written before "note" existed say so; files keep metrics of dropped columns.
        assert note_id not in old.added_files[0].field_ids
        assert note_id in new.added_files[0].field_ids
        assert new.added_files[0].columns[note_id].lower == "hello"
        assert old.added_files[0].columns[score_id].upper == 1.0
        assert old.schema_id != new.schema_id

    def test_bounds_written_before_int_to_long_promotion_decode(
        self, warehouse: IcebergWarehouse
    ) -> None:
        warehouse.create_table("p", pa.schema([("n", pa.int32())]))
        warehouse.append("p", {"n": [5, -3]})
        with warehouse.table("p").update_schema() as update:
            update.update_column("n", LongType())
        opened = open_iceberg_location(warehouse.location("p"))
        (data_file,) = opened.live_files(opened.current_snapshot_id() or 0)

        (metrics,) = data_file.columns.values()
        assert (metrics.lower, metrics.upper) == (-3, 5)
        assert opened.schema().columns[0].type == "long"

    def test_the_first_commit_after_a_promotion_lists_every_live_file_again(
        self, warehouse: IcebergWarehouse
    ) -> None:
        # the files written as ints hold sketches hashed as ints: the commit that follows
        # the promotion removes them as they were and adds every live file as it is now
        warehouse.create_table("q", pa.schema([("n", pa.int32()), ("s", pa.string())]))
        warehouse.append("q", {"n": [1, 2], "s": ["a", "b"]})
        warehouse.append("q", {"n": [3], "s": ["c"]})
        with warehouse.table("q").update_schema() as update:
            update.update_column("n", LongType())
        warehouse.append("q", {"n": [1], "s": ["a"]})
        with warehouse.table("q").update_schema() as update:
            update.rename_column("s", "t")  # no type changes: an ordinary commit
        warehouse.append("q", {"n": [4], "t": ["d"]})
        opened = open_iceberg_location(warehouse.location("q"))
        first, second, promoted, renamed = opened.commits_since(None)
        before = {f.path for f in (*first.added_files, *second.added_files)}
        assert len(before) == 2 and not second.removed_files
        assert {f.path for f in promoted.removed_files} == before
        now = opened.live_files(promoted.snapshot_id)
        assert {f.path for f in promoted.added_files} == {f.path for f in now}
        assert len(promoted.added_files) == 3
        assert promoted.schema_id != second.schema_id
        assert promoted.operation == "append"
        assert len(renamed.added_files) == 1 and not renamed.removed_files

    def test_schema_lists_struct_leaves_with_dotted_names(
        self, warehouse: IcebergWarehouse
    ) -> None:
        schema = pa.schema(
            [
                ("id", pa.int64()),
                ("addr", pa.struct([("city", pa.string()), ("zip", pa.int32())])),
                ("tags", pa.list_(pa.string())),
                ("amount", pa.decimal128(10, 2)),
            ]
        )
        warehouse.create_table("nested", schema)
        opened = open_iceberg_location(warehouse.location("nested"))

        columns = [(c.name, c.type) for c in opened.schema().columns]

        assert columns == [
            ("id", "long"),
            ("addr.city", "string"),
            ("addr.zip", "int"),
            ("amount", "decimal(10, 2)"),
        ]
        with pytest.raises(MetadataError, match="no schema with id 99"):
            opened.schema(99)


class TestPartitions:
    def test_double_partition_values_are_read_whole(self, warehouse: IcebergWarehouse) -> None:
        """pyiceberg 0.12's Cython Avro decoder reads a double of the partition tuple
        through float32: 1.0 and 1.00000001 were one partition, -1e300 was -inf. Such
        manifests are read with pyiceberg's pure-Python decoder (only they)."""
        values = [1.0, 1.00000001, 1.00000001, -1e300, 0.1]
        warehouse.create_table(
            "d",
            pa.schema([("id", pa.int64()), ("x", pa.float64())]),
            partition_by=[("x", IdentityTransform())],
        )
        warehouse.append("d", {"id": list(range(len(values))), "x": values})
        opened = open_iceberg_location(warehouse.location("d"))
        (commit,) = opened.commits_since(None)
        x = next(c.field_id for c in opened.schema().columns if c.name == "x")

        keys = {f.partition.as_dict()["x"]: f.record_count for f in commit.added_files}
        assert keys == {1.0: 1, 1.00000001: 2, -1e300: 1, 0.1: 1}
        assert {f.constants[x] for f in commit.added_files} == set(values)
        fast = avro_file.new_decoder(b"")  # other reads keep the fast decoder
        assert type(fast).__name__ == "CythonBinaryDecoder"

    def test_identity_day_and_bucket_values_render_as_json(
        self, warehouse: IcebergWarehouse
    ) -> None:
        schema = pa.schema(
            [
                ("id", pa.int64()),
                ("region", pa.string()),
                ("ts", pa.timestamp("us")),
                ("at", pa.timestamp("us", tz="UTC")),
            ]
        )
        warehouse.create_table(
            "parts",
            schema,
            partition_by=[
                ("region", IdentityTransform()),
                ("ts", DayTransform()),
                ("at", IdentityTransform()),
                ("id", BucketTransform(4)),
            ],
        )
        at = dt.datetime(2024, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
        warehouse.append(
            "parts",
            {
                "id": [1, 1],
                "region": ["eu", "us"],
                "ts": [dt.datetime(2024, 2, 29, 23), dt.datetime(2024, 3, 1, 1)],
                "at": [at, at],
            },
        )
        opened = open_iceberg_location(warehouse.location("parts"))

        (commit,) = opened.commits_since(None)

        keys = sorted((f.partition for f in commit.added_files), key=repr)
        assert [k.spec_id for k in keys] == [0, 0]
        first = keys[0].as_dict()
        assert list(first) == ["region", "ts_day", "at", "id_bucket"]
        assert {(k.as_dict()["region"], k.as_dict()["ts_day"]) for k in keys} == {
            ("eu", "2024-02-29"),
            ("us", "2024-03-01"),
        }
        assert first["at"] == "2024-03-04T05:06:07+00:00"
        assert isinstance(first["id_bucket"], int)
        json.dumps(first)  # plain JSON scalars


class TestBounds:
    def test_long_string_bounds_are_flagged_as_truncated(self, warehouse: IcebergWarehouse) -> None:
        warehouse.create_table("s", pa.schema([("a", pa.string()), ("b", pa.string())]))
        warehouse.append("s", {"a": ["x" * 40, "y"], "b": ["short", "tiny"]})
        opened = open_iceberg_location(warehouse.location("s"))
        (commit,) = opened.commits_since(None)
        a, b = (commit.added_files[0].columns[c.field_id] for c in opened.schema().columns)

        assert a.bounds_may_be_truncated
        assert a.lower == "x" * 16
        assert not b.bounds_may_be_truncated

    def test_bounds_of_every_primitive_type_equal_the_data(
        self, warehouse: IcebergWarehouse
    ) -> None:
        schema = pa.schema(
            [
                ("b", pa.bool_()),
                ("i", pa.int32()),
                ("f", pa.float32()),
                ("d", pa.date32()),
                ("t", pa.time64("us")),
                ("ts", pa.timestamp("us")),
                ("tz", pa.timestamp("us", tz="UTC")),
                ("s", pa.string()),
                ("bin", pa.binary()),
                ("u", pa.uuid()),
                ("dec", pa.decimal128(38, 6)),
            ]
        )
        warehouse.create_table("types", schema)
        base = dt.datetime(2001, 2, 3, 4, 5, 6, 7)
        warehouse.append(
            "types",
            {
                "b": [True, False, None],
                "i": [-(2**31), 2**31 - 1, None],
                "f": [1.5, -0.25, None],
                "d": [dt.date(1969, 12, 31), dt.date(2100, 1, 1), None],
                "t": [dt.time(0, 0, 1), dt.time(23, 59, 59, 999999), None],
                "ts": [base, base + dt.timedelta(microseconds=1), None],
                "tz": [base.replace(tzinfo=dt.UTC), dt.datetime(1900, 1, 1, tzinfo=dt.UTC), None],
                "s": ["ä", "z", None],
                "bin": [b"\x00\xff", b"\x01", None],
                "u": [uuid.UUID(int=1).bytes, uuid.UUID(int=2**127).bytes, None],
                "dec": [Decimal("-12345678901234567890.123456"), Decimal("0.000001"), None],
            },
        )
        opened = open_iceberg_location(warehouse.location("types"))
        (commit,) = opened.commits_since(None)
        (data_file,) = commit.added_files
        expected = exact_stats(warehouse.table("types"))["columns"]

        for column in opened.schema().columns:
            metrics = data_file.columns[column.field_id]
            wanted = expected[column.name]
            assert (metrics.lower, metrics.upper) == (wanted["min"], wanted["max"]), column
            assert type(metrics.lower) is type(wanted["min"]), column
            assert metrics.null_count == wanted["null_count"] == 1
        assert data_file.columns[7].lower.tzinfo is not None  # timestamptz stays aware

    def test_full_metrics_mode_is_never_truncated(self, warehouse: IcebergWarehouse) -> None:
        warehouse.create_table(
            "f",
            pa.schema([("a", pa.string())]),
            properties={"write.metadata.metrics.default": "full"},
        )
        warehouse.append("f", {"a": ["x" * 40]})
        opened = open_iceberg_location(warehouse.location("f"))
        (commit,) = opened.commits_since(None)
        (metrics,) = commit.added_files[0].columns.values()

        assert metrics.lower == "x" * 40
        assert not metrics.bounds_may_be_truncated


class TestHistory:
    def test_expired_history_starts_with_a_baseline(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1]))
        second = warehouse.append(table, rows([2]))
        third = warehouse.append(table, rows([3]))
        fourth = warehouse.append(table, rows([4]))
        warehouse.expire_snapshots(table, [first, second])
        opened = open_iceberg_location(warehouse.location(table))

        baseline, last = opened.commits_since(None)

        assert opened.snapshot_ids() == {third, fourth}
        assert baseline.is_baseline
        # pyiceberg's expiry forgets the parent of the oldest remaining snapshot
        assert (baseline.snapshot_id, baseline.parent_id) == (third, None)
        assert len(baseline.added_files) == 3  # every live file of the third snapshot
        assert sum(f.record_count for f in baseline.added_files) == 3
        assert not baseline.removed_files
        assert (last.snapshot_id, last.operation) == (fourth, "append")
        assert [c.snapshot_id for c in opened.commits_since(third)] == [fourth]
        with pytest.raises(LineageError, match=str(first)):
            opened.commits_since(first)

    def test_expired_parent_id_kept_as_java_does(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1]))
        second = warehouse.append(table, rows([2]))
        third = warehouse.append(table, rows([3]))
        # Java's expiry drops snapshots but leaves the survivors' parent ids alone.
        newest = local(warehouse.table(table).metadata_location)
        metadata = json.loads(newest.read_text())
        metadata["snapshots"] = [
            s for s in metadata["snapshots"] if s["snapshot-id"] not in (first, second)
        ]
        metadata["snapshot-log"] = [
            e for e in metadata["snapshot-log"] if e["snapshot-id"] not in (first, second)
        ]
        (newest.parent / "99999-expired.metadata.json").write_text(json.dumps(metadata))
        opened = open_iceberg_location(warehouse.location(table))

        (baseline,) = opened.commits_since(None)

        assert (baseline.operation, baseline.snapshot_id, baseline.parent_id) == (
            "baseline",
            third,
            second,
        )
        assert len(baseline.added_files) == 3
        # The expired parent of the oldest snapshot is still a valid starting point.
        (commit,) = opened.commits_since(second)
        assert (commit.snapshot_id, commit.operation) == (third, "append")
        assert len(commit.added_files) == 1
        with pytest.raises(LineageError):
            opened.commits_since(first)

    def test_first_snapshot_is_a_normal_commit(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1]))
        (commit,) = open_iceberg_location(warehouse.location(table)).commits_since(None)
        assert (commit.snapshot_id, commit.operation, commit.parent_id) == (first, "append", None)

    def test_rollback_makes_the_abandoned_snapshot_no_ancestor(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1]))
        abandoned = warehouse.append(table, rows([2]))
        warehouse.rollback(table, first)
        third = warehouse.append(table, rows([3]))
        opened = open_iceberg_location(warehouse.location(table))

        with pytest.raises(LineageError, match="not an ancestor"):
            opened.commits_since(abandoned)
        assert [c.snapshot_id for c in opened.commits_since(first)] == [third]
        with pytest.raises(LineageError):
            opened.commits_since(123)

    def test_live_files_of_a_snapshot(self, warehouse: IcebergWarehouse, table: str) -> None:
        first = warehouse.append(table, rows([1]))
        warehouse.append(table, rows([2]))
        warehouse.delete(table, "id = 1")
        opened = open_iceberg_location(warehouse.location(table))
        current = opened.current_snapshot_id() or 0
        expected = {t.file.file_path for t in warehouse.table(table).scan().plan_files()}

        assert paths(opened.live_files(current)) == expected
        assert len(opened.live_files(first)) == 1
        with pytest.raises(SnapshotNotFoundError):
            opened.live_files(1)


class TestOpening:
    def test_refresh_sees_new_commits(self, warehouse: IcebergWarehouse, table: str) -> None:
        by_location = open_iceberg_location(warehouse.location(table))
        by_catalog = open_table(**_catalog(warehouse, table))
        assert by_location.current_snapshot_id() is None
        snapshot = warehouse.append(table, rows([1]))
        assert by_location.current_snapshot_id() is None  # until refreshed

        by_location.refresh()
        by_catalog.refresh()

        assert by_location.current_snapshot_id() == snapshot
        assert by_catalog.current_snapshot_id() == snapshot
        assert by_catalog.table_id == by_location.table_id
        assert by_catalog.commits_since(None) == by_location.commits_since(None)

    def test_file_uri_and_format_detection(self, warehouse: IcebergWarehouse, table: str) -> None:
        path = warehouse.location(table)
        assert detect_format(path) == "iceberg"
        assert is_iceberg_location(Path(path).as_uri())
        assert isinstance(open_table(Path(path).as_uri()), IcebergTable)

    def test_version_hint_names_the_current_metadata_file(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        first = warehouse.append(table, rows([1]))
        first_metadata = Path(urlparse(warehouse.table(table).metadata_location).path).name
        warehouse.append(table, rows([2]))
        (metadata_dir(warehouse, table) / "version-hint.text").write_text(first_metadata)

        assert open_iceberg_location(warehouse.location(table)).current_snapshot_id() == first

    def test_numeric_version_hint_with_hadoop_names(
        self, warehouse: IcebergWarehouse, table: str, tmp_path: Path
    ) -> None:
        first = warehouse.append(table, rows([1]))
        second = warehouse.append(table, rows([2]))
        source = sorted(metadata_dir(warehouse, table).glob("*.metadata.json"))
        hadoop = tmp_path / "hadoop"
        (hadoop / "metadata").mkdir(parents=True)
        for version, path in enumerate(source, start=1):
            shutil.copy(path, hadoop / "metadata" / f"v{version}.metadata.json")
        hint = hadoop / "metadata" / "version-hint.text"

        hint.write_text("1\n")  # stale, as after a crash: later vN files are commits
        assert open_iceberg_location(str(hadoop)).current_snapshot_id() == second
        (hadoop / "metadata" / "v3.metadata.json").rename(hadoop / "metadata" / "v7.metadata.json")
        hint.write_text("2")  # v3 is absent, so the hint names the current version
        assert open_iceberg_location(str(hadoop)).current_snapshot_id() == first
        hint.unlink()  # without a hint the highest version wins
        assert open_iceberg_location(str(hadoop)).current_snapshot_id() == second

    def test_a_version_hint_is_followed_by_name_without_listing(
        self,
        warehouse: IcebergWarehouse,
        table: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``metadata/`` also holds every manifest list and manifest: with a hint, the
        current file is found by asking for names (the listing, spied on, is not used)."""
        snapshots = [warehouse.append(table, rows([i])) for i in range(3)]
        source = sorted(metadata_dir(warehouse, table).glob("*.metadata.json"))
        hadoop = tmp_path / "hadoop" / "metadata"
        hadoop.mkdir(parents=True)
        hint = hadoop / "version-hint.text"
        listings: list[str] = []
        real = metadata_files._metadata_infos

        def spy(location: Any) -> list[Any]:
            listings.append(location.uri)
            return real(location)

        def current(copies: int) -> int | None:
            for version, path in enumerate(source[:copies], start=1):
                shutil.copy(path, hadoop / f"v{version}.metadata.json")
            located = resolve_location(str(hadoop.parent))
            name = Path(metadata_files.current_metadata_file(located)).name
            return int(name.removeprefix("v").split(".")[0])

        monkeypatch.setattr(metadata_files, "_metadata_infos", spy)
        hint.write_text("1")
        assert current(1) == 1 and not listings  # the hint is current
        assert current(2) == 2 and not listings  # one commit past the hint
        assert current(len(source)) == len(source) and not listings  # v1 … v4
        for extra in range(len(source) + 1, 11):  # up to v10: two rounds of 4 past the hint
            shutil.copy(source[-1], hadoop / f"v{extra}.metadata.json")
        assert current(len(source)) == 10 and not listings
        loaded = open_iceberg_location(str(hadoop.parent))
        assert loaded.current_snapshot_id() == snapshots[-1]
        # a hint naming a gone version, or no file name at all: the listing decides
        for stale in ("11", "../../etc/passwd", ".hidden", ""):
            listings.clear()
            hint.write_text(stale)
            assert current(1) == 10 and listings, stale

    def test_a_poll_of_a_hinted_table_asks_for_each_file_once(
        self,
        warehouse: IcebergWarehouse,
        table: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """An unchanged Hadoop table's refresh reads the hint and asks for the file it names
        and whether the next exists: the size and mtime that tell a rewrite come from that
        answer, not from a third request, and the next is opened, not looked up (on S3 a
        file-info request for a missing key adds a LIST). Counted on the real files
        (``tests/file_calls.py``)."""
        warehouse.append(table, rows([1]))
        hadoop = tmp_path / "hadoop" / "metadata"
        hadoop.mkdir(parents=True)
        newest = sorted(metadata_dir(warehouse, table).glob("*.metadata.json"))[-1]
        shutil.copy(newest, hadoop / "v1.metadata.json")
        (hadoop / "version-hint.text").write_text("1")
        calls: list[str] = []
        counted = counting_filesystem(calls)

        def counting_location(path: str) -> Any:
            located = resolve_location(path)
            return replace(located, filesystem=counted)

        monkeypatch.setattr(opening, "resolve_location", counting_location)
        opened = opening.open_iceberg_location(str(hadoop.parent))
        assert opened.current_snapshot_id() is not None
        for _ in range(2):
            calls.clear()
            opened.refresh()
            assert calls == [
                "isfile version-hint.text",  # pyarrow opens a file after asking if it is one
                "open version-hint.text",
                "info v1.metadata.json",
                "isfile v2.metadata.json",  # is there one more? (opened: no LIST on S3)
            ]
        shutil.copy(newest, hadoop / "v2.metadata.json")  # a commit past the hint
        calls.clear()
        opened.refresh()
        assert calls[:5] == [
            "isfile version-hint.text",
            "open version-hint.text",
            "info v1.metadata.json",
            "isfile v2.metadata.json",
            "open v2.metadata.json",
        ]
        assert "info v3.metadata.json" in calls and not [c for c in calls if c.startswith("ls")]


def _catalog(warehouse: IcebergWarehouse, name: str) -> dict[str, Any]:
    catalog, properties, identifier = warehouse.catalog_args(name)
    return {"catalog": catalog, "catalog_properties": properties, "identifier": identifier}


class TestBadInput:
    def test_truncated_newest_metadata_file_is_an_error_naming_it(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        warehouse.append(table, rows([1]))
        location = warehouse.location(table)
        path = local(warehouse.table(table).metadata_location)
        path.write_bytes(path.read_bytes()[:200])

        with pytest.raises(MetadataError) as error:
            open_iceberg_location(location)

        message = str(error.value)
        assert str(path) in message and "not valid JSON (truncated?)" in message
        assert "\n" not in message

    def test_a_truncated_newest_file_is_in_progress_only_while_young(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        """Found by listing, the newest file may be one a writer is still writing in
        place; past ``WRITE_GRACE_S`` a truncated file is damage, reported as such."""
        warehouse.append(table, rows([1]))
        location = warehouse.location(table)
        path = local(warehouse.table(table).metadata_location)
        path.write_bytes(path.read_bytes()[:200])
        with pytest.raises(PartialMetadataError, match=r"written \d+\.\d s ago"):
            open_iceberg_location(location)
        old = time.time() - WRITE_GRACE_S - 5
        os.utime(path, (old, old))
        with pytest.raises(MetadataError, match="truncated") as error:
            open_iceberg_location(location)
        assert not isinstance(error.value, PartialMetadataError)

    def test_metadata_that_is_json_but_not_iceberg(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        location = warehouse.location(table)
        path = local(warehouse.table(table).metadata_location)
        path.write_text('{"format-version": 2}')

        with pytest.raises(MetadataError, match="not valid Iceberg table metadata") as error:
            open_iceberg_location(location)
        assert str(path) in str(error.value)
        with pytest.raises(MetadataError, match="not valid Iceberg table metadata"):
            open_table(**_catalog(warehouse, table))

    def test_missing_manifest_list(self, warehouse: IcebergWarehouse, table: str) -> None:
        warehouse.append(table, rows([1]))
        snapshot = warehouse.table(table).current_snapshot()
        assert snapshot is not None
        local(snapshot.manifest_list).unlink()
        opened = open_iceberg_location(warehouse.location(table))

        with pytest.raises(MetadataError, match=r"manifest list .* does not exist"):
            opened.commits_since(None)

    @pytest.mark.parametrize("damage", ["missing", "truncated", "garbage"])
    def test_damaged_manifest_is_an_error_naming_it(
        self, warehouse: IcebergWarehouse, table: str, damage: str
    ) -> None:
        warehouse.append(table, rows([1, 2, 3]))
        table_ = warehouse.table(table)
        (manifest,) = table_.current_snapshot().manifests(table_.io)  # type: ignore[union-attr]
        path = local(manifest.manifest_path)
        content = path.read_bytes()
        if damage == "missing":
            path.unlink()
        elif damage == "truncated":
            path.write_bytes(content[: len(content) - 40])
        else:
            path.write_bytes(b"not avro at all" + content)
        opened = open_iceberg_location(warehouse.location(table))

        with pytest.raises(MetadataError) as error:
            opened.commits_since(None)

        assert str(path) in str(error.value)
        assert "\n" not in str(error.value)

    def test_truncated_manifest_list_is_detected(
        self, warehouse: IcebergWarehouse, table: str
    ) -> None:
        warehouse.append(table, rows([1]))
        snapshot = warehouse.table(table).current_snapshot()
        assert snapshot is not None
        path = local(snapshot.manifest_list)
        path.write_bytes(path.read_bytes()[:-20])
        opened = open_iceberg_location(warehouse.location(table))

        with pytest.raises(MetadataError, match="truncated"):
            opened.commits_since(None)

    def test_manifests_are_read_once(self, warehouse: IcebergWarehouse, table: str) -> None:
        warehouse.append(table, rows([1]))
        opened = open_iceberg_location(warehouse.location(table))
        first = opened.commits_since(None)
        for manifest_file in metadata_dir(warehouse, table).glob("*.avro"):
            manifest_file.unlink()

        assert opened.commits_since(None) == first

    def test_paths_that_are_not_tables(self, tmp_path: Path) -> None:
        with pytest.raises(TableNotFoundError, match="does not exist"):
            open_table(str(tmp_path / "nope"))
        with pytest.raises(TableNotFoundError, match="is not a table"):
            open_table(str(tmp_path))
        (tmp_path / "metadata").mkdir()
        with pytest.raises(TableNotFoundError, match="not an Iceberg table"):
            open_iceberg_location(str(tmp_path))
        (tmp_path / "file.txt").write_text("x")
        with pytest.raises(TableNotFoundError, match="not a table"):
            open_table(str(tmp_path / "file.txt"))
        assert not is_iceberg_location(str(tmp_path / "nope"))

    def test_other_formats_are_recognised(self, tmp_path: Path) -> None:
        (tmp_path / "delta" / "_delta_log").mkdir(parents=True)
        (tmp_path / "paimon" / "snapshot").mkdir(parents=True)
        (tmp_path / "paimon" / "schema").mkdir()
        (tmp_path / "paimon" / "schema" / "schema-0").write_text("{broken")

        assert detect_format(str(tmp_path / "delta")) == "delta"  # Delta is built (issue 11)
        # Paimon is built now (issue 12): a broken schema file is one line naming it
        with pytest.raises(MetadataError, match=r"schema-0 is not valid JSON"):
            open_table(str(tmp_path / "paimon")).schema()

    def test_unknown_catalog_table(self, warehouse: IcebergWarehouse) -> None:
        with pytest.raises(TableNotFoundError, match=r"db\.missing"):
            open_table(**_catalog(warehouse, "missing"))

    def test_unusable_catalog_is_a_config_error(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="'broken' cannot be used"):
            open_table(
                catalog="broken",
                catalog_properties={"type": "sql", "uri": f"sqlite:///{tmp_path}/no/such/x.db"},
                identifier="db.t",
            )

    def test_open_table_needs_a_location_or_a_catalog(self) -> None:
        with pytest.raises(ValueError, match="location"):
            open_table()
        with pytest.raises(ValueError, match="both"):
            open_table(catalog="c")


def test_rereading_history_gives_equal_commits(warehouse: IcebergWarehouse, table: str) -> None:
    """Commits compare by value, so re-reading the same history gives equal objects."""
    warehouse.append(table, rows([1]))
    once = open_iceberg_location(warehouse.location(table)).commits_since(None)
    again = open_iceberg_location(warehouse.location(table)).commits_since(None)
    assert once == again
    assert isinstance(once[0], Commit)


def test_s3_endpoint_and_region_come_from_the_aws_environment_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyiceberg's S3 FileIO reads neither; everything else lakestats reads follows them."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://general:9000")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3-only:9000")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")

    assert environment_io_properties({}) == {
        "s3.endpoint": "http://s3-only:9000",
        "s3.region": "eu-west-3",
    }
    assert environment_io_properties({"s3.endpoint": "http://mine", "type": "sql"}) == {
        "s3.endpoint": "http://mine",
        "s3.region": "eu-west-3",
        "type": "sql",
    }
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert environment_io_properties({}) == {"s3.endpoint": "http://general:9000"}


@pytest.mark.parametrize(
    ("metadata", "written"),
    [
        ({"schema-id": "3", "schema": json.dumps({"schema-id": 5})}, 3),  # Java: the header
        ({"schema": json.dumps({"type": "struct", "fields": [], "schema-id": 5})}, 5),  # pyiceberg
        ({"schema": "not json"}, None),
        ({}, None),
    ],
)
def test_the_schema_a_manifest_was_written_with(
    tmp_path: Path, metadata: dict[str, str], written: int | None
) -> None:
    """The header as pyiceberg's Avro reader reads it (what ``ManifestReader`` gives)."""
    import fastavro
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    path = tmp_path / "m.avro"
    field = {"name": "x", "type": "long", "field-id": 1}
    record = {"type": "record", "name": "r", "fields": [field]}
    with path.open("wb") as out:
        fastavro.writer(out, record, [{"x": 1}], metadata=metadata)
    schema = Schema(NestedField(1, "x", LongType(), required=True))
    with AvroFile[Any](PyArrowFileIO().new_input(str(path)), schema) as reader:
        assert _written_schema_id(reader.header.meta) == written
