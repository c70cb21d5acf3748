"""The state dir's folders (``store.folders``): described from their newest state, and
deleted so that a deletion stopped anywhere leaves a state whose files are all there, or
none."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_store_api import TABLE, _commit_snapshot

from lakestats.store import StatsStore, atomic, referenced_files, statelog
from lakestats.store.folders import delete_folder, describe_folder, folder_files, folder_names


def _store_with_history(state_dir: Path) -> StatsStore:
    store = StatsStore(state_dir, TABLE)
    for snapshot in range(1, 5):
        _commit_snapshot(store, snapshot)
    store.write_stats(99, {"snapshot_id": 99})  # an orphan a killed run left
    (store.table_dir / "log" / ".00000000000000000009.json.tmp-0123").write_bytes(b"{")
    return store


def test_a_folder_is_described_by_its_newest_state(tmp_path: Path) -> None:
    store = _store_with_history(tmp_path / "state")
    (tmp_path / "state" / ".hidden").mkdir()
    (tmp_path / "state" / "empty").mkdir()
    assert folder_names(tmp_path / "state") == [TABLE, "empty"]
    folder = describe_folder(tmp_path / "state", TABLE)
    on_disk = [p for p in Path(store.table_dir).rglob("*") if p.is_file()]
    assert (folder.files, folder.bytes) == (len(on_disk), sum(p.stat().st_size for p in on_disk))
    assert folder.newest_file_ms == max(p.stat().st_mtime_ns // 1_000_000 for p in on_disk)
    assert (folder.table_id, folder.location, folder.format) == (TABLE, "file:///wh/t", "iceberg")
    assert folder.last_snapshot_id == 4 and folder.unreadable is None
    # the stats documents of this store name no table (``_commit_snapshot`` writes none)
    assert folder.table is None
    empty = describe_folder(tmp_path / "state", "empty")
    assert (empty.files, empty.table_id, empty.unreadable) == (0, None, None)


def test_an_unreadable_newest_state_is_said_not_raised(tmp_path: Path) -> None:
    store = _store_with_history(tmp_path / "state")
    (store.table_dir / "log" / statelog.version_file_name(5)).write_bytes(b"{not json")
    folder = describe_folder(tmp_path / "state", TABLE)
    assert folder.table_id is None
    assert folder.unreadable is not None and "not valid JSON" in folder.unreadable


def test_a_deletion_stopped_anywhere_leaves_a_whole_state_or_none(tmp_path: Path) -> None:
    original = tmp_path / "original"
    _store_with_history(original)
    files = folder_files(original, TABLE)
    assert files[:4] == [f"log/{statelog.version_file_name(v)}" for v in range(1, 5)]
    assert sorted(files) == sorted(atomic.list_tree(original / TABLE))
    for stop in range(len(files) + 1):
        state_dir = tmp_path / f"stopped-{stop}"
        shutil.copytree(original, state_dir)
        delete_folder(state_dir, TABLE, files[:stop])
        newest = statelog.latest_version(state_dir / TABLE)
        if newest is not None:
            left = set(atomic.list_tree(state_dir / TABLE))
            assert referenced_files(newest) <= left, stop
        # and going on from there finishes the job
        assert delete_folder(state_dir, TABLE, folder_files(state_dir, TABLE)) == len(files) - stop
        assert not (state_dir / TABLE).exists()
        assert folder_names(state_dir) == []
