"""The merge algebra: files → partition aggregates → table aggregate. Pure, no I/O.

Exact counts add; bounds take min/max over the files that carry them; sketches merge by
theta union and KLL merge. Merging is associative and commutative (property-tested), so a
table's stats are the same however its history was cut into commits and segments.
Removals never subtract sketches: the caller re-merges the live files of the affected
segments instead (DESIGN §7), and then only the partitions they touch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from lakestats.model import (
    ColumnAggregate,
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    MergedView,
    PartitionAggregate,
    PartitionKey,
    SketchSettings,
    signed_order,
)
from lakestats.sketches.frequent import DOUBLES, kind_of, merge_frequent_items
from lakestats.sketches.merge import merge_kll, union_theta
from lakestats.sketches.value_sample import union_value_samples

TABLE_KEY = PartitionKey(spec_id=-1)  # the key of a whole-table aggregate
# A merged view's groups (``MergedView.groups``): a removal re-merges the groups its
# partitions are in (about P / 16 partitions each) and the table from 16 groups, instead of
# the table from P partitions; 16 groups of sketches is the memory it costs.
TABLE_GROUPS = 16


def _sum_known(values: Iterable[int | None]) -> int | None:
    """Exact totals: unknown as soon as one part is unknown."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def _sum_present(values: Iterable[int | None]) -> int | None:
    """Sketch-derived totals: over the parts that have them (coverage is reported apart)."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _max_present(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _min_value(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present, key=signed_order) if present else None


def _max_value(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present, key=signed_order) if present else None


def _has_values(metrics: ColumnMetrics | None, sketch: ColumnSketch | None, records: int) -> bool:
    """Whether the file may hold a non-null, non-NaN value of the column."""
    if sketch is not None and sketch.null_count is not None:
        nan = sketch.nan_count or 0
        return records - sketch.null_count - nan > 0
    if metrics is not None and metrics.value_count is not None and metrics.null_count is not None:
        return metrics.value_count - metrics.null_count - (metrics.nan_count or 0) > 0
    return True


def column_of_file(data_file: DataFile, field_id: int, type_str: str) -> ColumnAggregate:
    """One file's contribution to a column: metadata metrics, completed by its sketch."""
    metrics = data_file.columns.get(field_id)
    sketch = data_file.sketches.get(field_id)
    m = metrics or ColumnMetrics()

    null_count = m.null_count
    if null_count is None and sketch is not None:
        null_count = sketch.null_count
    nan_count = m.nan_count
    if nan_count is None and sketch is not None:
        nan_count = sketch.nan_count
    if nan_count is None and type_str not in ("float", "double"):
        nan_count = 0  # only floating types can hold NaN

    # Metadata bounds are free but may be truncated (strings) or missing; a scan's min/max
    # is exact. Prefer exact: untruncated metadata, else the scan, else what metadata has.
    # A string or binary bound is cut or not by the mode the file was written under, which
    # the table may no longer state, so a scan's bounds win there (plan.bounds_needed).
    truncated = m.bounds_may_be_truncated
    lower, upper = m.lower, m.upper
    have_metadata_bounds = lower is not None and upper is not None
    scanned = sketch is not None and (sketch.min is not None or sketch.null_count is not None)
    scanned_strings = sketch is not None and isinstance(sketch.min, str | bytes)
    if scanned and (truncated or not have_metadata_bounds or scanned_strings):
        assert sketch is not None
        lower, upper, truncated = sketch.min, sketch.max, False
    complete = (lower is not None and upper is not None) or not _has_values(
        metrics, sketch, data_file.live_rows
    )

    return ColumnAggregate(
        field_id=field_id,
        type=type_str,
        files=1,
        records=data_file.live_rows,
        value_count=m.value_count,
        null_count=null_count,
        nan_count=nan_count,
        column_size=m.column_size,
        lower=lower,
        upper=upper,
        bounds_complete=complete,
        bounds_may_be_truncated=truncated and (lower is not None or upper is not None),
        sketched_files=1 if sketch is not None else 0,
        theta=sketch.theta if sketch else None,
        kll=sketch.kll if sketch else None,
        value_sample=sketch.value_sample if sketch else None,
        frequent_items=sketch.frequent_items if sketch else None,
        len_sum=sketch.len_sum if sketch else None,
        len_max=sketch.len_max if sketch else None,
        true_count=sketch.true_count if sketch else None,
        false_count=sketch.false_count if sketch else None,
    )


def merge_columns(parts: Sequence[ColumnAggregate], settings: SketchSettings) -> ColumnAggregate:
    """Merge aggregates of one column (same field id) over disjoint sets of files."""
    if not parts:
        raise ValueError("merge_columns needs at least one aggregate")
    if len(parts) == 1:
        return parts[0]
    return ColumnAggregate(
        field_id=parts[0].field_id,
        type=parts[-1].type,  # the newest type wins after a promotion (int → long)
        files=sum(p.files for p in parts),
        records=sum(p.records for p in parts),
        value_count=_sum_known(p.value_count for p in parts),
        null_count=_sum_known(p.null_count for p in parts),
        nan_count=_sum_known(p.nan_count for p in parts),
        column_size=_sum_known(p.column_size for p in parts),
        lower=_min_value(p.lower for p in parts),
        upper=_max_value(p.upper for p in parts),
        bounds_complete=all(p.bounds_complete for p in parts),
        bounds_may_be_truncated=any(p.bounds_may_be_truncated for p in parts),
        sketched_files=sum(p.sketched_files for p in parts),
        theta=union_theta([p.theta for p in parts if p.theta is not None], settings.theta_lg_k),
        kll=merge_kll([p.kll for p in parts if p.kll is not None], settings.kll_k),
        value_sample=_merge_value_samples(parts, settings),
        frequent_items=_merge_frequent_items(parts),
        len_sum=_sum_present(p.len_sum for p in parts),
        len_max=_max_present(p.len_max for p in parts),
        true_count=_sum_present(p.true_count for p in parts),
        false_count=_sum_present(p.false_count for p in parts),
    )


def _merge_value_samples(
    parts: Sequence[ColumnAggregate], settings: SketchSettings
) -> bytes | None:
    """Union of the parts' value samples; None when a part with a KLL sketch has none (a
    file sketched before value samples existed): a partial sample would undercount."""
    sketched = [p for p in parts if p.kll is not None]
    if not sketched or any(p.value_sample is None for p in sketched):
        return None
    return union_value_samples([p.value_sample for p in sketched], settings.theta_lg_k)


def _merge_frequent_items(parts: Sequence[ColumnAggregate]) -> bytes | None:
    """Merge of the parts' frequent-items sketches; None as for value samples (a string
    column's parts are the sketched ones, those with a theta sketch)."""
    kind = kind_of(parts[-1].type)
    if kind is None:
        return None
    sketched = [p for p in parts if (p.kll if kind == DOUBLES else p.theta) is not None]
    if not sketched or any(p.frequent_items is None for p in sketched):
        return None
    return merge_frequent_items((p.frequent_items for p in sketched), kind)


def _merge_column_maps(
    maps: Iterable[Mapping[int, ColumnAggregate]], settings: SketchSettings
) -> dict[int, ColumnAggregate]:
    by_field: dict[int, list[ColumnAggregate]] = {}
    for columns in maps:
        for field_id, column in columns.items():
            by_field.setdefault(field_id, []).append(column)
    return {fid: merge_columns(cols, settings) for fid, cols in sorted(by_field.items())}


def merge_partition(
    parts: Sequence[PartitionAggregate], settings: SketchSettings, key: PartitionKey | None = None
) -> PartitionAggregate:
    """Merge aggregates (of one partition, or of a whole table when ``key`` is given)."""
    if not parts:
        return PartitionAggregate(partition=key or TABLE_KEY)
    return PartitionAggregate(
        partition=key or parts[0].partition,
        record_count=sum(p.record_count for p in parts),
        file_count=sum(p.file_count for p in parts),
        total_size_bytes=sum(p.total_size_bytes for p in parts),
        position_delete_files=sum(p.position_delete_files for p in parts),
        position_delete_records=sum(p.position_delete_records for p in parts),
        equality_delete_files=sum(p.equality_delete_files for p in parts),
        equality_delete_records=sum(p.equality_delete_records for p in parts),
        columns=_merge_column_maps((p.columns for p in parts), settings),
        deleted_records=sum(p.deleted_records for p in parts),
        deletes_applied_files=sum(p.deletes_applied_files for p in parts),
        deletes_unknown_files=sum(p.deletes_unknown_files for p in parts),
    )


def merge_partitions(
    parts: Iterable[PartitionAggregate], settings: SketchSettings
) -> tuple[PartitionAggregate, ...]:
    """Group by partition key and merge; the result is sorted by key for stable output."""
    groups: dict[PartitionKey, list[PartitionAggregate]] = {}
    for part in parts:
        groups.setdefault(part.partition, []).append(part)
    return tuple(
        merge_partition(group, settings, _typed_key(group))
        for _, group in sorted(groups.items(), key=lambda kv: partition_sort_key(kv[0]))
    )


def _typed_key(group: Sequence[PartitionAggregate]) -> PartitionKey:
    """The group's key, typed where one of its parts has it (a key read back from an
    aggregate file equals the typed key but carries the stored JSON scalars)."""
    return next((p.partition for p in group if p.partition.fields), group[0].partition)


def partition_sort_key(key: PartitionKey) -> tuple[Any, ...]:
    """Order partitions by spec, then values as rendered (``PartitionKey.rendered``), nulls
    first, then numbers (-0.0 before 0.0), then strings (ISO dates and times in time
    order): a key read back with JSON scalars sorts where its typed equal does."""
    return (
        key.spec_id,
        tuple(
            (
                name,
                value is not None,
                isinstance(value, str),
                0 if value is None else signed_order(value),
            )
            for name, value in key.rendered
        ),
    )


def _file_partition(data_file: DataFile, types: Mapping[int, str]) -> PartitionAggregate:
    if data_file.content is FileContent.POSITION_DELETES:
        return PartitionAggregate(
            partition=data_file.partition,
            position_delete_files=1,
            position_delete_records=data_file.record_count,
        )
    if data_file.content is FileContent.EQUALITY_DELETES:
        return PartitionAggregate(
            partition=data_file.partition,
            equality_delete_files=1,
            equality_delete_records=data_file.record_count,
        )
    present = set(data_file.field_ids) | set(data_file.columns) | set(data_file.sketches)
    columns = {
        fid: column_of_file(data_file, fid, types[fid]) for fid in sorted(present) if fid in types
    }
    return PartitionAggregate(
        partition=data_file.partition,
        record_count=data_file.record_count,
        file_count=1,
        total_size_bytes=data_file.file_size_bytes,
        columns=columns,
        deleted_records=data_file.record_count - data_file.live_rows,
        deletes_applied_files=int(data_file.live_record_count is not None),
        deletes_unknown_files=int(data_file.deletes_unknown),
    )


def aggregate_files(
    files: Iterable[DataFile], types: Mapping[int, str], settings: SketchSettings
) -> tuple[PartitionAggregate, ...]:
    """Per-partition aggregates of data and delete files. ``types``: field id → type string.

    Fields missing from ``types`` (not primitive, or unknown to every schema) are skipped.
    """
    return merge_partitions((_file_partition(f, types) for f in files), settings)


def whole_table(
    parts: Sequence[PartitionAggregate], settings: SketchSettings
) -> PartitionAggregate:
    """All partitions merged into one aggregate under ``TABLE_KEY``."""
    return merge_partition(list(parts), settings, TABLE_KEY)


def group_of(key: PartitionKey) -> int:
    """The group of ``MergedView.groups`` that partition ``key`` is merged in (by its hash:
    groups live in one process's memory, never in the store)."""
    return hash(key) % TABLE_GROUPS


def table_of_groups(
    groups: Sequence[PartitionAggregate], settings: SketchSettings
) -> PartitionAggregate:
    """The whole table from its groups (merging is associative: the merge of every
    partition), the empty ones left out."""
    return whole_table([g for g in groups if not is_empty(g)], settings)


def counts_only(part: PartitionAggregate) -> PartitionAggregate:
    """``part`` with its totals (rows, files, sizes, deletes) and no columns: what the
    merged view keeps per partition (``MergedView.partitions``). A table wrongly merged
    from such entries has no columns at all, never some partitions' sketches."""
    return replace(part, columns={}) if part.columns else part


def view_of(partitions: Sequence[PartitionAggregate], settings: SketchSettings) -> MergedView:
    """A merged view from merged partitions (sorted by key), the table merged from them."""
    return MergedView(tuple(counts_only(p) for p in partitions), whole_table(partitions, settings))


def extend_view(
    view: MergedView, added: Sequence[PartitionAggregate], settings: SketchSettings
) -> MergedView:
    """``view`` with a commit's added files (its per-partition aggregates) merged in. Only
    the partitions they touch merge (their counts), and the table merges them once: no
    work grows with the table's partition count."""
    if not added:
        return view
    touched = {p.partition for p in added}
    before = [p for p in view.partitions if p.partition in touched]
    merged = merge_partitions((*before, *(counts_only(p) for p in added)), settings)
    groups = view.groups
    if groups is not None:  # kept up to date: each added partition into its group
        into: dict[int, list[PartitionAggregate]] = {}
        for part in added:
            into.setdefault(group_of(part.partition), []).append(part)
        groups = tuple(
            merge_partition([group, *into[i]], settings, TABLE_KEY) if i in into else group
            for i, group in enumerate(groups)
        )
    return MergedView(
        overlay_partitions(view.partitions, merged),
        merge_partition([view.table, *added], settings, TABLE_KEY),
        groups,
    )


def replace_partitions(
    view: MergedView,
    keys: frozenset[PartitionKey],
    remerged: Sequence[PartitionAggregate],
    table: PartitionAggregate,
    groups: tuple[PartitionAggregate, ...] | None = None,
) -> MergedView:
    """``view`` with partitions ``keys`` replaced by ``remerged`` (their merge from the
    live segments after a removal; a key missing there was emptied) and ``table``, the
    whole table merged again from the live segments (a removal cannot be subtracted),
    with ``groups`` when the table was merged from them (``regroup``)."""
    changed = [counts_only(p) for p in remerged]
    found = {p.partition for p in remerged}
    changed.extend(PartitionAggregate(partition=key) for key in keys - found)
    return MergedView(overlay_partitions(view.partitions, changed), table, groups)


def regroup(
    view: MergedView, remerged: Mapping[int, PartitionAggregate]
) -> tuple[PartitionAggregate, ...]:
    """``view``'s groups with ``remerged`` (group index → its merge from the live
    segments) in place of theirs; every group when ``view`` keeps none.
    ``ValueError`` if a group is then missing."""
    if view.groups is not None:
        return tuple(remerged.get(i, group) for i, group in enumerate(view.groups))
    missing = set(range(TABLE_GROUPS)) - set(remerged)
    if missing:
        raise ValueError(f"a view without groups needs all of them re-merged: {sorted(missing)}")
    return tuple(remerged[i] for i in range(TABLE_GROUPS))


def only_partitions(view: MergedView, keys: frozenset[PartitionKey]) -> bool:
    """Whether every partition of ``view`` is among ``keys``: then the merge of ``keys``
    from the live segments is the whole table, with no other partition to re-read."""
    return all(p.partition in keys for p in view.partitions)


def is_empty(part: PartitionAggregate) -> bool:
    """No files of any kind: the entry a merged view's chain records for a partition a
    removal emptied (a merged view never holds one)."""
    return not (part.file_count or part.position_delete_files or part.equality_delete_files)


def overlay_partitions(
    partitions: Iterable[PartitionAggregate], changed: Iterable[PartitionAggregate]
) -> tuple[PartitionAggregate, ...]:
    """``partitions`` with each of ``changed`` in place of its key's entry, in order; an
    empty entry (``is_empty``) removes the partition. Sorted by key, as merges are."""
    entries = list(partitions)
    at = {p.partition: i for i, p in enumerate(entries)}
    came = went = False  # a partition came: sort again; one went: drop it (order stands)
    for part in changed:
        i = at.get(part.partition)
        if i is None:
            if not is_empty(part):
                at[part.partition] = len(entries)
                entries.append(part)
                came = True
        elif is_empty(part):
            entries[i] = part  # dropped below
            went = True
        else:
            entries[i] = part
    if went:
        entries = [p for p in entries if not is_empty(p)]
    if came:
        entries.sort(key=lambda p: partition_sort_key(p.partition))
    return tuple(entries)
