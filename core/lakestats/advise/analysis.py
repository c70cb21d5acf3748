"""A whole table: every column, and every partition's columns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

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


def join_reports(reports: Sequence[AdviceReport]) -> AdviceReport:
    """One report from reports on the same files, each over its own columns (a wide
    table's columns advised a group at a time): columns in the reports' order, and
    likewise within each partition."""
    first = reports[0]
    partitions = []
    for parts in zip(*(r.partitions for r in reports), strict=True):
        if any(p.partition != parts[0].partition for p in parts):
            raise ValueError("reports on different partitions cannot be joined")
        partitions.append(replace(parts[0], columns=tuple(c for p in parts for c in p.columns)))
    return replace(
        first, columns=tuple(c for r in reports for c in r.columns), partitions=tuple(partitions)
    )


def _by_partition(files: Iterable[FileColumn]) -> Mapping[PartitionKey, list[FileColumn]]:
    groups: dict[PartitionKey, list[FileColumn]] = {}
    for f in files:
        groups.setdefault(f.partition, []).append(f)
    return groups
