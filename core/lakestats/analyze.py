"""The commit path: plan → sketch → store → merge once → commit → publish once.

``analyze_table`` brings a table's stats up to its current snapshot. It walks the table's
lineage once, cuts the unprocessed commits into batches (``plan``), sketches each batch's
new files in one Spark job (``sketching``), and for every commit writes its segment and
tombstones (``store.writer``), merges the table once (``StatsStore.merged_view``), builds the
native stats document and commits one new state version. Publishers get the same merged
value and register a batch's snapshots in one commit of the table.

Every commit ends with one state version, written only after everything it references is
durable, so a crash at any point leaves the previous version valid and a re-run continues
from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from lakestats.config import Config
from lakestats.exceptions import (
    ConcurrentUpdateError,
    ExpiredWhileReadingError,
    LakestatsError,
    MetadataError,
    StoreError,
    UnreadableCommitError,
)
from lakestats.formats.base import KeepsListedFiles, SupportsFormatTerms
from lakestats.lineage import pending_commits, rebased_baseline, reusable_sketches
from lakestats.locations import LocationMap
from lakestats.maintenance import expire_stats, stale_stats
from lakestats.merge import (
    TABLE_GROUPS,
    extend_view,
    group_of,
    only_partitions,
    regroup,
    replace_partitions,
    table_of_groups,
    view_of,
    whole_table,
)
from lakestats.model import (
    ColumnSketch,
    Commit,
    DataFile,
    MergedView,
    PartitionKey,
    SegmentEntry,
    SketchSettings,
    StateVersion,
)
from lakestats.plan import (
    BatchPlan,
    BatchSizer,
    BatchSketches,
    CommitPlan,
    Sketches,
    plan_commit,
)
from lakestats.publish.base import Publisher, SnapshotStats
from lakestats.publish.native import commit_doc, stats_doc
from lakestats.publish.registry import publisher_for
from lakestats.publish.sweeps import sweep_due
from lakestats.read import list_commit_docs, read_stats
from lakestats.sketching import (
    ReusingSketcher,
    Sketcher,
    SparkSketcher,
    make_sketcher,
    sketch_batch,
    with_location_map,
)
from lakestats.store import StatsStore
from lakestats.store.writer import SegmentWriter, StoredCommit
from lakestats.tables import ConfigLike, OpenedTable, TableLike, as_config, open_table

__all__ = [
    "AUTO",
    "AnalyzeResult",
    "BatchProgress",
    "CommitReport",
    "Sketcher",
    "SparkSketcher",
    "analyze_table",
    "list_commit_docs",
    "make_sketcher",
    "read_stats",
    "unregistered_stats",
]

_CONCURRENT_RETRIES = 3
# Per publish: snapshots whose stats were committed but never registered, staged again
# (newest first), and state versions read back to find their merged stats.
_MAX_RESTAGED = 64
_MAX_VERSIONS_READ = 512
# A walk that starts over looks for the files it adds in this many earlier state versions
# at most (after the state's own and retired segments, which hold what Iceberg and Paimon
# tables still list): each is a JSON document to parse, once per start-over.
_MAX_VERSIONS_LOOKED_BACK = 64
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
    # seconds per phase; "sketch" is this commit's share of its batch's Spark job (by added
    # files), never including Spark's start-up
    timings: Mapping[str, float] = field(default_factory=dict)
    batch_commits: int = 1  # commits sketched by the same Spark job
    batch_sketch_s: float = 0.0  # that whole job
    spark_start_s: float = 0.0  # starting Spark before the job (first commit of a batch only)
    # data files re-read with their row-level deletes applied, and the rows they hold
    deletes_reread_files: int = 0
    deletes_reread_rows: int = 0
    # data files not read: a walk that started over took the sketches the store held
    reused_files: int = 0

    def log_fields(self) -> dict[str, Any]:
        """The ``commit_processed`` log event's fields (CLI JSON lines and the daemon)."""
        return {
            "table": self.table,
            "snapshot_id": self.snapshot_id,
            "operation": self.operation,
            "commit_timestamp_ms": self.timestamp_ms,
            "added_files": self.added_files,
            "removed_files": self.removed_files,
            "added_records": self.added_records,
            "sketched_files": self.sketched_files,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            # timings["sketch"] is this commit's share of one Spark job over its batch
            "sketch_is_share_of_batch": self.batch_commits > 1,
            "batch_commits": self.batch_commits,
            "batch_sketch_s": round(self.batch_sketch_s, 4),
            "spark_start_s": round(self.spark_start_s, 4),
            "deletes_reread_files": self.deletes_reread_files,
            "deletes_reread_rows": self.deletes_reread_rows,
            "reused_files": self.reused_files,
        }


@dataclass(frozen=True)
class BatchProgress:
    """Where a run is: ``on_progress`` hears one before and one after each batch's job."""

    table: str
    batch: int  # 1-based
    batches: int  # in the run: an estimate, batch sizes adapt as it goes (``BatchSizer``)
    commits: int  # in this batch
    files: int  # data files this batch sketches
    rows: int  # rows in those files
    files_total: int  # over the whole run
    rows_total: int
    files_done: int  # sketched by earlier batches (and this one once ``sketched``)
    rows_done: int
    sketched: bool  # False: the job is about to run; True: it finished
    sketch_s: float = 0.0  # the job, once sketched
    spark_start_s: float = 0.0

    def log_fields(self) -> dict[str, Any]:
        """The ``analyze_progress`` log event's fields (CLI JSON lines and the daemon)."""
        return {
            "table": self.table,
            "batch": self.batch,
            "batches": self.batches,
            "phase": "sketched" if self.sketched else "sketching",
            "commits": self.commits,
            "files": self.files,
            "rows": self.rows,
            "files_done": self.files_done,
            "files_total": self.files_total,
            "rows_done": self.rows_done,
            "rows_total": self.rows_total,
            "sketch_s": round(self.sketch_s, 3),
        }


@dataclass(frozen=True)
class AnalyzeResult:
    table: str
    last_snapshot_id: int | None
    commits: tuple[CommitReport, ...] = ()
    stopped_early: bool = False
    # commits the run's next batch would have held (``BatchSizer``): a run that stopped
    # early hands it to its next turn in the same process (``first_batch_commits``)
    next_batch_commits: int = 1


class _CommitPath:
    """One run's steps over one table; each method is one step of the module doc."""

    def __init__(
        self,
        opened: OpenedTable,
        config: Config,
        sketcher: Sketcher | None,
        first_batch_commits: int = 1,
    ) -> None:
        self.opened = opened
        self.store: StatsStore = opened.store
        self.settings: SketchSettings = config.sketch.settings()
        self.location_map = LocationMap.of(opened.config.location_map)
        self.approximate_equality = opened.config.equality_deletes == "approximate"
        self.sketcher = with_location_map(
            sketcher if (config.sketch.enabled and opened.config.sketches) else None,
            self.location_map,
        )
        # stands in for ``sketcher`` in a walk that starts over after a rollback (``pending``),
        # for the files ``reusable`` names
        self.reusing: ReusingSketcher | None = None
        self.reusable: frozenset[str] = frozenset()
        # the commit the lineage walk stopped at (``pending``): reported after the others
        self.stopped: UnreadableCommitError | None = None
        fmt = opened.table
        retire = isinstance(fmt, KeepsListedFiles) and fmt.keeps_listed_files()
        self.writer = SegmentWriter(self.store, self.settings, retire=retire)
        self.publisher: Publisher = publisher_for(opened)
        self.grace_s = config.maintenance.grace_period_s
        self.swept = False
        self.batches = BatchSizer(
            max_files=config.sketch.max_files_per_job,
            max_bytes=config.sketch.max_bytes_per_job,
            target_s=config.sketch.batch_target_s,
            max_commits=max(1, first_batch_commits),
        )

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
        """The lineage walk (once per run, ``lakestats.lineage``). After a rollback past
        what was processed, or when the processed id now names another commit, the run
        starts over from the table's lineage."""
        pending = pending_commits(self.opened.table, state)
        self.stopped = pending.stopped
        if pending.started_over is None:
            # a commit may add again a file the state holds tombstoned (Delta's RESTORE):
            # known from the state alone, read from the store only when it happens
            added = _without_deletes(pending.commits)
            holding = tuple(s for s in state.segments if not s.dead_files.isdisjoint(added))
            if holding and self.sketcher is not None:
                restored = replace(state, segments=holding, retired=())
                self._reuse_stored_sketches(restored, pending.commits, versions=0)
            return state, pending.commits
        _log.warning("lineage_restart", table=self.opened.name, reason=pending.started_over)
        state = replace(state, last_snapshot_id=None, last_fingerprint=None)
        commits = pending.commits
        if pending.id_reused:
            # the stats of older snapshots may describe commits that were replaced too
            # (which ones the state cannot tell): the walk writes them again. Files are
            # another matter: a file the walk adds with the path, rows and bytes of one
            # the store holds is that file, whichever commit adds it now
            self._reuse_stored_sketches(state, commits)
            return replace(state, segments=(), retired=(), stats={}), commits
        rebased = bool(commits) and commits[0].is_baseline and bool(state.segments)
        if rebased:
            # history was cut past the processed commit: the files the store holds keep
            # their stats and segments, and the baseline reads only the others
            held = self.store.held_files(state)
            commits = [rebased_baseline(commits[0], held), *commits[1:]]
        self._reuse_stored_sketches(state, commits)
        return (state if rebased else replace(state, segments=())), commits

    def _reuse_stored_sketches(
        self,
        state: StateVersion,
        commits: Sequence[Commit],
        *,
        versions: int = _MAX_VERSIONS_LOOKED_BACK,
    ) -> None:
        """The commits add again files the store sketched before (after a rollback: live,
        or removed since, even by the commits the rollback undid; after a cut: removed, and
        listed again by the baseline; a restore): their stored sketches stand in. Looks
        through ``versions`` earlier state versions too."""
        if self.sketcher is None:
            return
        held = self.store.held_before(state, _without_deletes(commits), versions=versions)
        reusable = reusable_sketches(commits, held)
        if reusable:
            self.reusable = frozenset(reusable)
            self.reusing = ReusingSketcher(
                self.sketcher, lambda paths: self._stored_sketches(reusable, paths)
            )
            self.sketcher = self.reusing

    def _stored_sketches(
        self, reusable: Mapping[str, str], paths: Sequence[str]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        return self.store.stored_sketches({p: reusable[p] for p in paths if p in reusable})

    # -- per commit ----------------------------------------------------------------------

    def plan(self, state: StateVersion, commit: Commit, sketches: Sketches) -> CommitPlan:
        fmt = self.opened.table
        removed = [f.path for f in (*commit.removed_files, *commit.removed_delete_files)]
        located = self.store.locate(removed, state) if removed else {}
        plan = plan_commit(
            commit,
            schema=fmt.schema(commit.schema_id),
            current_schema=fmt.schema(),
            sketches=sketches,
            located=located,
        )
        if self.approximate_equality:
            plan = with_earlier_stats(plan, located, self.store)
        return plan

    def merge(self, state: StateVersion, plan: CommitPlan, stored: StoredCommit) -> MergedView:
        """The table merged once (its ``SnapshotStats``, which publishers and the native
        document read, are this view's: ``snapshot_stats``).

        An append merges its files into the previous merged view; a removal re-merges
        the partitions it touched from their live segments, and the table from the view's
        groups, re-merging those the partitions are in (``MergedView.groups``); a baseline
        re-merges all."""
        changed = _changed_partitions(plan, stored)
        if changed is None:
            view = self.store.merged_view(replace(state, segments=stored.segments), self.settings)
        elif plan.full_merge:
            previous = self.store.merged_view(state, self.settings)
            if only_partitions(previous, changed):
                # the removal's partitions are all the table has (unpartitioned): their
                # re-merge is the table, with no other partition to merge again
                remerged, _ = self.store.remerge_partitions(stored.segments, changed, self.settings)
                table = whole_table(remerged, self.settings)
                view = replace_partitions(previous, changed, remerged, table)
            else:
                # every group the first time (then kept), later the removal's partitions'
                wanted = (
                    range(TABLE_GROUPS)
                    if previous.groups is None
                    else {group_of(key) for key in changed}
                )
                remerged, merged_groups = self.store.remerge_partitions(
                    stored.segments, changed, self.settings, groups=wanted
                )
                groups = regroup(previous, merged_groups)
                table = table_of_groups(groups, self.settings)
                view = replace_partitions(previous, changed, remerged, table, groups)
        else:
            previous = self.store.merged_view(state, self.settings)
            view = extend_view(previous, stored.added, self.settings)
        return view

    def snapshot_stats(self, plan: CommitPlan, view: MergedView) -> SnapshotStats:
        return SnapshotStats(
            snapshot_id=plan.commit.snapshot_id,
            schema=plan.schema,
            partitions=view.partitions,
            table=view.table,
            settings=self.settings,
            commit=plan.commit,
        )

    def commit(
        self,
        state: StateVersion,
        plan: CommitPlan,
        stored: StoredCommit,
        stats: SnapshotStats,
        view: MergedView,
    ) -> StateVersion:
        """The stats document and merged view made durable, then one new state version."""
        doc = stats_doc(
            stats,
            table_name=self.opened.name,
            format_name=self.opened.table.format_name,
            commit=commit_doc(plan.commit, stored.added, stored.removed, plan.names, self.settings),
        )
        doc["computed_at_ms"] = int(time.time() * 1000)
        fmt = self.opened.table
        if isinstance(fmt, SupportsFormatTerms):
            try:
                doc[fmt.format_name] = fmt.format_terms(
                    stats.snapshot_id, stats.table, self.settings
                )
            except LakestatsError as exc:  # e.g. expired meanwhile: the rest stands
                _log.warning("format_terms_failed", table=self.opened.name, reason=str(exc))
        snapshot_id = stats.snapshot_id
        stats_path = self.store.write_stats(snapshot_id, doc)
        # replace(), not a new StateVersion: fields other parts own (published, expired …)
        # carry over without this code having to know them.
        next_state = replace(
            state,
            version=state.version + 1,
            last_snapshot_id=snapshot_id,
            segments=stored.segments,
            retired=stored.retired,
            stats={**state.stats, snapshot_id: stats_path},
            created_at_ms=int(time.time() * 1000),
            last_fingerprint=plan.commit.fingerprint,
        )
        next_state = self.store.write_merged_view(
            next_state,
            view,
            snapshot_id=snapshot_id,
            previous=state,
            changed=_changed_partitions(plan, stored),
        )
        committed = self.store.commit(next_state)
        self.store.remember_merged(committed, view)
        return committed

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        """Files only; registered once per batch by ``publish``."""
        try:
            self.publisher.stage(stats, published)
        except self.publisher.errors as exc:
            _log.warning("publish_failed", table=self.opened.name, error=str(exc))

    def apply(
        self,
        state: StateVersion,
        commit: Commit,
        sketches: Sketches,
        sketch_seconds: float,
        batch: tuple[int, float, float] = (1, 0.0, 0.0),
    ) -> tuple[StateVersion, CommitReport]:
        """``batch``: (commits in the batch, its job's seconds, Spark start-up to report)."""
        times = [time.perf_counter()]
        plan = self.plan(state, commit, sketches)
        stored = self.writer.write(state, plan)
        times.append(time.perf_counter())
        view = self.merge(state, plan, stored)
        stats = self.snapshot_stats(plan, view)
        times.append(time.perf_counter())
        committed = self.commit(state, plan, stored, stats, view)
        times.append(time.perf_counter())
        self.stage(stats, state.published)
        times.append(time.perf_counter())
        phases = ("store", "merge", "commit", "publish")
        live = sketches.live if isinstance(sketches, BatchSketches) else {}
        reread = [
            f
            for f in commit.added_files
            if (read := live.get((commit.snapshot_id, f.path))) is not None and read.data_read
        ]
        reread_keys = {(commit.snapshot_id, f.path) for f in reread}
        reused = self.reusing.reused if self.reusing is not None else frozenset()
        report = CommitReport(
            table=self.opened.name,
            snapshot_id=commit.snapshot_id,
            operation=commit.operation,
            timestamp_ms=commit.timestamp_ms,
            added_files=len(commit.added_files),
            removed_files=len(commit.removed_files),
            added_records=sum(f.record_count for f in commit.added_files),
            sketched_files=sum(
                1
                for f in commit.added_files
                if (commit.snapshot_id, f.path) in reread_keys
                or (f.path in sketches and f.path not in reused)
            ),
            reused_files=sum(1 for f in commit.added_files if f.path in reused),
            timings={
                "sketch": sketch_seconds,
                **{p: times[i + 1] - times[i] for i, p in enumerate(phases)},
            },
            batch_commits=batch[0],
            batch_sketch_s=batch[1],
            spark_start_s=batch[2],
            deletes_reread_files=len(reread),
            deletes_reread_rows=sum(f.record_count for f in reread),
        )
        return committed, report

    # -- per batch -----------------------------------------------------------------------

    def publish(self, state: StateVersion) -> StateVersion:
        """Register the staged stats in the table (one commit of the table), then record
        where they went in a new state version.

        Every processed snapshot whose stats were never registered — a run killed between
        its state commit and the batch's registration, or a failed publish — is staged
        again first, so a crash never strands a snapshot. Files of ours the table does not
        reference are swept once per run, and by one process at most once per grace period
        (``publish.sweeps``), after the grace period. A failure is logged and retried by
        the next run; the stats in the store stay valid either way.
        """
        if state.last_snapshot_id is None:
            return state
        try:
            self.restage_unregistered(state)
            published = self.publisher.flush(state.published)
            if not self.swept:
                self.swept = True
                fmt = self.opened.table
                if sweep_due(f"{fmt.table_id}\0{fmt.location}", self.grace_s):
                    self.publisher.sweep(self.grace_s)
        except self.publisher.errors as exc:
            _log.warning("publish_failed", table=self.opened.name, error=str(exc))
            return state
        if published == dict(state.published):
            return state
        return self.store.commit(
            replace(state, version=state.version + 1, published=published, created_at_ms=0)
        )

    def stopped_early(self, state: StateVersion, reports: Sequence[CommitReport]) -> AnalyzeResult:
        """A run told to stop or give way: what it did is registered and kept, and its
        batch size goes to its next turn (``AnalyzeResult.next_batch_commits``)."""
        state = self.publish(state)
        return AnalyzeResult(
            self.opened.name,
            state.last_snapshot_id,
            tuple(reports),
            stopped_early=True,
            next_batch_commits=self.batches.max_commits,
        )

    def restage_unregistered(self, state: StateVersion) -> None:
        live = self.opened.table.snapshot_ids()
        missing = {
            s
            for s in state.stats
            if s in live and not self.publisher.is_published(s, state.published)
        }
        if not missing:
            return
        found = 0
        for version in self._versions_newest_first(state):
            snapshot_id = version.last_snapshot_id
            if snapshot_id not in missing:
                continue
            missing.discard(snapshot_id)
            stats = self.stats_of(snapshot_id, state.stats[snapshot_id], version)
            self.publisher.stage(stats, state.published)
            found += 1
            if not missing or found >= _MAX_RESTAGED:
                return
        for snapshot_id in sorted(missing)[: _MAX_RESTAGED - found]:
            # its state version is gone (log retention): what the table metadata alone
            # gives (partition statistics from the snapshot's files), no NDV sketches
            stats = self.stats_of(snapshot_id, state.stats[snapshot_id], None)
            self.publisher.stage(stats, state.published)

    def _versions_newest_first(self, state: StateVersion) -> Iterator[StateVersion]:
        yield state
        for number in sorted(self.store.versions(), reverse=True)[:_MAX_VERSIONS_READ]:
            if number >= state.version:
                continue
            try:
                yield self.store.read_version(number)
            except (StoreError, OSError, ValueError):
                continue  # deleted by cleanup meanwhile, or unreadable: skip it

    def stats_of(
        self, snapshot_id: int, stats_path: str, version: StateVersion | None
    ) -> SnapshotStats:
        """A processed snapshot's merged stats again: its schema from its stats document,
        its partitions from the state ``version`` that committed it (that version's merged
        aggregate, else its segments' aggregates); no partitions when that is gone."""
        view = view_of((), self.settings)
        schema = self.opened.table.schema()
        try:
            schema_id = self.store.read_stats(stats_path).get("schema_id")
            schema = self.opened.table.schema(schema_id if isinstance(schema_id, int) else None)
            if version is not None:
                view = self.store.merged_view(version, self.settings)
        except (LakestatsError, OSError) as exc:
            _log.warning("republish_without_sketches", table=self.opened.name, error=str(exc))
            view = view_of((), self.settings)
        return SnapshotStats(
            snapshot_id=snapshot_id,
            schema=schema,
            partitions=view.partitions,
            table=view.table,
            settings=self.settings,
        )


def _without_deletes(commits: Sequence[Commit]) -> set[str]:
    """The data files the commits add with no row-level deletes: the only ones stored
    sketches can stand in for (``HeldFile.describes``), so the only ones looked for."""
    return {f.path for c in commits for f in c.added_files if not f.deletes}


def _changed_partitions(plan: CommitPlan, stored: StoredCommit) -> frozenset[PartitionKey] | None:
    """The partitions whose merged stats a commit changes: those of the files it adds and
    of the stored files it tombstones; ``None`` for a baseline, which replaces everything."""
    if plan.commit.is_baseline:
        return None
    return stored.tombstoned_partitions | {p.partition for p in stored.added}


def with_earlier_stats(
    plan: CommitPlan, located: Mapping[str, SegmentEntry], store: StatsStore
) -> CommitPlan:
    """Files re-added with equality deletes that were not re-read (``equality_deletes =
    "approximate"``) keep the stats the store had for them (no data read); they stay
    marked as not reflecting their deletes."""
    kept: dict[str, DataFile] = {}
    segments: dict[str, tuple[DataFile, ...]] = {}
    for f in plan.added:
        segment = located.get(f.path)
        if not f.deletes_unknown or f.sketches or segment is None:
            continue
        if segment.path not in segments:
            segments[segment.path] = store.read_segment(segment.path)
        earlier = next((e for e in segments[segment.path] if e.path == f.path), None)
        if earlier is not None:
            kept[f.path] = replace(
                f,
                columns=earlier.columns,
                sketches=earlier.sketches,
                live_record_count=None,
                live_rows_unknown=True,
            )
    if not kept:
        return plan
    return replace(plan, added=tuple(kept.get(f.path, f) for f in plan.added))


def unregistered_stats(opened: OpenedTable, state: StateVersion | None) -> bool:
    """Whether a processed snapshot of ``state`` (the store's current state, as the caller
    read it) still waits for its stats to be registered in the table (a run was killed
    before its batch's catalog commit). Cheap: the metadata the table already loaded. The
    daemon runs the table when this says so, even without a new commit."""
    if state is None or not state.stats:
        return False
    publisher = publisher_for(opened)
    live = opened.table.snapshot_ids()
    return any(s in live and not publisher.is_published(s, state.published) for s in state.stats)


class _Progress:
    """Turns the batch loop into ``BatchProgress`` events (nothing when nobody listens)."""

    def __init__(
        self,
        table: str,
        commits: Sequence[Commit],
        listener: Callable[[BatchProgress], None] | None,
        *,
        sketching: bool,
        reused: Collection[str] = (),
    ) -> None:
        self._table = table
        self._listener = listener
        self._sketching = sketching
        # files a walk that started over takes the stored sketches of: nothing to read
        self._reused = frozenset(reused)
        files = [f for c in commits for f in c.added_files if f.path not in self._reused]
        files = files if sketching else []
        self._files_total = len(files)
        self._rows_total = sum(f.record_count for f in files)
        self._files_done = 0
        self._rows_done = 0

    def _rows(self, batch: BatchPlan) -> int:
        if not self._sketching:
            return 0
        wanted = set(batch.paths) - self._reused
        return sum(f.record_count for c in batch.commits for f in c.added_files if f.path in wanted)

    def _files(self, batch: BatchPlan) -> int:
        return sum(1 for p in batch.paths if p not in self._reused) if self._sketching else 0

    def _event(self, number: int, batches: int, batch: BatchPlan, **extra: Any) -> None:
        if self._listener is None:
            return
        self._listener(
            BatchProgress(
                table=self._table,
                batch=number,
                batches=batches,
                commits=len(batch.commits),
                files=self._files(batch),
                rows=self._rows(batch),
                files_total=self._files_total,
                rows_total=self._rows_total,
                files_done=self._files_done,
                rows_done=self._rows_done,
                **extra,
            )
        )

    def started(self, number: int, batches: int, batch: BatchPlan) -> None:
        self._event(number, batches, batch, sketched=False)

    def sketched(
        self, number: int, batches: int, batch: BatchPlan, seconds: float, startup: float
    ) -> None:
        self._files_done += self._files(batch)
        self._rows_done += self._rows(batch)
        self._event(number, batches, batch, sketched=True, sketch_s=seconds, spark_start_s=startup)


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
    on_progress: Callable[[BatchProgress], None] | None = None,
    refreshed: bool = False,
    should_yield: Callable[[], bool] | None = None,
    first_batch_commits: int = 1,
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
    readable). ``on_progress`` hears each batch before and after its Spark job.
    ``refreshed``: the caller refreshed the ``OpenedTable`` it passes just before (the
    daemon's poll does, to see whether there is anything to do), so the run takes the
    table as it is instead of loading it again — for a catalog table a load parses the
    whole metadata file; a commit that landed meanwhile is the next run's.
    ``should_yield`` is checked before each batch but the first — never inside one, whose
    sketches are paid for: True ends the run there like ``should_stop`` (the daemon gives
    a worker that a long backlog holds back to the tables waiting for one).
    ``first_batch_commits``: the first batch's size, 1 unless this run goes on from one
    that stopped early in the same process (its ``next_batch_commits``): a new process
    starts small, in case it is one that gets killed sooner than a big batch takes.
    """
    resolved = as_config(config)
    opened = open_table(table, resolved)
    if isinstance(sketcher, _Auto):
        sketcher = make_sketcher(resolved) if resolved.sketch.enabled else None
    done: list[CommitReport] = []

    def committed(report: CommitReport) -> None:
        done.append(report)
        if on_commit is not None:
            on_commit(report)

    attempt = lost = 0
    while True:
        before = len(done)
        try:
            result = _analyze_once(
                _CommitPath(opened, resolved, sketcher, first_batch_commits),
                should_stop=should_stop,
                on_commit=committed,
                on_pending=on_pending,
                rebuild=rebuild,
                on_progress=on_progress,
                refresh=not (refreshed and attempt == 0 and isinstance(table, OpenedTable)),
                should_yield=should_yield,
            )
            return replace(result, commits=tuple(done))
        except (ConcurrentUpdateError, MetadataError) as exc:
            # Another process advanced the log first; its work is as good as ours, so
            # reload and continue from where it got to — as after snapshots expired under
            # the walk (their files gone). Only races lost in a row without a commit of
            # ours between them count: two runs over one backlog take turns
            if isinstance(exc, MetadataError) and not _expired_meanwhile(opened):
                raise
            attempt += 1
            if len(done) > before:
                lost, rebuild = 0, False  # a rebuild's first commit is its baseline
            else:
                lost += 1
                if lost < _CONCURRENT_RETRIES:
                    continue
                if isinstance(exc, MetadataError):
                    raise ExpiredWhileReadingError(
                        f"{exc} (snapshots were expired while this run read them; the next "
                        "run starts from what is left)"
                    ) from exc
                raise


def _expired_meanwhile(opened: OpenedTable) -> bool:
    """Whether a snapshot the failed attempt knew is gone now (expired during the run):
    what a metadata file that went missing meanwhile means, rather than damage. The
    handle still holds the table as the attempt read it; only this failure path pays
    for the look before and after a refresh."""
    try:
        known = opened.table.snapshot_ids()
        opened.table.refresh()
        return bool(known - opened.table.snapshot_ids())
    except LakestatsError:
        return False


def _analyze_once(
    path: _CommitPath,
    *,
    should_stop: Callable[[], bool] | None,
    on_commit: Callable[[CommitReport], None] | None,
    on_pending: PendingCallback | None,
    rebuild: bool,
    on_progress: Callable[[BatchProgress], None] | None = None,
    refresh: bool = True,
    should_yield: Callable[[], bool] | None = None,
) -> AnalyzeResult:
    opened = path.opened
    if refresh:
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

    progress = _Progress(
        opened.name,
        commits,
        on_progress,
        sketching=path.sketcher is not None,
        reused=path.reusable,
    )
    start = number = 0
    while start < len(commits):
        batch = path.batches.next(commits, start)
        start += len(batch.commits)
        number += 1
        if stopped() or (number > 1 and should_yield is not None and should_yield()):
            return path.stopped_early(state, reports)
        began = time.monotonic()
        # batch sizes adapt as the run goes, so the number of batches is an estimate
        batches = number + path.batches.batches_for(len(commits) - start)
        progress.started(number, batches, batch)
        # as written: a file of a since retyped column (Delta overwriting a string column
        # with a long one; Paimon dropping it and adding it again) is unreadable as the new
        # type, and the stats of its commit are of the old one (``plan.schema_types``)
        batch_schema = opened.table.schema(batch.commits[0].schema_id)
        sketches, sketch_seconds, startup = sketch_batch(
            path.sketcher,
            batch,
            batch_schema,
            path.settings,
            location_map=path.location_map,
            approximate_equality=path.approximate_equality,
        )
        progress.sketched(number, batches, batch, sketch_seconds, startup)
        for i, commit in enumerate(batch.commits):
            if i and stopped():
                return path.stopped_early(state, reports)
            share = sketch_seconds * len(commit.added_files) / (batch.file_count or 1)
            facts = (len(batch.commits), sketch_seconds, startup if i == 0 else 0.0)
            state, report = path.apply(state, commit, sketches, share, facts)
            reports.append(report)
            if on_commit is not None:
                on_commit(report)
        state = path.publish(state)  # one commit of the table per batch, not per snapshot
        path.batches.observe(batch, time.monotonic() - began)
    if not commits:
        state = path.publish(state)  # drops entries of snapshots expired meanwhile, if any
    if stale_stats(opened, state):
        # snapshots expired by anyone (a writer, a Spark procedure …): drop their stats
        expire_stats(opened)
    if path.stopped is not None:  # the commits before it are processed and kept
        raise path.stopped
    return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports))
