"""Paimon's ``mergedRecordCount``: rows after merging by primary key, and how it is known.

* append-only table: every row of the live files, minus the rows their deletion vectors
  delete (row-level ``DELETE``/``UPDATE`` with ``deletion-vectors.enabled``) — exact;
* deletion vectors: readers see compacted (level > 0) files minus their vectors — exact;
* primary key, every bucket fully compacted (one sorted run: all of its files in one level
  above 0, no retraction rows): keys are unique — exact;
* otherwise an estimate (``KeyEstimate``): the distinct primary keys over the live files
  minus the keys retracted there (the theta sketch of the key, any number of columns,
  made in the sketch job: ``model.KeySketch``); from stores without it, the one key
  column's theta sketch; unknown when neither exists (no sketches).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from lakestats.formats.paimon.changes import is_visible
from lakestats.formats.paimon.evolution import row_count
from lakestats.formats.paimon.table import PaimonTable
from lakestats.model import DeletionVector, KeyMerge, PartitionAggregate

EXACT = "exact"
ESTIMATED = "estimated"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class KeyEstimate:
    """Distinct live primary keys estimated from the stats, with its ~95 % bounds."""

    value: int
    why: str
    bounds: tuple[int, int] | None = None


@dataclass(frozen=True)
class MergedCount:
    value: int | None
    how: str  # EXACT, ESTIMATED or UNKNOWN
    why: str  # one phrase for ``show`` and the docs
    bounds: tuple[int, int] | None = None  # of an estimate (~95 %)


def _append_why(deleted: int) -> str:
    return "append-only table, minus deletion-vector rows" if deleted else "append-only table"


def merged_record_count(
    table: PaimonTable,
    snapshot_id: int,
    key: KeyEstimate | None = None,
    *,
    live: PartitionAggregate | None = None,
) -> MergedCount:
    """The snapshot's merged row count. ``key``: the distinct live keys estimated from
    the stats (``statistics.key_estimate``), used when the count is not exact. ``live``:
    the snapshot's stats; when the sketch job merged every file that needs a key merge
    (``KeyMerge``), their live rows are the merged rows — exact."""
    snapshot = table.snapshot(snapshot_id)
    schema = table.paimon_schema(snapshot.schema_id)
    if not schema.primary_keys and live is not None and not live.deletes_unknown_files:
        # every live file's rows minus those its deletion vector deletes: the stats count
        # them already, and reading the snapshot's live entries again costs a pass over
        # all of them on every commit
        return MergedCount(live.live_record_count, EXACT, _append_why(live.deleted_records))
    entries = table.live_entries(snapshot)
    if not schema.primary_keys:
        vectors = table.vectors(snapshot)
        deleted = sum(
            v.cardinality if v.cardinality is not None else table.deletion_vector(v).cardinality
            for key, v in vectors.items()
            if key in entries
        )
        rows = row_count(entries.values()) - deleted
        return MergedCount(rows, EXACT, _append_why(deleted))
    if table.deletion_vectors:
        files = table.live_files(snapshot_id)
        deleted = sum(
            d.cardinality for f in files for d in f.deletes if isinstance(d, DeletionVector)
        )
        rows = sum(f.record_count for f in files) - deleted
        return MergedCount(rows, EXACT, "deletion vectors: compacted files minus deleted rows")
    levels: dict[tuple[bytes, int], set[int]] = defaultdict(set)
    retractions = 0
    for entry in entries.values():
        if is_visible(entry, deletion_vectors=False):
            levels[(entry.partition, entry.bucket)].add(entry.level)
            retractions += entry.delete_row_count or 0
    if retractions == 0 and all(len(ls) == 1 and min(ls) > 0 for ls in levels.values()):
        rows = sum(e.row_count for e in entries.values())
        return MergedCount(rows, EXACT, "fully compacted: one sorted run per bucket")
    if live is not None and table.key_merge_rules is not None and not live.deletes_unknown_files:
        merging = sum(
            1
            for f in table.live_files(snapshot_id)
            if any(isinstance(d, KeyMerge) for d in f.deletes)
        )
        # stores from before key merges hold files sketched whole: their counts differ
        if live.deletes_applied_files == merging:
            return MergedCount(
                live.live_record_count, EXACT, "primary-key merge of each bucket's live files"
            )
    if key is not None:
        return MergedCount(key.value, ESTIMATED, key.why, key.bounds)
    what = "composite key" if len(schema.primary_keys) > 1 else "key"
    return MergedCount(
        None,
        UNKNOWN,
        f"primary-key table not fully compacted ({what}: no sketch of it in the stats — "
        "analyzed without sketches, or files sketched before lakestats kept key sketches)",
    )
