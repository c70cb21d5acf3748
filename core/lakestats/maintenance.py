"""Expiry, compaction and cleanup *execution*: the plans of ``lakestats.expiry``, done.

Every step follows the store's one rule: new files first, then one exclusively created
state version; deletions only after that, only of files no retained version references,
and only once they are older than the grace period. So each step is crash-safe (a SIGKILL
anywhere leaves the newest version valid and, at worst, orphans a later cleanup removes)
and idempotent (running it again plans again from the newest version and reaches the same
end state). A concurrent writer (``lakestats analyze`` in another process) is never lost:
when it commits first, ``ConcurrentUpdateError`` makes us re-plan on its version.

``docs/maintenance.md`` gives the whole safety argument.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog

from lakestats.config import Config, MaintenanceConfig
from lakestats.exceptions import ConcurrentUpdateError, ExpiryError
from lakestats.expiry import (
    CleanupPlan,
    CompactionPlan,
    ExpirePolicy,
    LogRetentionPlan,
    StatsExpiryPlan,
    apply_compaction,
    apply_stats_expiry,
    plan_cleanup,
    plan_compaction,
    plan_log_retention,
    plan_snapshot_expiry,
    plan_stats_expiry,
    unlisted_retired,
)
from lakestats.formats.base import SupportsSnapshotExpiry
from lakestats.merge import merge_partitions
from lakestats.model import (
    DataFile,
    PartitionAggregate,
    RetiredSegment,
    SegmentEntry,
    SketchSettings,
    StateVersion,
)
from lakestats.publish.registry import publisher_for
from lakestats.store import StatsStore, merge_key, referenced_files
from lakestats.tables import OpenedTable

_log = structlog.get_logger(__name__)

_CONCURRENT_RETRIES = 5


@dataclass(frozen=True)
class MaintenanceSettings:
    """``[maintenance]`` in milliseconds and counts."""

    grace_ms: int = 3_600_000
    log_retention_ms: int = 3_600_000
    min_log_versions: int = 10
    max_segments: int = 64
    target_files: int = 1000

    @classmethod
    def from_config(cls, config: MaintenanceConfig) -> MaintenanceSettings:
        return cls(
            grace_ms=round(config.grace_period_s * 1000),
            log_retention_ms=round(config.log_retention_s * 1000),
            min_log_versions=config.min_log_versions,
            max_segments=config.max_segments,
            target_files=config.segment_target_files,
        )


@dataclass(frozen=True)
class CleanupReport:
    versions_deleted: tuple[int, ...] = ()
    files_deleted: tuple[str, ...] = ()
    bytes_deleted: int = 0
    waiting: tuple[str, ...] = ()  # unreferenced, deleted once older than the grace period

    @property
    def removed(self) -> int:
        return len(self.versions_deleted) + len(self.files_deleted)


@dataclass(frozen=True)
class ExpiryReport:
    table: str
    dry_run: bool
    expired_snapshots: tuple[int, ...] = ()  # by the table format's own expiry (policy)
    dropped_stats: Mapping[int, str] = field(default_factory=dict)  # snapshot → stats doc
    kept_current: int | None = None
    version: int | None = None  # the state version that dropped them
    cleanup: CleanupReport = field(default_factory=CleanupReport)
    # retired segments dropped with them (no live snapshot lists their files)
    dropped_retired: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompactionReport:
    table: str
    dry_run: bool
    segments_before: int = 0
    segments_after: int = 0
    merged: tuple[tuple[str, ...], ...] = ()  # segment paths of each rewritten group
    # tombstoned data files whose rows left the live segments, and of those the files
    # whose rows went into a retired segment (a live snapshot may still list them)
    dead_rows_dropped: int = 0
    dead_rows_retired: int = 0
    version: int | None = None
    cleanup: CleanupReport = field(default_factory=CleanupReport)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- stats expiry -------------------------------------------------------------------------------


def stale_stats(opened: OpenedTable, state: StateVersion | None) -> bool:
    """Cheap check with the metadata already loaded: does ``state`` (the store's current
    state, as the caller read it) keep stats of a snapshot the table no longer lists, or a
    retired segment of files none lists? (``expire_stats`` then decides on fresh
    metadata.)"""
    if state is None or not (state.stats or state.retired):
        return False
    live = opened.table.snapshot_ids()
    return not set(state.stats) <= live or bool(unlisted_retired(state, live))


def expire_stats(
    opened: OpenedTable,
    *,
    dry_run: bool = False,
    now_ms: int | None = None,
    also_expiring: frozenset[int] = frozenset(),
) -> tuple[StatsExpiryPlan, int | None]:
    """Drop the stats of snapshots no longer in the table's metadata; (plan, new version).

    The state is read *before* the metadata is refreshed, so every snapshot the state
    knows was in the metadata we compare with unless it was expired (see
    ``plan_stats_expiry``). ``also_expiring`` counts as gone (dry runs of managed expiry).
    """
    for attempt in range(_CONCURRENT_RETRIES):
        state = opened.store.current()
        if state is None:
            return StatsExpiryPlan(dropped={}), None
        opened.table.refresh()
        live = opened.table.snapshot_ids() - also_expiring
        plan = plan_stats_expiry(state, live)
        if plan.empty or dry_run:
            return plan, None
        next_state = apply_stats_expiry(state, plan, _now_ms() if now_ms is None else now_ms)
        try:
            committed = opened.store.commit(next_state)
        except ConcurrentUpdateError:
            if attempt == _CONCURRENT_RETRIES - 1:
                raise
            continue
        return plan, committed.version
    raise AssertionError("unreachable")  # pragma: no cover


def expire_policy(opened: OpenedTable) -> ExpirePolicy | None:
    """The table's ``[[table]] expire`` policy, if any."""
    cfg = opened.config.expire
    if cfg is None:
        return None
    older = cfg.older_than_s
    return ExpirePolicy(
        older_than_ms=None if older is None else round(older * 1000),
        retain_last=cfg.retain_last,
    )


def expire(
    opened: OpenedTable, config: Config, *, dry_run: bool = False, now_ms: int | None = None
) -> ExpiryReport:
    """Managed expiry: the table format's own snapshot expiry under the table's policy (if
    it has one), then the stats of every snapshot gone from the table, then cleanup."""
    now = _now_ms() if now_ms is None else now_ms
    policy = expire_policy(opened)
    doomed: tuple[int, ...] = ()
    if policy is not None:
        fmt = opened.table
        if not isinstance(fmt, SupportsSnapshotExpiry):
            raise ExpiryError(
                f"table {opened.name}: the {fmt.format_name} format cannot expire snapshots "
                "through lakestats"
            )
        fmt.refresh()
        doomed = plan_snapshot_expiry(fmt.snapshot_infos(), policy, now)
        # a dry run only checks that the table can commit: what it promises, the real run
        # must be able to do (a table opened read-only refuses both alike)
        fmt.expire_snapshots(() if dry_run else doomed)
    plan, version = expire_stats(
        opened,
        dry_run=dry_run,
        now_ms=now,
        also_expiring=frozenset(doomed) if dry_run else frozenset(),
    )
    settings = MaintenanceSettings.from_config(config.maintenance)
    cleaned = cleanup(opened.store, settings, dry_run=dry_run, now_ms=now)
    return ExpiryReport(
        table=opened.name,
        dry_run=dry_run,
        expired_snapshots=doomed,
        dropped_stats=dict(plan.dropped),
        kept_current=plan.kept_current,
        version=version,
        cleanup=cleaned,
        dropped_retired=tuple(r.path for r in plan.retired_dropped),
    )


# -- compaction ---------------------------------------------------------------------------------


def _rewrite_group(
    store: StatsStore, segments: Sequence[SegmentEntry], settings: SketchSettings
) -> tuple[SegmentEntry | None, RetiredSegment | None]:
    """One segment holding the group's live files, with the merge of their aggregates; and
    the dead files whose last listing snapshot is known, written apart as a retired
    segment (a rollback to that snapshot takes their sketches from there)."""
    live: list[DataFile] = []
    dead: list[DataFile] = []
    listed_by: set[int] = set()
    types: dict[int, str] = {}
    parts: list[PartitionAggregate] = []
    for segment in segments:
        for f in store.read_segment(segment.path):
            if f.path not in segment.dead_files:
                live.append(f)
            elif segment.last_listed is not None:
                dead.append(f)
                listed_by.add(segment.last_listed)
        types.update(store.segment_types(segment.path))  # later segments win (promotions)
        parts.extend(store.segment_aggregate(segment))
    snapshot_id = segments[-1].snapshot_id
    retired = (
        RetiredSegment(store.write_segment(snapshot_id, dead, types), frozenset(listed_by))
        if dead
        else None
    )
    if not live:
        return None, retired
    # Aggregates already exclude dead files (re-merged when they were tombstoned), and the
    # merge is associative: the table's merged stats are unchanged by compaction.
    aggregate = merge_partitions(parts, settings)
    merged = SegmentEntry(
        snapshot_id=snapshot_id,
        path=store.write_segment(snapshot_id, live, types),
        aggregate_path=store.write_aggregate(snapshot_id, aggregate),
        file_count=len(live),
    )
    return merged, retired


def _keeping_merged_view(state: StateVersion, compacted: StateVersion) -> StateVersion:
    """``compacted`` still naming ``state``'s merged view as its own: compaction moves live
    files between segments without changing what they merge to, so the next commit
    extends that view rather than re-merging every segment."""
    if state.merged_path is None or state.merged_key != merge_key(state):
        return compacted
    return replace(compacted, merged_key=merge_key(compacted))


def compact(
    opened: OpenedTable, config: Config, *, dry_run: bool = False, now_ms: int | None = None
) -> CompactionReport:
    """Merge small segments, drop tombstoned rows, then clean up (log retention, orphans)."""
    settings = MaintenanceSettings.from_config(config.maintenance)
    sketch = config.sketch.settings()
    store = opened.store
    report = CompactionReport(table=opened.name, dry_run=dry_run)
    for attempt in range(_CONCURRENT_RETRIES):
        state = store.current()
        if state is None:
            break
        plan: CompactionPlan = plan_compaction(
            state, max_segments=settings.max_segments, target_files=settings.target_files
        )
        report = CompactionReport(
            table=opened.name,
            dry_run=dry_run,
            segments_before=plan.segments_before,
            segments_after=plan.segments_after if not plan.empty else plan.segments_before,
            merged=tuple(tuple(s.path for s in g.segments) for g in plan.rewrites),
            dead_rows_dropped=sum(g.dead_files for g in plan.rewrites),
            dead_rows_retired=sum(
                len(s.dead_files)
                for g in plan.rewrites
                for s in g.segments
                if s.last_listed is not None
            ),
        )
        if plan.empty or dry_run:
            break
        rewritten = {
            i: _rewrite_group(store, g.segments, sketch)
            for i, g in enumerate(plan.groups)
            if g.needs_rewrite
        }
        merged = {i: segment for i, (segment, _) in rewritten.items()}
        retired = [r for _, r in rewritten.values() if r is not None]
        try:
            committed = store.commit(
                _keeping_merged_view(state, apply_compaction(state, plan, merged, retired))
            )
        except ConcurrentUpdateError:
            # an analyze committed first: what we wrote is orphaned, re-plan on its state
            if attempt == _CONCURRENT_RETRIES - 1:
                raise
            continue
        report = CompactionReport(
            table=report.table,
            dry_run=False,
            segments_before=report.segments_before,
            segments_after=len(committed.segments),
            merged=report.merged,
            dead_rows_dropped=report.dead_rows_dropped,
            dead_rows_retired=report.dead_rows_retired,
            version=committed.version,
        )
        break
    cleaned = cleanup(store, settings, dry_run=dry_run, now_ms=now_ms)
    if not dry_run:
        _sweep_table(opened, config.maintenance.grace_period_s)
    return replace(report, cleanup=cleaned)


def _sweep_table(opened: OpenedTable, grace_s: float) -> None:
    """Files a killed run wrote into the table and never registered: deleted after the
    grace period here too, so they go even if no new commit comes to trigger a run."""
    publisher = publisher_for(opened)
    try:
        publisher.sweep(grace_s)
    except publisher.errors as exc:
        _log.warning("stray_sweep_failed", table=opened.name, error=str(exc))


# -- cleanup ------------------------------------------------------------------------------------


def plan_store_cleanup(
    store: StatsStore, settings: MaintenanceSettings, now_ms: int
) -> tuple[LogRetentionPlan, CleanupPlan]:
    """What cleanup would delete now: old state versions, then unreferenced files."""
    retention = plan_log_retention(
        store.version_infos(),
        now_ms,
        max(settings.log_retention_ms, settings.grace_ms),
        settings.min_log_versions,
    )
    referenced: set[str] = set()
    for version in retention.keep:
        referenced |= referenced_files(store.read_version(version))
    files = plan_cleanup(store.files(), referenced, now_ms, settings.grace_ms)
    return retention, files


def cleanup(
    store: StatsStore,
    settings: MaintenanceSettings,
    *,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> CleanupReport:
    """Delete state versions past the retention (oldest first), then every file that no
    retained version references and that is older than the grace period."""
    now = _now_ms() if now_ms is None else now_ms
    retention, files = plan_store_cleanup(store, settings, now)
    report = CleanupReport(
        versions_deleted=retention.delete,
        files_deleted=tuple(f.path for f in files.delete),
        bytes_deleted=files.bytes,
        waiting=tuple(f.path for f in files.waiting),
    )
    if dry_run:
        return report
    # Versions first: once a version is gone nobody can follow it to a deleted file; a
    # crash between the two leaves files that the next run finds unreferenced anyway.
    for version in retention.delete:
        store.delete_version(version)
    for f in files.delete:
        store.delete_file(f.path)
    if retention.delete or files.delete:
        store.sync()
    return report


# -- reading stats of a snapshot that may be gone -----------------------------------------------


def expired_meanwhile(opened: OpenedTable, state: StateVersion, snapshot_id: int) -> bool:
    """The state still has stats of ``snapshot_id`` but the table has expired it (lakestats
    drops them at its next run). The current stats are never "expired" (see
    ``plan_stats_expiry``). Refreshes the metadata before saying yes: a handle loaded before
    the snapshot was committed must not call a new snapshot expired."""
    known = opened.table.snapshot_ids()
    if snapshot_id == state.last_snapshot_id or snapshot_id in known:
        return False
    if state.last_snapshot_id in known:
        # the metadata is at least as new as the state's newest snapshot, and every other
        # snapshot with stats is older: it is gone because it was expired (no refresh, so
        # a client asking again and again costs no metadata read)
        return True
    opened.table.refresh()
    return snapshot_id not in opened.table.snapshot_ids()


def missing_snapshot_message(opened: OpenedTable, state: StateVersion, snapshot_id: int) -> str:
    """Why there are no stats for ``snapshot_id``: expired, not analyzed yet, or unknown."""
    name = opened.name
    when = state.expired.get(snapshot_id)
    if when is not None:
        at = datetime.fromtimestamp(when / 1000, UTC).isoformat(timespec="seconds")
        return (
            f"snapshot {snapshot_id} of table {name} was expired; its stats were removed "
            f"with it (noticed at {at})"
        )
    if snapshot_id in state.stats:  # still in the state: expired_meanwhile said so
        return (
            f"snapshot {snapshot_id} of table {name} was expired; its stats are removed at "
            "lakestats' next run"
        )
    if snapshot_id in opened.table.snapshot_ids():
        return (
            f"snapshot {snapshot_id} of table {name} has not been analyzed yet: "
            f"run `lakestats analyze {name}`"
        )
    return (
        f"snapshot {snapshot_id} of table {name} does not exist or was expired before "
        "lakestats processed it"
    )
