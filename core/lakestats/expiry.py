"""Expiry, compaction and cleanup *planning*: pure functions over frozen values, no I/O.

``lakestats.maintenance`` executes these plans through the stats store; everything that
decides *what* may be deleted lives here, so the safety rules are checked exhaustively
(``tests/core/test_expiry.py``) without a filesystem. ``docs/maintenance.md`` explains the
rules in prose. The vocabulary:

* a **live snapshot** is one still listed in the table's metadata;
* a **retained state version** is the current one, or one superseded less than the log
  retention ago (a reader may still be using it: readers finish within the grace period,
  and the log retention is never shorter than the grace period);
* a store file is **referenced** when some retained state version points at it. Only
  unreferenced files are ever deleted, and only once older than the grace period.

Dropping a snapshot's stats from the state (``plan_stats_expiry``) and merging segments
(``plan_compaction``) only produce the *next state version*; the files they stop
referencing are deleted later by ``plan_cleanup``, after the versions that referenced them
have left the retention window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace

from lakestats.model import RetiredSegment, SegmentEntry, SnapshotInfo, StateVersion

EXPIRED_MEMORY = 1000
"""How many expired snapshot ids a state remembers (newest first), so that ``show`` can
say "expired" rather than "unknown". Bounded: the state is rewritten on every commit."""


# -- stats of expired snapshots ----------------------------------------------------------------


@dataclass(frozen=True)
class StatsExpiryPlan:
    """Which stats documents and retired segments the next state stops referencing."""

    dropped: Mapping[int, str]  # snapshot id → stats document path
    # the state's last processed snapshot is gone from the table too, but its document is
    # the table's current stats (``show`` without --snapshot): kept until analyze moves on
    kept_current: int | None = None
    # retired segments no live snapshot lists a file of any more
    retired_dropped: tuple[RetiredSegment, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.dropped and not self.retired_dropped


def plan_stats_expiry(state: StateVersion, live_snapshot_ids: Set[int]) -> StatsExpiryPlan:
    """Drop the stats of every snapshot that is no longer in the table's metadata.

    ``live_snapshot_ids`` must come from table metadata read *after* ``state`` was read:
    every snapshot in ``state.stats`` was in the metadata when it was processed, so one
    missing from newer metadata was expired (by anyone), never "not seen yet".
    """
    kept_current: int | None = None
    dropped: dict[int, str] = {}
    for snapshot_id, path in state.stats.items():
        if snapshot_id in live_snapshot_ids:
            continue
        if snapshot_id == state.last_snapshot_id:
            kept_current = snapshot_id
            continue
        dropped[snapshot_id] = path
    return StatsExpiryPlan(
        dropped=dropped,
        kept_current=kept_current,
        retired_dropped=unlisted_retired(state, live_snapshot_ids),
    )


def unlisted_retired(
    state: StateVersion, live_snapshot_ids: Set[int]
) -> tuple[RetiredSegment, ...]:
    """The state's retired segments whose files no live snapshot lists: none of the
    snapshots that listed them last is live (snapshots expire oldest first, so the older
    ones that listed them are gone too)."""
    return tuple(r for r in state.retired if not r.listed_by & live_snapshot_ids)


def remember_expired(
    expired: Mapping[int, int], snapshot_ids: Set[int], now_ms: int, limit: int = EXPIRED_MEMORY
) -> dict[int, int]:
    """``expired`` plus ``snapshot_ids`` (noticed at ``now_ms``), newest ``limit`` kept."""
    merged = {**expired, **dict.fromkeys(snapshot_ids, now_ms)}
    if len(merged) <= limit:
        return dict(sorted(merged.items()))
    newest = sorted(merged.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:limit]
    return dict(sorted(newest))


def apply_stats_expiry(state: StateVersion, plan: StatsExpiryPlan, now_ms: int) -> StateVersion:
    """The next state version: ``plan.dropped`` removed from the stats, remembered as
    expired, and ``plan.retired_dropped`` from the retired segments."""
    return replace(
        state,
        version=state.version + 1,
        stats={s: p for s, p in state.stats.items() if s not in plan.dropped},
        retired=tuple(r for r in state.retired if r not in plan.retired_dropped),
        expired=remember_expired(state.expired, set(plan.dropped), now_ms),
        created_at_ms=0,
    )


# -- the table format's own snapshot expiry ---------------------------------------------------


@dataclass(frozen=True)
class ExpirePolicy:
    """A table's snapshot retention: either part may be absent, not both."""

    older_than_ms: int | None = None
    retain_last: int | None = None

    def __post_init__(self) -> None:
        if self.older_than_ms is None and self.retain_last is None:
            raise ValueError("an expire policy needs older_than or retain_last")
        if self.older_than_ms is not None and self.older_than_ms < 0:
            raise ValueError("older_than must not be negative")
        if self.retain_last is not None and self.retain_last < 1:
            raise ValueError("retain_last must be at least 1")


def plan_snapshot_expiry(
    snapshots: Sequence[SnapshotInfo], policy: ExpirePolicy, now_ms: int
) -> tuple[int, ...]:
    """Snapshot ids the table format should expire under ``policy``, ascending by time.

    Never expired: branch and tag heads (the current snapshot is the head of ``main``), and
    the ``retain_last`` newest snapshots of the main lineage. Of the rest, with
    ``older_than`` those older than ``now − older_than`` are expired; without it, all are.
    """
    protected = {s.snapshot_id for s in snapshots if s.is_ref_head}
    if policy.retain_last is not None:
        lineage = sorted(
            (s for s in snapshots if s.in_main_lineage),
            key=lambda s: (s.timestamp_ms, s.snapshot_id),
            reverse=True,
        )
        protected.update(s.snapshot_id for s in lineage[: policy.retain_last])
    cutoff = math.inf if policy.older_than_ms is None else now_ms - policy.older_than_ms
    doomed = [s for s in snapshots if s.snapshot_id not in protected and s.timestamp_ms < cutoff]
    doomed.sort(key=lambda s: (s.timestamp_ms, s.snapshot_id))
    return tuple(s.snapshot_id for s in doomed)


# -- segment compaction -----------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentGroup:
    """Consecutive segments that become one (or stay as they are when nothing changes)."""

    segments: tuple[SegmentEntry, ...]

    @property
    def live_files(self) -> int:
        return sum(max(0, s.live_file_count) for s in self.segments)

    @property
    def dead_files(self) -> int:
        return sum(len(s.dead_files) for s in self.segments)

    @property
    def needs_rewrite(self) -> bool:
        """Merged with others, or carrying tombstoned rows that can go."""
        return len(self.segments) > 1 or self.dead_files > 0

    @property
    def snapshot_id(self) -> int:
        """Names the merged segment: the newest commit whose files it holds."""
        return self.segments[-1].snapshot_id


@dataclass(frozen=True)
class CompactionPlan:
    """Every segment of the state, in order, cut into groups."""

    groups: tuple[SegmentGroup, ...]

    @property
    def rewrites(self) -> tuple[SegmentGroup, ...]:
        return tuple(g for g in self.groups if g.needs_rewrite)

    @property
    def empty(self) -> bool:
        return not self.rewrites

    @property
    def segments_before(self) -> int:
        return sum(len(g.segments) for g in self.groups)

    @property
    def segments_after(self) -> int:
        return sum(1 for g in self.groups if g.live_files > 0)


def plan_compaction(state: StateVersion, *, max_segments: int, target_files: int) -> CompactionPlan:
    """Cut the state's segments into groups to merge (order kept).

    * A segment with tombstones is rewritten without the dead files' rows. No merge needs
      them again: aggregates are only ever re-merged from *live* rows, and the stats
      document of every older snapshot is already written and self-contained. Only a
      rollback to a snapshot that still lists the files could use their sketches: the
      rewrite writes them apart, as a retired segment (``RetiredSegment``), when the
      segment knows the last snapshot listing them (``SegmentEntry.last_listed``).
    * Small neighbours (under half the target) are packed together up to the target
      number of live files; a segment of at least half the target stays alone, so a big
      segment is not rewritten each time a small commit lands next to it.
    * If that still leaves more than ``max_segments`` groups, the adjacent pair with the
      fewest live files is merged until the bound holds: the bound always holds after a
      compaction, whatever the sizes.
    """
    if max_segments < 1 or target_files < 1:
        raise ValueError("max_segments and target_files must be at least 1")
    segments = state.segments
    total = sum(max(0, s.live_file_count) for s in segments)
    cap = max(target_files, math.ceil(total / max_segments))
    groups: list[list[SegmentEntry]] = []
    current: list[SegmentEntry] = []
    current_files = 0
    for segment in segments:
        live = max(0, segment.live_file_count)
        full = 2 * live >= cap
        current_full = 2 * current_files >= cap
        if current and (full or current_full or current_files + live > cap):
            groups.append(current)
            current, current_files = [], 0
        current.append(segment)
        current_files += live
    if current:
        groups.append(current)
    while len(groups) > max_segments:
        sizes = [
            sum(max(0, s.live_file_count) for s in groups[i] + groups[i + 1])
            for i in range(len(groups) - 1)
        ]
        i = sizes.index(min(sizes))
        groups[i : i + 2] = [groups[i] + groups[i + 1]]
    return CompactionPlan(tuple(SegmentGroup(tuple(g)) for g in groups))


def apply_compaction(
    state: StateVersion,
    plan: CompactionPlan,
    merged: Mapping[int, SegmentEntry | None],
    retired: Sequence[RetiredSegment] = (),
) -> StateVersion:
    """The next state version, each rewritten group (by index) replaced by ``merged[i]``,
    and ``retired`` (the dead rows the rewrite took out, written apart) added to the
    state's retired segments.

    ``None`` drops a group that had no live file left. ``ValueError`` if ``plan`` does not
    cover exactly the state's segments or a rewritten group has no replacement.
    """
    planned = tuple(s for g in plan.groups for s in g.segments)
    if planned != tuple(state.segments):
        raise ValueError("the compaction plan was made for another state")
    segments: list[SegmentEntry] = []
    for index, group in enumerate(plan.groups):
        if not group.needs_rewrite:
            segments.extend(group.segments)
            continue
        if index not in merged:
            raise ValueError(f"group {index} of the plan was not rewritten")
        entry = merged[index]
        if entry is not None:
            segments.append(entry)
    return replace(
        state,
        version=state.version + 1,
        segments=tuple(segments),
        retired=(*state.retired, *retired),
        created_at_ms=0,
    )


# -- state log retention and file cleanup -----------------------------------------------------


@dataclass(frozen=True)
class VersionInfo:
    version: int
    created_at_ms: int


@dataclass(frozen=True)
class LogRetentionPlan:
    keep: tuple[int, ...]
    delete: tuple[int, ...]  # always a prefix of the log, oldest first


def plan_log_retention(
    versions: Sequence[VersionInfo], now_ms: int, retain_ms: int, min_versions: int = 1
) -> LogRetentionPlan:
    """Which state versions a reader may still use, and which can go.

    Version ``v`` was the current one until ``v + 1`` was created; a reader that loaded it
    then holds it for at most the grace period (≤ ``retain_ms``). So ``v`` is kept while
    ``v + 1`` is younger than ``retain_ms``; the newest version and the newest
    ``min_versions`` are always kept. Deletion is a prefix, oldest first, so the log stays
    contiguous even if deleting stops half-way.
    """
    ordered = sorted(versions, key=lambda v: v.version)
    if not ordered:
        return LogRetentionPlan((), ())
    first_kept = len(ordered) - 1
    for i in range(len(ordered) - 1):
        if now_ms - ordered[i + 1].created_at_ms < retain_ms:
            first_kept = i
            break
    first_kept = min(first_kept, max(0, len(ordered) - max(1, min_versions)))
    keep = tuple(v.version for v in ordered[first_kept:])
    delete = tuple(v.version for v in ordered[:first_kept])
    return LogRetentionPlan(keep=keep, delete=delete)


@dataclass(frozen=True)
class StoreFile:
    path: str  # relative to the table's store folder
    mtime_ms: int
    size: int


@dataclass(frozen=True)
class CleanupPlan:
    delete: tuple[StoreFile, ...]
    waiting: tuple[StoreFile, ...]  # unreferenced, but younger than the grace period

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.delete)


def plan_cleanup(
    files: Sequence[StoreFile], referenced: Set[str], now_ms: int, grace_ms: int
) -> CleanupPlan:
    """Unreferenced files older than the grace period go; the others wait.

    ``referenced`` is the union of what every *retained* state version references. The
    age test protects files a concurrent writer has written but not yet committed (a
    version is committed seconds after its files are written; the grace period is far
    longer), and stats documents that readers in flight may still open.
    """
    delete: list[StoreFile] = []
    waiting: list[StoreFile] = []
    for f in sorted(files, key=lambda f: f.path):
        if f.path in referenced:
            continue
        (delete if now_ms - f.mtime_ms >= grace_ms else waiting).append(f)
    return CleanupPlan(delete=tuple(delete), waiting=tuple(waiting))
