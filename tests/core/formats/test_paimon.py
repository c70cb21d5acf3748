"""The Paimon adapter over the tables Java Paimon wrote and tables pypaimon writes here.

Every number is compared with an independent oracle: pypaimon's reader (rows engines
see), pyarrow over the data files, or the README operations where pypaimon cannot read.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import struct
import zlib
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pypaimon.schema.data_types import AtomicType, DataField
from pypaimon.table.row.generic_row import GenericRow, GenericRowSerializer
from pyroaring import BitMap64

from lakestats.cli import main
from lakestats.exceptions import (
    LineageError,
    MetadataError,
    TableNotFoundError,
    UnsupportedTableError,
)
from lakestats.formats.paimon import PaimonTable, open_paimon_location
from lakestats.formats.paimon.binary_row import decode_row
from lakestats.formats.paimon.changes import delta_changes
from lakestats.formats.paimon.deletion_vectors import BITMAP_MAGIC, decode_vector
from lakestats.formats.paimon.entries import ADD, DELETE, ManifestEntry
from lakestats.formats.paimon.evolution import changed_groups, row_count, row_group
from lakestats.formats.paimon.merged import merged_record_count
from lakestats.formats.paimon.types import parse_type
from lakestats.formats.registry import detect_format, open_table
from lakestats.model import DeletionVector
from paimon_fixtures import (
    ALL_TABLES,
    READABLE_BY_PYPAIMON,
    copy_fixture,
    fixture,
    needs_paimon_fixtures,
    read_rows,
)
from paimon_tables import DATA_EVOLUTION, FULL_STATS, PaimonWarehouse

pytestmark = needs_paimon_fixtures


def opened(name: str) -> PaimonTable:
    table = open_table(str(fixture(name)))
    assert isinstance(table, PaimonTable)
    return table


def live_rows(table: PaimonTable) -> int:
    """Rows of the visible files minus their deletion vectors (what readers return)."""
    current = table.current_snapshot_id()
    assert current is not None
    files = table.live_files(current)
    deleted = sum(d.cardinality for f in files for d in f.deletes if isinstance(d, DeletionVector))
    return sum(f.record_count for f in files) - deleted


class TestFixtures:
    @pytest.mark.parametrize("name", ALL_TABLES)
    def test_every_fixture_is_detected_and_reads_as_paimon(self, name: str) -> None:
        assert detect_format(str(fixture(name))) == "paimon"
        table = opened(name)
        commits = table.commits_since(None)
        assert [c.snapshot_id for c in commits] == sorted(table.snapshot_ids())
        assert commits[0].parent_id is None and not commits[0].is_baseline

    @pytest.mark.parametrize("name", READABLE_BY_PYPAIMON)
    def test_append_and_dv_tables_have_the_rows_pypaimon_reads(self, name: str) -> None:
        table = opened(name)
        rows = read_rows(name)
        if name == "pk_table_with_mor":
            # merge-on-read without DVs: the files hold every version of a key (13 rows);
            # readers merge them to 8. record counts here are file rows, by design.
            assert (live_rows(table), rows.num_rows) == (13, 8)
        else:
            assert live_rows(table) == rows.num_rows

    def test_dv_table_counts_8_rows_as_readers_do_level_0_invisible(self) -> None:
        # README operations give 11 logical rows, but with deletion vectors readers skip
        # level-0 files: 10 rows in compacted files minus 2 deleted positions (paimon-cpp's
        # own test asserts 8).
        table = opened("pk_table_scan_and_read_dv")
        files = table.live_files(6)
        assert sum(f.record_count for f in files) == 10
        vectors = {
            Path(f.path).name.split("-")[1]: sorted(BitMap64.deserialize(d.bitmap))
            for f in files
            for d in f.deletes
            if isinstance(d, DeletionVector)
        }
        assert vectors == {"f19db350": [0], "d18e5571": [4]}
        assert live_rows(table) == 8 == read_rows("pk_table_scan_and_read_dv").num_rows

    def test_append_10_with_orc_manifests_has_the_rows_of_its_data_files(self) -> None:
        # pypaimon cannot read ORC manifests; the data files themselves are the oracle
        table = opened("append_10")
        files = table.live_files(1)
        assert sum(f.record_count for f in files) == 5  # README: Alice, Bob, Emily, Tony, Lucy
        scanned = pa.concat_tables([pq.ParquetFile(f.path).read() for f in files])
        assert scanned.num_rows == 5
        assert sorted(scanned.column("f0").to_pylist()) == ["Alice", "Bob", "Emily", "Lucy", "Tony"]
        for data_file in files:
            data = pq.ParquetFile(data_file.path).read()
            name = data.column("f0").to_pylist()
            assert data_file.columns[0].lower == min(name)
            assert data_file.columns[0].upper == max(name)
            assert data_file.partition.as_dict() == {"f1": data.column("f1")[0].as_py()}

    @pytest.mark.parametrize(
        "name", ["append_table_with_alter_table", "append_with_multiple_ts_precision_and_timezone"]
    )
    def test_per_column_stats_match_pypaimon_rows(self, name: str) -> None:
        table = opened(name)
        rows = read_rows(name)
        files = table.live_files(table.current_snapshot_id() or 0)
        schema = table.schema()
        for column in schema.columns:
            values = rows.column(column.name)
            nulls = sum(
                (f.columns[column.field_id].null_count or 0)
                if column.field_id in f.columns
                else f.record_count  # files written before the column existed
                for f in files
            )
            assert nulls == values.null_count, column.name
            lowers = [
                f.columns[column.field_id].lower
                for f in files
                if column.field_id in f.columns and f.columns[column.field_id].lower is not None
            ]
            if not lowers:
                # TIMESTAMP(9): Java Paimon writes no min/max; unknown, not "all null"
                assert column.type.endswith("_ns") and values.null_count < len(values)
                continue
            low, high = pc.min_max(values).values()
            assert min(lowers) == _py(low.as_py(), column.type), column.name
            uppers = [
                f.columns[column.field_id].upper for f in files if column.field_id in f.columns
            ]
            assert max(u for u in uppers if u is not None) == _py(high.as_py(), column.type)

    def test_schema_evolution_names_each_commit_s_schema(self) -> None:
        table = opened("append_table_with_alter_table")
        commits = table.commits_since(None)
        assert [c.schema_id for c in commits] == [0, 1]
        old, new = table.schema(0), table.schema(1)
        assert [c.name for c in old.columns] != [c.name for c in new.columns]
        for commit in commits:
            schema = table.schema(commit.schema_id)
            for data_file in commit.added_files:
                assert data_file.field_ids == {c.field_id for c in schema.columns}

    def test_dv_compaction_upgrades_and_dv_changes_follow_the_model(self) -> None:
        table = opened("pk_table_scan_and_read_dv")
        commits = {c.snapshot_id: c for c in table.commits_since(None)}
        # level-0 appends are invisible in DV mode; COMPACT (level 0 -> 5) makes them visible
        assert [len(commits[i].added_files) for i in (1, 3, 5, 6)] == [0, 0, 0, 0]
        assert commits[2].operation == "replace"
        assert sum(f.record_count for f in commits[2].added_files) == 9
        assert not commits[2].removed_files
        # snapshot 4: a vector now deletes a row of two files already there: each is listed
        # removed as it was and added again with its complete deletes (model convention)
        removed = {Path(f.path).name: f for f in commits[4].removed_files}
        re_added = {Path(f.path).name: f for f in commits[4].added_files if f.deletes}
        assert set(removed) == set(re_added) and len(removed) == 2
        assert all(not f.deletes for f in removed.values())
        assert all(d.cardinality == 1 for f in re_added.values() for d in f.deletes)

    def test_an_older_manifest_without_value_stats_cols_reads_as_all_columns(
        self, tmp_path: Path
    ) -> None:
        # Paimon 0.9 wrote no _VALUE_STATS_COLS/_EXTERNAL_PATH/_FIRST_ROW_ID (pypaimon
        # then fails with KeyError); stats cover every column of the file's schema.
        copy = copy_fixture("append_table_with_alter_table", tmp_path)
        for manifest in (copy / "manifest").glob("manifest-*"):
            if manifest.name.startswith(("manifest-list", "index-")):
                continue
            with manifest.open("rb") as stream:
                reader = fastavro.reader(stream)
                schema = _without_fields(reader.writer_schema, _NEW_FIELDS)
                records = [_strip(r) for r in reader]
            out = io.BytesIO()
            fastavro.writer(out, schema, records)
            manifest.write_bytes(out.getvalue())
        before = opened("append_table_with_alter_table").live_files(2)
        after = open_paimon_location(str(copy)).live_files(2)
        assert [f.columns for f in after] == [f.columns for f in before]
        assert sum(f.record_count for f in after) == 10


class TestDecoding:
    TYPES = (
        ("INT", 7),
        ("BIGINT", -(2**40)),
        ("DOUBLE", 2.5),
        ("FLOAT", 1.5),
        ("SMALLINT", -3),
        ("TINYINT", 5),
        ("STRING", "short"),
        ("STRING", "a string longer than seven bytes"),
        ("BOOLEAN", True),
        ("DATE", dt.date(2024, 3, 2)),
        ("DECIMAL(10, 2)", Decimal("12.25")),
        ("DECIMAL(38, 4)", Decimal("-123456789012345678901.2345")),
        ("TIMESTAMP(3)", dt.datetime(2024, 3, 1, 12, 0, 0, 123000)),
        ("TIMESTAMP(6)", dt.datetime(2024, 3, 1, 12, 0, 0, 123456)),
        ("BYTES", b"\x00\x01"),
        ("TIME", dt.time(1, 2, 3)),
    )

    @pytest.mark.parametrize("null_every", [0, 2, 3])
    def test_binary_rows_pypaimon_serializes_decode_to_the_same_values(
        self, null_every: int
    ) -> None:
        fields = [DataField(i, f"c{i}", AtomicType(t)) for i, (t, _) in enumerate(self.TYPES)]
        values = [
            None if null_every and i % null_every == 0 else v for i, (_, v) in enumerate(self.TYPES)
        ]
        data = GenericRowSerializer.to_bytes(GenericRow(values, fields))
        assert decode_row(data, [parse_type(t) for t, _ in self.TYPES]) == tuple(values)

    def test_type_strings_map_to_model_types(self) -> None:
        expected = {
            "STRING NOT NULL": "string",
            "INT": "int",
            "BIGINT": "long",
            "DECIMAL(10, 2)": "decimal(10, 2)",
            "TIMESTAMP(3)": "timestamp",
            "TIMESTAMP(9)": "timestamp_ns",
            "TIMESTAMP(6) WITH LOCAL TIME ZONE": "timestamptz",
            "VARCHAR(20)": "string",
            "BYTES": "binary",
            "DATE": "date",
        }
        assert {k: parse_type(k).iceberg_type for k in expected} == expected
        assert parse_type({"type": "ARRAY", "element": "INT"}).iceberg_type is None

    def test_a_deletion_vector_decodes_and_a_bad_checksum_is_one_line(self) -> None:
        from pyroaring import BitMap

        body = struct.pack(">I", BITMAP_MAGIC) + BitMap([1, 5, 9]).serialize()
        blob = struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body))
        vector = decode_vector(blob, "index/x")
        assert (sorted(BitMap64.deserialize(vector.bitmap)), vector.cardinality) == ([1, 5, 9], 3)
        broken = blob[:-1] + bytes([blob[-1] ^ 1])
        with pytest.raises(MetadataError, match=r"^index/x: deletion vector checksum mismatch$"):
            decode_vector(broken, "index/x")


def _entry(kind: int, name: str, level: int) -> ManifestEntry:
    return ManifestEntry(
        kind=kind,
        partition=b"",
        bucket=0,
        file_name=name,
        file_size=1,
        row_count=3,
        level=level,
        schema_id=0,
    )


class TestChanges:
    def test_a_level_upgrade_is_no_new_data_without_deletion_vectors(self) -> None:
        moved = [_entry(DELETE, "a", 0), _entry(ADD, "a", 5), _entry(ADD, "b", 5)]
        changes = delta_changes(moved, deletion_vectors=False)
        assert [e.file_name for e in changes.added] == ["b"]
        assert not changes.removed

    def test_with_deletion_vectors_an_upgrade_from_level_0_makes_a_file_visible(self) -> None:
        changes = delta_changes(
            [_entry(DELETE, "a", 0), _entry(ADD, "a", 5), _entry(ADD, "c", 0)],
            deletion_vectors=True,
        )
        assert [e.file_name for e in changes.added] == ["a"]
        rewritten = delta_changes(
            [_entry(DELETE, "a", 5), _entry(ADD, "b", 5)], deletion_vectors=True
        )
        assert (
            [e.file_name for e in rewritten.added],
            [e.file_name for e in rewritten.removed],
        ) == (
            ["b"],
            ["a"],
        )

    def test_a_row_group_takes_each_column_from_its_newest_file(self) -> None:
        def written(name: str, sequence: int, columns: tuple[str, ...] | None) -> ManifestEntry:
            entry = replace(_entry(ADD, name, 0), max_sequence_number=sequence)
            return replace(entry, first_row_id=10, write_cols=columns)

        ids = {"a": 1, "b": 2, "c": 3}

        def field_ids_of(entry: ManifestEntry) -> list[int]:
            return [ids[c] for c in (entry.write_cols or tuple(ids))]

        base, first, second = (
            written("f0", 1, None),
            written("f1", 2, ("b", "c")),
            written("f2", 3, ("c",)),
        )
        group = row_group([second, base, first], field_ids_of)
        assert group.anchor is base  # the oldest
        assert {i: e.file_name for i, e in group.owners.items()} == {1: "f0", 2: "f1", 3: "f2"}
        assert {n: ids for n, (_, ids) in group.others.items()} == {"f1": (2,), "f2": (3,)}
        assert row_count([base, first, second, replace(base, first_row_id=None)]) == 6
        assert changed_groups([first], lambda e: True, 0) == {(b"", 0, 10)}
        assert changed_groups([base], lambda e: False, 10) == set()  # new rows, whole
        # whole columns of rows that existed before (pypaimon's upsert), or unknown
        assert changed_groups([base], lambda e: False, 11) == {(b"", 0, 10)}
        assert changed_groups([base], lambda e: False, None) == {(b"", 0, 10)}
        with pytest.raises(MetadataError, match="different row counts"):
            row_group([base, replace(first, row_count=4)], field_ids_of)
        with pytest.raises(UnsupportedTableError, match=r"x\.blob"):
            row_group([base, replace(first, file_name="x.blob")], field_ids_of)


class TestPypaimonTables:
    def test_partitioned_overwrite_and_incremental_equals_from_scratch(
        self, tmp_path: Path
    ) -> None:
        warehouse = PaimonWarehouse(tmp_path)
        location = warehouse.create(
            "p", [("id", "long"), ("p", "string"), ("v", "double")], partition_keys=["p"]
        )
        first = warehouse.write("p", {"id": [1, 2], "p": ["a", "b"], "v": [1.0, None]})
        warehouse.write("p", {"id": [3], "p": ["a"], "v": [3.5]})
        table = open_paimon_location(str(location))
        early = table.commits_since(None)
        warehouse.write("p", {"id": [9], "p": ["a"], "v": [9.0]}, overwrite=True)
        table.refresh()
        (overwrite,) = table.commits_since(early[-1].snapshot_id)
        assert overwrite.operation == "overwrite"
        assert {f.partition.as_dict()["p"] for f in overwrite.removed_files} == {"a"}
        assert [f.record_count for f in overwrite.added_files] == [1]
        # replaying the commits gives the live files of the current snapshot
        live: dict[str, Any] = {}
        for commit in table.commits_since(None):
            for f in commit.removed_files:
                live.pop(f.path)
            live.update({f.path: f for f in commit.added_files})
        current = table.current_snapshot_id() or 0
        assert set(live) == {f.path for f in table.live_files(current)}
        rows = warehouse.table("p").new_read_builder()
        read = rows.new_read().to_arrow(rows.new_scan().plan().splits())
        assert sum(f.record_count for f in live.values()) == read.num_rows == 2
        assert first == 1

    def test_rollback_reuses_ids_and_the_old_id_is_no_ancestor(self, tmp_path: Path) -> None:
        warehouse = PaimonWarehouse(tmp_path)
        location = warehouse.create("r", [("id", "long")])
        warehouse.write("r", {"id": [1]})
        warehouse.write("r", {"id": [2]})
        warehouse.write("r", {"id": [3]})
        warehouse.rollback("r", 1)
        table = open_paimon_location(str(location))
        with pytest.raises(LineageError, match="snapshot 3 is not an ancestor"):
            table.commits_since(3)

    def test_bad_input_is_one_line(self, tmp_path: Path) -> None:
        warehouse = PaimonWarehouse(tmp_path)
        location = warehouse.create("b", [("id", "long")])
        warehouse.write("b", {"id": [1]})
        snapshot = json.loads((location / "snapshot" / "snapshot-1").read_text())
        manifest = location / "manifest" / snapshot["deltaManifestList"]
        manifest.write_bytes(b"garbage")
        table = open_paimon_location(str(location))
        with pytest.raises(MetadataError) as raised:
            table.commits_since(None)
        assert manifest.name in str(raised.value) and "\n" not in str(raised.value)
        with pytest.raises(TableNotFoundError, match="not a Paimon table"):
            open_paimon_location(str(tmp_path))

    def test_a_column_update_in_place_is_one_file_of_the_rows_readers_assemble(
        self, tmp_path: Path
    ) -> None:
        """pypaimon's in-place update (data evolution) writes a file of the updated
        columns for rows another file holds. lakestats lists the two as one data file:
        the rows once, each column's metrics from the newest file that writes it, the
        update's file named to sketch that column from; only the updated row group is
        listed again."""
        warehouse = PaimonWarehouse(tmp_path / "wh")
        options = {**DATA_EVOLUTION, **FULL_STATS}
        location = warehouse.create("t", [("id", "long"), ("s", "string")], options=options)
        warehouse.write("t", {"id": [1, 2, 3], "s": ["a", "b", None]})
        warehouse.write("t", {"id": [4, 5], "s": ["d", "e"]})
        row_ids = warehouse.row_ids("t", "id")
        update = pa.table(
            {"_ROW_ID": pa.array([row_ids[2], row_ids[3]], pa.int64()), "s": ["z"] * 2}
        )
        updated = warehouse.update_columns("t", update)
        (patch,) = [f for f in location.rglob("*.parquet") if pq.read_schema(f).names == ["s"]]
        assert warehouse.read("t").column("s").to_pylist() == ["a", "z", "z", "d", "e"]

        table = open_paimon_location(str(location))
        (commit,) = table.commits_since(updated - 1)
        assert len(commit.added_files) == len(commit.removed_files) == 1
        (was,), (now,) = commit.removed_files, commit.added_files
        assert was.path == now.path and not was.column_files
        assert now.record_count == 3
        s_id = next(c.field_id for c in table.schema().columns if c.name == "s")
        (column_file,) = now.column_files
        assert column_file.path.endswith(patch.name) and column_file.field_ids == (s_id,)
        # the update's own metrics: z everywhere (the whole row range is written again)
        assert (now.columns[s_id].lower, now.columns[s_id].upper) == ("a", "z")
        assert now.columns[s_id].null_count == 0 and was.columns[s_id].null_count == 1
        live = table.live_files(updated)
        assert sorted(f.record_count for f in live) == [2, 3]
        assert merged_record_count(table, updated).value == 5  # from the entries

        state = ["--state-dir", str(tmp_path / "state"), "--no-sketches", str(location)]
        code, _, err = run_cli("analyze", "--quiet", *state)
        assert (code, err) == (0, "")
        code, out, _ = run_cli("show", "--json", *state[:2], str(location))
        shown = json.loads(out)
        assert (shown["snapshot_id"], shown["record_count"]) == (updated, 5)
        assert shown["paimon"]["merged_record_count"] == 5
        s = shown["columns"]["s"]
        assert (s["null_count"], s["min"], s["max"]) == (0, "a", "z")

    def test_a_partition_column_stays_exact_under_deletion_vectors_without_sketches(
        self, tmp_path: Path
    ) -> None:
        """Readers fill a partition column from the entry's partition row, so every live
        row of a file holds its value: with rows deleted by vectors and no data read, the
        column's null count and bounds are still the live rows' (a partition whose rows
        are all deleted gives no bound), while other columns' are not kept."""
        warehouse = PaimonWarehouse(tmp_path / "wh")
        columns = [("id", "long"), ("p", "string"), ("v", "double")]
        location = warehouse.create("t", columns, partition_keys=["p"], options=DATA_EVOLUTION)
        ids = list(range(30))
        parts = ["a", "b", "z", None, "b", "a"]
        warehouse.write(
            "t", {"id": ids, "p": [parts[i % 6] for i in ids], "v": [i / 3 for i in ids]}
        )
        row_ids = warehouse.row_ids("t", "id")
        warehouse.delete_rows("t", [row_ids[i] for i in ids if parts[i % 6] == "z"])
        warehouse.delete_rows("t", [row_ids[i] for i in (0, 1, 3)])
        live = warehouse.read("t")
        assert "z" not in live.column("p").to_pylist() and live.num_rows == 30 - 5 - 3

        state = ["--state-dir", str(tmp_path / "state")]
        code, _, err = run_cli("analyze", "--quiet", "--no-sketches", *state, str(location))
        assert (code, err) == (0, "")
        code, out, _ = run_cli("show", "--json", *state, str(location))
        shown = json.loads(out)
        assert shown["merged_record_count"] == live.num_rows
        p = shown["columns"]["p"]
        present = live.column("p").drop_null()
        assert (p["null_count"], p["min"], p["max"], p["min_max_exact"]) == (
            live.column("p").null_count,
            pc.min(present).as_py(),
            pc.max(present).as_py(),
            True,
        )
        assert shown["columns"]["v"]["min"] is None  # the manifest's counted deleted rows


_NEW_FIELDS = {"_VALUE_STATS_COLS", "_EXTERNAL_PATH", "_FIRST_ROW_ID", "_WRITE_COLS"}


def _without_fields(schema: Any, names: set[str]) -> Any:
    if isinstance(schema, dict):
        out = {k: _without_fields(v, names) for k, v in schema.items()}
        if isinstance(out.get("fields"), list):
            out["fields"] = [f for f in out["fields"] if f.get("name") not in names]
        return out
    if isinstance(schema, list):
        return [_without_fields(s, names) for s in schema]
    return schema


def _strip(record: Any) -> Any:
    if isinstance(record, dict):
        return {k: _strip(v) for k, v in record.items() if k not in _NEW_FIELDS}
    return record


def _py(value: Any, type_str: str) -> Any:
    """A pyarrow scalar's value as the model holds it (UTC-aware for timestamptz)."""
    if type_str.startswith("timestamptz") and isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC)
    if type_str.endswith("_ns") and hasattr(value, "to_pydatetime"):
        return value.to_pydatetime()
    return value


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(args), out=out)
    return code, out.getvalue(), err.getvalue()
