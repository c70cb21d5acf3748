"""The stats store on S3 (``state_dir = "s3://…"``): the same store, objects instead of files.

AWS cannot exist here: moto's S3 server on 127.0.0.1 stands in (``tests/object_store.py``),
reached through the standard AWS environment by pyarrow's S3 client and by boto3 (the
conditional PUT that arbitrates state versions). moto checks ``If-None-Match`` and then
writes, not atomically, so two writers are raced here in sequence (the loser's PUT arrives
after the winner's), which is the request S3 itself decides.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_store_api import TABLE, _commit_snapshot, _state

from lakestats.config import Config
from lakestats.exceptions import ConcurrentUpdateError, StoreError
from lakestats.maintenance import MaintenanceSettings, cleanup
from lakestats.merge import aggregate_files
from lakestats.model import (
    Column,
    ColumnMetrics,
    Commit,
    DataFile,
    FileContent,
    PartitionField,
    PartitionKey,
    SketchSettings,
    TableSchema,
)
from lakestats.plan import plan_commit
from lakestats.store import StatsStore, atomic, list_files, referenced_files
from lakestats.store.statelog import version_path
from lakestats.store.writer import SegmentWriter
from object_store import S3Server


@pytest.fixture
def state_uri(s3_server: S3Server) -> str:
    return f"{s3_server.new_bucket()}/state"


def test_a_store_on_s3_round_trips_and_keeps_the_layout(
    s3_server: S3Server, state_uri: str
) -> None:
    store = StatsStore(state_uri, TABLE)
    assert store.table_dir == f"{state_uri}/{TABLE}"
    assert store.current() is None and store.versions() == []
    first = _commit_snapshot(store, 1)
    second = _commit_snapshot(store, 2)

    reopened = StatsStore(f"{state_uri}/", TABLE)  # a trailing slash names the same store
    assert reopened.current() == second
    assert reopened.read_version(1) == first
    assert reopened.versions() == [1, 2]
    for seg in second.segments:
        assert reopened.read_segment(seg.path) == store.read_segment(seg.path)
        assert reopened.read_aggregate(seg.aggregate_path) == store.read_aggregate(
            seg.aggregate_path
        )
    assert reopened.read_stats(second.stats[2]) == {"snapshot_id": 2}

    # the objects are exactly the files a local store would hold, at the same paths
    keys = s3_server.keys(state_uri)
    assert keys == sorted(
        [f"{state_uri}/{TABLE}/{rel}" for rel in referenced_files(second)]
        + [str(version_path(store.table_dir, v)) for v in (1, 2)]
    )
    assert sorted(list_files(store.table_dir)) == sorted(referenced_files(second))
    assert atomic.list_subdirs(state_uri) == [TABLE]
    files, size = store.usage()
    assert files == len(keys) and size == sum(len(s3_server.read(k)) for k in keys)


def test_two_writers_of_one_version_on_s3_one_wins(s3_server: S3Server, state_uri: str) -> None:
    a = StatsStore(state_uri, TABLE)
    b = StatsStore(state_uri, TABLE)
    base = _commit_snapshot(a, 1)
    seen_by_b = b.current()
    winner = a.commit(replace(base, version=2, last_snapshot_id=2))
    b.current = lambda: seen_by_b  # type: ignore[method-assign]  # b read before a won
    with pytest.raises(ConcurrentUpdateError, match="another writer committed version 2"):
        b.commit(replace(base, version=2, last_snapshot_id=99))
    assert StatsStore(state_uri, TABLE).current() == winner
    stored = json.loads(s3_server.read(str(version_path(a.table_dir, 2))))
    assert stored["last_snapshot_id"] == 2  # the winner's bytes, not the loser's (99)


def test_create_exclusive_on_s3_never_overwrites(s3_server: S3Server, state_uri: str) -> None:
    target = f"{state_uri}/v.json"
    assert atomic.create_exclusive(target, b"first")
    assert not atomic.create_exclusive(target, b"second")
    assert s3_server.read(target) == b"first"
    atomic.atomic_write(target, b"third")  # a plain write replaces
    assert atomic.read_bytes(target) == b"third"
    assert atomic.remove(target) and not atomic.remove(target)
    assert not atomic.exists(target)


def test_cleanup_deletes_objects_no_retained_version_needs(
    s3_server: S3Server, state_uri: str
) -> None:
    store = StatsStore(state_uri, TABLE)
    for snapshot in range(1, 5):
        current = _commit_snapshot(store, snapshot)
    # an unreferenced leftover, as a crash between write and commit leaves it
    orphan = store.write_stats(99, {"snapshot_id": 99})
    settings = MaintenanceSettings(grace_ms=0, log_retention_ms=0, min_log_versions=2)

    with s3_server.request_log() as requests:
        report = cleanup(store, settings, now_ms=current.created_at_ms + 10_000)
        counts = requests.take()[0]

    assert report.versions_deleted == (1, 2)
    # one DELETE per object, nothing written: pyarrow's delete_file PUT a folder marker
    # after each
    deleted = len(report.versions_deleted) + len(report.files_deleted)
    assert counts["DELETE"] == deleted and counts["PUT"] == 0
    assert orphan in report.files_deleted
    assert store.versions() == [3, 4]
    assert sorted(list_files(store.table_dir)) == sorted(
        referenced_files(store.read_version(3)) | referenced_files(current)
    )
    assert StatsStore(state_uri, TABLE).current() == current
    assert all(v.created_at_ms > 0 for v in store.version_infos())


def test_a_corrupt_version_on_s3_is_named(s3_server: S3Server, state_uri: str) -> None:
    store = StatsStore(state_uri, TABLE)
    _commit_snapshot(store, 1)
    bad = str(version_path(store.table_dir, 2))
    s3_server.write(bad, b"{")
    with pytest.raises(StoreError, match=f"{bad}: state version is not valid JSON"):
        store.current()


def test_a_missing_bucket_is_storage_trouble_not_a_bug(s3_server: S3Server) -> None:
    store = StatsStore("s3://no-such-bucket-lakestats/state", TABLE)
    with pytest.raises(OSError) as info:
        store.commit(_state(1))
    assert info.value.errno in (errno.EIO, errno.EACCES), info.value
    assert "no-such-bucket-lakestats" in str(info.value)


@pytest.mark.parametrize(
    ("state_dir", "message"),
    [
        ("gs://bucket/state", "cannot live on gs://"),
        ("abfs://container/state", "cannot live on abfs://"),
        ("s3://bucket/state?endpoint_override=x", "takes no options"),
        ("s3:///state", "names no bucket"),
    ],
)
def test_a_state_dir_the_store_cannot_use_is_a_config_error(state_dir: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Config(state_dir=state_dir)


def test_a_state_dir_on_s3_without_boto3_names_the_extra(tmp_path: Path) -> None:
    """boto3 is installed here, so a child process hides it (``sys.modules[name] = None``,
    Python's own way of making an import fail), as an image built without the ``s3`` extra
    would lack it; the CLI says which extra to install."""
    config = tmp_path / "lakestats.toml"
    config.write_text('state_dir = "s3://bucket/state"\n')
    hide = (
        "import sys\n"
        "sys.modules['boto3'] = sys.modules['botocore'] = None\n"
        "from lakestats.cli import main\n"
        f"sys.exit(main(['show', 'x', '--config', {str(config)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "install the `lakestats[s3]` extra" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_removal_on_s3_chains_the_segments_aggregate_and_reads_its_row_groups(
    state_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal in a big segment of a store on S3: the partitions it changed go into the
    segment's aggregate chain (footers checked over S3), the segment's row groups holding
    them are read, a new store object reads the chain back, and cleanup keeps it."""
    monkeypatch.setattr("lakestats.store.segments.SEGMENT_ROW_GROUP_BYTES", 512)
    schema = TableSchema(1, (Column(1, "id", "long"),))
    part = PartitionField(1000, "int")

    def in_day(i: int) -> DataFile:
        return DataFile(
            path=f"s3://data/t/{i}.parquet",
            content=FileContent.DATA,
            file_format="PARQUET",
            record_count=10 + i,
            file_size_bytes=1000 + i,
            partition=PartitionKey(1, (("day", i % 8),), (part,)),
            columns={1: ColumnMetrics(value_count=10 + i, null_count=0, lower=i, upper=i + 9)},
            field_ids=frozenset({1}),
        )

    def change(snapshot: int, added: tuple[DataFile, ...], removed: tuple[DataFile, ...]) -> Commit:
        return Commit(
            snapshot,
            snapshot - 1 or None,
            snapshot,
            snapshot * 1000,
            "overwrite",
            1,
            added,
            removed,
        )

    files = tuple(in_day(i) for i in range(40))  # 8 days of 5 files
    store = StatsStore(state_uri, TABLE)
    writer = SegmentWriter(store, SketchSettings())
    first = plan_commit(
        change(1, files, ()), schema=schema, current_schema=schema, sketches={}, located={}
    )
    written = writer.write(_state(1), first)
    state = store.commit(_state(1, segments=written.segments, last_snapshot_id=1))
    assert (
        pq.ParquetFile(
            atomic.open_input(store.path(state.segments[0].path))
        ).metadata.num_row_groups
        > 1
    )
    gone = (files[3],)
    plan = plan_commit(
        change(2, (), gone),
        schema=schema,
        current_schema=schema,
        sketches={},
        located={f.path: state.segments[0] for f in gone},
    )
    stored = writer.write(state, plan)
    state = store.commit(_state(2, segments=stored.segments, last_snapshot_id=2))
    (segment,) = state.segments
    assert [d.partitions for d in segment.aggregate_deltas] == [1]
    live = [f for f in files if f not in gone]
    fresh = StatsStore(state_uri, TABLE)
    assert fresh.current() == state
    assert fresh.segment_aggregate(segment) == aggregate_files(live, plan.types, SketchSettings())
    report = cleanup(
        fresh, MaintenanceSettings(grace_ms=0, log_retention_ms=0, min_log_versions=1), now_ms=2**62
    )
    assert not set(report.files_deleted) & set(segment.aggregate_files)
    assert StatsStore(state_uri, TABLE).segment_aggregate(segment) == aggregate_files(
        live, plan.types, SketchSettings()
    )
