"""The pure planning functions of ``lakestats.expiry``: exhaustive and property-based."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.expiry import (
    EXPIRED_MEMORY,
    ExpirePolicy,
    SegmentGroup,
    StoreFile,
    VersionInfo,
    apply_compaction,
    apply_stats_expiry,
    plan_cleanup,
    plan_compaction,
    plan_log_retention,
    plan_snapshot_expiry,
    plan_stats_expiry,
    remember_expired,
)
from lakestats.model import RetiredSegment, SegmentEntry, SnapshotInfo, StateVersion
from lakestats.store import referenced_files


def state_with(
    segments: tuple[SegmentEntry, ...] = (),
    stats: dict[int, str] | None = None,
    last: int | None = None,
) -> StateVersion:
    return StateVersion(
        version=7,
        table_id="t",
        format="iceberg",
        location="file:///t",
        last_snapshot_id=last,
        segments=segments,
        stats=stats or {},
    )


def seg(i: int, files: int, dead: int = 0) -> SegmentEntry:
    return SegmentEntry(
        snapshot_id=i,
        path=f"segments/{i}.parquet",
        aggregate_path=f"aggregates/{i}.parquet",
        file_count=files,
        dead_files=frozenset(f"d{i}-{k}" for k in range(dead)),
    )


# -- stats expiry -------------------------------------------------------------------------------


def test_stats_of_snapshots_gone_from_the_table_are_dropped_but_not_the_current() -> None:
    state = state_with(stats={1: "stats/1.json", 2: "stats/2.json", 3: "stats/3.json"}, last=3)
    plan = plan_stats_expiry(state, {2})
    assert dict(plan.dropped) == {1: "stats/1.json"}
    assert plan.kept_current == 3
    nxt = apply_stats_expiry(state, plan, now_ms=5000)
    assert nxt.version == 8 and nxt.created_at_ms == 0
    assert dict(nxt.stats) == {2: "stats/2.json", 3: "stats/3.json"}
    assert dict(nxt.expired) == {1: 5000}
    assert plan_stats_expiry(state, {1, 2, 3}).empty


def test_retired_segments_go_when_no_snapshot_that_listed_their_files_is_live() -> None:
    kept = RetiredSegment("segments/a.parquet", frozenset({2, 9}))
    gone = RetiredSegment("segments/b.parquet", frozenset({1}))
    state = replace(state_with(stats={2: "stats/2.json"}, last=2), retired=(kept, gone))
    assert referenced_files(state) >= {"segments/a.parquet", "segments/b.parquet"}

    plan = plan_stats_expiry(state, {2})
    assert not plan.empty and not plan.dropped
    assert plan.retired_dropped == (gone,)
    nxt = apply_stats_expiry(state, plan, now_ms=5000)
    assert nxt.retired == (kept,) and dict(nxt.stats) == {2: "stats/2.json"}
    assert "segments/b.parquet" not in referenced_files(nxt)
    assert plan_stats_expiry(nxt, {2}).empty


def test_compaction_adds_the_dead_rows_it_wrote_apart_as_retired() -> None:
    earlier = RetiredSegment("segments/old.parquet", frozenset({1}))
    state = replace(state_with((seg(1, 4, dead=2), seg(2, 4))), retired=(earlier,))
    plan = plan_compaction(state, max_segments=1, target_files=50)
    written = RetiredSegment("segments/dead-rows.parquet", frozenset({5}))
    nxt = apply_compaction(state, plan, merged_entries(plan.groups), [written])
    assert nxt.retired == (earlier, written)
    assert apply_compaction(state, plan, merged_entries(plan.groups)).retired == (earlier,)


def test_expired_memory_is_bounded_newest_kept() -> None:
    old = {i: i for i in range(EXPIRED_MEMORY)}
    merged = remember_expired(old, {10**6, 10**6 + 1}, now_ms=10**9)
    assert len(merged) == EXPIRED_MEMORY
    assert merged[10**6] == merged[10**6 + 1] == 10**9
    assert 0 not in merged and 1 not in merged and EXPIRED_MEMORY - 1 in merged


# -- the table's snapshot expiry ----------------------------------------------------------------


def snaps(
    n: int, *, heads: tuple[int, ...] = (), off_lineage: tuple[int, ...] = ()
) -> list[SnapshotInfo]:
    return [
        SnapshotInfo(
            snapshot_id=i,
            timestamp_ms=1000 * i,
            in_main_lineage=i not in off_lineage,
            is_ref_head=i in heads or i == n - 1,
        )
        for i in range(n)
    ]


def test_retain_last_keeps_the_newest_lineage_and_every_ref_head() -> None:
    infos = snaps(20, heads=(3,), off_lineage=(18,))
    doomed = plan_snapshot_expiry(infos, ExpirePolicy(retain_last=5), now_ms=10**9)
    # newest 5 of the lineage: 19, 17, 16, 15, 14 (18 is not on it); 3 is a tag
    assert set(doomed) == set(range(20)) - {19, 17, 16, 15, 14, 3}
    assert list(doomed) == sorted(doomed)


def test_older_than_and_both() -> None:
    infos = snaps(20)
    now = 20_000
    assert plan_snapshot_expiry(infos, ExpirePolicy(older_than_ms=5_500), now) == tuple(range(15))
    both = ExpirePolicy(older_than_ms=5_500, retain_last=10)
    assert plan_snapshot_expiry(infos, both, now) == tuple(range(10))
    assert plan_snapshot_expiry(infos, ExpirePolicy(older_than_ms=10**9), now) == ()
    with pytest.raises(ValueError, match="older_than or retain_last"):
        ExpirePolicy()


@given(
    n=st.integers(1, 40),
    retain=st.integers(1, 50),
    older=st.one_of(st.none(), st.integers(0, 50_000)),
)
def test_snapshot_expiry_never_touches_heads_or_the_retained(
    n: int, retain: int, older: int | None
) -> None:
    infos = snaps(n, heads=(n // 2,))
    doomed = set(plan_snapshot_expiry(infos, ExpirePolicy(older, retain), now_ms=40_000))
    assert n - 1 not in doomed and n // 2 not in doomed
    newest = sorted(range(n), reverse=True)[:retain]
    assert not doomed & set(newest)


# -- compaction ---------------------------------------------------------------------------------


segment_lists = st.lists(
    st.tuples(st.integers(1, 300), st.integers(0, 300)), min_size=0, max_size=60
).map(lambda xs: tuple(seg(i, f, min(d, f)) for i, (f, d) in enumerate(xs)))


def merged_entries(groups: tuple[SegmentGroup, ...]) -> dict[int, SegmentEntry | None]:
    out: dict[int, SegmentEntry | None] = {}
    for i, g in enumerate(groups):
        if g.needs_rewrite:
            out[i] = (
                None
                if g.live_files == 0
                else SegmentEntry(
                    g.snapshot_id,
                    f"segments/m{i}.parquet",
                    f"aggregates/m{i}.parquet",
                    g.live_files,
                )
            )
    return out


@settings(max_examples=300)
@given(segments=segment_lists, max_segments=st.integers(1, 20), target=st.integers(1, 500))
def test_compaction_bounds_segments_keeps_live_files_and_order(
    segments: tuple[SegmentEntry, ...], max_segments: int, target: int
) -> None:
    state = state_with(segments)
    plan = plan_compaction(state, max_segments=max_segments, target_files=target)
    assert tuple(s for g in plan.groups for s in g.segments) == segments  # covers, in order
    assert len(plan.groups) <= max_segments
    nxt = apply_compaction(state, plan, merged_entries(plan.groups))
    assert len(nxt.segments) <= max_segments
    assert sum(s.live_file_count for s in nxt.segments) == sum(s.live_file_count for s in segments)
    assert all(not s.dead_files for s in nxt.segments if s not in segments)
    # every segment kept as is carries no tombstone: dead rows never survive a compaction
    assert all(not s.dead_files for s in nxt.segments)
    # untouched segments are not rewritten; a state already compact yields an empty plan
    again = plan_compaction(nxt, max_segments=max_segments, target_files=target)
    assert len(again.groups) <= max_segments
    assert nxt.version == state.version + 1


def test_big_segments_stay_alone_small_ones_pack() -> None:
    segments = (seg(0, 900), seg(1, 10), seg(2, 10), seg(3, 700), seg(4, 5), seg(5, 5, dead=2))
    plan = plan_compaction(state_with(segments), max_segments=10, target_files=1000)
    assert [[s.snapshot_id for s in g.segments] for g in plan.groups] == [[0], [1, 2], [3], [4, 5]]
    assert [g.needs_rewrite for g in plan.groups] == [False, True, False, True]
    compact = state_with((seg(0, 900), seg(1, 600)))
    assert plan_compaction(compact, max_segments=10, target_files=1000).empty


def test_apply_refuses_a_plan_for_another_state() -> None:
    plan = plan_compaction(state_with((seg(0, 1), seg(1, 1))), max_segments=1, target_files=10)
    with pytest.raises(ValueError, match="another state"):
        apply_compaction(state_with((seg(0, 1),)), plan, {0: None})
    with pytest.raises(ValueError, match="not rewritten"):
        apply_compaction(state_with((seg(0, 1), seg(1, 1))), plan, {})


# -- log retention and cleanup ------------------------------------------------------------------


@given(
    gaps=st.lists(st.integers(0, 5000), min_size=1, max_size=40),
    now_after=st.integers(0, 10_000),
    retain=st.integers(0, 8000),
    min_versions=st.integers(1, 10),
)
def test_log_retention_keeps_every_version_a_reader_may_hold(
    gaps: list[int], now_after: int, retain: int, min_versions: int
) -> None:
    times: list[int] = []
    t = 0
    for gap in gaps:
        t += gap
        times.append(t)
    versions = [VersionInfo(i + 1, at) for i, at in enumerate(times)]
    now = times[-1] + now_after
    plan = plan_log_retention(versions, now, retain, min_versions)
    assert sorted(plan.keep + plan.delete) == [v.version for v in versions]
    assert plan.keep[-1] == len(versions)  # the newest is never deleted
    assert len(plan.keep) >= min(min_versions, len(versions))
    assert all(d < min(plan.keep) for d in plan.delete)  # a prefix: the log stays contiguous
    for v in versions[:-1]:
        successor = versions[v.version]  # version numbers are 1-based
        if now - successor.created_at_ms < retain:
            assert v.version in plan.keep  # superseded too recently: someone may read it


@given(
    files=st.dictionaries(
        st.sampled_from([f"{d}/{i}" for d in ("segments", "stats", "log") for i in range(12)]),
        st.tuples(st.integers(0, 10_000), st.integers(0, 100)),
        max_size=30,
    ),
    referenced=st.sets(
        st.sampled_from([f"{d}/{i}" for d in ("segments", "stats") for i in range(12)])
    ),
    grace=st.integers(0, 10_000),
)
def test_cleanup_never_deletes_a_referenced_or_young_file(
    files: dict[str, tuple[int, int]], referenced: set[str], grace: int
) -> None:
    now = 10_000
    listed = [StoreFile(p, mtime, size) for p, (mtime, size) in files.items()]
    plan = plan_cleanup(listed, referenced, now, grace)
    deleted = {f.path for f in plan.delete}
    assert not deleted & referenced
    assert all(now - f.mtime_ms >= grace for f in plan.delete)
    assert all(now - f.mtime_ms < grace for f in plan.waiting)
    assert deleted | {f.path for f in plan.waiting} == set(files) - referenced
    assert plan.bytes == sum(f.size for f in plan.delete)


@settings(max_examples=100)
@given(segments=segment_lists, max_segments=st.integers(1, 8))
def test_compaction_then_cleanup_keeps_what_retained_versions_reference(
    segments: tuple[SegmentEntry, ...], max_segments: int
) -> None:
    """The old version (a reader may hold it) and the new one both stay fully readable."""
    old = state_with(segments, stats={s.snapshot_id: f"stats/{s.snapshot_id}" for s in segments})
    plan = plan_compaction(old, max_segments=max_segments, target_files=50)
    new = apply_compaction(old, plan, merged_entries(plan.groups))
    new = replace(new, stats={k: v for k, v in new.stats.items() if k % 2 == 0})
    everything = referenced_files(old) | referenced_files(new) | {"segments/orphan"}
    listed = [StoreFile(p, 0, 1) for p in everything]
    retained = referenced_files(old) | referenced_files(new)
    both = plan_cleanup(listed, retained, now_ms=10**6, grace_ms=1)
    assert {f.path for f in both.delete} == {"segments/orphan"}
    only_new = plan_cleanup(listed, referenced_files(new), now_ms=10**6, grace_ms=1)
    assert not {f.path for f in only_new.delete} & referenced_files(new)
