"""Refreshing a big Paimon ``snapshot/`` directory by asking for snapshot files by name
instead of listing it.

Real pypaimon commits, locally and on the S3 server on 127.0.0.1. ``snapshot_listing`` is
wrapped by a counting spy that calls the real method: the tests assert when a refresh
listed. Every probed state is compared with what a table opened (listed) now gives.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from file_calls import counting_filesystem
from lakestats.formats import probing
from lakestats.formats.paimon import PaimonTable
from lakestats.formats.paimon.metafiles import MetaFiles, SnapshotListing
from lakestats.lineage import replaced_commit
from lakestats.locations import resolve_location
from lakestats.model import StateVersion
from object_store import S3Server
from paimon_tables import PaimonWarehouse

NAME = "t"


class ListingSpy:
    calls = 0


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[ListingSpy]:
    spy = ListingSpy()
    real = MetaFiles.snapshot_listing

    def counted(files: MetaFiles) -> SnapshotListing:
        spy.calls += 1
        return real(files)

    monkeypatch.setattr(MetaFiles, "snapshot_listing", counted)
    yield spy


@pytest.fixture
def warehouse(tmp_path: Path) -> PaimonWarehouse:
    made = PaimonWarehouse(tmp_path / "warehouse")
    made.create(NAME, [("id", "long")])
    return made


def write(warehouse: PaimonWarehouse, *ids: int) -> int:
    return warehouse.write(NAME, {"id": list(ids)})


def probing_table(location: str) -> PaimonTable:
    return PaimonTable(resolve_location(location), probe_above_entries=0)


def same_as_a_listing(table: PaimonTable, location: str, spy: ListingSpy) -> None:
    """The probed table answers as a table opened (listed) now (not counted)."""
    fresh = PaimonTable(resolve_location(location))
    spy.calls -= 1
    assert table.current_snapshot_id() == fresh.current_snapshot_id()
    assert table.snapshot_ids() == fresh.snapshot_ids()
    probed, listed = table.commits_since(None), fresh.commits_since(None)
    assert [c.snapshot_id for c in probed] == [c.snapshot_id for c in listed]
    for commit, expected in zip(probed, listed, strict=True):
        assert sorted(f.path for f in commit.added_files) == sorted(
            f.path for f in expected.added_files
        )
        assert sorted(f.path for f in commit.removed_files) == sorted(
            f.path for f in expected.removed_files
        )


def test_new_snapshots_are_found_by_name(warehouse: PaimonWarehouse, listings: ListingSpy) -> None:
    write(warehouse, 0)
    location = str(warehouse.location(NAME))
    table = probing_table(location)
    assert listings.calls == 1  # the opening
    table.refresh()  # nothing new: no list request
    assert listings.calls == 1 and table.current_snapshot_id() == 1
    for batch in (1, 3, 9):  # up to two probe batches beyond the newest snapshot
        for i in range(batch):
            write(warehouse, 10 * batch + i)
        table.refresh()
        assert listings.calls == 1, f"listed after {batch} new snapshot(s)"
        same_as_a_listing(table, location, listings)
    for i in range(17):  # a burst: one listing is cheaper than probing it
        write(warehouse, 100 + i)
    table.refresh()
    assert listings.calls == 2
    same_as_a_listing(table, location, listings)


def test_a_small_directory_is_listed_as_before(
    warehouse: PaimonWarehouse, listings: ListingSpy
) -> None:
    table = PaimonTable(resolve_location(str(warehouse.location(NAME))))  # probe past 1,000
    for i in range(3):
        write(warehouse, i)
        table.refresh()
    assert listings.calls == 4
    assert table.current_snapshot_id() == 3


def test_a_rollback_is_listed_again(warehouse: PaimonWarehouse, listings: ListingSpy) -> None:
    for i in range(4):
        write(warehouse, i)
    location = str(warehouse.location(NAME))
    table = probing_table(location)
    assert [c.snapshot_id for c in table.commits_since(None)] == [1, 2, 3, 4]
    # rolled back: the newest known snapshot is gone
    warehouse.rollback(NAME, 2)
    table.refresh()
    assert listings.calls == 2 and table.current_snapshot_id() == 2
    same_as_a_listing(table, location, listings)
    # committed on from there: found by name (the newest known snapshot is still there)
    for i in range(2):
        write(warehouse, 50 + i)
    table.refresh()
    assert listings.calls == 2 and table.current_snapshot_id() == 4
    same_as_a_listing(table, location, listings)
    # rolled back and committed again as far as before between two refreshes: the newest
    # id is there, but another file; the snapshots read before under ids 3 and 4 are
    # forgotten (their files' stamps differ)
    before = table.snapshot(4)
    warehouse.rollback(NAME, 2)
    write(warehouse, 70)
    write(warehouse, 71)
    table.refresh()
    assert listings.calls == 3 and table.current_snapshot_id() == 4
    assert table.snapshot(4) != before
    same_as_a_listing(table, location, listings)


def test_snapshots_expired_by_another_writer_are_listed_at_once(
    warehouse: PaimonWarehouse, listings: ListingSpy
) -> None:
    """Paimon deletes the oldest snapshot files first: a probe that finds the oldest known
    one gone lists, so the ids a poll sees never keep an expired snapshot (the stats
    expiry that follows a writer's expiry is not delayed)."""
    for i in range(5):
        write(warehouse, i)
    location = str(warehouse.location(NAME))
    table = probing_table(location)
    other = PaimonTable(resolve_location(location))  # another process: the writer
    other.expire_snapshots([1, 2])
    listings.calls = 1
    table.refresh()
    assert listings.calls == 2
    assert table.snapshot_ids() == frozenset({3, 4, 5})
    same_as_a_listing(table, location, listings)
    write(warehouse, 9)
    table.refresh()  # the oldest known is there again: probed
    assert listings.calls == 2 and table.snapshot_ids() == frozenset({3, 4, 5, 6})


def test_a_snapshot_written_again_with_the_same_stamp_is_read_again(
    warehouse: PaimonWarehouse, listings: ListingSpy
) -> None:
    """Rolled back and committed again within the same second (object stores keep whole
    seconds) by a snapshot of the same size: the stamps cannot tell, so a refresh reads the
    newest snapshot again (every such rewrite rewrites the newest) and forgets what it read
    before; the fingerprint check (``replaced_commit``) then sees another commit. Made here
    by giving the new file the old one's size and mtime."""
    for i in range(3):
        write(warehouse, i)
    location = str(warehouse.location(NAME))
    snapshot_file = warehouse.location(NAME) / "snapshot" / "snapshot-3"
    # room to make the next snapshot-3 as long (JSON allows trailing whitespace)
    snapshot_file.write_bytes(snapshot_file.read_bytes() + b" " * 64)
    first = snapshot_file.stat()
    table = probing_table(location)
    old = table.snapshot(3)
    fingerprint = table.commit_fingerprint(3)
    assert fingerprint is not None
    warehouse.rollback(NAME, 2)
    write(warehouse, 40)
    written = snapshot_file.read_bytes()
    assert len(written) <= first.st_size
    snapshot_file.write_bytes(written + b" " * (first.st_size - len(written)))
    os.utime(snapshot_file, ns=(first.st_atime_ns, first.st_mtime_ns))
    table.refresh()
    assert listings.calls == 1  # the probe saw the same stamps
    assert table.snapshot(3) != old  # read again
    processed = StateVersion(
        version=1,
        table_id=table.table_id,
        format="paimon",
        location=location,
        last_snapshot_id=3,
        last_fingerprint=fingerprint,
    )
    assert replaced_commit(table, processed) is not None
    same_as_a_listing(table, location, listings)


def test_what_a_probe_misses_is_listed_within_the_interval(
    warehouse: PaimonWarehouse, listings: ListingSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(warehouse, 0)
    table = probing_table(str(warehouse.location(NAME)))
    table.refresh()
    assert listings.calls == 1
    monkeypatch.setattr(probing, "RELIST_EVERY_S", 0.0)
    table.refresh()
    assert listings.calls == 2


def test_an_idle_poll_asks_for_three_files_and_reads_one(
    warehouse: PaimonWarehouse, listings: ListingSpy
) -> None:
    """What the daemon's poll of an unchanged table asks for (``refresh``, the current id,
    ``replaced_commit``'s fingerprint): the oldest, the newest and the next snapshot by
    name (the next one opened, not looked up: on S3 a file-info request for a missing key
    adds a LIST), and the newest read — not a listing of ``snapshot/``, whatever its size.
    Counted on the real files (``tests/file_calls.py``)."""
    for i in range(5):
        write(warehouse, i)
    calls: list[str] = []
    located = resolve_location(str(warehouse.location(NAME)))
    counted = replace(located, filesystem=counting_filesystem(calls))
    table = PaimonTable(counted, probe_above_entries=0)
    for _ in range(2):
        calls.clear()
        table.refresh()
        assert table.commit_fingerprint(table.current_snapshot_id() or 0) is not None
        assert calls == [
            "info snapshot-1",
            "info snapshot-5",
            "isfile snapshot-6",  # is there one more? (opened: on S3 a HEAD, no LIST)
            "isfile snapshot-5",  # pyarrow opens a file after asking if it is one
            "open snapshot-5",
        ]


def test_probing_snapshots_on_object_storage(
    warehouse: PaimonWarehouse, s3_server: S3Server, listings: ListingSpy
) -> None:
    write(warehouse, 0)
    local = warehouse.location(NAME)
    uri = f"{s3_server.new_bucket()}/t"
    s3_server.sync(local, uri)
    table = probing_table(uri)
    table.refresh()
    for batch in (1, 5):
        for i in range(batch):
            write(warehouse, 10 + i)
        s3_server.sync(local, uri)
        table.refresh()
        same_as_a_listing(table, uri, listings)
    assert listings.calls == 1  # the opening only
    shutil.rmtree(local / "snapshot")  # not a table any more: a listing says so
    s3_server.sync(local, uri)
    table.refresh()
    assert listings.calls == 2 and table.current_snapshot_id() is None
