"""The commit path: plan → sketch → store → merge → publish, one commit at a time.

``analyze_table`` brings a table's stats up to its current snapshot. Every commit ends
with one new state version, written only after everything it references is durable, so a
crash at any point leaves the previous version valid and a re-run continues from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog

from lakestats.config import Config
from lakestats.exceptions import (
    ConcurrentUpdateError,
    LineageError,
    SnapshotNotFoundError,
    StoreError,
)
from lakestats.maintenance import (
    expire_stats,
    expired_meanwhile,
    missing_snapshot_message,
    stale_stats,
)
from lakestats.merge import aggregate_files, merge_partitions, whole_table
from lakestats.model import (
    ColumnSketch,
    Commit,
    DataFile,
    PartitionAggregate,
    SegmentEntry,
    SketchSettings,
    StateVersion,
    TableSchema,
)
from lakestats.publish.base import SnapshotStats
from lakestats.publish.native import commit_doc, stats_doc
from lakestats.publish.registry import publisher_for
from lakestats.store import merge_key
from lakestats.tables import OpenedTable

_CONCURRENT_RETRIES = 3
_log = structlog.get_logger(__name__)


class Sketcher(Protocol):
    """Reads data files and returns block-level sketches: path → field id → sketch."""

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]: ...


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
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds per phase


@dataclass(frozen=True)
class AnalyzeResult:
    table: str
    last_snapshot_id: int | None
    commits: tuple[CommitReport, ...] = ()
    stopped_early: bool = False


class SparkSketcher:
    """The sketch pipeline on the process-wide SparkSession, started on first use."""

    def __init__(self, config: Config) -> None:
        self._config = config

    def warm(self) -> None:
        """Start Spark now (the daemon does this at start, so the first commit is fast)."""
        from lakestats.sketches.spark import SparkSettings, get_spark  # noqa: PLC0415

        get_spark(SparkSettings(master=self._config.spark.master, conf=self._config.spark.conf))

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int]
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        # Imported here: pyspark takes seconds to import, and metadata-only runs need none.
        from lakestats.pipeline import sketch_files  # noqa: PLC0415
        from lakestats.sketches.spark import SparkSettings, get_spark  # noqa: PLC0415

        spark = get_spark(
            SparkSettings(master=self._config.spark.master, conf=self._config.spark.conf)
        )
        return sketch_files(
            spark, paths, schema, self._config.sketch.settings(), bounds_for=bounds_for
        )


def make_sketcher(config: Config) -> SparkSketcher:
    return SparkSketcher(config)


def _types(*schemas: TableSchema) -> dict[int, str]:
    """field id → type; later schemas win (a promoted type replaces the old one)."""
    types: dict[int, str] = {}
    for schema in schemas:
        types.update({c.field_id: c.type for c in schema.columns})
    return types


def _bounds_needed(files: Sequence[DataFile]) -> set[int]:
    """Field ids whose min/max some file's metadata lacks or may have truncated: only
    those need a scan (the issue: "where the file's metadata lacks them")."""
    needed: set[int] = set()
    for f in files:
        for field_id in f.field_ids:
            metrics = f.columns.get(field_id)
            if (
                metrics is None
                or metrics.lower is None
                or metrics.upper is None
                or metrics.bounds_may_be_truncated
            ):
                needed.add(field_id)
    return needed


def _batches(commits: Sequence[Commit], max_files: int) -> Iterator[list[Commit]]:
    """Consecutive commits whose added data files fit one Spark job (≥ 1 commit each)."""
    batch: list[Commit] = []
    files = 0
    for commit in commits:
        n = len(commit.added_files)
        if batch and files + n > max_files:
            yield batch
            batch, files = [], 0
        batch.append(commit)
        files += n
    if batch:
        yield batch


class _Run:
    """One analyze run over a table: holds the state being advanced and the merged cache."""

    def __init__(self, opened: OpenedTable, config: Config, sketcher: Sketcher | None) -> None:
        self.opened = opened
        self.fmt = opened.table
        self.store = opened.store
        self.settings: SketchSettings = config.sketch.settings()
        self.max_files = config.sketch.max_files_per_job
        self.sketcher = sketcher if (config.sketch.enabled and opened.config.sketches) else None
        self._partitions: tuple[PartitionAggregate, ...] | None = None
        # the format's table metadata (Iceberg: statistics + partition statistics); a
        # NullPublisher when off or impossible (opened by location). docs/publishing.md
        self.publisher = publisher_for(opened)

    def publish(self, state: StateVersion) -> StateVersion:
        """Register the staged stats in the table metadata (one catalog commit), then
        record where they went in a new state version.

        Publishing is a side effect keyed by snapshot: a failure is logged and retried by
        the next run (the newest snapshot is staged again if it was never registered); the
        stats in the store stay valid either way.
        """
        if state.last_snapshot_id is None:
            return state
        try:
            if not self.publisher.is_published(state.last_snapshot_id, state.published):
                partitions = self.partitions(state)
                doc = state.stats.get(state.last_snapshot_id)  # its schema id, not the current
                schema_id = self.store.read_stats(doc)["schema_id"] if doc else None
                self.publisher.stage(
                    SnapshotStats(
                        state.last_snapshot_id,
                        self.fmt.schema(schema_id),
                        partitions,
                        whole_table(partitions, self.settings),
                        self.settings,
                    ),
                    state.published,
                )
            published = self.publisher.flush(state.published)
        except self.publisher.errors as exc:
            _log.warning("publish_failed", table=self.opened.name, error=str(exc))
            return state
        if published == dict(state.published):
            return state
        return self.store.commit(
            replace(state, version=state.version + 1, published=published, created_at_ms=0)
        )

    def initial_state(self) -> StateVersion:
        current = self.store.current()
        if current is not None:
            return current
        return StateVersion(
            version=0,
            table_id=self.fmt.table_id,
            format=self.fmt.format_name,
            location=self.fmt.location,
            last_snapshot_id=None,
        )

    # -- merge cache ---------------------------------------------------------------------

    def partitions(self, state: StateVersion) -> tuple[PartitionAggregate, ...]:
        if self._partitions is None:
            self._partitions = self.store.merged(state)
        if self._partitions is None and state.merged_path and state.merged_key == merge_key(state):
            self._partitions = self.store.read_aggregate(state.merged_path)
        if self._partitions is None:
            parts: list[PartitionAggregate] = []
            for segment in state.segments:
                parts.extend(self.store.read_aggregate(segment.aggregate_path))
            self._partitions = merge_partitions(parts, self.settings)
            self.store.remember_merged(state, self._partitions)
        return self._partitions

    # -- one commit ----------------------------------------------------------------------

    def _sketch(self, batch: Sequence[Commit], schema: TableSchema) -> dict[str, Any]:
        if self.sketcher is None:
            return {}
        files = [f for c in batch for f in c.added_files]
        if not files:
            return {}  # a commit that only removes files reads no data
        return dict(self.sketcher([f.path for f in files], schema, _bounds_needed(files)))

    def _with_sketches(
        self, files: Sequence[DataFile], sketches: Mapping[str, Mapping[int, ColumnSketch]]
    ) -> list[DataFile]:
        out = []
        for f in files:
            per_file = sketches.get(f.path)
            if per_file is None:
                out.append(f)
                continue
            # Columns added after the file was written read as null in Spark; they are
            # absent from the file, not all-null values of it.
            kept = {fid: s for fid, s in per_file.items() if fid in f.field_ids}
            out.append(replace(f, sketches=kept))
        return out

    def _remerge_removed(
        self, state: StateVersion, removed: Sequence[DataFile], types: Mapping[int, str]
    ) -> tuple[list[SegmentEntry], bool]:
        """Tombstone removed files; re-merge only the segments they belonged to."""
        if not removed:
            return list(state.segments), False
        paths = [f.path for f in removed]
        located = self.store.locate(paths, state)
        missing = [p for p in paths if p not in located]
        if missing:
            raise StoreError(
                f"file {missing[0]} removed by this commit was never recorded in the stats "
                "store; run `lakestats analyze --rebuild` to recompute from the table's files"
            )
        dead_by_segment: dict[str, set[str]] = {}
        for path, segment in located.items():
            dead_by_segment.setdefault(segment.path, set()).add(path)
        segments: list[SegmentEntry] = []
        for segment in state.segments:
            newly_dead = dead_by_segment.get(segment.path)
            if not newly_dead:
                segments.append(segment)
                continue
            dead = frozenset(segment.dead_files | newly_dead)
            if len(dead) >= segment.file_count:
                continue  # fully dead: the segment leaves the state (cleanup deletes it)
            live = [f for f in self.store.read_segment(segment.path) if f.path not in dead]
            aggregate = aggregate_files(live, types, self.settings)
            aggregate_path = self.store.write_aggregate(segment.snapshot_id, aggregate)
            segments.append(replace(segment, aggregate_path=aggregate_path, dead_files=dead))
        return segments, True

    def apply(
        self,
        state: StateVersion,
        commit: Commit,
        sketches: Mapping[str, Mapping[int, ColumnSketch]],
        sketch_seconds: float,
    ) -> tuple[StateVersion, CommitReport]:
        started = time.perf_counter()
        schema = self.fmt.schema(commit.schema_id)
        types = _types(self.fmt.schema(), schema)
        added = self._with_sketches(commit.added_files, sketches) + list(commit.added_delete_files)
        removed = list(commit.removed_files) + list(commit.removed_delete_files)

        segments, had_removals = self._remerge_removed(state, removed, types)
        new_parts: tuple[PartitionAggregate, ...] = ()
        if added:
            segment_path = self.store.write_segment(commit.snapshot_id, added, types)
            new_parts = aggregate_files(added, types, self.settings)
            aggregate_path = self.store.write_aggregate(commit.snapshot_id, new_parts)
            segments.append(
                SegmentEntry(
                    snapshot_id=commit.snapshot_id,
                    path=segment_path,
                    aggregate_path=aggregate_path,
                    file_count=len(added),
                )
            )
        stored = time.perf_counter()

        if had_removals or commit.is_baseline:
            self._partitions = None
            next_state = replace(state, segments=tuple(segments))
            partitions = self.partitions(next_state)
        else:
            partitions = merge_partitions((*self.partitions(state), *new_parts), self.settings)
            self._partitions = partitions
        names = {c.field_id: c.name for c in self.fmt.schema().columns} | {
            c.field_id: c.name for c in schema.columns
        }
        removed_parts = aggregate_files(removed, types, self.settings)
        snapshot = SnapshotStats(
            commit.snapshot_id,
            schema,
            partitions,
            whole_table(partitions, self.settings),
            self.settings,
            commit,
        )
        doc = stats_doc(
            snapshot,
            table_name=self.opened.name,
            format_name=self.fmt.format_name,
            commit=commit_doc(commit, new_parts, removed_parts, names, self.settings),
        )
        doc["computed_at_ms"] = int(time.time() * 1000)
        stats_path = self.store.write_stats(commit.snapshot_id, doc)
        merged_path = self.store.write_aggregate(commit.snapshot_id, partitions)
        merged = time.perf_counter()

        # replace(), not a new StateVersion: fields other parts own (published, expired …)
        # carry over without this code having to know them.
        next_state = replace(
            state,
            version=state.version + 1,
            last_snapshot_id=commit.snapshot_id,
            segments=tuple(segments),
            stats={**state.stats, commit.snapshot_id: stats_path},
            created_at_ms=int(time.time() * 1000),
        )
        next_state = replace(next_state, merged_path=merged_path, merged_key=merge_key(next_state))
        committed = self.store.commit(next_state)
        self.store.remember_merged(committed, partitions)
        done = time.perf_counter()
        try:  # files only; registered per batch by publish()
            self.publisher.stage(snapshot, state.published)
        except self.publisher.errors as exc:
            _log.warning("publish_failed", table=self.opened.name, error=str(exc))
        published = time.perf_counter()
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
                "store": stored - started,
                "merge": merged - stored,
                "commit": done - merged,
                "publish": published - done,
            },
        )
        return committed, report


def analyze_table(
    opened: OpenedTable,
    *,
    config: Config,
    sketcher: Sketcher | None,
    should_stop: Callable[[], bool] | None = None,
    on_commit: Callable[[CommitReport], None] | None = None,
    rebuild: bool = False,
) -> AnalyzeResult:
    """Process every commit not yet reflected in the table's stats, oldest first.

    ``should_stop`` is checked between commits (a signal handler sets it); the work done
    so far stays committed. ``rebuild`` recomputes from the table's history, ignoring the
    stored segments (stats of earlier snapshots stay readable).
    """
    for attempt in range(_CONCURRENT_RETRIES):
        try:
            return _analyze_once(
                opened,
                config=config,
                sketcher=sketcher,
                should_stop=should_stop,
                on_commit=on_commit,
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
    opened: OpenedTable,
    *,
    config: Config,
    sketcher: Sketcher | None,
    should_stop: Callable[[], bool] | None,
    on_commit: Callable[[CommitReport], None] | None,
    rebuild: bool,
) -> AnalyzeResult:
    run = _Run(opened, config, sketcher)
    opened.table.refresh()
    state = run.initial_state()
    if rebuild:
        state = replace(state, last_snapshot_id=None, segments=())
    try:
        commits = opened.table.commits_since(state.last_snapshot_id)
    except LineageError:
        # The table was rolled back past what we processed: start over from its lineage.
        state = replace(state, last_snapshot_id=None, segments=())
        commits = opened.table.commits_since(None)
    reports: list[CommitReport] = []
    current_schema = opened.table.schema()
    for batch in _batches(commits, run.max_files):
        if should_stop is not None and should_stop():
            state = run.publish(state)
            return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports), True)
        started = time.perf_counter()
        sketches = run._sketch(batch, current_schema)
        sketch_seconds = time.perf_counter() - started
        total_files = sum(len(c.added_files) for c in batch) or 1
        for i, commit in enumerate(batch):
            if i and should_stop is not None and should_stop():
                state = run.publish(state)
                return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports), True)
            share = sketch_seconds * len(commit.added_files) / total_files
            state, report = run.apply(state, commit, sketches, share)
            reports.append(report)
            if on_commit is not None:
                on_commit(report)
        state = run.publish(state)  # one catalog commit per batch, not per snapshot
    if not commits:
        state = run.publish(state)  # drops entries of snapshots expired meanwhile, if any
    if stale_stats(opened):
        # snapshots expired by anyone (pyiceberg, a Spark procedure …): drop their stats
        expire_stats(opened)
    return AnalyzeResult(opened.name, state.last_snapshot_id, tuple(reports))


def read_stats(opened: OpenedTable, snapshot_id: int | None = None) -> dict[str, Any]:
    """The stats document of the current (or a given) snapshot."""
    state = opened.store.current()
    if state is None or state.last_snapshot_id is None:
        raise SnapshotNotFoundError(
            f"no stats for table {opened.name} yet: run `lakestats analyze {opened.name}`"
        )
    wanted = state.last_snapshot_id if snapshot_id is None else snapshot_id
    path = state.stats.get(wanted)
    if path is None or (snapshot_id is not None and expired_meanwhile(opened, state, wanted)):
        raise SnapshotNotFoundError(missing_snapshot_message(opened, state, wanted))
    doc = opened.store.read_stats(path)
    doc["table"] = opened.name
    doc["published"] = publisher_for(opened).describe(wanted, state.published)
    return doc


def list_commit_docs(opened: OpenedTable) -> list[dict[str, Any]]:
    """The per-commit aggregates of every processed snapshot still in the state, oldest
    first (by sequence number)."""
    state = opened.store.current()
    if state is None:
        return []
    docs = [opened.store.read_stats(p)["commit"] for p in state.stats.values()]
    return sorted(docs, key=lambda d: (d["sequence_number"], d["timestamp_ms"]))
