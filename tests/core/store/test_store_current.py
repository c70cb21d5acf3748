"""``StatsStore.current``: once a store has read or written the newest state version, it
asks for that version's file and the next by name (two stats; on S3 two HEADs) instead of
listing the log and reading the whole state again — on every poll of every table.

Real stores in a temporary state dir and on the S3 server on 127.0.0.1. The store's
primitives (``atomic.list_dir``, ``read_bytes``, ``size``) are wrapped by counting spies
that call the real functions; every answer is compared with a store opened now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_store_api import TABLE, _commit_snapshot

from lakestats.exceptions import StoreError
from lakestats.model import StateVersion
from lakestats.store import StatsStore, atomic, statelog
from lakestats.store.statelog import version_path
from object_store import S3Server


@pytest.fixture(params=["local", "s3"])
def state_dir(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "state")
    server: S3Server = request.getfixturevalue("s3_server")
    return f"{server.new_bucket()}/state"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counted: Counter[str] = Counter()

    def spy(name: str) -> Callable[..., Any]:
        real = getattr(atomic, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return real(*args, **kwargs)

        return call

    for name in ("list_dir", "read_bytes", "size"):
        monkeypatch.setattr(atomic, name, spy(name))
    return counted


def fresh(state_dir: str) -> StateVersion | None:
    return StatsStore(state_dir, TABLE).current()


def delete(path: Path | str) -> None:
    assert atomic.remove(path)


def test_an_unchanged_log_is_asked_for_by_name(state_dir: str, calls: Counter[str]) -> None:
    writer = StatsStore(state_dir, TABLE)
    for snapshot_id in (1, 2, 3):
        _commit_snapshot(writer, snapshot_id)
    reader = StatsStore(state_dir, TABLE)
    calls.clear()
    first = reader.current()
    assert calls == {"list_dir": 1, "read_bytes": 1}  # the first look: a listing and a read
    for _ in range(3):
        calls.clear()
        assert reader.current() == first == fresh(state_dir)
        calls["list_dir"] -= 1  # the fresh store's look
        calls["read_bytes"] -= 1
        assert +calls == {"size": 2}, "the newest and the next, by name"
    assert first is not None and first.version == 3


def test_a_store_that_commits_knows_its_version_without_reading_it(
    state_dir: str, calls: Counter[str]
) -> None:
    store = StatsStore(state_dir, TABLE)
    _commit_snapshot(store, 1)
    written = _commit_snapshot(store, 2)
    calls.clear()
    assert store.current() == written
    assert calls == {"size": 2}
    assert written == fresh(state_dir)


def test_a_version_another_store_commits_is_seen_at_once(
    state_dir: str, calls: Counter[str]
) -> None:
    reader = StatsStore(state_dir, TABLE)
    writer = StatsStore(state_dir, TABLE)
    _commit_snapshot(writer, 1)
    assert reader.current() == fresh(state_dir)
    newer = _commit_snapshot(writer, 2)
    calls.clear()
    assert reader.current() == newer
    assert calls["list_dir"] == 1 and calls["read_bytes"] == 1  # a new version: read it
    calls.clear()
    assert reader.current() == newer and +calls == {"size": 2}


def test_a_newest_version_deleted_or_rewritten_is_looked_for_again(state_dir: str) -> None:
    """Never a state the log no longer holds: the newest version file deleted by hand (a
    store reset) gives the one before it, a rewritten one of another size is read again —
    here damaged, so the read says so (``current`` never falls back past the newest)."""
    store = StatsStore(state_dir, TABLE)
    first = _commit_snapshot(store, 1)
    second = _commit_snapshot(store, 2)
    assert store.current() == second
    delete(version_path(store.table_dir, 2))
    assert store.current() == first == fresh(state_dir)
    newest = version_path(store.table_dir, 1)
    atomic.atomic_write(newest, b'{"format_version": 1, "version": 1')
    with pytest.raises(StoreError) as damaged:
        store.current()
    assert str(newest) in str(damaged.value)
    delete(newest)
    assert store.current() is None and fresh(state_dir) is None
    again = _commit_snapshot(store, 7)
    assert again.version == 1 and store.current() == again == fresh(state_dir)


def test_a_newest_version_cleaned_up_after_the_listing_sends_the_read_to_the_newer(
    state_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader lists the log, a writer commits a newer version and the log's cleanup
    removes the listed newest (grace period 0) before the reader reads it: the reader
    reads the newer one (it raised "state version N does not exist"; the daemon's
    maintenance test met it). The interleaving is made by handing the reader the listing
    it took before the commit."""
    store = StatsStore(state_dir, TABLE)
    _commit_snapshot(store, 1)
    _commit_snapshot(store, 2)
    stale = statelog.list_versions(store.table_dir)
    newer = _commit_snapshot(store, 3)
    delete(version_path(store.table_dir, 2))
    real = statelog.list_versions
    listings = iter([stale])
    monkeypatch.setattr(statelog, "list_versions", lambda d: next(listings, None) or real(d))
    found = statelog.latest_version(store.table_dir)
    assert found == newer
    # a newest version gone with nothing newer is still an error, never an older state
    listings = iter([real(store.table_dir)])
    delete(version_path(store.table_dir, 3))
    with pytest.raises(StoreError, match="state version 3 does not exist"):
        statelog.latest_version(store.table_dir)


def test_a_state_read_by_name_is_the_one_written(state_dir: str) -> None:
    """What ``current`` hands out from memory equals the version file's contents, through
    every field (the hypothesis round trips cover the codec; this the cache's identity)."""
    store = StatsStore(state_dir, TABLE)
    _commit_snapshot(store, 1)
    written = store.commit(
        replace(
            _commit_snapshot(store, 2),
            version=3,
            published={"puffin": {"path": "x"}},
            last_fingerprint="sha256:abc",
        )
    )
    assert store.current() == written == store.read_version(3) == fresh(state_dir)
