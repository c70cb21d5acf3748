"""Paimon's ``mergedRecordCount``: rows after merging by primary key, and how it is known.

* append-only table: every row is live — exact;
* deletion vectors: readers see compacted (level > 0) files minus their vectors — exact;
* primary key, every bucket fully compacted (one sorted run: all of its files in one level
  above 0, no retraction rows): keys are unique — exact;
* otherwise an estimate: the distinct count of the primary key over the live files (its
  theta sketch, when the key is one column), or unknown for a composite key.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from lakestats.formats.paimon.changes import is_visible
from lakestats.formats.paimon.table import PaimonTable
from lakestats.model import DeletionVector

EXACT = "exact"
ESTIMATED = "estimated"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class MergedCount:
    value: int | None
    how: str  # EXACT, ESTIMATED or UNKNOWN
    why: str  # one phrase for ``show`` and the docs


def merged_record_count(
    table: PaimonTable, snapshot_id: int, key_ndv: int | None = None
) -> MergedCount:
    """The snapshot's merged row count. ``key_ndv``: the estimated distinct count of a
    one-column primary key over the live files (from the stats), used when not exact."""
    snapshot = table.snapshot(snapshot_id)
    schema = table.paimon_schema(snapshot.schema_id)
    entries = table.live_entries(snapshot)
    if not schema.primary_keys:
        return MergedCount(sum(e.row_count for e in entries.values()), EXACT, "append-only table")
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
    if key_ndv is not None and len(schema.primary_keys) == 1:
        return MergedCount(key_ndv, ESTIMATED, "distinct primary keys (theta sketch)")
    return MergedCount(
        None, UNKNOWN, "primary-key table not fully compacted (composite key: no estimate)"
    )
