"""A real ``lakestatsd`` following a Delta table that delta-rs commits to: end to end, and
SIGKILLed over and over while the writer commits (the Iceberg crash suite's Delta twin).

Sketches are off so a restart takes a second (no JVM); the log reading, the commit path,
the store and the sidecar publisher are the real ones.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lakestatsd_harness import DaemonProcess, WriterLoop, fast_config_text, kill_while_writing

from delta_tables import DeltaWriter, live_rows
from lakestats.analyze import analyze_table, read_stats
from lakestats.config import load_config
from lakestats.formats.registry import open_table
from lakestats.publish.delta import FILE_PREFIX, INDEX_NAME
from lakestats.store import StatsStore
from lakestats.tables import open_configured

KILLS = 15  # the Iceberg suite kills 50 times; this twin checks the Delta paths
VOLATILE = {"computed_at_ms", "published"}


def config_text(location: str, state_dir: Path, *, maintenance: str = "") -> str:
    return fast_config_text(
        state_dir, f'[[table]]\nname = "t"\nlocation = "{location}"\n', maintenance=maintenance
    )


class Writer(WriterLoop):
    """delta-rs appends until stopped (the daemon never commits to the log)."""

    def __init__(self, writer: DeltaWriter) -> None:
        super().__init__("delta-crash-writer")
        self.writer = writer

    def commit(self, batch: dict[str, list[Any]]) -> None:
        self.writer.append(batch)


def new_table(root: Path) -> DeltaWriter:
    writer = DeltaWriter(root / "t")
    writer.create([("id", "long"), ("cat", "string")], partition_by=["cat"])
    writer.append({"id": [0], "cat": ["c0"]})
    return writer


def sidecar(writer: DeltaWriter) -> tuple[dict[str, str], set[str]]:
    folder = writer.log / "_lakestats"
    index_file = folder / INDEX_NAME
    index = dict(json.loads(index_file.read_text())["versions"]) if index_file.exists() else {}
    on_disk = {p.name for p in folder.iterdir() if p.name.startswith(FILE_PREFIX)}
    return index, on_disk


def test_the_daemon_follows_delta_commits(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    writer = new_table(tmp_path)
    daemon = run_daemon(config_text(writer.path, tmp_path / "state"))
    for i in range(1, 4):
        writer.append({"id": [i, i + 100], "cat": ["c1", "c2"]})
    writer.delete("id = 1")
    version = writer.version()

    def served() -> Any:
        resp = daemon.request("GET", "/v1/tables/t/stats")
        return resp.json() if resp.status == 200 else None

    daemon.wait_until(lambda: (served() or {}).get("snapshot_id") == version)
    doc = served()
    assert doc["format"] == "delta"
    assert doc["record_count"] == doc["merged_record_count"] == live_rows(writer.path).num_rows
    assert doc["columns"]["id"]["max"] == 103
    daemon.wait_until(lambda: str(version) in sidecar(writer)[0], timeout_s=30)
    assert daemon.terminate() == 0


@pytest.mark.slow
def test_copies_of_a_table_followed_by_one_daemon_keep_their_own_stats(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    """A copied table keeps its table id: the daemon opens both before either has stats,
    and each must still get a store of its own — before, they shared one, each run took
    the other's commits for a rollback, and both served the same stats."""
    original = new_table(tmp_path)
    copy_path = tmp_path / "copy"
    shutil.copytree(original.path, copy_path)
    copy = DeltaWriter(copy_path)
    assert open_table(str(copy_path)).table_id == open_table(original.path).table_id
    tables = "".join(
        f'[[table]]\nname = "{name}"\nlocation = "{path}"\n'
        for name, path in (("original", original.path), ("copy", copy_path))
    )
    daemon = run_daemon(fast_config_text(tmp_path / "state", tables))
    original.append({"id": [1, 2], "cat": ["c1", "c1"]})
    for i in range(3):
        copy.append({"id": [10 + i], "cat": ["c2"]})

    def served(name: str) -> Any:
        resp = daemon.request("GET", f"/v1/tables/{name}/stats")
        return resp.json() if resp.status == 200 else {}

    daemon.wait_until(
        lambda: (
            served("original").get("snapshot_id") == original.version()
            and served("copy").get("snapshot_id") == copy.version()
        )
    )
    for name, writer in (("original", original), ("copy", copy)):
        assert served(name)["record_count"] == live_rows(writer.path).num_rows
    assert (served("original")["record_count"], served("copy")["record_count"]) == (3, 4)
    assert not daemon.events("table_run_failed") and not daemon.events("lineage_restart")
    assert len(daemon.events("store_folder_taken")) == 1


def test_sigkill_while_delta_rs_commits_strands_nothing(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    writer = new_table(tmp_path)
    state_dir = tmp_path / "state"
    text = config_text(writer.path, state_dir)
    committer = Writer(writer)
    progress = kill_while_writing(run_daemon, text, committer, state_dir, KILLS)
    assert committer.error is None, committer.error
    assert committer.commits >= KILLS
    assert progress == sorted(progress), progress
    assert progress[-1] >= (KILLS + 2) // 3, progress

    daemon = run_daemon(text)
    current = writer.version()

    def settled() -> bool:
        resp = daemon.request("GET", "/v1/tables/t/stats")
        served = resp.json().get("snapshot_id") if resp.status == 200 else None
        index, _ = sidecar(writer)
        return served == current and str(current) in index

    daemon.wait_until(settled)
    assert daemon.terminate() == 0
    failures = [e for e in daemon.events() if e.get("event") == "table_run_failed"]
    assert not failures, daemon.tail()

    time.sleep(1.2)  # past the grace period: the next run sweeps what killed runs left
    config = load_config(tmp_path / "lakestatsd.toml")
    opened = open_configured(config.table[0], config)
    analyze_table(opened, config=config, sketcher=None)
    versions = {str(v) for v in opened.table.snapshot_ids()}
    index, on_disk = sidecar(writer)
    assert set(index) == versions
    assert on_disk == set(index.values()), sorted(on_disk - set(index.values()))
    state = opened.store.current()
    assert state is not None and {str(s) for s in state.stats} == versions

    fresh_config = config.model_copy(update={"state_dir": str(tmp_path / "fresh")})
    fresh = open_configured(config.table[0].model_copy(update={"publish": False}), fresh_config)
    analyze_table(fresh, config=fresh_config, sketcher=None)
    assert strip(read_stats(opened)) == strip(read_stats(fresh))


def strip(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}


def test_the_daemons_compaction_drops_the_rows_of_vacuumed_files(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    """Issue 11: VACUUM'd files lose their block sketches — here through the daemon's
    scheduled compaction and cleanup, with nobody running ``lakestats compact``."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create([("id", "long"), ("cat", "string")], partition_by=["cat"])
    writer.append({"id": list(range(20)), "cat": ["c1"] * 10 + ["c2"] * 10})  # one segment
    state_dir = tmp_path / "state"
    maintenance = "enabled = true\ncompaction_interval_s = 1\nmin_log_versions = 1"
    daemon = run_daemon(config_text(writer.path, state_dir, maintenance=maintenance))
    store = StatsStore(state_dir, open_table(writer.path).table_id)

    def served() -> Any:
        resp = daemon.request("GET", "/v1/tables/t/stats")
        return resp.json() if resp.status == 200 else None

    daemon.wait_until(lambda: (served() or {}).get("snapshot_id") == writer.version())
    version = writer.delete("cat = 'c1'")
    daemon.wait_until(lambda: (served() or {}).get("snapshot_id") == version)
    (vacuumed,) = writer.vacuum()
    gone = f"file://{writer.path}/{vacuumed}"

    def held_anywhere() -> set[str]:
        segments = [f.path for f in store.files() if f.path.startswith("segments/")]
        return {path for rel in segments for path in store.segment_paths(rel)}

    # the scheduled compaction drops its row, its cleanup deletes the segment that held it
    daemon.wait_until(lambda: gone not in held_anywhere())
    assert any(e.get("dead_rows_dropped") == 1 for e in daemon.events("compact_done"))
    state = store.current()
    assert state is not None
    rows = {f.path for s in state.segments for f in store.read_segment(s.path)}
    assert len(rows) == 1 and gone not in rows
    assert held_anywhere() == rows
    doc = served()
    assert doc["record_count"] == doc["merged_record_count"] == live_rows(writer.path).num_rows
    assert doc["columns"]["id"]["min"] == 10
    assert daemon.terminate() == 0
