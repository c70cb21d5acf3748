"""A whole table: every column, and every partition's columns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from lakestats.advise.measure import analyze_column
from lakestats.advise.model import (
    AdviceReport,
    AdviceSettings,
    ColumnInput,
    FileColumn,
    PartitionAdvice,
)
from lakestats.merge import partition_sort_key
from lakestats.model import PartitionKey


def advise(
    table: str,
    snapshot_id: int | None,
    columns: Sequence[ColumnInput],
    settings: AdviceSettings | None = None,
) -> AdviceReport:
    """Advice per column over all files, and per partition when there is more than one
    (only partitions of at least ``min_files`` files; the others are counted)."""
    s = settings or AdviceSettings()
    table_advice = tuple(analyze_column(c, s) for c in columns)
    all_files = {f.path: f.partition for c in columns for f in c.files}
    keys = sorted(set(all_files.values()), key=partition_sort_key)
    partitions: list[PartitionAdvice] = []
    small = 0
    if len(keys) > 1:
        grouped = [_by_partition(c.files) for c in columns]
        counts = Counter(all_files.values())
        for key in keys:
            if counts[key] < s.min_files:
                small += 1
                continue
            per_column = tuple(
                analyze_column(c, s, groups.get(key, []))
                for c, groups in zip(columns, grouped, strict=True)
            )
            partitions.append(PartitionAdvice(key, counts[key], per_column))
    return AdviceReport(
        table, snapshot_id, len(all_files), table_advice, tuple(partitions), s, small
    )


def _by_partition(files: Iterable[FileColumn]) -> Mapping[PartitionKey, list[FileColumn]]:
    groups: dict[PartitionKey, list[FileColumn]] = {}
    for f in files:
        groups.setdefault(f.partition, []).append(f)
    return groups
