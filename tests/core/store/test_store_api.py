"""``StatsStore`` and the atomic primitives, on real files in a temporary state dir."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from lakestats.exceptions import ConcurrentUpdateError, StoreError
from lakestats.model import (
    UNPARTITIONED,
    ColumnAggregate,
    ColumnMetrics,
    DataFile,
    FileContent,
    PartitionAggregate,
    SegmentEntry,
    StateVersion,
)
from lakestats.store import (
    StatsStore,
    atomic_write,
    create_exclusive,
    list_files,
    referenced_files,
    segments,
)
from lakestats.store.statelog import version_path
from lakestats.store.store import store_folder

TABLE = "3f1c0d2e-table"
UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def _files(snapshot_id: int, count: int = 3) -> list[DataFile]:
    return [
        DataFile(
            path=f"file:///wh/t/data/{snapshot_id}-{i}.parquet",
            content=FileContent.DATA,
            file_format="PARQUET",
            record_count=10 * i,
            file_size_bytes=100,
            partition=UNPARTITIONED,
            columns={1: ColumnMetrics(null_count=0, lower=i, upper=i + 1)},
            field_ids=frozenset({1, 2}),
        )
        for i in range(count)
    ]


def _parts(snapshot_id: int) -> list[PartitionAggregate]:
    column = ColumnAggregate(field_id=1, type="long", files=3, lower=0, upper=snapshot_id)
    return [PartitionAggregate(UNPARTITIONED, record_count=30, file_count=3, columns={1: column})]


def _state(version: int, **kwargs: object) -> StateVersion:
    base: dict[str, object] = {
        "version": version,
        "table_id": TABLE,
        "format": "iceberg",
        "location": "file:///wh/t",
        "last_snapshot_id": None,
    }
    base.update(kwargs)
    return StateVersion(**base)  # type: ignore[arg-type]


def _commit_snapshot(store: StatsStore, snapshot_id: int) -> StateVersion:
    """Write a segment, its aggregate and a stats doc, then commit them on top of current."""
    seg = store.write_segment(snapshot_id, _files(snapshot_id), {1: "long"})
    agg = store.write_aggregate(snapshot_id, _parts(snapshot_id))
    stats = store.write_stats(snapshot_id, {"snapshot_id": snapshot_id})
    current = store.current() or _state(0)
    return store.commit(
        replace(
            current,
            version=current.version + 1,
            last_snapshot_id=snapshot_id,
            segments=(*current.segments, SegmentEntry(snapshot_id, seg, agg, 3)),
            stats={**current.stats, snapshot_id: stats},
        )
    )


@pytest.fixture
def store(tmp_path: Path) -> StatsStore:
    return StatsStore(tmp_path / "state", TABLE)


def test_layout_and_round_trips(store: StatsStore, tmp_path: Path) -> None:
    assert store.table_dir == tmp_path / "state" / TABLE
    assert store.current() is None
    seg = store.write_segment(42, _files(42), {1: "long"})
    agg = store.write_aggregate(42, _parts(42))
    stats = store.write_stats(42, {"snapshot_id": 42, "ndv": 1.5, "name": "é"})
    assert re.fullmatch(rf"segments/42-{UUID4}\.parquet", seg)
    assert re.fullmatch(rf"aggregates/42-{UUID4}\.parquet", agg)
    assert re.fullmatch(rf"stats/42-{UUID4}\.json", stats)
    assert store.read_segment(seg) == tuple(_files(42))
    assert store.read_aggregate(agg) == tuple(_parts(42))
    assert store.read_stats(stats) == {"snapshot_id": 42, "ndv": 1.5, "name": "é"}
    assert sorted(list_files(store.table_dir)) == sorted([seg, agg, stats])


def test_file_uri_state_dir(tmp_path: Path) -> None:
    store = StatsStore((tmp_path / "with space").as_uri(), TABLE)
    assert store.table_dir == tmp_path / "with space" / TABLE
    state = _commit_snapshot(store, 1)
    assert StatsStore(tmp_path / "with space", TABLE).current() == state


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", ".hidden", "a\\b"])
def test_table_id_must_be_a_folder_name(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="table id"):
        StatsStore(tmp_path, bad)


def test_paths_cannot_escape_the_table_dir(store: StatsStore) -> None:
    for rel in ("../other/x.parquet", "/etc/passwd", ""):
        with pytest.raises(StoreError, match="escapes"):
            store.read_segment(rel)


def test_writing_the_same_segment_twice_makes_two_files(store: StatsStore) -> None:
    first = store.write_segment(7, _files(7), {1: "long"})
    second = store.write_segment(7, _files(7), {1: "long"})
    assert first != second
    assert store.read_segment(first) == store.read_segment(second) == tuple(_files(7))


def test_stats_must_be_json_safe(store: StatsStore) -> None:
    with pytest.raises(ValueError):
        store.write_stats(1, {"ndv": math.inf})
    assert list_files(store.table_dir) == []


def test_stats_read_errors_name_the_file(store: StatsStore) -> None:
    with pytest.raises(StoreError, match="missing") as info:
        store.read_stats("stats/nope.json")
    assert str(store.path("stats/nope.json")) in str(info.value)
    atomic_write(store.path("stats/bad.json"), b"[1, 2]")
    with pytest.raises(StoreError, match="not a JSON object"):
        store.read_stats("stats/bad.json")
    atomic_write(store.path("stats/worse.json"), b"{")
    with pytest.raises(StoreError, match="not valid JSON"):
        store.read_stats("stats/worse.json")


def test_commit_sequence(store: StatsStore) -> None:
    first = _commit_snapshot(store, 1)
    assert first.version == 1
    assert first.created_at_ms > 0
    second = _commit_snapshot(store, 2)
    assert store.current() == second
    assert store.versions() == [1, 2]
    assert store.read_version(1) == first
    assert json.loads(version_path(store.table_dir, 2).read_bytes())["version"] == 2
    kept = store.commit(replace(second, version=3, created_at_ms=5))
    assert kept.created_at_ms == 5


def test_commit_rejects_wrong_versions(store: StatsStore) -> None:
    with pytest.raises(ValueError, match="the next is 1") as raised:
        store.commit(_state(2))
    # a log deleted under a writer (a forget from another config) is a store error: the
    # CLI's one line, not a traceback
    assert isinstance(raised.value, StoreError)
    with pytest.raises(ValueError, match="state is for table"):
        store.commit(_state(1, table_id="other"))
    _commit_snapshot(store, 1)
    with pytest.raises(ConcurrentUpdateError, match="already committed"):
        store.commit(_state(1))


def test_two_commits_of_one_version_one_wins(tmp_path: Path) -> None:
    a = StatsStore(tmp_path, TABLE)
    b = StatsStore(tmp_path, TABLE)
    base = _commit_snapshot(a, 1)
    seen_by_b = b.current()
    assert seen_by_b == base

    winner = a.commit(replace(base, version=2, last_snapshot_id=2))
    # b read current before a committed: its create of version 2 is what loses
    b.current = lambda: seen_by_b  # type: ignore[method-assign]
    with pytest.raises(ConcurrentUpdateError, match="another writer committed version 2"):
        b.commit(replace(base, version=2, last_snapshot_id=99))
    fresh = StatsStore(tmp_path, TABLE)
    assert fresh.current() == winner
    assert fresh.versions() == [1, 2]
    assert not [p for p in (tmp_path / TABLE / "log").iterdir() if p.name.startswith(".")]


def test_commit_refuses_dangling_references(store: StatsStore) -> None:
    state = _state(1, segments=(SegmentEntry(1, "segments/ghost.parquet", "aggregates/g", 1),))
    with pytest.raises(StoreError, match="referenced by the new state but missing") as info:
        store.commit(state)
    assert str(store.path("aggregates/g")) in str(info.value)
    assert store.current() is None


def test_current_rejects_another_tables_log(tmp_path: Path) -> None:
    StatsStore(tmp_path, "other").commit(_state(1, table_id="other"))
    (tmp_path / "other").rename(tmp_path / TABLE)
    with pytest.raises(StoreError, match="belongs to table 'other'"):
        StatsStore(tmp_path, TABLE).current()


def test_a_table_with_another_tables_id_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    """Copies keep their table's id: the first to commit holds ``<id>/``, another
    location ``<id>@<hash>/`` (and keeps it once it has a state); spellings of one
    location are one table."""
    state_dir = tmp_path / "state"
    first = StatsStore.for_table(state_dir, TABLE, "file:///wh/t")
    assert first.folder == TABLE
    _commit_snapshot(first, 1)
    for spelling in ("/wh/t", "/wh/t/", "file:///wh/t/"):
        assert store_folder(state_dir, TABLE, spelling) == TABLE
    copy = StatsStore.for_table(state_dir, TABLE, "file:///elsewhere/t")
    assert copy.folder.startswith(f"{TABLE}@") and copy.table_id == TABLE
    assert copy.current() is None
    copy.commit(_state(1, location="file:///elsewhere/t", last_snapshot_id=7))
    assert [s.last_snapshot_id for s in (first.current(), copy.current())] == [1, 7]
    # the first table's stats removed: the copy keeps its folder, not the freed one
    shutil.rmtree(state_dir / TABLE)
    assert store_folder(state_dir, TABLE, "/elsewhere/t") == copy.folder


def test_a_folder_chosen_in_this_process_is_held_before_its_first_commit(
    tmp_path: Path,
) -> None:
    """A daemon opens all its tables before any commits: two copies opened one after the
    other must not both choose the empty ``<id>/``."""
    state_dir = tmp_path / "state"
    one = StatsStore.for_table(state_dir, TABLE, "s3://bucket/one")
    two = StatsStore.for_table(state_dir, TABLE, "s3://bucket/two")
    assert one.folder == TABLE and two.folder != TABLE


def test_a_state_of_another_location_is_refused(tmp_path: Path) -> None:
    """Two processes that chose ``<id>/`` for two copies at once: the loser of the first
    commit reads the winner's state and refuses it (reopening chooses again)."""
    winner = StatsStore(tmp_path, TABLE, location="file:///wh/a")
    loser = StatsStore(tmp_path, TABLE, location="/wh/b")
    winner.commit(_state(1, location="file:///wh/a"))
    with pytest.raises(StoreError, match="holds the stats of the table at file:///wh/a"):
        loser.current()
    assert store_folder(tmp_path, TABLE, "/wh/b") != TABLE


def test_corrupt_log_file_is_reported(store: StatsStore) -> None:
    _commit_snapshot(store, 1)
    bad = version_path(store.table_dir, 2)
    bad.write_text('{"format_version": 1, "version": 2')
    with pytest.raises(StoreError) as info:
        store.current()
    assert str(bad) in str(info.value)
    with pytest.raises(StoreError):
        _commit_snapshot(store, 2)


def test_missing_referenced_files_are_named(store: StatsStore) -> None:
    state = _commit_snapshot(store, 1)
    (seg,) = state.segments
    store.path(seg.path).unlink()
    store.path(seg.aggregate_path).unlink()
    with pytest.raises(StoreError, match="missing") as info:
        store.read_segment(seg.path)
    assert str(store.path(seg.path)) in str(info.value)
    with pytest.raises(StoreError) as info:
        StatsStore(store.table_dir.parent, TABLE).locate(["x"], state)
    assert seg.path in str(info.value)
    with pytest.raises(StoreError) as info:
        store.read_aggregate(seg.aggregate_path)
    assert seg.aggregate_path in str(info.value)


def test_locate_finds_live_segments(store: StatsStore) -> None:
    _commit_snapshot(store, 1)
    state = _commit_snapshot(store, 2)
    one, two = state.segments
    dead = "file:///wh/t/data/1-0.parquet"
    state = replace(state, segments=(replace(one, dead_files=frozenset({dead})), two))
    found = store.locate(
        [dead, "file:///wh/t/data/1-2.parquet", "file:///wh/t/data/2-1.parquet", "unknown"],
        state,
    )
    assert found == {
        "file:///wh/t/data/1-2.parquet": state.segments[0],
        "file:///wh/t/data/2-1.parquet": state.segments[1],
    }


def test_held_files_are_the_live_ones_held_before_looks_back(store: StatsStore) -> None:
    """``held_before``: tombstoned files, and files of segments that left the state in an
    earlier version, are still held while their segment is there; a swept one is not."""
    _commit_snapshot(store, 1)
    _commit_snapshot(store, 2)
    state = _commit_snapshot(store, 3)
    one, two, three = state.segments
    dead = "file:///wh/t/data/2-0.parquet"
    # snapshot 1's segment left the state (all its files removed), 2's has a tombstone
    state = store.commit(
        replace(
            state,
            version=state.version + 1,
            segments=(replace(two, dead_files=frozenset({dead})), three),
        )
    )
    store.table_dir.joinpath(three.path).unlink()  # swept (as cleanup would, later)
    wanted = [f.path for n in (1, 2, 3) for f in _files(n)]

    live = store.held_files(replace(state, segments=state.segments[:1]))
    assert sorted(live) == ["file:///wh/t/data/2-1.parquet", "file:///wh/t/data/2-2.parquet"]
    assert all(not held.dead and held.segment == two.path for held in live.values())

    held = store.held_before(state, wanted, versions=10)
    assert sorted(held) == sorted(f.path for n in (1, 2) for f in _files(n))
    assert held[dead].dead and held[dead].segment == two.path
    assert {held[f.path].segment for f in _files(1)} == {one.path}
    assert held["file:///wh/t/data/1-2.parquet"].record_count == 20
    # no earlier version read: snapshot 1's files are not found
    assert sorted(store.held_before(state, wanted, versions=0)) == sorted(f.path for f in _files(2))


def test_locate_reads_only_paths_and_caches(
    store: StatsStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _commit_snapshot(store, 1)
    state = _commit_snapshot(store, 2)
    reads: list[str] = []
    original = segments.read_segment_paths

    def counting(path: object) -> list[str]:
        reads.append(str(path))
        return original(path)  # type: ignore[arg-type]

    monkeypatch.setattr(segments, "read_segment_paths", counting)
    monkeypatch.setattr(segments, "read_segment", None)  # locate must not decode segments
    reader = StatsStore(store.table_dir.parent, TABLE)
    paths = ["file:///wh/t/data/1-0.parquet"]
    assert reader.locate(paths, state) == {paths[0]: state.segments[0]}
    assert reader.locate(paths, state) == {paths[0]: state.segments[0]}
    assert len(reads) == 2  # each segment once, newest first, then cached
    # the writer knows its own segments' paths without reading them back
    assert store.locate(paths, state) == {paths[0]: state.segments[0]}
    assert len(reads) == 2


def test_aggregates_are_cached(store: StatsStore) -> None:
    agg = store.write_aggregate(1, _parts(1))
    assert store.read_aggregate(agg) is store.read_aggregate(agg)


def test_referenced_and_listed_files(store: StatsStore) -> None:
    assert referenced_files(None) == set()
    _commit_snapshot(store, 1)
    state = _commit_snapshot(store, 2)
    orphan = store.write_segment(3, _files(3), {1: "long"})
    (store.table_dir / "log" / ".00000000000000000003.json.tmp-x").write_bytes(b"{")
    refs = referenced_files(state)
    assert len(refs) == 6
    listed = set(list_files(store.table_dir))
    assert refs <= listed
    assert listed - refs == {orphan, "log/.00000000000000000003.json.tmp-x"}
    assert not any(re.fullmatch(r"log/\d{20}\.json", rel) for rel in listed)


def test_atomic_write_replaces_whole(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "f.bin"
    atomic_write(target, b"one")
    atomic_write(target, b"two" * 1000)
    assert target.read_bytes() == b"two" * 1000
    assert [p.name for p in target.parent.iterdir()] == ["f.bin"]
    atomic_write(target.as_uri(), b"three")
    assert target.read_bytes() == b"three"


def test_create_exclusive_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "v.json"
    assert create_exclusive(target, b"first")
    assert not create_exclusive(target, b"second")
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]


def test_unsupported_uri_scheme(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scheme 'gs'"):
        StatsStore("gs://bucket/state", TABLE)


def _with_sketch(snapshot_id: int, size: int) -> list[PartitionAggregate]:
    """One partition whose column carries ``size`` bytes of (opaque) sketch."""
    (part,) = _parts(snapshot_id)
    column = replace(part.columns[1], sketched_files=3, theta=bytes(size))
    return [replace(part, columns={1: column})]


def test_the_aggregate_cache_is_bounded_by_what_it_holds(tmp_path: Path) -> None:
    """Aggregates are cached up to ``cache_bytes`` of sketches (least recently used
    dropped first); one larger than that alone is read again when needed, never kept."""
    writer = StatsStore(tmp_path / "state", TABLE)
    small, other, big = (
        writer.write_aggregate(1, _with_sketch(1, 4_000)),
        writer.write_aggregate(2, _with_sketch(2, 4_000)),
        writer.write_aggregate(3, _with_sketch(3, 50_000)),
    )
    store = StatsStore(tmp_path / "state", TABLE, cache_bytes=10_000)
    assert store.read_aggregate(big) == tuple(_with_sketch(3, 50_000))
    assert store.read_aggregate(small) == tuple(_with_sketch(1, 4_000))
    for rel in (small, big):
        store.path(rel).unlink()
    assert store.read_aggregate(small) == tuple(_with_sketch(1, 4_000))  # cached
    with pytest.raises(StoreError, match="missing"):
        store.read_aggregate(big)  # too large to keep: read again, and it is gone

    store.read_aggregate(other)  # two of ~4.8 KB fit in 10 KB: both kept
    store.path(other).unlink()
    assert store.read_aggregate(other) == tuple(_with_sketch(2, 4_000))  # cached
    # a third pushes out the least recently used: small (other was read after it)
    store.read_aggregate(writer.write_aggregate(4, _with_sketch(4, 4_000)))
    with pytest.raises(StoreError, match="missing"):
        store.read_aggregate(small)
    assert store.read_aggregate(other) == tuple(_with_sketch(2, 4_000))


def test_a_copy_taking_a_folder_of_its_own_is_said_once(tmp_path: Path) -> None:
    """A daemon opens a table more than once (its worker's handle, its reader's) before the
    copy's own folder has a state: ``store_folder_taken`` is said once, not per open."""
    from structlog.testing import capture_logs

    state = tmp_path / "state"
    assert store_folder(state, "tid", str(tmp_path / "original")) == "tid"
    with capture_logs() as logs:
        folders = {store_folder(state, "tid", str(tmp_path / "copy")) for _ in range(3)}
    (folder,) = folders
    assert folder.startswith("tid@")
    assert [e["folder"] for e in logs if e["event"] == "store_folder_taken"] == [folder]
