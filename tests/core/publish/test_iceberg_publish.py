"""Publishing into Iceberg table metadata, on real pyiceberg tables with a SQLite catalog.

The sketches here come from ``PySketcher`` (pure Python, long and string columns, spec
hashing by construction); the Spark pipeline's sketches are checked in test_theta_spec.py.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketches import compact_theta_sketch
from publish_helpers import PySketcher, catalog_config, local, run_analyze, unsketched
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.transforms import IdentityTransform
from structlog.testing import capture_logs

from lakestats.analyze import read_stats
from lakestats.cli import main
from lakestats.config import Config
from lakestats.publish.iceberg import FILE_PREFIX, IcebergPublisher
from lakestats.publish.registry import publisher_for
from lakestats.sketches.hashing import THETA_SEED
from lakestats.tables import OpenedTable
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])
THETA = "apache-datasketches-theta-v1"
PARTITION_STATS_FIELDS = [
    ("partition", 1),
    ("spec_id", 2),
    ("data_record_count", 3),
    ("data_file_count", 4),
    ("total_data_file_size_in_bytes", 5),
    ("position_delete_record_count", 6),
    ("position_delete_file_count", 7),
    ("equality_delete_record_count", 8),
    ("equality_delete_file_count", 9),
    ("total_record_count", 10),
    ("last_updated_at", 11),
    ("last_updated_snapshot_id", 12),
]


def rows(start: int, n: int, cats: list[str]) -> dict[str, list[Any]]:
    return {"id": list(range(start, start + n)), "cat": [cats[i % len(cats)] for i in range(n)]}


def make_table(wh: IcebergWarehouse, name: str = "t") -> None:
    wh.create_table(name, SCHEMA, partition_by=[("cat", IdentityTransform())])
    wh.append(name, rows(0, 300, ["a", "b", "c"]))
    wh.append(name, rows(300, 200, ["a", "d"]))
    wh.delete(name, "cat == 'c'")
    wh.append(name, rows(500, 100, ["e", "b"]))


def scan_sorted(table: Table) -> list[tuple[Any, ...]]:
    data = table.scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("cat").to_pylist(), strict=True))


def read_bytes(table: Table, path: str) -> bytes:
    with table.io.new_input(path).open() as stream:
        return stream.read()


def lakestats_files(table: Table) -> set[str]:
    folder = Path(local(table.metadata.location)) / "metadata"
    return {p.name for p in folder.iterdir() if p.name.startswith(FILE_PREFIX)}


def exact_partitions(table: Table) -> dict[str, tuple[int, int, int]]:
    """cat → (rows, data files, bytes) from the live files pyiceberg lists, and the rows
    cross-checked against a full scan."""
    files = table.inspect.files().to_pylist()
    out: dict[str, tuple[int, int, int]] = {}
    for f in files:
        if f["content"] != 0:
            continue
        cat = f["partition"]["cat"]
        r, n, b = out.get(cat, (0, 0, 0))
        out[cat] = (r + f["record_count"], n + 1, b + f["file_size_in_bytes"])
    scanned = Counter(table.scan().to_arrow().column("cat").to_pylist())
    assert {k: v[0] for k, v in out.items()} == dict(scanned)
    return out


@pytest.fixture
def published(tmp_path: Path) -> tuple[IcebergWarehouse, Config, OpenedTable, list[Any]]:
    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    before = scan_sorted(wh.table("t"))
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    run_analyze(config, opened, PySketcher())
    return wh, config, opened, before


def test_stats_are_registered_readable_and_exact(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
) -> None:
    wh, _, opened, before = published
    table = wh.table("t")  # loads: the metadata we wrote is valid for pyiceberg
    assert scan_sorted(table) == before  # same rows
    lineage = wh.lineage("t")
    assert len(table.metadata.snapshots) == len(lineage) == 4  # publishing made no snapshot
    current = table.metadata.current_snapshot_id
    assert current is not None

    # every processed snapshot has both entries, naming existing snapshots
    assert sorted(s.snapshot_id for s in table.metadata.statistics) == sorted(lineage)
    assert sorted(p.snapshot_id for p in table.metadata.partition_statistics) == sorted(lineage)

    stats = next(s for s in table.metadata.statistics if s.snapshot_id == current)
    data = read_bytes(table, stats.statistics_path)
    assert stats.file_size_in_bytes == len(data)
    puffin = PuffinFile(data)
    blob_end = max(b.offset + b.length for b in puffin.footer.blobs)
    assert stats.file_footer_size_in_bytes == len(data) - blob_end  # footer follows the blobs
    assert {b.type for b in stats.blob_metadata} == {THETA}
    exact = {"id": len({r[0] for r in before if r[1] != "c"}), "cat": 4}
    ids = {f.field_id: f.name for f in table.schema().fields}
    seen = set()
    for blob in puffin.footer.blobs:
        assert blob.type == THETA and blob.snapshot_id == current
        (field_id,) = blob.fields
        sketch = compact_theta_sketch.deserialize(puffin.get_blob_payload(blob), THETA_SEED)
        assert str(round(sketch.get_estimate())) == blob.properties["ndv"]
        true = exact[ids[field_id]]
        assert sketch.get_lower_bound(3) <= true <= sketch.get_upper_bound(3)
        seen.add(ids[field_id])
    assert seen == {"id", "cat"}

    part = next(p for p in table.metadata.partition_statistics if p.snapshot_id == current)
    raw = read_bytes(table, part.statistics_path)
    assert part.file_size_in_bytes == len(raw)
    written = pq.read_table(io.BytesIO(raw))
    ids_in_file = [
        (f.name, int(f.metadata[b"PARQUET:field_id"])) for f in written.schema
    ]  # the spec's field ids, in the spec's order (format v2)
    assert ids_in_file == PARTITION_STATS_FIELDS
    got = written.to_pylist()
    keys = [r["partition"]["cat"] for r in got]
    assert keys == sorted(keys)  # sorted by partition
    assert {
        r["partition"]["cat"]: (
            r["data_record_count"],
            r["data_file_count"],
            r["total_data_file_size_in_bytes"],
        )
        for r in got
    } == exact_partitions(table)
    assert all(r["total_record_count"] == r["data_record_count"] for r in got)  # no deletes
    last = {r["partition"]["cat"]: r["last_updated_snapshot_id"] for r in got}
    assert last["e"] == last["b"] == current  # the last append touched e and b
    assert last["a"] == lineage[1] and last["d"] == lineage[1]

    doc = read_stats(opened)
    assert doc["published"] == [
        f"iceberg statistics (Puffin, theta NDV): {stats.statistics_path}",
        f"iceberg partition-statistics: {part.statistics_path}",
    ]


def test_no_new_commit_means_no_metadata_change(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
) -> None:
    """Our own metadata commit must not look like work: re-running is a cheap no-op."""
    wh, config, opened, _ = published
    location = wh.table("t").metadata_location
    versions = opened.store.versions()
    sketcher = PySketcher()
    result = run_analyze(config, opened, sketcher)
    assert result.commits == ()
    assert sketcher.calls == 0
    assert wh.table("t").metadata_location == location
    assert opened.store.versions() == versions


def test_incremental_partition_stats_follow_each_commit(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
) -> None:
    wh, config, opened, _ = published
    wh.append("t", rows(1000, 30, ["a", "zz"]))
    wh.delete("t", "cat == 'd'")
    run_analyze(config, opened, PySketcher())
    table = wh.table("t")
    for snapshot_id in wh.lineage("t")[-2:]:
        entry = next(p for p in table.metadata.partition_statistics if p.snapshot_id == snapshot_id)
        got = pq.read_table(io.BytesIO(read_bytes(table, entry.statistics_path))).to_pylist()
        assert {r["partition"]["cat"]: r["data_record_count"] for r in got} == {
            k: v[0]
            for k, v in exact_partitions(
                wh.catalog.load_table(wh.identifier("t"))
                if snapshot_id == table.metadata.current_snapshot_id
                else _at(table, snapshot_id)
            ).items()
        }


def _at(table: Table, snapshot_id: int) -> Table:
    """The table as of a snapshot, for exact_partitions (inspect/scan read the current one)."""
    metadata = table.metadata.model_copy(
        update={
            "current_snapshot_id": snapshot_id,
            "refs": {
                "main": table.metadata.refs["main"].model_copy(update={"snapshot_id": snapshot_id})
            },
        }
    )
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)


def test_expired_snapshots_lose_their_entries_and_files(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
) -> None:
    wh, config, opened, _ = published
    lineage = wh.lineage("t")
    before = lakestats_files(wh.table("t"))
    assert len(before) == 2 * len(lineage)
    wh.expire_snapshots("t", lineage[:2])
    # pyiceberg's expiry drops the statistics entries but not partition statistics (nor files)
    assert {p.snapshot_id for p in wh.table("t").metadata.partition_statistics} >= set(lineage[:2])
    run_analyze(config, opened, PySketcher())
    table = wh.table("t")
    live = {s.snapshot_id for s in table.metadata.snapshots}
    assert {s.snapshot_id for s in table.metadata.statistics} == live
    assert {p.snapshot_id for p in table.metadata.partition_statistics} == live
    assert len(lakestats_files(table)) == 2 * len(live)
    state = opened.store.current()
    assert state is not None
    assert {int(k) for k in state.published["iceberg"]["snapshots"]} == live
    assert scan_sorted(table)  # still readable


def test_rebuild_replaces_files_instead_of_accumulating(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
) -> None:
    wh, config, opened, _ = published
    first = lakestats_files(wh.table("t"))
    run_analyze(config, opened, PySketcher(), rebuild=True)
    table = wh.table("t")
    second = lakestats_files(table)
    assert len(second) == len(first)
    assert first.isdisjoint(second)  # every snapshot re-registered; old files deleted
    registered = {Path(s.statistics_path).name for s in table.metadata.statistics}
    registered |= {Path(p.statistics_path).name for p in table.metadata.partition_statistics}
    assert registered == second


def test_registered_but_unrecorded_stats_are_adopted(tmp_path: Path) -> None:
    """A crash after the catalog commit but before the state version records it: the next
    run takes the bookkeeping from the table metadata and writes no duplicate."""
    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    run_analyze(config, opened, PySketcher())
    state = opened.store.current()
    assert state is not None
    current = wh.table("t").metadata.current_snapshot_id
    assert current is not None
    recorded = state.published["iceberg"]["snapshots"][str(current)]
    # another registration for the current snapshot whose returned records are "lost"
    # (made by this store's own publisher, as the crashed run's was)
    publisher = publisher_for(opened)
    publisher.stage(unsketched(opened, current), state.published)
    publisher.flush(state.published)
    table = wh.table("t")
    now = next(p for p in table.metadata.partition_statistics if p.snapshot_id == current)
    assert now.statistics_path != recorded["partition_statistics"]  # replaced, not recorded
    # no sketches were given: the Puffin entry stays, the partition stats file is replaced
    assert len(lakestats_files(table)) == 2 * len(wh.lineage("t"))

    sketcher = PySketcher()
    result = run_analyze(config, opened, sketcher)
    assert result.commits == () and sketcher.calls == 0
    after = opened.store.current()
    assert after is not None and after.version == state.version + 1  # bookkeeping only
    entry = after.published["iceberg"]["snapshots"][str(current)]
    assert entry == {  # adopted from the table metadata
        "statistics": recorded["statistics"],
        "partition_statistics": now.statistics_path,
    }
    assert len(lakestats_files(wh.table("t"))) == 2 * len(wh.lineage("t"))  # no duplicate
    assert read_stats(opened)["published"][1] == (
        f"iceberg partition-statistics: {now.statistics_path}"
    )


def test_files_registered_before_owner_tags_stay_the_stores_after_an_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Releases before owner tags named their files ``lakestats-<snapshot>-<uuid>``. The
    store's bookkeeping names them: after an upgrade they stay its own — still recorded
    and shown as published, and replaced by a rebuild — not taken for another state dir's
    (the upgrade hunt: the first run forgot them, and a rebuild kept them as foreign).
    The old release is simulated by publishing with no owner, as it did."""
    from lakestats.publish.iceberg import registration

    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    with monkeypatch.context() as old_release:
        old_release.setattr(registration, "owner_tag", lambda _store_dir: None)
        run_analyze(config, opened, PySketcher())
    before = opened.store.current()
    assert before is not None
    old = before.published["iceberg"]["snapshots"]
    untagged = {p for entry in old.values() for p in entry.values()}
    # lakestats-<snapshot>-<uuid>: no o<owner> part (a uuid's hex never starts with "o")
    assert untagged and not any(Path(p).name.split("-")[2].startswith("o") for p in untagged)

    wh.append("t", rows(600, 10, ["a"]))
    run_analyze(config, opened, PySketcher())
    after = opened.store.current()
    assert after is not None
    snapshots = after.published["iceberg"]["snapshots"]
    assert {k: snapshots[k] for k in old} == old  # still recorded as this store's
    first = wh.lineage("t")[0]
    shown = read_stats(opened, first)["published"]
    assert all(any(p in line for line in shown) for p in old[str(first)].values()), shown

    with capture_logs() as logs:
        run_analyze(config, opened, PySketcher(), rebuild=True)
    assert not [e for e in logs if e["event"] == "publish_skipped_foreign_entry"]
    table = wh.table("t")
    registered = {s.statistics_path for s in table.metadata.statistics}
    registered |= {p.statistics_path for p in table.metadata.partition_statistics}
    assert registered.isdisjoint(untagged)  # replaced by the rebuild's own files
    assert not any(Path(local(p)).exists() for p in untagged)


def test_a_second_state_dir_keeps_the_files_the_first_one_registered(tmp_path: Path) -> None:
    """Two state dirs analysing one catalog table: the second neither replaces nor deletes
    what the first registered (issue 13: it silently replaced the partition stats file)."""
    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    config, opened = catalog_config(wh, "t", tmp_path / "state-a")
    run_analyze(config, opened, PySketcher())
    table = wh.table("t")
    first = {p.snapshot_id: p.statistics_path for p in table.metadata.partition_statistics}
    first_puffin = {s.snapshot_id: s.statistics_path for s in table.metadata.statistics}
    assert first and first_puffin
    files = lakestats_files(table)

    config_b, opened_b = catalog_config(wh, "t", tmp_path / "state-b")
    run_analyze(config_b, opened_b, PySketcher())
    table = wh.table("t")
    assert {p.snapshot_id: p.statistics_path for p in table.metadata.partition_statistics} == (
        first
    )
    assert {s.snapshot_id: s.statistics_path for s in table.metadata.statistics} == first_puffin
    assert lakestats_files(table) == files  # the second run's own copies were deleted
    for path in first.values():
        assert Path(local(path)).is_file()


def test_stats_of_a_snapshot_expired_before_registration_are_never_registered(
    tmp_path: Path,
) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    _, opened = catalog_config(wh, "t", tmp_path / "state")
    oldest = wh.lineage("t")[0]
    publisher = IcebergPublisher(opened.table)  # type: ignore[arg-type]
    publisher.stage(unsketched(opened, oldest), {})
    staged = lakestats_files(wh.table("t"))
    assert staged  # the partition stats file was written
    wh.expire_snapshots("t", [oldest])
    out = publisher.flush({})
    table = wh.table("t")
    assert oldest not in {p.snapshot_id for p in table.metadata.partition_statistics}
    assert oldest not in {s.snapshot_id for s in table.metadata.statistics}
    assert lakestats_files(table) == set()  # the unregistered file was deleted
    assert str(oldest) not in out["iceberg"]["snapshots"]


def test_location_opened_table_is_not_published(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    location = wh.location("t")
    metadata_location = wh.table("t").metadata_location
    state = str(tmp_path / "state")
    assert main(["analyze", location, "--state-dir", state, "--no-sketches", "-q"]) == 0
    assert wh.table("t").metadata_location == metadata_location  # nothing written beside it
    assert lakestats_files(wh.table("t")) == set()
    out = io.StringIO()
    assert main(["show", location, "--state-dir", state], out=out) == 0
    assert "published: not in table metadata: the table was opened by location" in out.getvalue()


def test_publishing_can_be_switched_off(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    make_table(wh)
    metadata_location = wh.table("t").metadata_location
    config, opened = catalog_config(wh, "t", tmp_path / "state", publish=False)
    run_analyze(config, opened, PySketcher())
    assert wh.table("t").metadata_location == metadata_location
    assert read_stats(opened)["published"] == [
        "not in table metadata: publishing is off for this table (publish = false)"
    ]


def test_writer_committing_concurrently_loses_nothing(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("cat", IdentityTransform())])
    wh.append("t", rows(0, 10, ["a"]))
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    writes = 25
    committed: list[int] = []
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(writes):
                committed.append(wh.append("t", rows(100 + 10 * i, 10, ["a", "b", f"p{i % 3}"])))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    runs = 0
    while thread.is_alive():
        run_analyze(config, opened, PySketcher())
        runs += 1
    thread.join()
    run_analyze(config, opened, PySketcher())
    assert not errors
    assert runs >= 2  # publishing really overlapped the writer
    table = wh.table("t")
    lineage = wh.lineage("t")
    assert set(committed) <= set(lineage)  # every writer commit survived
    assert len(lineage) == writes + 1
    assert len(table.scan().to_arrow()) == 10 + 10 * writes
    live = {s.snapshot_id for s in table.metadata.snapshots}
    assert {s.snapshot_id for s in table.metadata.statistics} <= live
    assert {p.snapshot_id for p in table.metadata.partition_statistics} <= live
    current = table.metadata.current_snapshot_id
    assert current in {s.snapshot_id for s in table.metadata.statistics}
    entry = next(p for p in table.metadata.partition_statistics if p.snapshot_id == current)
    got = pq.read_table(io.BytesIO(read_bytes(table, entry.statistics_path))).to_pylist()
    assert {r["partition"]["cat"]: r["data_record_count"] for r in got} == {
        k: v[0] for k, v in exact_partitions(table).items()
    }


def _before_first_commit(monkeypatch: pytest.MonkeyPatch, first: Callable[[], object]) -> None:
    """Run ``first`` (another process's work) just before this process's first catalog
    commit goes out."""
    original = SqlCatalog.commit_table
    done: list[bool] = []

    def commit_table(self: SqlCatalog, *args: Any) -> Any:
        if not done:
            done.append(True)
            first()
        return original(self, *args)

    monkeypatch.setattr(SqlCatalog, "commit_table", commit_table)


def test_two_runs_removing_the_same_expired_entry_both_succeed(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyiceberg's expiry leaves the partition statistics of the snapshots it expired;
    every run removes them. Two runs at once (a daemon and a CLI `analyze`, two hooks)
    send the same removal, and pyiceberg refuses the second ("… does not exist"): that run
    registers again on the table as it now is instead of failing with a ValueError."""
    wh, config, opened, _ = published
    wh.expire_snapshots("t", wh.lineage("t")[:2])
    wh.append("t", rows(900, 10, ["a", "z"]))
    _, other = catalog_config(wh, "t", tmp_path / "state")  # the other process's handle
    _before_first_commit(monkeypatch, lambda: run_analyze(config, other, PySketcher()))

    result = run_analyze(config, opened, PySketcher())

    table = wh.table("t")
    live = {s.snapshot_id for s in table.metadata.snapshots}
    assert result.last_snapshot_id == table.metadata.current_snapshot_id
    assert {s.snapshot_id for s in table.metadata.statistics} == live
    assert {p.snapshot_id for p in table.metadata.partition_statistics} == live


def test_a_catalog_failing_at_the_registration_commit_fails_publishing_only(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table loads, then the catalog's backend fails at the commit that registers the
    stats (here SQLite locked by another process's transaction: SQLAlchemy's
    OperationalError, no pyiceberg error). The run keeps its stats and logs
    publish_failed; the next run registers them."""
    wh, config, opened, _ = published
    newest = wh.append("t", rows(900, 10, ["a", "z"]))
    database = str(wh.root / "catalog.db")
    locker: list[subprocess.Popen[str]] = []

    def lock_the_catalog() -> None:
        script = (
            "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", script, database], stdout=subprocess.PIPE, text=True
        )
        locker.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"

    _before_first_commit(monkeypatch, lock_the_catalog)
    try:
        with capture_logs() as logs:
            result = run_analyze(config, opened, PySketcher())
    finally:
        for proc in locker:
            proc.kill()
            proc.wait()
    assert result.last_snapshot_id == newest
    assert read_stats(opened)["snapshot_id"] == newest
    [failed] = [e for e in logs if e["event"] == "publish_failed"]
    assert "the catalog failed at the commit (OperationalError" in failed["error"]
    assert newest not in {s.snapshot_id for s in wh.table("t").metadata.statistics}

    monkeypatch.undo()
    run_analyze(config, opened, PySketcher())  # nothing new to analyze: registers only
    table = wh.table("t")
    assert newest in {s.snapshot_id for s in table.metadata.statistics}
    assert newest in {p.snapshot_id for p in table.metadata.partition_statistics}


def test_duckdb_reads_the_published_table(
    published: tuple[IcebergWarehouse, Config, OpenedTable, list[Any]],
) -> None:
    from foreign import duckdb_with_iceberg

    wh, _, _, before = published
    # The extensions come from their PyPI packages (the test extra), not a network download.
    con = duckdb_with_iceberg()
    got = con.execute(
        "SELECT id, cat FROM iceberg_scan(?) ORDER BY id",
        [local(wh.table("t").metadata_location)],
    ).fetchall()
    assert sorted(got) == before
