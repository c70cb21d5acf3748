"""Expiry, compaction and cleanup over real pyiceberg tables (metadata-only stats).

Every check compares with something independent: a from-scratch analyze of the table, the
stats documents written before maintenance, or the files on disk.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform

from lakestats.analyze import analyze_table, read_stats
from lakestats.cli import main
from lakestats.config import (
    Config,
    ExpireConfig,
    MaintenanceConfig,
    SketchConfig,
    TableConfig,
    load_config,
)
from lakestats.exceptions import SnapshotNotFoundError, StoreError
from lakestats.maintenance import compact, expire
from lakestats.merge import merge_partitions
from lakestats.model import SketchSettings, StateVersion
from lakestats.store import StatsStore, merge_key, referenced_files
from lakestats.tables import OpenedTable, open_configured
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
VOLATILE = ("computed_at_ms", "published")


def rows(start: int, n: int, parts: tuple[str, ...] = ("a",)) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "part": [parts[i % len(parts)] for i in ids]}, schema=SCHEMA)


def make_config(
    state: Path,
    wh: IcebergWarehouse | None = None,
    tables: tuple[TableConfig, ...] = (),
    **maintenance: Any,
) -> Config:
    settings: dict[str, Any] = {"grace_period": "0s", "min_log_versions": 1} | maintenance
    catalog = {wh.catalog_name: dict(wh.catalog_properties)} if wh is not None else {}
    return Config(
        state_dir=str(state),
        sketch=SketchConfig(enabled=False),
        maintenance=MaintenanceConfig(**settings),
        catalog=catalog,
        table=tables,
    )


def catalog_table(wh: IcebergWarehouse, name: str, **expire: Any) -> TableConfig:
    return TableConfig(
        name=name,
        catalog=wh.catalog_name,
        identifier=wh.identifier(name),
        expire=ExpireConfig(**expire) if expire else None,
    )


def location_table(wh: IcebergWarehouse, name: str) -> TableConfig:
    return TableConfig(name=name, location=wh.location(name))


def analyze(opened: OpenedTable, config: Config) -> None:
    analyze_table(opened, config=config, sketcher=None)


def stable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}


def table_part(doc: dict[str, Any]) -> dict[str, Any]:
    """What a from-scratch recompute must reproduce: all but the per-commit section."""
    return {k: v for k, v in stable(doc).items() if k != "commit"}


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), out=out), out.getvalue()


def assert_store_consistent(store: StatsStore, *, grace_zero: bool = True) -> None:
    """Every file a kept version references exists; with no grace, nothing else does."""
    referenced: set[str] = set()
    for version in store.versions():
        refs = referenced_files(store.read_version(version))
        for rel in refs:
            assert store.path(rel).is_file(), rel
        referenced |= refs
    if grace_zero:
        assert {f.path for f in store.files()} == referenced


# -- the bounded store ---------------------------------------------------------------------------


def test_200_commits_with_periodic_expiry_keep_the_store_bounded(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    retain, max_segments, min_versions, every = 10, 4, 2, 10
    table = catalog_table(wh, "t", retain_last=retain)
    config = make_config(
        tmp_path / "state",
        wh,
        (table,),
        max_segments=max_segments,
        min_log_versions=min_versions,
        segment_target_files=3,
    )
    opened = open_configured(table, config)
    usage: list[tuple[int, int]] = []
    largest = 0
    for i in range(200):
        if i % 25 == 24:
            wh.overwrite("t", rows(i * 10, 3))  # keeps the table itself small
        else:
            wh.append("t", rows(i * 10, 2))
        if i % 5 == 4:
            analyze(opened, config)
        if i % every == every - 1:
            expire(opened, config)
            assert len(wh.table("t").metadata.snapshots) == retain
            state = opened.store.current()
            assert state is not None
            assert set(state.stats) == set(wh.lineage("t"))  # exactly the live snapshots
            compact(opened, config)
            state = opened.store.current()
            assert state is not None and len(state.segments) <= max_segments
            usage.append(opened.store.usage())
            largest = max([largest, *(f.size for f in opened.store.files())])
            # Two retained versions (min_log_versions): before and after the compaction.
            # Before: ≤ retain stats, ≤ max_segments + `every` segments and as many
            # aggregates; after: the same stats, ≤ max_segments segments and aggregates.
            bound = retain + 2 * (max_segments + every) + 2 * max_segments + min_versions
            files, size = usage[-1]
            assert files <= bound, (i, files, bound)
            assert size <= bound * largest
            assert_store_consistent(opened.store)
    assert len(usage) == 20
    # no growth: the last cycles use no more than the first ones
    assert max(f for f, _ in usage[10:]) <= max(f for f, _ in usage[:10])
    assert max(b for _, b in usage[10:]) <= 1.5 * max(b for _, b in usage[:10])
    # the current stats equal a from-scratch recompute of the table as it is now
    analyze(opened, config)
    fresh_config = make_config(tmp_path / "fresh", wh, (table,))
    fresh = open_configured(table, fresh_config)
    analyze(fresh, fresh_config)
    assert table_part(read_stats(opened)) == table_part(read_stats(fresh))


# -- following expiry by anyone -----------------------------------------------------------------


def test_expiry_by_pyiceberg_outside_lakestats(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(12):
        wh.append("t", rows(i * 10, 10))
        if i % 4 == 3:
            wh.delete("t", f"id < {i * 6}")
    loc = wh.location("t")
    state = tmp_path / "state"
    assert cli("analyze", loc, "--state-dir", str(state), "--no-sketches", "-q")[0] == 0
    lineage = wh.lineage("t")
    before = {}
    for snapshot in lineage:
        code, text = cli(
            "show", loc, "--state-dir", str(state), "--json", "--snapshot", str(snapshot)
        )
        assert code == 0
        before[snapshot] = stable(json.loads(text))
    gone, kept = lineage[:9], lineage[9:]
    wh.expire_snapshots("t", gone)

    # before lakestats ran: the stats are still stored, but show already says "expired"
    code, _ = cli("show", loc, "--state-dir", str(state), "--snapshot", str(gone[0]))
    assert code == 1

    # any lakestats run follows: here a plain analyze with no new commit
    code, text = cli("analyze", loc, "--state-dir", str(state), "--no-sketches", "-q")
    assert code == 0 and "up to date" in text
    (table_dir,) = state.iterdir()
    store = StatsStore(state, table_dir.name)
    current = store.current()
    assert current is not None
    assert set(current.stats) == set(kept)
    assert set(current.expired) == set(gone)
    for snapshot in kept:
        code, text = cli(
            "show", loc, "--state-dir", str(state), "--json", "--snapshot", str(snapshot)
        )
        assert code == 0 and stable(json.loads(text)) == before[snapshot]
    opened = open_configured(location_table(wh, "t"), make_config(state))
    for snapshot in gone:
        with pytest.raises(
            SnapshotNotFoundError, match=f"snapshot {snapshot} of table t was expired"
        ):
            read_stats(opened, snapshot)
    with pytest.raises(SnapshotNotFoundError, match="does not exist or was expired before"):
        read_stats(opened, 12345)

    # the stats documents of expired snapshots are physically deleted by cleanup (grace 0)
    old_docs = {
        store.path(p) for v in store.versions() for p in store.read_version(v).stats.values()
    }
    config = tmp_path / "lakestats.toml"
    config.write_text('[maintenance]\ngrace_period = "0s"\nmin_log_versions = 1\n')
    code, text = cli("expire", loc, "--state-dir", str(state), "--config", str(config))
    assert code == 0 and "no expire policy" in text
    remaining = {p for p in old_docs if p.exists()}
    assert {p.name.split("-")[0] for p in remaining} == {str(s) for s in kept}
    assert_store_consistent(store)
    for snapshot in kept:
        code, text = cli(
            "show", loc, "--state-dir", str(state), "--json", "--snapshot", str(snapshot)
        )
        assert code == 0 and stable(json.loads(text)) == before[snapshot]


def test_managed_expiry_drops_the_retired_segments_of_what_it_expires(tmp_path: Path) -> None:
    """An overwrite retires the segments of the files it removed (their snapshots may come
    back); the expiry of the snapshots that listed them drops them, and cleanup their
    files."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(3):
        wh.append("t", rows(i * 10, 5))
    wh.overwrite("t", rows(100, 5))  # every file removed: each segment retires
    toml = tmp_path / "lakestats.toml"
    props = "\n".join(f'{k} = "{v}"' for k, v in wh.catalog_properties.items())
    toml.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[sketch]\nenabled = false\n'
        f'[maintenance]\ngrace_period = "0s"\nmin_log_versions = 1\n'
        f"[catalog.{wh.catalog_name}]\n{props}\n"
        f'[[table]]\nname = "t"\ncatalog = "{wh.catalog_name}"\n'
        f'identifier = "{wh.identifier("t")}"\nexpire = {{ retain_last = 1 }}\n'
    )
    assert cli("analyze", "t", "--config", str(toml), "-q")[0] == 0
    config = load_config(toml)
    opened = open_configured(config.table[0], config)
    state = opened.store.current()
    assert state is not None
    retired = [opened.store.path(r.path) for r in state.retired]
    assert len(retired) == 3 and all(path.exists() for path in retired)

    code, text = cli("expire", "t", "--config", str(toml), "--dry-run")
    assert code == 0
    assert text.count("would drop retired segment") == 3
    code, text = cli("expire", "t", "--config", str(toml))
    assert code == 0 and text.count("drop retired segment") == 3
    state = opened.store.current()
    assert state is not None and state.retired == ()
    # the version before still names them (a reader may hold it): the next cleanup deletes
    time.sleep(0.01)
    assert cli("compact", "t", "--config", str(toml))[0] == 0
    assert not any(path.exists() for path in retired)
    assert_store_consistent(opened.store)


def test_snapshots_another_process_expired_meanwhile_are_not_an_error(tmp_path: Path) -> None:
    """Two expiries at once (``lakestats expire`` beside the daemon's schedule): the one
    whose plan names snapshots the other removed first expires what is left, no error."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(4):
        wh.append("t", rows(i * 10, 5))
    config = make_config(tmp_path / "state", wh, (catalog_table(wh, "t", retain_last=1),))
    opened = open_configured(config.table[0], config)
    analyze(opened, config)
    lineage = wh.lineage("t")
    wh.expire_snapshots("t", lineage[:2])  # the other process, first
    opened.table.expire_snapshots(lineage[:3])  # planned on the metadata loaded before
    assert wh.lineage("t") == lineage[3:]
    assert opened.table.snapshot_ids() == frozenset(lineage[3:])


def test_managed_expiry_cli_dry_run_and_policy(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(8):
        wh.append("t", rows(i * 10, 5))
    toml = tmp_path / "lakestats.toml"
    props = "\n".join(f'{k} = "{v}"' for k, v in wh.catalog_properties.items())
    toml.write_text(
        f'state_dir = "state"\n[sketch]\nenabled = false\n'
        f'[maintenance]\ngrace_period = "0s"\nmin_log_versions = 1\n'
        f"[catalog.{wh.catalog_name}]\n{props}\n"
        f'[[table]]\nname = "t"\ncatalog = "{wh.catalog_name}"\n'
        f'identifier = "{wh.identifier("t")}"\n'
        f"expire = {{ retain_last = 3 }}\n"
        f'[[table]]\nname = "byloc"\nlocation = "{wh.location("t")}"\n'
        f"expire = {{ retain_last = 3 }}\n"
    )
    assert cli("analyze", "t", "--config", str(toml), "-q")[0] == 0
    lineage = wh.lineage("t")
    code, text = cli("expire", "t", "--config", str(toml), "--dry-run")
    assert code == 0
    for snapshot in lineage[:5]:
        assert f"would expire snapshot {snapshot}" in text
        assert f"would drop stats of snapshot {snapshot}" in text
    assert wh.lineage("t") == lineage  # a dry run changes nothing
    code, text = cli("expire", "t", "--config", str(toml))
    assert code == 0 and "expire 5 snapshot(s), drop stats of 5" in text
    assert wh.lineage("t") == lineage[5:]
    code, _ = cli("show", "t", "--config", str(toml), "--snapshot", str(lineage[6]))
    assert code == 0
    err = io.StringIO()
    sys_stderr, sys.stderr = sys.stderr, err
    try:
        code, _ = cli("show", "t", "--config", str(toml), "--snapshot", str(lineage[0]))
        assert code == 1
        assert f"snapshot {lineage[0]} of table t was expired" in err.getvalue()
        for dry_run in ("--dry-run", None):  # the dry run promises only what can be done
            err.seek(0)
            err.truncate()
            code, text = cli("expire", "byloc", "--config", str(toml), *filter(None, [dry_run]))
            assert code == 1 and "would expire" not in text, text
            assert "opened by location, which is read-only" in err.getvalue()
            assert "catalog + identifier" in err.getvalue()
    finally:
        sys.stderr = sys_stderr


# -- compaction ---------------------------------------------------------------------------------


def build_history(wh: IcebergWarehouse, name: str, commits: int) -> None:
    wh.create_table(name, SCHEMA, partition_by=[("part", IdentityTransform())])
    for i in range(commits):
        wh.append(name, rows(i * 10, 9, parts=("a", "b", "c")))  # one file per partition
        if i % 7 == 6:
            wh.delete(name, f"part = 'b' AND id < {i * 10}")  # partly kills segments


def test_compaction_drops_dead_rows_and_keeps_stats(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    build_history(wh, "t", 24)
    table = location_table(wh, "t")
    config = make_config(tmp_path / "state", max_segments=3, segment_target_files=10)
    opened = open_configured(table, config)
    analyze(opened, config)
    before = opened.store.current()
    assert before is not None
    assert any(s.dead_files for s in before.segments) and len(before.segments) > 3
    docs = {s: stable(read_stats(opened, s)) for s in before.stats}
    live_before = sum(s.live_file_count for s in before.segments)

    dry = compact(opened, config, dry_run=True)
    assert dry.dead_rows_dropped > 0 and opened.store.current() == before

    report = compact(opened, config)
    after = opened.store.current()
    assert after is not None and report.version == after.version == before.version + 1
    assert len(after.segments) <= 3
    assert not any(s.dead_files for s in after.segments)
    assert sum(s.file_count for s in after.segments) == live_before
    live_paths = {f.path for f in opened.table.live_files(wh.lineage("t")[-1])}
    stored = {f.path for s in after.segments for f in opened.store.read_segment(s.path)}
    assert stored == live_paths  # exactly the live files: dead rows are gone
    for snapshot, doc in docs.items():
        assert stable(read_stats(opened, snapshot)) == doc
    assert_store_consistent(opened.store)
    # the merged view carries over (compaction changes no merge): the next commit extends
    # it instead of re-merging every segment, and it is what the segments merge to
    assert after.merged_key == merge_key(after)
    fresh_store = StatsStore(opened.store.table_dir.parent, opened.store.table_id)
    carried = fresh_store.merged_view(after, SketchSettings())
    parts = [p for s in after.segments for p in fresh_store.segment_aggregate(s)]
    remerged = merge_partitions(parts, SketchSettings())
    assert [(p.partition, p.record_count, p.file_count) for p in carried.partitions] == [
        (p.partition, p.record_count, p.file_count) for p in remerged
    ]
    # a second run has nothing to do
    again = compact(opened, config)
    assert again.merged == () and again.version is None

    # and the next commits still merge into correct stats
    wh.delete("t", "part = 'a'")
    wh.append("t", rows(5000, 6, parts=("a", "c")))
    analyze(opened, config)
    fresh_config = make_config(tmp_path / "fresh")
    fresh = open_configured(table, fresh_config)
    analyze(fresh, fresh_config)
    assert table_part(read_stats(opened)) == table_part(read_stats(fresh))


def test_reader_holding_an_old_version_reads_consistent_stats(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    build_history(wh, "t", 15)
    table = location_table(wh, "t")
    config = make_config(tmp_path / "state", grace_period="1h", max_segments=2)
    opened = open_configured(table, config)
    analyze(opened, config)
    store = opened.store
    held = store.current()  # the reader loads this version, then compaction runs
    assert held is not None and held.last_snapshot_id is not None
    held_doc = held.stats[held.last_snapshot_id]
    settings = config.sketch.settings()

    def merged(state: Any) -> Any:
        parts = [p for s in state.segments for p in store.segment_aggregate(s)]
        return merge_partitions(parts, settings)

    expected = merged(held)
    doc = stable(store.read_stats(held_doc))
    for _ in range(3):  # compaction and cleanup, several times, while the reader holds it
        compact(opened, config)
        reread = StatsStore(config.state_dir, store.table_id, cache_bytes=0)  # no cache
        assert merged(held) == expected
        for rel in referenced_files(held):
            assert reread.path(rel).is_file(), rel
        assert [f.path for s in held.segments for f in reread.read_segment(s.path)]
        assert stable(reread.read_stats(held_doc)) == doc
        assert reread.read_version(held.version) == held
    new = store.current()
    assert new is not None and new.version > held.version and len(new.segments) <= 2
    totals = [(p.partition, p.record_count, p.file_count) for p in merged(new)]
    assert totals == [(p.partition, p.record_count, p.file_count) for p in expected]

    # past the grace period, the superseded version and its files go
    later = time.time_ns() // 1_000_000 + 2 * 3_600_000
    report = compact(opened, config, now_ms=later)
    assert held.version in report.cleanup.versions_deleted
    gone = referenced_files(held) - referenced_files(store.current())
    assert gone and not any(store.path(rel).exists() for rel in gone)
    with pytest.raises(StoreError, match="does not exist"):
        store.read_version(held.version)


def test_a_failed_compaction_leaves_stats_readable(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    build_history(wh, "t", 8)
    table = location_table(wh, "t")
    config = make_config(tmp_path / "state", max_segments=1)
    opened = open_configured(table, config)
    analyze(opened, config)
    before = opened.store.current()
    assert before is not None
    doc = stable(read_stats(opened))
    victim = opened.store.path(before.segments[0].path)
    victim.write_bytes(b"not parquet")  # disk corruption, or another tool
    with pytest.raises(StoreError, match=victim.name):
        compact(opened, config)
    assert opened.store.current() == before
    assert stable(read_stats(opened)) == doc
    for snapshot in before.stats:
        read_stats(opened, snapshot)


# -- crash trials -------------------------------------------------------------------------------

WORKER = """
import sys
import lakestats.maintenance, lakestats.tables, lakestats.analyze  # import before "ready"
from lakestats.cli import main
print("ready", flush=True)
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    return {**os.environ, "PYTHONPATH": f"{root / 'core'}{os.pathsep}{root / 'daemon'}"}


def _kill_during(args: list[str], worker: Path, delay_s: float) -> bool:
    """Start the CLI, SIGKILL it ``delay_s`` after its imports; whether it was still running."""
    proc = subprocess.Popen(
        [sys.executable, str(worker), *args],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay_s)
    alive = proc.poll() is None
    if alive:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    return alive


def _end_state(store: StatsStore) -> tuple[Any, ...]:
    """The state up to file names (uuids differ between runs)."""
    state = store.current()
    assert state is not None
    segments = tuple(
        (s.snapshot_id, frozenset(f.path for f in store.read_segment(s.path)), s.dead_files)
        for s in state.segments
    )
    stats = {k: stable(store.read_stats(p)) for k, p in state.stats.items()}
    return state.last_snapshot_id, segments, stats, frozenset(state.expired)


@pytest.mark.slow
def test_sigkill_during_compaction_then_rerun(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    build_history(wh, "t", 30)
    loc = wh.location("t")
    base = tmp_path / "base"
    assert cli("analyze", loc, "--state-dir", str(base), "--no-sketches", "-q")[0] == 0
    toml = tmp_path / "lakestats.toml"
    toml.write_text(
        '[sketch]\nenabled = false\n[maintenance]\ngrace_period = "0s"\nmin_log_versions = 1\n'
        "max_segments = 3\nsegment_target_files = 5\n"
    )
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)

    reference = tmp_path / "reference"
    shutil.copytree(base, reference)
    started = time.monotonic()
    assert cli("compact", loc, "--state-dir", str(reference), "--config", str(toml))[0] == 0
    window = time.monotonic() - started
    (table_dir,) = reference.iterdir()
    expected = _end_state(StatsStore(reference, table_dir.name))

    rng = random.Random(5)
    killed = 0
    for trial in range(3):
        state = tmp_path / f"trial-{trial}"
        shutil.copytree(base, state)
        args = ["compact", loc, "--state-dir", str(state), "--config", str(toml)]
        for _ in range(2):
            killed += _kill_during(args, worker, rng.uniform(0, 1.5 * window + 0.1))
        # a reader between the crash and the rerun sees valid, complete stats
        assert cli("show", loc, "--state-dir", str(state), "--json")[0] == 0
        assert cli(*args)[0] == 0
        store = StatsStore(state, table_dir.name)
        assert _end_state(store) == expected, trial
        assert_store_consistent(store)
        assert len(store.versions()) == 1
    assert killed > 0


@pytest.mark.slow
def test_sigkill_during_managed_expiry_then_rerun(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    rng = random.Random(11)
    killed = 0
    for trial in range(2):
        name = f"t{trial}"
        wh.create_table(name, SCHEMA)
        for i in range(20):
            wh.append(name, rows(i * 10, 4))
            if i % 6 == 5:
                wh.delete(name, f"id < {i * 5}")
        toml = tmp_path / f"{name}.toml"
        props = "\n".join(f'{k} = "{v}"' for k, v in wh.catalog_properties.items())
        toml.write_text(
            f'state_dir = "state-{name}"\n[sketch]\nenabled = false\n'
            f'[maintenance]\ngrace_period = "0s"\nmin_log_versions = 1\n'
            f"[catalog.{wh.catalog_name}]\n{props}\n"
            f'[[table]]\nname = "{name}"\ncatalog = "{wh.catalog_name}"\n'
            f'identifier = "{wh.identifier(name)}"\nexpire = {{ retain_last = 4 }}\n'
        )
        assert cli("analyze", name, "--config", str(toml), "-q")[0] == 0
        lineage = wh.lineage(name)
        state = tmp_path / f"state-{name}"
        (table_dir,) = state.iterdir()
        store = StatsStore(state, table_dir.name)
        analyzed = store.current()
        assert analyzed is not None
        docs = {s: stable(store.read_stats(p)) for s, p in analyzed.stats.items()}
        for delay in (rng.uniform(0.05, 0.6), rng.uniform(0.0, 0.3)):
            killed += _kill_during(["expire", name, "--config", str(toml)], worker, delay)
            assert cli("show", name, "--config", str(toml), "--json")[0] == 0
        assert cli("expire", name, "--config", str(toml))[0] == 0
        kept = lineage[-4:]
        assert wh.lineage(name) == kept
        assert {s.snapshot_id for s in wh.table(name).metadata.snapshots} == set(kept)
        last, segments, stats, expired = _end_state(store)
        assert last == lineage[-1]
        assert stats == {s: docs[s] for s in kept}
        assert expired == frozenset(lineage[:-4])
        assert_store_consistent(store)
        # running it again changes nothing
        assert cli("expire", name, "--config", str(toml))[0] == 0
        assert _end_state(store) == (last, segments, stats, expired)
    assert killed > 0


def test_store_primitives_refuse_what_cleanup_must_never_do(tmp_path: Path) -> None:
    store = StatsStore(tmp_path, "t")
    base = StateVersion(1, "t", "iceberg", "/l", None, expired={5: 1000, -3: 2000})
    store.commit(base)
    store.commit(replace(base, version=2))
    assert store.read_version(1).expired == {5: 1000, -3: 2000}  # round trip
    with pytest.raises(ValueError, match="newest"):
        store.delete_version(2)
    with pytest.raises(ValueError, match="state version"):
        store.delete_file("log/00000000000000000001.json")
    assert store.delete_version(1) and not store.delete_version(1)  # idempotent
    assert store.versions() == [2]
    assert store.usage()[0] == 1
