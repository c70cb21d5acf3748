"""The store step of the commit path: a commit's files into segments, tombstones re-merged.

``SegmentWriter.write`` executes a ``CommitPlan``: the files the commit added become one new
segment (and its aggregate); the segments that held the files it removed get tombstones and
their partitions holding those files re-merged from their remaining live files (no data
read), written as one more delta of the segment's aggregate chain (a big segment: its other
partitions are not written again) or as a whole new aggregate; a segment whose files are
all dead leaves the state, retired (``RetiredSegment``: kept, out of every merge, while a
snapshot that lists its files may be rolled back to). Everything written is durable before
``write`` returns and nothing is committed: the caller commits a state version pointing at
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import structlog

from lakestats.exceptions import StoreError
from lakestats.merge import aggregate_files, overlay_partitions, partition_sort_key
from lakestats.model import (
    AggregateDelta,
    PartitionAggregate,
    PartitionKey,
    RetiredSegment,
    SegmentEntry,
    SketchSettings,
    StateVersion,
)
from lakestats.plan import CommitPlan
from lakestats.store.store import StatsStore, chain_extends

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class StoredCommit:
    """What the store step wrote for one commit."""

    segments: tuple[SegmentEntry, ...]  # the next state's live segments
    added: tuple[PartitionAggregate, ...]  # the commit's added files, per partition
    removed: tuple[PartitionAggregate, ...]  # its removed files, per partition
    read_segments: int = 0  # segments re-read to apply tombstones
    # the partitions of the files it tombstoned, as the store holds them (a format's own
    # description of a removed file may lack its partition: Delta's remove actions)
    tombstoned_partitions: frozenset[PartitionKey] = frozenset()
    # the next state's retired segments: the state's, and those whose files all died now
    retired: tuple[RetiredSegment, ...] = ()


class SegmentWriter:
    """Writes commits' segments into one table's store."""

    def __init__(
        self, store: StatsStore, settings: SketchSettings, *, retire: bool = False
    ) -> None:
        """``retire``: the table's removed files stay readable while a snapshot lists them
        (``formats.base.KeepsListedFiles``), so their sketches are kept that long."""
        self._store = store
        self._settings = settings
        self._retire = retire

    def write(self, state: StateVersion, plan: CommitPlan) -> StoredCommit:
        segments: list[SegmentEntry] = []
        retired: list[RetiredSegment] = list(state.retired)
        touched: set[PartitionKey] = set()
        # the last snapshot listing the files this commit removes
        listed = plan.commit.parent_id if self._retire else None
        for segment in state.segments:
            newly_dead = plan.tombstones.get(segment.path)
            if not newly_dead:
                segments.append(segment)
                continue
            dead = frozenset(segment.dead_files | newly_dead)
            if len(dead) >= segment.file_count:
                # fully dead: the segment leaves the state, retired while a snapshot that
                # lists its files may come back (else cleanup deletes it)
                touched.update(self._partitions(segment))
                listed_by = {s for s in (segment.last_listed, listed) if s is not None}
                if listed_by and self._retire:
                    retired.append(RetiredSegment(segment.path, frozenset(listed_by)))
                continue
            tombstoned, here = self._tombstoned(segment, newly_dead, dead, plan)
            touched.update(here)
            last = listed if listed is not None else segment.last_listed
            segments.append(replace(tombstoned, last_listed=last))
        added: tuple[PartitionAggregate, ...] = ()
        snapshot_id = plan.commit.snapshot_id
        if plan.added:
            added = aggregate_files(plan.added, plan.types, self._settings)
            aggregate_path = self._store.write_aggregate(snapshot_id, added)
            self._store.remember_aggregate(aggregate_path, added)  # the merge reads it next
            segments.append(
                SegmentEntry(
                    snapshot_id=snapshot_id,
                    path=self._store.write_segment(snapshot_id, plan.added, plan.types),
                    aggregate_path=aggregate_path,
                    file_count=len(plan.added),
                )
            )
        return StoredCommit(
            segments=tuple(segments),
            added=added,
            removed=aggregate_files(plan.removed, plan.types, self._settings),
            read_segments=sum(1 for s in state.segments if plan.tombstones.get(s.path)),
            tombstoned_partitions=frozenset(touched),
            retired=tuple(retired),
        )

    def _tombstoned(
        self,
        segment: SegmentEntry,
        newly_dead: frozenset[str],
        dead: frozenset[str],
        plan: CommitPlan,
    ) -> tuple[SegmentEntry, set[PartitionKey]]:
        """The segment with ``dead`` tombstoned, and the partitions the newly dead files
        are in: only those change, re-merged from their live files, and go into the
        segment's aggregate chain as one delta while it has room; else the whole aggregate
        is written, the others as the segment's aggregate has them (re-merged too when it
        cannot be read)."""
        files = self._store.read_segment(segment.path, partitions_of=newly_dead)
        here = {f.partition for f in files if f.path in newly_dead}
        remerged = aggregate_files(
            [f for f in files if f.path not in dead], plan.types, self._settings
        )
        if len(files) >= segment.file_count:  # those partitions are the whole segment
            return self._rewritten(segment, remerged, dead), here
        emptied = sorted(here - {p.partition for p in remerged}, key=partition_sort_key)
        changed = (*remerged, *(PartitionAggregate(partition=key) for key in emptied))
        if chain_extends(segment, len(changed)) and self._chain_readable(segment):
            delta_path = self._store.write_aggregate(segment.snapshot_id, changed)
            self._store.remember_aggregate(delta_path, changed)
            delta = AggregateDelta(delta_path, len(changed))
            chained = (*segment.aggregate_deltas, delta)
            return replace(segment, dead_files=dead, aggregate_deltas=chained), here
        before = self._aggregate(segment)
        if before is None:  # unreadable: the whole segment re-merges
            live = [f for f in self._store.read_segment(segment.path) if f.path not in dead]
            return self._rewritten(
                segment, aggregate_files(live, plan.types, self._settings), dead
            ), here
        return self._rewritten(segment, overlay_partitions(before, changed), dead), here

    def _rewritten(
        self, segment: SegmentEntry, aggregate: Sequence[PartitionAggregate], dead: frozenset[str]
    ) -> SegmentEntry:
        """The segment with ``dead`` tombstoned and ``aggregate`` as its whole aggregate,
        written anew (the chain, if any, ends)."""
        aggregate_path = self._store.write_aggregate(segment.snapshot_id, aggregate)
        self._store.remember_aggregate(aggregate_path, aggregate)
        return replace(segment, aggregate_path=aggregate_path, dead_files=dead, aggregate_deltas=())

    def _chain_readable(self, segment: SegmentEntry) -> bool:
        """Whether the files of the segment's aggregate chain are there to extend (their
        footers; ``False``, logged, when not: the caller re-merges as for an unreadable
        aggregate, rather than leave a chain no merge can read)."""
        try:
            for rel in segment.aggregate_files:
                self._store.check_aggregate(rel)
        except StoreError as exc:
            _log.warning("segment_aggregate_unreadable", segment=segment.path, error=str(exc))
            return False
        return True

    def _partitions(self, segment: SegmentEntry) -> set[PartitionKey]:
        """The partitions of a segment's live files (from its files when its aggregate
        cannot be read)."""
        before = self._aggregate(segment)
        if before is not None:
            return {p.partition for p in before}
        files = self._store.read_segment(segment.path)
        return {f.partition for f in files if f.path not in segment.dead_files}

    def _aggregate(self, segment: SegmentEntry) -> tuple[PartitionAggregate, ...] | None:
        """The segment's aggregate; ``None`` (logged) when it cannot be read, and the
        caller goes to the segment's files instead."""
        try:
            return self._store.segment_aggregate(segment)
        except StoreError as exc:
            _log.warning("segment_aggregate_unreadable", segment=segment.path, error=str(exc))
            return None
