"""The merge algebra: exact stats are independent of how files are split into commits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.merge import (
    aggregate_files,
    column_of_file,
    merge_partitions,
    whole_table,
)
from lakestats.model import (
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
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


def test_delete_files_count_apart_from_data() -> None:
    data = DataFile("file:///d", FileContent.DATA, "PARQUET", 100, 1000, PartitionKey(0))
    pos = DataFile("file:///p", FileContent.POSITION_DELETES, "PARQUET", 7, 50, PartitionKey(0))
    table = whole_table(aggregate_files([data, pos], TYPES, SETTINGS), SETTINGS)
    assert (table.record_count, table.file_count) == (100, 1)
    assert (table.position_delete_files, table.position_delete_records) == (1, 7)
