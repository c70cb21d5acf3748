"""The merge algebra: exact stats are independent of how files are split into commits."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.merge import (
    aggregate_files,
    column_of_file,
    extend_view,
    merge_partitions,
    only_partitions,
    overlay_partitions,
    replace_partitions,
    view_of,
    whole_table,
)
from lakestats.model import (
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    PartitionAggregate,
    PartitionField,
    PartitionKey,
    SketchSettings,
)

SETTINGS = SketchSettings()
TYPES = {1: "long", 2: "double", 3: "string"}


@st.composite
def data_files(draw: st.DrawFn, index: int = 0) -> DataFile:
    records = draw(st.integers(min_value=0, max_value=1000))
    nulls = draw(st.integers(min_value=0, max_value=records))
    lo = draw(st.integers(min_value=-(10**6), max_value=10**6))
    hi = draw(st.integers(min_value=lo, max_value=lo + 10**6))
    has_bounds = records > nulls
    partition = draw(
        st.sampled_from(
            [
                PartitionKey(0, (("region", "a"),)),
                PartitionKey(0, (("region", "b"),)),
                PartitionKey(0, (("region", None),)),
            ]
        )
    )
    columns = {
        1: ColumnMetrics(
            column_size=draw(st.integers(0, 10**6)),
            value_count=records,
            null_count=nulls,
            lower=lo if has_bounds else None,
            upper=hi if has_bounds else None,
        ),
        2: ColumnMetrics(
            column_size=draw(st.integers(0, 10**6)),
            value_count=records,
            null_count=0,
            nan_count=draw(st.integers(0, records)),
            lower=float(lo) if has_bounds else None,
            upper=float(hi) if has_bounds else None,
        ),
    }
    path = draw(st.uuids()).hex
    return DataFile(
        path=f"file:///t/data/{path}.parquet",
        content=FileContent.DATA,
        file_format="PARQUET",
        record_count=records,
        file_size_bytes=draw(st.integers(1, 10**7)),
        partition=partition,
        columns=columns,
        field_ids=frozenset({1, 2, 3}),
    )


file_lists = st.lists(data_files(), min_size=0, max_size=12)


@given(file_lists, st.data())
@settings(max_examples=60, deadline=None)
def test_split_into_commits_does_not_change_the_result(
    files: list[DataFile], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(files)))
    whole = aggregate_files(files, TYPES, SETTINGS)
    parts = merge_partitions(
        (
            *aggregate_files(files[:cut], TYPES, SETTINGS),
            *aggregate_files(files[cut:], TYPES, SETTINGS),
        ),
        SETTINGS,
    )
    assert parts == whole


@given(file_lists, st.randoms())
@settings(max_examples=60, deadline=None)
def test_merge_is_commutative(files: list[DataFile], rnd: object) -> None:
    shuffled = list(files)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert aggregate_files(shuffled, TYPES, SETTINGS) == aggregate_files(files, TYPES, SETTINGS)


@given(st.lists(file_lists, min_size=1, max_size=5))
@settings(max_examples=60, deadline=None)
def test_a_view_extended_commit_by_commit_equals_one_merge(commits: list[list[DataFile]]) -> None:
    view = view_of((), SETTINGS)
    for files in commits:
        view = extend_view(view, aggregate_files(files, TYPES, SETTINGS), SETTINGS)
    every = [f for files in commits for f in files]
    assert view == view_of(aggregate_files(every, TYPES, SETTINGS), SETTINGS)


@given(file_lists, st.data())
@settings(max_examples=60, deadline=None)
def test_replacing_the_partitions_a_removal_touched_equals_a_full_remerge(
    files: list[DataFile], data: st.DataObject
) -> None:
    gone = data.draw(st.sets(st.integers(0, len(files) - 1))) if files else set()
    view = view_of(aggregate_files(files, TYPES, SETTINGS), SETTINGS)
    live = [f for i, f in enumerate(files) if i not in gone]
    touched = frozenset(files[i].partition for i in gone)
    remerged = aggregate_files([f for f in live if f.partition in touched], TYPES, SETTINGS)
    # as ``analyze`` does: the re-merged partitions are the table when no other is left,
    # else the table merges again from every live file
    whole = remerged if only_partitions(view, touched) else aggregate_files(live, TYPES, SETTINGS)
    after = replace_partitions(view, touched, remerged, whole_table(whole, SETTINGS))
    # a partition whose files were all removed leaves the view
    assert after == view_of(aggregate_files(live, TYPES, SETTINGS), SETTINGS)


@given(file_lists)
@settings(max_examples=60, deadline=None)
def test_a_views_partitions_hold_their_totals_and_no_columns(files: list[DataFile]) -> None:
    parts = aggregate_files(files, TYPES, SETTINGS)
    view = view_of(parts, SETTINGS)
    assert [p.partition for p in view.partitions] == [p.partition for p in parts]
    for slim, full in zip(view.partitions, parts, strict=True):
        assert slim == replace(full, columns={})
        assert slim.live_record_count == full.live_record_count
    assert view.table == whole_table(parts, SETTINGS)
    # a table wrongly merged from them has no columns, never some partitions' sketches
    assert whole_table(view.partitions, SETTINGS).columns == {}


def test_a_key_read_back_without_types_is_the_typed_key() -> None:
    typed = PartitionKey(
        0,
        (("day", dt.date(2026, 1, 2)), ("x", float("nan"))),
        (PartitionField(1000, "date"), PartitionField(1001, "double")),
    )
    untyped = PartitionKey(0, (("day", "2026-01-02"), ("x", "NaN")))  # as stored in JSON
    assert untyped == typed and hash(untyped) == hash(typed)
    assert untyped != PartitionKey(0, (("day", "2026-01-03"), ("x", "NaN")))
    assert untyped != PartitionKey(1, (("day", "2026-01-02"), ("x", "NaN")))
    (merged,) = merge_partitions(
        [
            PartitionAggregate(partition=untyped, record_count=3, file_count=1),
            PartitionAggregate(partition=typed, record_count=4, file_count=1),
        ],
        SETTINGS,
    )
    assert merged.record_count == 7 and merged.partition.fields == typed.fields


@given(file_lists)
@settings(max_examples=60, deadline=None)
def test_totals_equal_sums_over_files(files: list[DataFile]) -> None:
    table = whole_table(aggregate_files(files, TYPES, SETTINGS), SETTINGS)
    assert table.record_count == sum(f.record_count for f in files)
    assert table.file_count == len(files)
    assert table.total_size_bytes == sum(f.file_size_bytes for f in files)
    if files:
        col = table.columns[1]
        assert col.null_count == sum(f.columns[1].null_count or 0 for f in files)
        lowers = [f.columns[1].lower for f in files if f.columns[1].lower is not None]
        assert col.lower == (min(lowers) if lowers else None)
        assert table.columns[2].nan_count == sum(f.columns[2].nan_count or 0 for f in files)


def test_missing_metrics_make_exact_totals_unknown() -> None:
    known = DataFile(
        "file:///a",
        FileContent.DATA,
        "PARQUET",
        10,
        100,
        PartitionKey(0),
        {1: ColumnMetrics(null_count=1, value_count=10, lower=1, upper=5)},
        frozenset({1}),
    )
    unknown = DataFile(
        "file:///b",
        FileContent.DATA,
        "PARQUET",
        10,
        100,
        PartitionKey(0),
        {1: ColumnMetrics()},
        frozenset({1}),
    )
    col = whole_table(aggregate_files([known, unknown], TYPES, SETTINGS), SETTINGS).columns[1]
    assert col.null_count is None
    assert col.bounds_complete is False  # b may hold values and has no bounds
    assert (col.lower, col.upper) == (1, 5)


def test_truncated_metadata_bounds_yield_to_exact_scan_bounds() -> None:
    f = DataFile(
        "file:///a",
        FileContent.DATA,
        "PARQUET",
        2,
        100,
        PartitionKey(0),
        {
            3: ColumnMetrics(
                null_count=0,
                value_count=2,
                lower="a" * 16,
                upper="z" * 15 + "{",
                bounds_may_be_truncated=True,
            )
        },
        frozenset({3}),
        sketches={3: ColumnSketch(null_count=0, min="a" * 20, max="z" * 20)},
    )
    col = column_of_file(f, 3, "string")
    assert (col.lower, col.upper) == ("a" * 20, "z" * 20)
    assert col.bounds_may_be_truncated is False
    no_scan = column_of_file(f.__class__(**{**f.__dict__, "sketches": {}}), 3, "string")
    assert no_scan.bounds_may_be_truncated is True


def test_minus_zero_is_below_zero_in_merged_bounds_whatever_the_order() -> None:
    """-0.0 in one file, 0.0 in another: the table's min is -0.0 and its max 0.0 (Iceberg's
    order), whichever file comes first."""

    def file(path: str, value: float) -> DataFile:
        metrics = ColumnMetrics(null_count=0, value_count=1, lower=value, upper=value)
        return DataFile(path, FileContent.DATA, "PARQUET", 1, 10, PartitionKey(0), {2: metrics})

    cases = [
        ((-0.0, 0.0), (-0.0, 0.0)),
        ((0.0, -0.0), (-0.0, 0.0)),
        ((0.0, -0.0, 3, -2.5), (-2.5, 3)),  # ints beside floats: a widened column
    ]
    for values, (low, high) in cases:
        files = [file(f"file:///{i}", v) for i, v in enumerate(values)]
        column = whole_table(aggregate_files(files, TYPES, SETTINGS), SETTINGS).columns[2]
        assert column.lower == low and math.copysign(1, column.lower) == math.copysign(1, low)
        assert column.upper == high and math.copysign(1, column.upper) == math.copysign(1, high)


def test_delete_files_count_apart_from_data() -> None:
    data = DataFile("file:///d", FileContent.DATA, "PARQUET", 100, 1000, PartitionKey(0))
    pos = DataFile("file:///p", FileContent.POSITION_DELETES, "PARQUET", 7, 50, PartitionKey(0))
    table = whole_table(aggregate_files([data, pos], TYPES, SETTINGS), SETTINGS)
    assert (table.record_count, table.file_count) == (100, 1)
    assert (table.position_delete_files, table.position_delete_records) == (1, 7)


@given(
    st.sets(st.integers(0, 40), max_size=20),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 3)), max_size=12),
    st.booleans(),
)
def test_overlaying_partitions_replaces_adds_and_drops_in_key_order(
    days: set[int], changes: list[tuple[int, int]], read_back: bool
) -> None:
    """A sorted list of partitions with changes laid over it (later ones win; an entry
    without files drops its partition) is what replacing them in a dict and sorting
    gives, whether the keys are typed or read back as JSON scalars (``read_back``)."""
    field = (PartitionField(1000, "date"),)

    def key(day: int, typed: bool) -> PartitionKey:
        value = dt.date(2026, 1, 1) + dt.timedelta(days=day)
        if typed:
            return PartitionKey(1, (("day", value),), field)
        return PartitionKey(1, (("day", value.isoformat()),))

    base = tuple(
        PartitionAggregate(partition=key(d, not read_back), record_count=d, file_count=1)
        for d in sorted(days)
    )
    changed = [
        PartitionAggregate(partition=key(d, True), record_count=100 + d, file_count=files)
        for d, files in changes
    ]
    want: dict[int, PartitionAggregate] = dict(zip(sorted(days), base, strict=True))
    for (d, _), part in zip(changes, changed, strict=True):
        want[d] = part
    expected = [want[d] for d in sorted(want) if want[d].file_count]
    got = overlay_partitions(base, changed)
    assert [(p.record_count, p.file_count) for p in got] == [
        (p.record_count, p.file_count) for p in expected
    ]
