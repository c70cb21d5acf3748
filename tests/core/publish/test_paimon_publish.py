"""Publishing Paimon's statistics file: written as Java Paimon reads it, committed with an
ANALYZE snapshot by Paimon's protocol, read back by pypaimon, equal to ``show --json``.

Real tables written by pypaimon 2.1; a pure-Python theta sketcher (by column name:
pypaimon writes Parquet without field ids) stands in for Spark.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakestats.analyze import analyze_table
from lakestats.config import Config
from lakestats.formats.paimon import PaimonTable, open_paimon_location
from lakestats.formats.paimon.serialize import java_double, to_paimon_string
from lakestats.formats.paimon.types import PaimonType, parse_schema
from lakestats.freshness import freshness
from lakestats.merge import aggregate_files, merge_partitions, whole_table
from lakestats.model import SketchSettings
from lakestats.publish.base import SnapshotStats
from lakestats.publish.paimon import PaimonPublisher
from lakestats.publish.registry import publisher_for
from lakestats.read import read_stats
from lakestats.tables import open_configured
from paimon_tables import DATA_EVOLUTION, NameSketcher, PaimonWarehouse, one_table_config

COLUMNS = [("id", "long"), ("cat", "string"), ("price", "decimal(10, 2)"), ("day", "date")]
REPO = Path(__file__).resolve().parents[3]


def rows(ids: Sequence[int]) -> dict[str, list[Any]]:
    return {
        "id": list(ids),
        "cat": [f"c{i % 3}" if i % 4 else None for i in ids],
        "price": [Decimal(f"{i}.25") for i in ids],
        "day": [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in ids],
    }


def config_for(location: Path, state: Path, **table: Any) -> Config:
    return one_table_config("t", location, state, **table)


def analyze(config: Config) -> None:
    analyze_table(open_configured(config.table[0], config), config=config, sketcher=NameSketcher())


def snapshot_doc(location: Path, snapshot_id: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (location / "snapshot" / f"snapshot-{snapshot_id}").read_text()
    )
    return doc


def java_reads(location: Path, stats_name: str) -> dict[str, Any]:
    """The checks Java's ``StatsFileHandler.readStats`` makes before a writer commits:
    the file exists, every ``colStats`` name is a column of schema ``schemaId``, ``colId``
    is its id, and min/max parse as that column's type."""
    stats: dict[str, Any] = json.loads((location / "statistics" / stats_name).read_text())
    assert isinstance(stats["snapshotId"], int) and isinstance(stats["schemaId"], int)
    schema = parse_schema(
        json.loads((location / "schema" / f"schema-{stats['schemaId']}").read_text())
    )
    fields = schema.by_name()
    allowed = {"colId", "distinctCount", "min", "max", "nullCount", "avgLen", "maxLen"}
    for name, col in stats["colStats"].items():
        assert name in fields, name
        assert col["colId"] == fields[name].field_id
        assert set(col) <= allowed, col
        for key in ("min", "max"):
            if key in col:
                _parse_java(col[key], fields[name].type)
    return stats


def _parse_java(text: str, paimon_type: PaimonType) -> Any:
    root = paimon_type.root
    if root in ("BIGINT", "INT", "DATE", "TIME"):
        return int(text)  # DATE is the int of days, as Java's IntSerializer writes it
    if root == "DECIMAL":
        return Decimal(text)
    if root in ("DOUBLE", "FLOAT"):
        return float(text)
    return text


@pytest.fixture
def table_location(tmp_path: Path) -> tuple[PaimonWarehouse, Path]:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", COLUMNS, partition_keys=["cat"])
    warehouse.write("t", rows(range(1, 21)))
    warehouse.write("t", rows(range(21, 31)))
    return warehouse, location


class TestPublishing:
    def test_the_statistics_file_is_read_back_by_pypaimon_and_matches_show(
        self, table_location: tuple[PaimonWarehouse, Path], tmp_path: Path
    ) -> None:
        warehouse, location = table_location
        config = config_for(location, tmp_path / "state", publish=True)
        analyze(config)

        latest = warehouse.table("t").snapshot_manager().get_latest_snapshot()
        assert (latest.id, latest.commit_kind) == (3, "ANALYZE")
        assert latest.statistics and latest.statistics.startswith("stat-")
        stats = java_reads(location, latest.statistics)
        shown = read_stats("t", config=config)
        assert shown["snapshot_id"] == stats["snapshotId"] == 2
        assert stats["schemaId"] == 0
        assert stats["mergedRecordCount"] == shown["record_count"] == 30
        assert stats["mergedRecordSize"] == shown["total_size_bytes"]
        for name, column in shown["columns"].items():
            col = stats["colStats"][name]
            assert col["nullCount"] == column["null_count"], name
            if column.get("ndv") is not None:
                assert col["distinctCount"] == round(column["ndv"]), name
        assert stats["colStats"]["id"]["min"] == "1" and stats["colStats"]["id"]["max"] == "30"
        assert stats["colStats"]["id"]["distinctCount"] == 30
        assert stats["colStats"]["price"]["max"] == "30.25"
        # DATE as Java's IntSerializer writes it: days since the epoch
        assert stats["colStats"]["day"]["min"] == str(
            (dt.date(2024, 3, 2) - dt.date(1970, 1, 1)).days
        )
        assert stats["colStats"]["cat"]["avgLen"] == 2 and stats["colStats"]["cat"]["maxLen"] == 2
        # the ANALYZE snapshot has its parent's data: pypaimon reads the same 30 rows
        read = warehouse.table("t").new_read_builder()
        assert read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows == 30
        parent, analyzed = snapshot_doc(location, 2), snapshot_doc(location, 3)
        assert analyzed["totalRecordCount"] == parent["totalRecordCount"]
        assert analyzed["deltaRecordCount"] == 0

        # lakestats' own ANALYZE snapshot is not published again; a writer's commit is
        analyze(config)
        assert warehouse.current("t") == 3
        warehouse.write("t", rows([40]))
        analyze(config)
        newest = warehouse.table("t").snapshot_manager().get_latest_snapshot()
        assert (newest.id, newest.commit_kind) == (5, "ANALYZE")
        assert java_reads(location, newest.statistics)["snapshotId"] == 4
        assert java_reads(location, newest.statistics)["mergedRecordCount"] == 31

    def test_on_a_table_with_row_level_deletes_pypaimon_goes_on_after_our_snapshots(
        self, tmp_path: Path
    ) -> None:
        """A data-evolution table (row ids, deletion vectors): an ANALYZE snapshot keeps its
        parent's index manifest and next row id, so pypaimon reads the rows its vectors
        leave, and deletes and appends after it as after its own commits; the published
        ``mergedRecordCount`` is the rows it reads."""
        warehouse = PaimonWarehouse(tmp_path / "wh")
        location = warehouse.create("t", COLUMNS, options=DATA_EVOLUTION)
        warehouse.write("t", rows(range(1, 21)))
        row_ids = warehouse.row_ids("t", "id")
        warehouse.delete_rows("t", [row_ids[2], row_ids[3]])
        config = config_for(location, tmp_path / "state", publish=True, sketches=False)
        opened = open_configured(config.table[0], config)
        analyze_table(opened, config=config, sketcher=None)
        analyzed = snapshot_doc(location, warehouse.current("t"))
        parent = snapshot_doc(location, analyzed["id"] - 1)
        assert analyzed["commitKind"] == "ANALYZE"
        assert analyzed["indexManifest"] == parent["indexManifest"]
        assert analyzed["nextRowId"] == parent["nextRowId"] == 20
        stats = java_reads(location, analyzed["statistics"])
        assert stats["mergedRecordCount"] == warehouse.read("t").num_rows == 18

        warehouse.write("t", rows(range(21, 26)))  # row ids 20..24, after the ANALYZE
        row_ids = warehouse.row_ids("t", "id")
        assert sorted(row_ids[i] for i in range(21, 26)) == [20, 21, 22, 23, 24]
        warehouse.delete_rows("t", [row_ids[5], row_ids[22]])
        analyze_table(opened, config=config, sketcher=None)
        read = warehouse.read("t")
        assert sorted(read.column("id").to_pylist()) == [
            i for i in range(1, 26) if i not in (2, 3, 5, 22)
        ]
        newest = snapshot_doc(location, warehouse.current("t"))
        stats = java_reads(location, newest["statistics"])
        assert stats["mergedRecordCount"] == read.num_rows == 21
        assert read_stats("t", config=config)["merged_record_count"] == 21

    def test_the_runs_own_snapshot_leaves_the_stats_up_to_date(
        self, table_location: tuple[PaimonWarehouse, Path], tmp_path: Path
    ) -> None:
        """The ANALYZE snapshot a run commits holds its parent's data: right after the run
        the stats are not behind (`show` said BEHIND 1 commit, `status` 1 behind, until a
        second run); a writer's commit after it is."""
        warehouse, location = table_location
        config = config_for(location, tmp_path / "state", publish=True, sketches=False)
        opened = open_configured(config.table[0], config)
        analyze_table(opened, config=config, sketcher=None)
        analyzed = warehouse.current("t")
        assert snapshot_doc(location, analyzed)["commitKind"] == "ANALYZE"

        fresh = freshness(opened)

        assert (fresh.last_snapshot_id, fresh.current_snapshot_id) == (analyzed - 1, analyzed)
        assert fresh.commits_behind == 0 and fresh.up_to_date
        warehouse.write("t", rows(range(31, 33)))
        assert freshness(opened).commits_behind == 1

    def test_without_publish_true_nothing_is_written(
        self, table_location: tuple[PaimonWarehouse, Path], tmp_path: Path
    ) -> None:
        warehouse, location = table_location
        config = config_for(location, tmp_path / "state")
        analyze(config)
        assert warehouse.current("t") == 2
        assert not (location / "statistics").exists()
        opened = open_configured(config.table[0], config)
        assert "publish = true" in publisher_for(opened).describe(2, {})[0]

    def test_expiry_deletes_stats_files_only_when_no_retained_snapshot_names_them(
        self, table_location: tuple[PaimonWarehouse, Path], tmp_path: Path
    ) -> None:
        warehouse, location = table_location
        config = config_for(location, tmp_path / "state", publish=True)
        analyze(config)  # snapshot 3: ANALYZE of 2
        warehouse.write("t", rows([50]))  # 4 (pypaimon does not inherit statistics)
        analyze(config)  # 5: ANALYZE of 4
        first = snapshot_doc(location, 3)["statistics"]
        second = snapshot_doc(location, 5)["statistics"]
        table = open_paimon_location(str(location))
        table.expire_snapshots([1, 2])
        assert (location / "statistics" / first).exists()  # snapshot 3 still names it
        table.expire_snapshots([3, 4])
        assert not (location / "statistics" / first).exists()
        assert (location / "statistics" / second).exists()
        assert sorted(table.snapshot_ids()) == [5]
        assert (location / "snapshot" / "EARLIEST").read_text() == "5"
        read = warehouse.table("t").new_read_builder()
        assert read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows == 31

    def test_a_stale_or_orphaned_stats_file_is_swept_and_older_stats_never_win(
        self, table_location: tuple[PaimonWarehouse, Path], tmp_path: Path
    ) -> None:
        _, location = table_location
        table = open_paimon_location(str(location))
        publisher = PaimonPublisher(table)
        publisher.stage(merged(table, 2), {})
        published = publisher.flush({})
        assert table.current_snapshot_id() == 3
        older = PaimonPublisher(table)
        older.stage(merged(table, 1), {})  # stats of an older snapshot than those named
        after = older.flush(published)
        assert table.current_snapshot_id() == 3  # no commit: the table names newer stats
        assert after["paimon"]["snapshots"]["1"] == {"skipped": "newer snapshots"}
        assert "newer data or stats" in older.describe(1, after)[0]
        assert len(list((location / "statistics").iterdir())) == 1  # its file went again
        orphan = location / "statistics" / "stat-left-by-a-killed-run-0"
        orphan.write_text("{}")
        os.utime(orphan, (time.time() - 7200, time.time() - 7200))
        assert publisher.sweep(3600) == 1
        assert {p.name for p in (location / "statistics").iterdir()} == {
            snapshot_doc(location, 3)["statistics"]
        }
        assert "ANALYZE snapshot 3" in publisher.describe(2, published)[0]

    def test_a_concurrent_writer_loop_loses_no_commit(self, tmp_path: Path) -> None:
        warehouse = PaimonWarehouse(tmp_path / "wh")
        location = warehouse.create("t", COLUMNS)
        warehouse.write("t", rows([0]))
        appends = 12
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path / "wh"), str(appends)],
            cwd=REPO / "tests",
            env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
        )
        table = open_paimon_location(str(location))
        published: dict[str, Any] = {}
        while writer.poll() is None:
            table.refresh()
            current = table.current_snapshot_id()
            assert current is not None
            if table.snapshot(current).commit_kind != "ANALYZE":
                publisher = PaimonPublisher(table)
                publisher.stage(merged(table, current), published)
                published = publisher.flush(published)
        assert writer.wait() == 0
        publisher = PaimonPublisher(table)  # the writer is done: this one must commit
        table.refresh()
        publisher.stage(merged(table, table.current_snapshot_id() or 0), published)
        publisher.flush(published)
        table.refresh()
        ids = sorted(table.snapshot_ids())
        assert ids == list(range(1, len(ids) + 1))
        kinds = [table.snapshot(i).commit_kind for i in ids]
        assert kinds.count("APPEND") == appends + 1
        assert kinds.count("ANALYZE") >= 1 and kinds[-1] == "ANALYZE"
        for i in ids:
            if table.snapshot(i).statistics:
                java_reads(location, table.snapshot(i).statistics or "")
        read = warehouse.table("t").new_read_builder()
        assert read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows == appends + 1
        assert not list((location / "snapshot").glob(".*tmp"))


def merged(table: PaimonTable, snapshot_id: int) -> SnapshotStats:
    """A snapshot's stats merged from its live files' metadata (no sketches)."""
    settings = SketchSettings()
    schema = table.schema(table.snapshot(snapshot_id).schema_id)
    types = {c.field_id: c.type for c in schema.columns}
    partitions = merge_partitions(
        aggregate_files(list(table.live_files(snapshot_id)), types, settings), settings
    )
    return SnapshotStats(
        snapshot_id, schema, partitions, whole_table(partitions, settings), settings
    )


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from paimon_tables import NameSketcher, PaimonWarehouse
    warehouse = PaimonWarehouse(Path(sys.argv[1]))
    for i in range(1, int(sys.argv[2]) + 1):
        warehouse.write("t", {"id": [i], "cat": ["w"], "price": [None], "day": [None]})
    """
)


class TestSerialisation:
    def test_values_are_written_as_java_paimon_writes_them(self) -> None:
        def t(text: str) -> PaimonType:
            return (
                parse_schema({"id": 0, "fields": [{"id": 0, "name": "c", "type": text}]})
                .fields[0]
                .type
            )

        assert to_paimon_string(True, t("BOOLEAN")) == "true"
        assert to_paimon_string(dt.date(1970, 1, 11), t("DATE")) == "10"
        assert to_paimon_string(dt.time(0, 0, 1, 5000), t("TIME")) == "1005"
        assert to_paimon_string(Decimal("1.5"), t("DECIMAL(10, 2)")) == "1.50"
        ts = dt.datetime(2024, 3, 1, 12, 0, 0, 120000)
        assert to_paimon_string(ts, t("TIMESTAMP(3)")) == "2024-03-01 12:00:00.12"[:22] + "0"
        assert to_paimon_string(ts, t("TIMESTAMP(6)")) == "2024-03-01 12:00:00.120000"
        assert to_paimon_string(dt.datetime(2024, 3, 1), t("TIMESTAMP(0)")) == "2024-03-01 00:00:00"
        assert to_paimon_string(b"x", t("BYTES")) is None
        assert [java_double(v) for v in (1.0, 1e10, 1.5e-5, 12345678.9, float("nan"))] == [
            "1.0",
            "1.0E10",
            "1.5E-5",
            "1.23456789E7",
            "NaN",
        ]


_ = (signal, time)


class TestMergedRecordCount:
    def test_a_one_column_key_is_estimated_from_its_theta_sketch(self, tmp_path: Path) -> None:
        warehouse = PaimonWarehouse(tmp_path / "wh")
        location = warehouse.create("k", [("id", "long"), ("v", "string")], primary_keys=["id"])
        warehouse.write("k", {"id": [1, 2, 3], "v": ["a", "b", "c"]})
        warehouse.write("k", {"id": [2, 3, 4], "v": ["B", "C", "d"]})  # updates 2, 3
        # the key-sketch estimate (the default key merge makes it exact:
        # tests/core/formats/test_paimon_key_merge.py)
        doc = analyze_doc(config_for(location, tmp_path / "state", key_merge="estimate"))
        read = warehouse.table("k").new_read_builder()
        merged_rows = read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows
        assert doc["record_count"] == 6  # every version of a key, as the files hold them
        assert doc["paimon"]["merged_record_count"] == merged_rows == 4
        assert doc["paimon"]["merged_record_count_is"] == "estimated"
        assert "theta" in doc["paimon"]["merged_record_count_why"]


def analyze_doc(config: Config) -> dict[str, Any]:
    analyze(config)
    return read_stats("t", config=config)
