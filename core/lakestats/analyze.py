"""The commit path: plan → sketch → store → merge once → commit → publish once.

``analyze_table`` brings a table's stats up to its current snapshot. It walks the table's
lineage once, cuts the unprocessed commits into batches (``plan``), sketches each batch's
new files in one Spark job (``sketching``), and for every commit writes its segment and
tombstones (``store.writer``), merges the table once (``StatsStore.merged``), builds the
native stats document and commits one new state version. Publishers get the same merged
value and register a batch's snapshots in one commit of the table.

Every commit ends with one state version, written only after everything it references is
durable, so a crash at any point leaves the previous version valid and a re-run continues
from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from lakestats.config import Config
from lakestats.exceptions import ConcurrentUpdateError, LineageError
from lakestats.locations import LocationMap
from lakestats.maintenance import expire_stats, stale_stats
from lakestats.merge import merge_partitions, whole_table
from lakestats.model import Commit, SketchSettings, StateVersion
from lakestats.plan import CommitPlan, Sketches, plan_batches, plan_commit
from lakestats.publish.base import Publisher, SnapshotStats
from lakestats.publish.native import commit_doc, stats_doc
from lakestats.publish.registry import publisher_for
from lakestats.read import list_commit_docs, read_stats
from lakestats.sketching import (
    Sketcher,
    SparkSketcher,
    make_sketcher,
    sketch_batch,
    with_location_map,
)
from lakestats.store import StatsStore, merge_key
from lakestats.store.writer import SegmentWriter, StoredCommit
from lakestats.tables import ConfigLike, OpenedTable, TableLike, as_config, open_table

__all__ = [
    "AUTO",
    "AnalyzeResult",
    "CommitReport",
    "Sketcher",
    "SparkSketcher",
    "analyze_table",
    "list_commit_docs",
    "make_sketcher",
    "read_stats",
]

_CONCURRENT_RETRIES = 3
_log = structlog.get_logger(__name__)

PendingCallback = Callable[[Sequence[Commit]], None]
"""Called once per run with the commits the run is about to process (empty: up to date)."""


@dataclass(frozen=True)
class CommitReport:
    """What processing one commit did, for logs, metrics and progress lines."""

    table: str
    snapshot_id: int
    operation: str
    timestamp_ms: int
    added_files: int
    removed_files: int
    added_records: int
    sketched_files: int
    # seconds per phase; "sketch" is this commit's share of its batch's Spark job
    timings: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AnalyzeResult:
    table: str
    last_snapshot_id: int | None
    commits: tuple[CommitReport, ...] = ()
    stopped_early: bool = False


class _CommitPath:
    """One run's steps over one table; each method is one step of the module doc."""

    def __init__(self, opened: OpenedTable, config: Config, sketcher: Sketcher | None) -> None:
        self.opened = opened
        self.store: StatsStore = opened.store
        self.settings: SketchSettings = config.sketch.settings()
        self.max_files = config.sketch.max_files_per_job
        self.sketcher = with_location_map(
            sketcher if (config.sketch.enabled and opened.config.sketches) else None,
            LocationMap.of(opened.config.location_map),
        )
        self.writer = SegmentWriter(self.store, self.settings)
        self.publisher: Publisher = publisher_for(opened)

    def initial_state(self) -> StateVersion:
        current = self.store.current()
        if current is not None:
            return current
        fmt = self.opened.table
        return StateVersion(
            version=0,
            table_id=fmt.table_id,
            format=fmt.format_name,
            location=fmt.location,
            last_snapshot_id=None,
        )

    def pending(self, state: StateVersion) -> tuple[StateVersion, Sequence[Commit]]:
        """The lineage walk (once per run). After a rollback past what was processed the
        run starts over from the table's lineage."""
        try:
            return state, self.opened.table.commits_since(state.last_snapshot_id)
        except LineageError:
            state = replace(state, last_snapshot_id=None, segments=())
            return state, self.opened.table.commits_since(None)

    # -- per commit ----------------------------------------------------------------------

    def plan(self, state: StateVersion, commit: Commit, sketches: Sketches) -> CommitPlan:
        fmt = self.opened.table
        removed = [f.path for f in (*commit.removed_files, *commit.removed_delete_files)]
        return plan_commit(
            commit,
            schema=fmt.schema(commit.schema_id),
            current_schema=fmt.schema(),
            sketches=sketches,
            located=self.store.locate(removed, state) if removed else {},
        )

    def merge(self, state: StateVersion, plan: CommitPlan, stored: StoredCommit) -> SnapshotStats:
        """The table merged once; publishers and the native document read this value."""
        if plan.full_merge:
            partitions = self.store.merged(replace(state, segments=stored.segments), self.settings)
        else:
            previous = self.store.merged(state, self.settings)
            partitions = merge_partitions((*previous, *stored.added), self.settings)
        return SnapshotStats(
            snapshot_id=plan.commit.snapshot_id,
            schema=plan.schema,
            partitions=partitions,
            table=whole_table(partitions, self.settings),
            settings=self.settings,
            commit=plan.commit,
        )

    def commit(
        self, state: StateVersion, plan: CommitPlan, stored: StoredCommit, stats: SnapshotStats
    ) -> StateVersion:
        """The stats document and merged view made durable, then one new state version."""
        doc = stats_doc(
            stats,
            table_name=self.opened.name,
            format_name=self.opened.table.format_name,
            commit=commit_doc(plan.commit, stored.added, stored.removed, plan.names, self.settings),
        )
        doc["computed_at_ms"] = int(time.time() * 1000)
        snapshot_id = stats.snapshot_id
        stats_path = self.store.write_stats(snapshot_id, doc)
        merged_path = self.store.write_aggregate(snapshot_id, stats.partitions)
        # replace(), not a new StateVersion: fields other parts own (published, expired …)
        # carry over without this code having to know them.
        next_state = replace(
            state,
            version=state.version + 1,
            last_snapshot_id=snapshot_id,
            segments=stored.segments,
            stats={**state.stats, snapshot_id: stats_path},
            created_at_ms=int(time.time() * 1000),
            merged_path=merged_path,
        )
        next_state = replace(next_state, merged_key=merge_key(next_state))
        committed = self.store.commit(next_state)
        self.store.remember_merged(committed, stats.partitions)
        return committed

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        """Files only; registered once per batch by ``publish``."""
        try:
            self.publisher.stage(stats, published)
        except self.publisher.errors as exc:
            _log.warning("publish_failed", table=self.opened.name, error=str(exc))

    def apply(
        self, state: StateVersion, commit: Commit, sketches: Sketches, sketch_seconds: float
    ) -> tuple[StateVersion, CommitReport]:
        times = [time.perf_counter()]
        plan = self.plan(state, commit, sketches)
        stored = self.writer.write(state, plan)
        times.append(time.perf_counter())
        stats = self.merge(state, plan, stored)
        times.append(time.perf_counter())
        committed = self.commit(state, plan, stored, stats)
        times.append(time.perf_counter())
        self.stage(stats, state.published)
        times.append(time.perf_counter())
        phases = ("store", "merge", "commit", "publish")
        report = CommitReport(
            table=self.opened.name,
            snapshot_id=commit.snapshot_id,
            operation=commit.operation,
            timestamp_ms=commit.timestamp_ms,
            added_files=len(commit.added_files),
            removed_files=len(commit.removed_files),
            added_records=sum(f.record_count for f in commit.added_files),
            sketched_files=sum(1 for f in commit.added_files if f.path in sketches),
            timings={
                "sketch": sketch_seconds,
                **{p: times[i + 1] - times[i] for i, p in enumerate(phases)},
            },
        )
        return committed, report

    # -- per batch -----------------------------------------------------------------------

    def publish(self, state: StateVersion) -> StateVersion:
        """Register the staged stats in the table (one commit of the table), then record
        where they went in a new state version.

        A failure is logged and retried by the next run (the newest snapshot is staged
        again if it was never registered); the stats in the store stay valid either way.
        """
        snapshot_id = state.last_snapshot_id
        if snapshot_id is None:
            return state
        try:
            if not self.publisher.is_published(snapshot_id, state.published):
                schema_id = self.store.read_stats(state.stats[snapshot_id])["schema_id"]
                partitions = self.store.merged(state, self.settings)
                retry = SnapshotStats(
                    snapshot_id=snapshot_id,
                    schema=self.opened.table.schema(schema_id),
                    partitions=partitions,
                    table=whole_table(partitions, self.settings),
                    settings=self.settings,
                )
                self.publisher.stage(retry, state.published)
            published = self.publisher.flush(state.published)
        except self.publisher.errors as exc:
            _log.warning("publish_failed", table=self.opened.name, error=str(exc))
            return state
        if published == dict(state.published):
            return state
        return self.store.commit(
            replace(state, version=state.version + 1, published=published, created_at_ms=0)
        )


class _Auto:
    def __repr__(self) -> str:
        return "AUTO"


AUTO = _Auto()
"""``sketcher=AUTO``: sketch on Spark when the config enables sketches (the default)."""


def analyze_table(
    table: TableLike,
    *,
    config: ConfigLike = None,
    sketcher: Sketcher | _Auto | None = AUTO,
    should_stop: Callable[[], bool] | None = None,
    on_commit: Callable[[CommitReport], None] | None = None,
    on_pending: PendingCallback | None = None,
    rebuild: bool = False,
) -> AnalyzeResult:
    """Process every commit not yet reflected in the table's stats, oldest first.

    ``table`` is a configured name, a location, a ``TableConfig`` or an ``OpenedTable``;
    ``config`` a ``Config``, a TOML file's path, or ``None`` for defaults plus environment.
    ``sketcher``: ``AUTO`` sketches new files on Spark when the config enables sketches,
    ``None`` keeps to metadata-only stats.

    ``should_stop`` is checked between commits (a signal handler sets it); the work done
    so far stays committed. ``on_pending`` receives the commits the run is about to process
    (the daemon's freshness comes from this one lineage walk). ``rebuild`` recomputes from
    the table's history, ignoring the stored segments (stats of earlier snapshots stay
    readable).
    """
    resolved = as_config(config)
    opened = open_table(table, resolved)
    if isinstance(sketcher, _Auto):
        sketcher = make_sketcher(resolved) if resolved.sketch.enabled else None
    for attempt in range(_CONCURRENT_RETRIES):
        try:
            return _analyze_once(
                _CommitPath(opened, resolved, sketcher),
                should_stop=should_stop,
                on_commit=on_commit,
                on_pending=on_pending,
                rebuild=rebuild,
            )
        except ConcurrentUpdateError:
            # Another process advanced the log first; its work is as good as ours, so
            # reload and continue from where it got to.
            if attempt == _CONCURRENT_RETRIES - 1:
                raise
            rebuild = False
    raise AssertionError("unreachable")  # pragma: no cover


def _analyze_once(
    path: _CommitPath,
    *,
    should_stop: Callable[[], bool] | None,
    on_commit: Callable[[CommitReport], None] | None,
    on_pending: PendingCallback | None,
    rebuild: bool,
) -> AnalyzeResult:
    opened = path.opened
    opened.table.refresh()
    state = path.initial_state()
    if rebuild:
        state = replace(state, last_snapshot_id=None, segments=())
    state, commits = path.pending(state)
    if on_pending is not None:
        on_pending(commits)
    reports: list[CommitReport] = []

    def stopped() -> bool:
        return should_stop is not None and should_stop()

    current_schema = opened.table.schema()
    for batch in plan_batches(commits, path.max_files):
        if stopped():
            state = path.publish(state)
            return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports), True)
        sketches, sketch_seconds = sketch_batch(path.sketcher, batch, current_schema, path.settings)
        for i, commit in enumerate(batch.commits):
            if i and stopped():
                state = path.publish(state)
                return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports), True)
            share = sketch_seconds * len(commit.added_files) / (batch.file_count or 1)
            state, report = path.apply(state, commit, sketches, share)
            reports.append(report)
            if on_commit is not None:
                on_commit(report)
        state = path.publish(state)  # one commit of the table per batch, not per snapshot
    if not commits:
        state = path.publish(state)  # drops entries of snapshots expired meanwhile, if any
    if stale_stats(opened):
        # snapshots expired by anyone (a writer, a Spark procedure …): drop their stats
        expire_stats(opened)
    return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports))
