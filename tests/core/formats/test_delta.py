"""The Delta adapter on tables written by delta-rs and on the fixtures: log reading,
column mapping, non-data commits, deletion vector decoding, bad input. Metadata only (no
Spark): ``--no-sketches`` where the CLI runs."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import shutil
import struct
import time
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyroaring import BitMap64

from delta_tables import (
    ID_NAME_PART,
    NO_LOG_RETENTION,
    DeltaWriter,
    fixture_path,
    live_rows,
    needs_fixtures,
)
from lakestats import analyze_table, read_stats
from lakestats.cli import main
from lakestats.config import Config
from lakestats.exceptions import LineageError, MetadataError, SnapshotNotFoundError
from lakestats.formats.delta.dv import (
    DvDescriptor,
    decode_bitmap,
    read_deletion_vector,
    relative_dv_path,
    z85_decode,
)
from lakestats.formats.delta.files import FileStats, partition_value, stat_value
from lakestats.formats.delta.schema import name_field_id, parse_schema
from lakestats.formats.registry import open_table
from lakestats.model import DeletionVector

COLUMNS = ID_NAME_PART


def snapshot_dir(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue(), capsys.readouterr().err


def show(state: Path, table: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run(capsys, "show", table, "--state-dir", str(state), "--json")
    assert code == 0, err
    return dict(json.loads(out))


def analyze(state: Path, table: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "analyze", table, "--state-dir", str(state), "--no-sketches", "-q")
    assert code == 0, err


def rows(ids: list[int], part: str = "a") -> dict[str, list[Any]]:
    return {"id": ids, "name": [f"n{i}" if i % 2 else None for i in ids], "part": [part] * len(ids)}


# --- decoding the log (pure) ---------------------------------------------------------------


class TestValues:
    def test_stats_values_parse_exactly_per_type(self) -> None:
        assert stat_value("decimal(8, 5)", Decimal("1.1")) == Decimal("1.10000")
        assert str(stat_value("decimal(8, 5)", Decimal("1.1"))) == "1.10000"
        assert stat_value("date", "2000-01-01") == dt.date(2000, 1, 1)
        spark = stat_value("timestamptz", "2000-01-01T00:00:00.000-08:00")
        assert spark == dt.datetime(2000, 1, 1, 8, tzinfo=dt.UTC)
        delta_rs = stat_value("timestamptz", "9999-12-31T00:00:00.000Z")
        assert delta_rs == dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
        assert stat_value("timestamp", "2024-03-01T12:01:00.000") == dt.datetime(2024, 3, 1, 12, 1)
        assert stat_value("double", Decimal("0.1")) == 0.1
        assert stat_value("long", "not a number") is None  # unknown bound: scanned instead

    def test_partition_values_are_strings_and_empty_is_null(self) -> None:
        assert partition_value("int", "7") == 7
        assert partition_value("string", "") is None
        assert partition_value("string", None) is None
        assert partition_value("date", "2021-01-10") == dt.date(2021, 1, 10)
        assert partition_value("timestamp", "2021-01-10 12:00:00") == dt.datetime(2021, 1, 10, 12)
        assert partition_value("decimal(6, 3)", "123.321") == Decimal("123.321")
        assert partition_value("boolean", "true") is True

    def test_inexact_bounds_are_flagged_for_a_scan(self) -> None:
        schema = parse_schema(
            json.dumps(
                {
                    "type": "struct",
                    "fields": [
                        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
                        {"name": "t", "type": "timestamp", "nullable": True, "metadata": {}},
                        {"name": "n", "type": "long", "nullable": True, "metadata": {}},
                        {"name": "skipped", "type": "long", "nullable": True, "metadata": {}},
                    ],
                }
            ),
            [],
            {},
            where="test",
        )
        from lakestats.formats.delta.files import data_file

        long_text = "x" * 32
        stats = FileStats.parse(
            json.dumps(
                {
                    "numRecords": 3,
                    "minValues": {"s": "a", "t": "2020-01-01T00:00:00.000Z", "n": 1},
                    "maxValues": {"s": long_text, "t": "2020-01-02T00:00:00.000Z", "n": 5},
                    "nullCount": {"s": 0, "t": 1, "n": 0},
                }
            ),
            where="test",
        )
        made = data_file(
            path="file:///t/x.parquet",
            size=10,
            schema=schema,
            stats=stats,
            record_count=3,
            partition_values={},
            deletion_vector=None,
            where="test",
        )
        by_name = {c.column.name: c.column.field_id for c in schema.columns}
        assert made.columns[by_name["s"]].bounds_may_be_truncated  # 32-character prefix
        assert made.columns[by_name["t"]].bounds_may_be_truncated  # milliseconds
        assert not made.columns[by_name["n"]].bounds_may_be_truncated
        assert made.columns[by_name["n"]].lower == 1
        assert by_name["skipped"] not in made.columns  # past dataSkippingNumIndexedCols
        assert by_name["n"] == name_field_id("n")  # no column mapping: the name is the id

    def test_id_mode_column_mapping_keys_columns_by_their_mapping_ids(self) -> None:
        fields = [
            {
                "name": "a b",
                "type": "long",
                "nullable": True,
                "metadata": {
                    "delta.columnMapping.id": 7,
                    "delta.columnMapping.physicalName": "col-7",
                },
            },
            {
                "name": "s",
                "type": {
                    "type": "struct",
                    "fields": [
                        {
                            "name": "x",
                            "type": "timestamp_ntz",
                            "nullable": True,
                            "metadata": {
                                "delta.columnMapping.id": 9,
                                "delta.columnMapping.physicalName": "col-9",
                            },
                        }
                    ],
                },
                "nullable": True,
                "metadata": {
                    "delta.columnMapping.id": 8,
                    "delta.columnMapping.physicalName": "col-8",
                },
            },
        ]
        schema = parse_schema(
            json.dumps({"type": "struct", "fields": fields}),
            [],
            {"delta.columnMapping.mode": "id"},
            where="test",
        )
        assert [(c.column.field_id, c.column.name, c.column.type) for c in schema.columns] == [
            (7, "a b", "long"),
            (9, "s.x", "timestamp"),
        ]
        assert [c.physical_path for c in schema.columns] == [("col-7",), ("col-8", "col-9")]
        renamed = json.loads(json.dumps(fields))
        renamed[0]["name"] = "c"
        again = parse_schema(
            json.dumps({"type": "struct", "fields": renamed}),
            [],
            {"delta.columnMapping.mode": "id"},
            where="test",
        )
        assert again.columns[0].column.field_id == 7
        assert again.schema_id != schema.schema_id
        with pytest.raises(MetadataError, match=r"has no delta\.columnMapping\.id"):
            parse_schema(
                json.dumps({"type": "struct", "fields": [{"name": "z", "type": "long"}]}),
                [],
                {"delta.columnMapping.mode": "name"},
                where="test",
            )


class TestDeletionVectors:
    def test_z85_decodes_the_spec_example(self) -> None:
        assert z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
        assert relative_dv_path("ab" + "vBn[lx{q8@P<9BNH/isA") == (
            "ab/deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
        )

    @needs_fixtures
    @pytest.mark.parametrize(
        "name",
        [
            "delta-rs/table-with-dv-small",
            "delta-rs/table_with_deletion_logs",
            "delta-golden/dv-partitioned-with-checkpoint",
        ],
    )
    def test_relative_vectors_decode_as_deltalake_does(self, name: str) -> None:
        from deltalake import DeltaTable

        path = fixture_path(name)
        table = open_table(path)
        current = table.current_snapshot_id()
        assert current is not None
        ours = {
            f.path[len("file://") :]: sorted(BitMap64.deserialize(d.bitmap))
            for f in table.live_files(current)
            for d in f.deletes
            if isinstance(d, DeletionVector)
        }
        reader = DeltaTable(path).deletion_vectors()
        theirs = {
            row["filepath"][len("file://") :]: [
                i for i, keep in enumerate(row["selection_vector"]) if not keep
            ]
            for row in pa.RecordBatchReader.from_stream(reader).read_all().to_pylist()
        }
        assert ours == theirs
        assert ours  # every one of these tables has vectors

    def test_inline_and_absolute_vectors(self, tmp_path: Path) -> None:
        rows_deleted = BitMap64([0, 7, 2**33 + 5])
        blob = struct.pack("<I", 1681511377) + rows_deleted.serialize()
        while len(blob) % 4:
            blob += b"\0"  # Z85 works on 4-byte groups; trailing zeros are ignored
        inline = DvDescriptor("i", _z85_encode(blob), None, len(blob), 3)
        decoded = read_deletion_vector(inline, _no_file, where="test")
        assert sorted(BitMap64.deserialize(decoded.bitmap)) == list(rows_deleted)

        bitmap = struct.pack("<I", 1681511377) + rows_deleted.serialize()
        framed = (
            b"\x01"
            + struct.pack(">I", len(bitmap))
            + bitmap
            + struct.pack(">I", zlib.crc32(bitmap))
        )
        file = tmp_path / "vector.bin"
        file.write_bytes(framed)
        absolute = DvDescriptor("p", file.as_uri(), 1, len(bitmap), 3)
        seen: list[tuple[str, bool]] = []

        def read(path: str, is_absolute: bool) -> bytes:
            seen.append((path, is_absolute))
            return Path(path[len("file://") :]).read_bytes()

        assert read_deletion_vector(absolute, read, where="test").cardinality == 3
        assert seen == [(file.as_uri(), True)]
        broken = framed[:-1] + bytes([framed[-1] ^ 1])
        with pytest.raises(MetadataError, match="CRC-32"):
            read_deletion_vector(absolute, lambda p, a: broken, where="test")
        with pytest.raises(MetadataError, match="cardinality 4"):
            read_deletion_vector(
                DvDescriptor("p", file.as_uri(), 1, len(bitmap), 4), read, where="test"
            )
        with pytest.raises(MetadataError, match="bad magic"):
            decode_bitmap(b"\0\0\0\0", where="test")


def _no_file(path: str, absolute: bool) -> bytes:
    raise AssertionError("an inline vector reads no file")


def _z85_encode(data: bytes) -> str:
    alphabet = (
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
    )
    out = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start : start + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(alphabet[digit])
        out.append("".join(reversed(chunk)))
    return "".join(out)


# --- tables written by delta-rs --------------------------------------------------------------


class TestWrittenTables:
    def test_partitioned_commits_and_their_files(self, tmp_path: Path) -> None:
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS, partition_by=["part"])
        first = writer.append(rows([1, 2, 3], "a"))
        second = writer.append({**rows([4]), "part": [None]})
        updated = writer.update({"name": "'z'"}, "id = 2")
        table = open_table(writer.path)

        commits = table.commits_since(None)

        assert [(c.snapshot_id, c.operation) for c in commits] == [
            (first, "append"),
            (second, "append"),
            (updated, "overwrite"),
        ]
        part_id = next(c.field_id for c in table.schema().columns if c.name == "part")
        (a_file,) = commits[0].added_files
        assert a_file.partition.as_dict() == {"part": "a"}
        assert a_file.constants == {part_id: "a"}
        (null_file,) = commits[1].added_files
        assert null_file.partition.as_dict() == {"part": None}  # "" or null in the log
        assert null_file.columns[part_id].null_count == 1
        assert {f.path for f in commits[2].removed_files} == {a_file.path}
        assert all(f.path.startswith("file:///") for f in table.live_files(updated))
        assert sum(f.record_count for f in table.live_files(updated)) == 4

    def test_non_data_commits_are_no_snapshots_and_optimize_is_a_replace(
        self, tmp_path: Path
    ) -> None:
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS)
        first = writer.append(rows([1, 2]))
        second = writer.append(rows([3]))
        writer.table().alter.set_table_properties({"delta.appendOnly": "false"})
        writer.table().optimize.compact()
        compacted = writer.version()
        # delta-rs writes VACUUM START / END commits. Only an old orphan goes: the files
        # OPTIMIZE replaced stay, so the versions before it stay readable (a VACUUM that
        # deletes them ends those versions: tests/core/formats/test_delta_vacuum.py)
        orphan = Path(writer.path) / "orphan.parquet"
        orphan.write_bytes(b"not data")
        os.utime(orphan, (time.time() - 10 * 86400,) * 2)
        assert writer.table().vacuum(
            retention_hours=1, enforce_retention_duration=False, dry_run=False, full=True
        ) == ["orphan.parquet"]
        assert writer.version() > compacted
        table = open_table(writer.path)

        commits = table.commits_since(None)

        assert [(c.snapshot_id, c.operation) for c in commits] == [
            (first, "append"),
            (second, "append"),
            (compacted, "replace"),
        ]
        assert table.current_snapshot_id() == compacted
        assert table.commits_since(compacted) == []
        assert table.snapshot_ids() == {first, second, compacted}

    def test_a_version_that_changed_no_file_shows_the_data_version_before_it(
        self, tmp_path: Path
    ) -> None:
        """docs/delta.md: its stats are those of the newest data version before it (it said
        the version does not exist)."""
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS)
        first = writer.append(rows([1, 2]))
        writer.table().alter.set_table_properties({"delta.appendOnly": "false"})
        properties = writer.version()
        second = writer.append(rows([3]))
        config = Config(state_dir=str(tmp_path / "state"))
        analyze_table(writer.path, config=config, sketcher=None)

        table = open_table(writer.path)
        assert table.data_version_of(properties) == first
        assert table.data_version_of(second) is None  # a data version is its own
        assert table.data_version_of(second + 5) is None  # no such version
        shown = read_stats(writer.path, properties, config=config)
        assert shown == read_stats(writer.path, first, config=config)
        assert shown["record_count"] == 2
        with pytest.raises(SnapshotNotFoundError, match="does not exist"):
            read_stats(writer.path, second + 5, config=config)

    def test_log_compaction_files_are_ignored(self, tmp_path: Path) -> None:
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS)
        for start in (1, 3, 5):
            writer.append(rows([start, start + 1]))
        before = [
            (c.snapshot_id, len(c.added_files)) for c in open_table(writer.path).commits_since(None)
        ]
        writer.table().compact_logs(1, 3)
        assert any(p.name.endswith(".compacted.json") for p in writer.log.iterdir())

        after = [
            (c.snapshot_id, len(c.added_files)) for c in open_table(writer.path).commits_since(None)
        ]

        assert after == before == [(1, 1), (2, 1), (3, 1)]

    def test_column_mapping_renames_keep_ids_and_drops_forget_them(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS, column_mapping=True)
        writer.append(rows([1, 2, 3]))
        state = tmp_path / "state"
        analyze(state, writer.path, capsys)
        before = show(state, writer.path, capsys)["columns"]
        writer.rename_column("name", "label")
        writer.drop_column("part")
        writer.append({"id": [4], "label": ["x"]})
        analyze(state, writer.path, capsys)

        after = show(state, writer.path, capsys)["columns"]

        assert set(after) == {"id", "label"}
        assert after["label"]["field_id"] == before["name"]["field_id"]
        assert after["label"]["null_count"] == before["name"]["null_count"] == 1
        assert after["label"]["max"] == "x"
        assert after["id"]["max"] == 4

    def test_log_cleanup_starts_over_from_the_checkpoint_and_expires_old_versions(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS, configuration=NO_LOG_RETENTION)
        state = tmp_path / "state"
        first = writer.append(rows([1, 2]))
        analyze(state, writer.path, capsys)
        writer.append(rows([3]))
        last = writer.append(rows([4, 5]))
        writer.cleanup()  # checkpoint at `last`; every commit before it goes
        table = open_table(writer.path)
        with pytest.raises(LineageError, match=f"version {first} is no longer"):
            table.commits_since(first)

        analyze(state, writer.path, capsys)

        doc = show(state, writer.path, capsys)
        assert doc["snapshot_id"] == last
        assert doc["record_count"] == 5 == live_rows(writer.path).num_rows
        code, _, err = run(
            capsys,
            "show",
            writer.path,
            "--state-dir",
            str(state),
            "--json",
            "--snapshot",
            str(first),
        )
        assert code != 0 and "expired" in err


# --- bad input --------------------------------------------------------------------------------


def assert_one_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("lakestats: error: ")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


class TestBadInput:
    @pytest.fixture
    def analyzed(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> tuple[DeltaWriter, Path]:
        writer = DeltaWriter(tmp_path / "t")
        writer.create(COLUMNS)
        writer.append(rows([1, 2]))
        state = tmp_path / "state"
        analyze(state, writer.path, capsys)
        return writer, state

    def _assert_fails(
        self, writer: DeltaWriter, state: Path, capsys: pytest.CaptureFixture[str], *needles: str
    ) -> None:
        before = snapshot_dir(state)
        code, _, err = run(
            capsys, "analyze", writer.path, "--state-dir", str(state), "--no-sketches"
        )
        assert code != 0
        assert_one_line(err, *needles)
        assert snapshot_dir(state) == before

    def test_corrupt_commit_json(
        self, analyzed: tuple[DeltaWriter, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        writer, state = analyzed
        version = writer.append(rows([3]))
        commit = writer.log / f"{version:020d}.json"
        commit.write_text(commit.read_text() + '{"add": {broken\n')
        self._assert_fails(writer, state, capsys, commit.name, "not valid JSON")

    def test_unknown_reader_feature(
        self, analyzed: tuple[DeltaWriter, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        writer, state = analyzed
        version = writer.append(rows([3]))
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["fooBar"],
            "writerFeatures": ["fooBar"],
        }
        (writer.log / f"{version + 1:020d}.json").write_text(
            json.dumps({"protocol": protocol}) + "\n"
        )
        self._assert_fails(writer, state, capsys, "fooBar")

    @needs_fixtures
    def test_missing_checkpoint_part(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        copy = tmp_path / "t"
        shutil.copytree(fixture_path("delta-golden/multi-part-checkpoint"), copy)
        writer, state = DeltaWriter(copy), tmp_path / "state"
        analyze(state, writer.path, capsys)
        part = "00000000000000000001.checkpoint.0000000002.0000000002.parquet"
        (writer.log / part).unlink()
        self._assert_fails(writer, state, capsys, "checkpoint 1", part, "missing")


def test_a_file_action_without_a_path_is_a_corrupt_commit() -> None:
    from lakestats.formats.delta.replay import CommitLog

    for kind in ("add", "remove"):
        with pytest.raises(MetadataError, match=f"00000000000000000007.json: {kind} action"):
            CommitLog.of(7, [{kind: {"size": 3, "dataChange": True}}], 0)
