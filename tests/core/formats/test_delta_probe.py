"""Refreshing a big Delta log by probing for new commits by name instead of listing it.

Real delta-rs commits, locally and on the S3 server on 127.0.0.1. ``list_log`` is wrapped
by a counting spy that calls the real function: the tests assert when a refresh listed.
Every probed state is compared with what a fresh listing of the same log gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from delta_tables import ID_NAME_PART, NO_LOG_RETENTION, DeltaWriter
from lakestats.formats import probing
from lakestats.formats.delta import log as delta_log
from lakestats.formats.delta import table as delta_table
from lakestats.formats.delta.table import DeltaLakeTable
from lakestats.locations import resolve_location
from object_store import S3Server


def rows(i: int) -> dict[str, list[Any]]:
    return {"id": [i], "name": [f"n{i}"], "part": ["a"]}


class ListingSpy:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, location: Any) -> delta_log.LogListing:
        self.calls += 1
        return delta_log.list_log(location)


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[ListingSpy]:
    spy = ListingSpy()
    monkeypatch.setattr(delta_table, "list_log", spy)
    yield spy


def same_as_a_listing(table: DeltaLakeTable, uri: str, spy: ListingSpy) -> None:
    """The probed table answers as a table opened (listed) now (not counted)."""
    fresh = DeltaLakeTable(resolve_location(uri))
    spy.calls -= 1
    probed, listed = table._snapshot(), fresh._snapshot()
    assert dict(probed.commits) == dict(listed.commits)
    assert table.current_snapshot_id() == fresh.current_snapshot_id()
    assert table.snapshot_ids() == fresh.snapshot_ids()
    assert [c.snapshot_id for c in table.commits_since(None)] == [
        c.snapshot_id for c in fresh.commits_since(None)
    ]
    for commit, expected in zip(table.commits_since(None), fresh.commits_since(None), strict=True):
        assert sorted(f.path for f in commit.added_files) == sorted(
            f.path for f in expected.added_files
        )


def test_new_commits_are_found_by_name(tmp_path: Path, listings: ListingSpy) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create(ID_NAME_PART)
    writer.append(rows(0))
    table = DeltaLakeTable(resolve_location(writer.path), probe_above_entries=0)
    assert listings.calls == 1  # the opening
    table.refresh()  # nothing new: the same listing, no list request
    assert listings.calls == 1
    before = table._snapshot()
    table.refresh()
    assert table._snapshot() is before
    for batch in (1, 3, 9):  # up to two probe batches beyond the newest commit
        for i in range(batch):
            writer.append(rows(i + 1))
        table.refresh()
        assert listings.calls == 1, f"listed after {batch} new commit(s)"
        same_as_a_listing(table, writer.path, listings)
    for i in range(17):  # a burst: one listing is cheaper than probing it
        writer.append(rows(100 + i))
    table.refresh()
    assert listings.calls == 2
    same_as_a_listing(table, writer.path, listings)


def test_a_small_log_is_listed_as_before(tmp_path: Path, listings: ListingSpy) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create(ID_NAME_PART)
    table = DeltaLakeTable(resolve_location(writer.path))  # default: probe past 1,000 files
    for i in range(3):
        writer.append(rows(i))
        table.refresh()
    assert listings.calls == 4


def test_a_log_cut_back_or_replaced_is_listed_again(tmp_path: Path, listings: ListingSpy) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create(ID_NAME_PART)
    for i in range(4):
        writer.append(rows(i))
    table = DeltaLakeTable(resolve_location(writer.path), probe_above_entries=0)
    top = writer.version()
    # cut back: the newest known commit is gone
    writer.cut_log_after(top - 2)
    table.refresh()
    assert listings.calls == 2
    assert table.current_snapshot_id() == top - 2
    same_as_a_listing(table, writer.path, listings)
    # written on from there: found by name (the newest known commit is still there)
    for i in range(2):
        writer.append(rows(50 + i))
    table.refresh()
    assert listings.calls == 2 and table.current_snapshot_id() == top
    same_as_a_listing(table, writer.path, listings)
    # cut back and written again as far as before between two refreshes: the newest
    # known version is there, but another file
    writer.cut_log_after(top - 1)
    writer.append(rows(70))
    assert writer.version() == top
    table.refresh()
    assert listings.calls == 3
    same_as_a_listing(table, writer.path, listings)


def test_what_a_probe_misses_is_listed_within_the_interval(
    tmp_path: Path, listings: ListingSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's log cleanup deletes old commits; a probe does not see that (nor a new
    checkpoint), the next listing does, at most ``RELIST_EVERY_S`` later."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create(ID_NAME_PART, configuration=NO_LOG_RETENTION)
    for i in range(4):
        writer.append(rows(i))
    table = DeltaLakeTable(resolve_location(writer.path), probe_above_entries=0)
    writer.cleanup()  # a checkpoint of the newest version, older commits deleted
    writer.append(rows(9))
    table.refresh()
    assert listings.calls == 1
    assert 1 in table._snapshot().commits  # stale: deleted since
    assert not table._snapshot().checkpoints
    monkeypatch.setattr(probing, "RELIST_EVERY_S", 0.0)
    table.refresh()
    assert listings.calls == 2
    assert 1 not in table._snapshot().commits and table._snapshot().checkpoints
    same_as_a_listing(table, writer.path, listings)


def test_probing_a_log_on_object_storage(
    tmp_path: Path, s3_server: S3Server, listings: ListingSpy
) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create(ID_NAME_PART)
    writer.append(rows(0))
    uri = f"{s3_server.new_bucket()}/t"
    s3_server.sync(Path(writer.path), uri)
    table = DeltaLakeTable(resolve_location(uri), probe_above_entries=0)
    table.refresh()
    for batch in (1, 5):
        for i in range(batch):
            writer.append(rows(10 + i))
        s3_server.sync(Path(writer.path), uri)
        table.refresh()
        same_as_a_listing(table, uri, listings)
    assert listings.calls == 1  # the opening only
