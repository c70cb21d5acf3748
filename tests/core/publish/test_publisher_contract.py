"""The contract every publisher keeps, run over each one.

A target is a publisher plus the place it publishes into, seen from outside: which
snapshots exist, what the target registers for a snapshot, what it stores at all, how
often it was committed, and ways to expire a snapshot or break the target. Iceberg runs
on a real catalog table (SQLite catalog) with stats merged from its live files; the
in-memory publisher (``lakestats.publish.memory``) is the reference a new format's
publisher is compared with. Adding a publisher = one fixture branch below.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from publish_helpers import PySketcher, catalog_config, local
from pyiceberg.transforms import IdentityTransform
from test_paimon_publish import merged as paimon_merged

from delta_tables import DeltaWriter
from lakestats.formats.paimon import open_paimon_location
from lakestats.formats.registry import open_table
from lakestats.merge import aggregate_files, merge_partitions, whole_table
from lakestats.model import DataFile, SketchSettings, TableSchema
from lakestats.publish.base import Publisher, SnapshotStats
from lakestats.publish.delta import FILE_PREFIX as DELTA_PREFIX
from lakestats.publish.delta import INDEX_NAME, DeltaSidecarPublisher
from lakestats.publish.iceberg import FILE_PREFIX, IcebergPublisher
from lakestats.publish.memory import MemoryPublisher, MemoryTarget
from lakestats.publish.paimon import PaimonPublisher
from lakestats.tables import OpenedTable
from lakestats.testing import IcebergWarehouse
from object_store import S3Server
from paimon_tables import PaimonWarehouse

SETTINGS = SketchSettings()
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])


@dataclass
class Target:
    publisher: Callable[[], Publisher]  # a new publisher (a new run) over the same target
    snapshots: list[int]  # oldest first
    stats: Callable[[int], SnapshotStats]
    registered: Callable[[int], set[str]]  # names the target registers for a snapshot
    stored: Callable[[], set[str]]  # every stats object the target holds
    version: Callable[[], Any]  # changes with every commit to the target
    expire: Callable[[int], None]
    break_target: Callable[[], None]


def _iceberg(tmp_path: Path) -> Target:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("cat", IdentityTransform())])
    for start, cats in ((0, ["a", "b"]), (100, ["b", "c"]), (200, ["c", "d"])):
        wh.append("t", {"id": list(range(start, start + 100)), "cat": cats * 50})
    _, opened = catalog_config(wh, "t", tmp_path / "state")

    def registered(snapshot_id: int) -> set[str]:
        metadata = wh.table("t").metadata
        paths = {s.statistics_path for s in metadata.statistics if s.snapshot_id == snapshot_id}
        paths |= {
            p.statistics_path for p in metadata.partition_statistics if p.snapshot_id == snapshot_id
        }
        return {PurePosixPath(p).name for p in paths}

    def stored() -> set[str]:
        folder = Path(local(wh.table("t").metadata.location)) / "metadata"
        return {p.name for p in folder.iterdir() if p.name.startswith(FILE_PREFIX)}

    def publisher() -> Publisher:
        opened.table.refresh()
        return IcebergPublisher(opened.table)  # type: ignore[arg-type]

    return Target(
        publisher=publisher,
        snapshots=wh.lineage("t"),
        stats=lambda snapshot_id: _merged_stats(opened, snapshot_id),
        registered=registered,
        stored=stored,
        version=lambda: wh.table("t").metadata_location,
        expire=lambda snapshot_id: wh.expire_snapshots("t", [snapshot_id]),
        break_target=lambda: wh.catalog.drop_table(wh.identifier("t")),
    )


def _delta(tmp_path: Path) -> Target:
    """A delta-rs table; a version expires as log cleanup expires it (a checkpoint of the
    next version, the older commit files gone)."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create([("id", "long"), ("cat", "string")])
    versions = [writer.append({"id": [s, s + 1], "cat": ["a", "b"]}) for s in (0, 100, 200)]
    table = open_table(writer.path)
    sidecar = Path(writer.path) / "_delta_log" / "_lakestats"

    def index() -> dict[str, str]:
        path = sidecar / INDEX_NAME
        return dict(json.loads(path.read_text())["versions"]) if path.exists() else {}

    def expire(version: int) -> None:
        from deltalake import DeltaTable

        DeltaTable(writer.path, version=version + 1).create_checkpoint()
        for old in range(version + 1):
            (writer.log / f"{old:020d}.json").unlink(missing_ok=True)

    def break_target() -> None:
        shutil.rmtree(sidecar, ignore_errors=True)
        sidecar.write_text("not a directory")

    return Target(
        publisher=lambda: DeltaSidecarPublisher(open_table(writer.path), "t"),
        snapshots=versions,
        stats=lambda version: _merged_stats(_Opened(table), version),  # type: ignore[arg-type]
        registered=lambda version: {index()[str(version)]} if str(version) in index() else set(),
        stored=lambda: (
            {p.name for p in sidecar.iterdir() if p.name.startswith(DELTA_PREFIX)}
            if sidecar.is_dir()
            else set()
        ),
        version=lambda: (
            (sidecar / INDEX_NAME).read_bytes() if (sidecar / INDEX_NAME).exists() else b""
        ),
        expire=expire,
        break_target=break_target,
    )


@dataclass
class _Opened:
    table: Any


def _merged_stats(opened: OpenedTable, snapshot_id: int) -> SnapshotStats:
    """A snapshot's stats merged from its live files, with theta sketches (as analyze)."""
    schema = opened.table.schema()
    live = opened.table.live_files(snapshot_id)
    sketches = PySketcher()([f.path for f in live], schema)
    files: list[DataFile] = [replace(f, sketches=dict(sketches.get(f.path, {}))) for f in live]
    types = {c.field_id: c.type for c in schema.columns}
    partitions = merge_partitions(aggregate_files(files, types, SETTINGS), SETTINGS)
    return SnapshotStats(
        snapshot_id, schema, partitions, whole_table(partitions, SETTINGS), SETTINGS
    )


def _memory() -> Target:
    target = MemoryTarget(snapshots={1, 2, 3})

    def stats(snapshot_id: int) -> SnapshotStats:
        table = whole_table((), SETTINGS)
        return SnapshotStats(
            snapshot_id,
            TableSchema(schema_id=0, columns=()),
            (),
            replace(table, record_count=10 * snapshot_id),
            SETTINGS,
        )

    def break_target() -> None:
        target.broken = "switched off by the test"

    return Target(
        publisher=lambda: MemoryPublisher(target),
        snapshots=[1, 2, 3],
        stats=stats,
        registered=lambda s: {target.entries[s]} if s in target.entries else set(),
        stored=lambda: set(target.objects),
        version=lambda: target.commits,
        expire=target.expire,
        break_target=break_target,
    )


def _paimon(tmp_path: Path) -> Target:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("cat", "string")], partition_keys=["cat"])
    for start, cats in ((0, ["a", "b"]), (100, ["b", "c"]), (200, ["c", "d"])):
        warehouse.write("t", {"id": list(range(start, start + 100)), "cat": cats * 50})
    table = open_paimon_location(str(location))
    statistics = location / "statistics"

    def registered(snapshot_id: int) -> set[str]:
        table.refresh()
        names = {table.snapshot(i).statistics for i in table.snapshot_ids()}
        return {
            name
            for name in names
            if name and json.loads((statistics / name).read_text())["snapshotId"] == snapshot_id
        }

    def stored() -> set[str]:
        return {p.name for p in statistics.iterdir()} if statistics.is_dir() else set()

    def break_target() -> None:
        shutil.rmtree(statistics, ignore_errors=True)
        statistics.write_text("not a directory")

    return Target(
        publisher=lambda: PaimonPublisher(open_paimon_location(str(location))),
        snapshots=[1, 2, 3],
        stats=lambda snapshot_id: paimon_merged(table, snapshot_id),
        registered=registered,
        stored=stored,
        version=lambda: open_paimon_location(str(location)).current_snapshot_id(),
        expire=lambda snapshot_id: table.expire_snapshots([snapshot_id]),
        break_target=break_target,
    )


def _delta_on_s3(s3: S3Server) -> Target:
    """A delta-rs table written straight to S3 (tests/object_store.py: an S3 server on
    127.0.0.1); versions expire as in ``_delta``, on the bucket."""
    uri = f"{s3.new_bucket()}/t"
    options = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # one writer: no lock table needed
    versions = []
    for start in (0, 100, 200):
        batch = pa.table({"id": [start, start + 1], "cat": ["a", "b"]}, schema=SCHEMA)
        write_deltalake(uri, batch, mode="append", storage_options=options)
        versions.append(DeltaTable(uri, storage_options=options).version())
    table = open_table(uri)
    sidecar = f"{uri}/_delta_log/_lakestats"

    def index() -> dict[str, str]:
        keys = s3.keys(sidecar)
        path = f"{sidecar}/{INDEX_NAME}"
        return dict(json.loads(s3.read(path))["versions"]) if path in keys else {}

    def expire(version: int) -> None:
        DeltaTable(uri, version=version + 1, storage_options=options).create_checkpoint()
        log = f"{uri}/_delta_log"
        for old in range(version + 1):
            s3.delete(f"{log}/{old:020d}.json")

    return Target(
        publisher=lambda: DeltaSidecarPublisher(open_table(uri), "t"),
        snapshots=versions,
        stats=lambda version: _merged_stats(_Opened(table), version),  # type: ignore[arg-type]
        registered=lambda version: {index()[str(version)]} if str(version) in index() else set(),
        stored=lambda: {
            name
            for key in s3.keys(sidecar)
            if (name := key.rsplit("/", 1)[1]).startswith(DELTA_PREFIX)
        },
        version=lambda: json.dumps(index(), sort_keys=True),
        expire=expire,
        # an object store has no file to put in a folder's way: an index nobody can read
        break_target=lambda: s3.write(f"{sidecar}/{INDEX_NAME}", b"{not json"),
    )


TARGETS: dict[str, Callable[[Path], Target]] = {
    "delta": _delta,
    "iceberg": _iceberg,
    "memory": lambda _: _memory(),
    "paimon": _paimon,
}
# the same publishers on object storage
S3_TARGETS: dict[str, Callable[[S3Server], Target]] = {"delta-s3": _delta_on_s3}


def _made(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param in S3_TARGETS:
        return S3_TARGETS[request.param](request.getfixturevalue("s3_server"))
    return TARGETS[request.param](tmp_path)


# Targets that register every staged snapshot. Paimon cannot: a snapshot names one
# statistics file, so a flush registers the newest staged snapshot only (an ANALYZE
# snapshot), and a file stays while an older ANALYZE snapshot names it; the test after
# those three says what holds for it instead.
ONE_STATS_FILE_PER_SNAPSHOT = {"paimon"}


@pytest.fixture(params=sorted(TARGETS) + sorted(S3_TARGETS))
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    yield _made(request, tmp_path)


@pytest.fixture(params=sorted((set(TARGETS) | set(S3_TARGETS)) - ONE_STATS_FILE_PER_SNAPSHOT))
def every_snapshot_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    yield _made(request, tmp_path)


@pytest.fixture(params=sorted(ONE_STATS_FILE_PER_SNAPSHOT))
def newest_only_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    yield TARGETS[request.param](tmp_path)


def test_publisher_satisfies_the_protocol(target: Target) -> None:
    publisher = target.publisher()
    assert isinstance(publisher, Publisher)
    assert publisher.key
    assert all(issubclass(e, BaseException) for e in publisher.errors)


def test_stage_then_flush_registers_and_describe_names_it(target: Target) -> None:
    newest = target.snapshots[-1]
    publisher = target.publisher()
    publisher.stage(target.stats(newest), {})
    assert target.registered(newest) == set()  # nothing visible before flush
    published = publisher.flush({})
    registered = target.registered(newest)
    assert registered
    assert registered <= target.stored()
    lines = target.publisher().describe(newest, published)
    for name in registered:
        assert any(name in line for line in lines), (name, lines)
    assert target.publisher().key in published


def test_is_published_before_and_after(target: Target) -> None:
    oldest, newest = target.snapshots[0], target.snapshots[-1]
    publisher = target.publisher()
    assert not publisher.is_published(newest, {})
    publisher.stage(target.stats(newest), {})
    assert publisher.is_published(newest, {})  # staged counts: the run flushes it
    assert not target.publisher().is_published(newest, {})  # a new run knows only `published`
    published = publisher.flush({})
    assert target.publisher().is_published(newest, published)
    assert not target.publisher().is_published(oldest, published)


def stage_every_snapshot_then_flush(target: Target) -> dict[str, Any]:
    """One publisher stages every snapshot (no commit yet), then flushes (a commit)."""
    publisher = target.publisher()
    before = target.version()
    for snapshot_id in target.snapshots:
        publisher.stage(target.stats(snapshot_id), {})
    assert target.version() == before  # staging commits nothing
    published = publisher.flush({})
    assert target.version() != before
    return published


def test_one_flush_registers_a_batch_in_one_commit(every_snapshot_target: Target) -> None:
    target = every_snapshot_target
    published = stage_every_snapshot_then_flush(target)
    assert all(target.registered(s) for s in target.snapshots)
    assert all(target.publisher().is_published(s, published) for s in target.snapshots)


def test_flush_with_nothing_staged_is_a_no_op(target: Target) -> None:
    newest = target.snapshots[-1]
    publisher = target.publisher()
    publisher.stage(target.stats(newest), {})
    published = publisher.flush({})
    version, stored = target.version(), target.stored()
    assert publisher.flush(published) == published  # the same run, nothing left staged
    assert target.publisher().flush(published) == published  # a new run
    assert target.version() == version
    assert target.stored() == stored


def test_a_snapshot_that_no_longer_exists_gets_nothing(target: Target) -> None:
    oldest, second = target.snapshots[0], target.snapshots[1]
    stats_oldest, stats_second = target.stats(oldest), target.stats(second)
    publisher = target.publisher()
    publisher.stage(stats_oldest, {})  # expired after staging
    target.expire(oldest)
    published = publisher.flush({})
    assert target.registered(oldest) == set()
    assert not target.publisher().is_published(oldest, published)
    assert target.stored() == set()  # the staged objects went with it

    target.expire(second)
    publisher = target.publisher()
    publisher.stage(stats_second, published)  # expired before staging
    published = publisher.flush(published)
    assert target.registered(second) == set()
    assert not target.publisher().is_published(second, published)
    assert target.stored() == set()


def test_expired_snapshots_lose_what_was_registered(every_snapshot_target: Target) -> None:
    target = every_snapshot_target
    publisher = target.publisher()
    for snapshot_id in target.snapshots:
        publisher.stage(target.stats(snapshot_id), {})
    published = publisher.flush({})
    oldest = target.snapshots[0]
    gone = target.registered(oldest)
    target.expire(oldest)
    published = target.publisher().flush(published)
    assert target.registered(oldest) == set()
    assert not target.publisher().is_published(oldest, published)
    assert gone.isdisjoint(target.stored())
    assert all(target.registered(s) for s in target.snapshots[1:])


def test_restaging_a_snapshot_supersedes(every_snapshot_target: Target) -> None:
    target = every_snapshot_target
    newest = target.snapshots[-1]
    publisher = target.publisher()
    publisher.stage(target.stats(newest), {})
    publisher.stage(target.stats(newest), {})  # staged twice in one run: the second wins
    published = publisher.flush({})
    first = target.registered(newest)
    assert target.stored() == first  # the first staging left nothing behind

    publisher = target.publisher()  # a later run (e.g. --rebuild) publishes it again
    publisher.stage(target.stats(newest), published)
    published = publisher.flush(published)
    second = target.registered(newest)
    assert second and second.isdisjoint(first)
    assert target.stored() == second  # replaced, not accumulated
    lines = target.publisher().describe(newest, published)
    assert all(any(name in line for line in lines) for name in second)


def test_one_flush_registers_the_newest_staged_snapshot_in_one_commit(
    newest_only_target: Target,
) -> None:
    target = newest_only_target
    published = stage_every_snapshot_then_flush(target)
    newest, older = target.snapshots[-1], target.snapshots[:-1]
    assert target.registered(newest) and target.registered(newest) <= target.stored()
    assert all(target.registered(s) == set() for s in older)
    assert target.publisher().is_published(newest, published)
    assert target.publisher().flush(published) == published  # nothing left to do


def test_errors_cover_what_a_broken_target_raises(target: Target) -> None:
    newest = target.snapshots[-1]
    stats = target.stats(newest)
    publisher = target.publisher()
    target.break_target()
    with pytest.raises(publisher.errors):
        publisher.stage(stats, {})
        publisher.flush({})
