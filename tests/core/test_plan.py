"""Planning the commit path (pure) and the store step that executes a plan."""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.exceptions import StoreError
from lakestats.merge import (
    TABLE_GROUPS,
    aggregate_files,
    counts_only,
    group_of,
    merge_partitions,
    table_of_groups,
    view_of,
    whole_table,
)
from lakestats.model import (
    Column,
    ColumnFile,
    ColumnMetrics,
    ColumnSketch,
    Commit,
    DataFile,
    FileContent,
    PartitionField,
    PartitionKey,
    SegmentEntry,
    SketchSettings,
    StateVersion,
    TableSchema,
)
from lakestats.plan import BatchSizer, bounds_needed, next_batch, plan_batches, plan_commit
from lakestats.store import StatsStore, merge_key
from lakestats.store.writer import SegmentWriter

SETTINGS = SketchSettings()
SCHEMA = TableSchema(1, (Column(1, "id", "long"), Column(2, "name", "string")))
OLD_SCHEMA = TableSchema(0, (Column(1, "id", "int"), Column(2, "label", "string")))
PART = PartitionKey(1, (("day", 3),), (PartitionField(1000, "int"),))


def data_file(
    name: str, records: int = 10, *, lo: int | None = 0, truncated: bool = False
) -> DataFile:
    return DataFile(
        path=f"file:///t/data/{name}.parquet",
        content=FileContent.DATA,
        file_format="PARQUET",
        record_count=records,
        file_size_bytes=100 * records,
        partition=PART,
        columns={
            1: ColumnMetrics(
                value_count=records,
                null_count=0,
                lower=lo,
                upper=None if lo is None else lo + records,
            ),
            2: ColumnMetrics(
                value_count=records,
                null_count=0,
                lower="a",
                upper="b",
                bounds_may_be_truncated=truncated,
            ),
        },
        field_ids=frozenset({1, 2}),
    )


def commit(
    snapshot_id: int, added: tuple[DataFile, ...] = (), removed: tuple[DataFile, ...] = ()
) -> Commit:
    return Commit(
        snapshot_id=snapshot_id,
        parent_id=snapshot_id - 1 or None,
        sequence_number=snapshot_id,
        timestamp_ms=snapshot_id * 1000,
        operation="append" if not removed else "overwrite",
        schema_id=1,
        added_files=added,
        removed_files=removed,
    )


@given(st.lists(st.integers(min_value=0, max_value=7), max_size=30), st.integers(1, 10))
@settings(max_examples=100, deadline=None)
def test_batches_keep_order_and_respect_the_file_limit(sizes: list[int], max_files: int) -> None:
    commits = [
        commit(i + 1, tuple(data_file(f"{i}-{j}") for j in range(n))) for i, n in enumerate(sizes)
    ]
    batches = plan_batches(commits, max_files)
    assert [c for b in batches for c in b.commits] == commits  # every commit once, in order
    for batch in batches:
        assert batch.commits  # never an empty batch
        # a batch exceeds the limit only when one commit alone does
        assert batch.file_count <= max_files or len(batch.commits) == 1
        assert batch.paths == tuple(f.path for c in batch.commits for f in c.added_files)
    for first, second in itertools.pairwise(batches):
        # greedy: the next batch's first commit would not have fitted
        assert first.file_count + len(second.commits[0].added_files) > max_files


@given(
    st.lists(st.integers(min_value=0, max_value=7), min_size=1, max_size=30),
    st.integers(1, 10),
    st.integers(1, 5000),
    st.integers(1, 8),
)
@settings(max_examples=100, deadline=None)
def test_next_batch_respects_every_limit(
    sizes: list[int], max_files: int, max_bytes: int, max_commits: int
) -> None:
    commits = [
        commit(i + 1, tuple(data_file(f"{i}-{j}") for j in range(n))) for i, n in enumerate(sizes)
    ]
    start = 0
    seen: list[Commit] = []
    while start < len(commits):
        batch = next_batch(
            commits, start, max_commits=max_commits, max_files=max_files, max_bytes=max_bytes
        )
        assert batch.commits  # always progress
        weight = sum(f.file_size_bytes for c in batch.commits for f in c.added_files)
        if len(batch.commits) > 1:
            assert len(batch.commits) <= max_commits
            assert batch.file_count <= max_files and weight <= max_bytes
        seen += batch.commits
        start += len(batch.commits)
    assert seen == commits


def test_a_file_added_again_with_other_column_files_starts_the_next_batch() -> None:
    """A batch's sketches are by path: a Paimon row group listed again with another
    column update (the same anchor path, other rows) goes to a batch of its own."""
    plain = data_file("a")
    first = replace(plain, column_files=(ColumnFile("file:///t/data/u1.parquet", (2,)),))
    second = replace(plain, column_files=(ColumnFile("file:///t/data/u2.parquet", (2,)),))
    other = data_file("b")
    commits = [
        commit(1, (plain,)),
        commit(2, (first,), (plain,)),
        commit(3, (other,)),
        commit(4, (second,), (first,)),
        commit(5, (data_file("c"),)),
    ]
    batches = plan_batches(commits, max_files=100)
    assert [[c.snapshot_id for c in b.commits] for b in batches] == [[1], [2, 3], [4, 5]]
    batch = next_batch(commits, 1, max_commits=10, max_files=100, max_bytes=10**9)
    assert [c.snapshot_id for c in batch.commits] == [2, 3]


def test_a_commit_under_another_schema_starts_the_next_batch() -> None:
    """A batch's files are read with its commits' schema (as they were written): a file of
    a column since given an incompatible type cannot be read as the new one."""
    schemas = (1, 1, 2, 2, 1)
    commits = [
        replace(commit(i, (data_file(str(i)),)), schema_id=schema_id)
        for i, schema_id in enumerate(schemas, start=1)
    ]
    batches = plan_batches(commits, max_files=100)
    assert [[c.snapshot_id for c in b.commits] for b in batches] == [[1, 2], [3, 4], [5]]


def test_batches_start_at_one_commit_grow_when_fast_and_shrink_when_slow() -> None:
    commits = [commit(i + 1, (data_file(f"{i}"),)) for i in range(100)]
    sizer = BatchSizer(max_files=10, max_bytes=10**9, target_s=10.0)
    sizes = []
    start = 0
    for seconds in (1.0, 1.0, 1.0, 1.0, 1.0, 40.0, 1.0):
        batch = sizer.next(commits, start)
        sizes.append(len(batch.commits))
        start += len(batch.commits)
        sizer.observe(batch, seconds)
    # 1, 2, 4, 8, then the file limit (10); a batch 4x too slow cuts the next to a quarter
    assert sizes == [1, 2, 4, 8, 10, 10, 2]


def _with_timestamps(data_file: DataFile) -> DataFile:
    """Field 2 holding timestamps (Delta flags its millisecond bounds as may-be-cut):
    string bounds are scanned whatever their flag (below)."""
    second = replace(
        data_file.columns[2],
        lower=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        upper=dt.datetime(2024, 1, 2, tzinfo=dt.UTC),
    )
    return replace(data_file, columns={**data_file.columns, 2: second})


def test_bounds_are_scanned_only_where_metadata_lacks_them_or_may_be_truncated() -> None:
    def timed(name: str, **kw: Any) -> DataFile:
        return _with_timestamps(data_file(name, **kw))

    assert bounds_needed([timed("a")]) == frozenset()
    assert bounds_needed([timed("a", lo=None)]) == {1}
    assert bounds_needed([timed("a"), timed("b", truncated=True)]) == {2}
    added_later = DataFile(**{**timed("c").__dict__, "field_ids": frozenset({1, 2, 3})})
    assert bounds_needed([added_later]) == {3}  # no metrics at all for field 3


@pytest.mark.parametrize("bound", ["a", b"\x01"])
def test_string_and_binary_bounds_are_always_scanned(bound: str | bytes) -> None:
    """Whether a writer cut them depends on the metrics mode the file was written under,
    which the table may no longer state."""
    plain = _with_timestamps(data_file("a"))
    text = ColumnMetrics(value_count=10, null_count=0, lower=bound, upper=bound)
    with_text = replace(plain, columns={**plain.columns, 3: text}, field_ids=frozenset({1, 2, 3}))
    assert bounds_needed([with_text]) == {3}
    assert bounds_needed([data_file("a")]) == {2}  # the helper's string column


def test_commit_plan_locates_tombstones_attaches_sketches_and_keeps_commit_types() -> None:
    old = data_file("old")
    segment = SegmentEntry(1, "segments/1-x.parquet", "aggregates/1-x.parquet", 2)
    new = data_file("new")
    sketch = ColumnSketch(null_count=0, len_sum=3)
    plan = plan_commit(
        commit(2, (new,), (old,)),
        schema=OLD_SCHEMA,
        current_schema=SCHEMA,
        sketches={new.path: {2: sketch, 9: ColumnSketch(null_count=10)}},
        located={old.path: segment},
    )
    assert plan.tombstones == {segment.path: frozenset({old.path})}
    assert plan.full_merge
    (added,) = plan.added
    assert added.sketches == {2: sketch}  # field 9 is not in the file: dropped
    assert plan.removed == (old,)
    # bounds of the commit's files are encoded in the types they were written with
    assert plan.types == {1: "int", 2: "string"}
    assert plan.names == {1: "id", 2: "label"}
    with pytest.raises(StoreError, match="never recorded in the stats store"):
        plan_commit(
            commit(3, (), (data_file("ghost"),)),
            schema=SCHEMA,
            current_schema=SCHEMA,
            sketches={},
            located={},
        )
    append = plan_commit(
        commit(4, (new,)), schema=SCHEMA, current_schema=SCHEMA, sketches={}, located={}
    )
    assert not append.full_merge and not append.tombstones


def _state(store: StatsStore, segments: tuple[SegmentEntry, ...], version: int) -> StateVersion:
    return StateVersion(
        version=version,
        table_id=store.table_id,
        format="iceberg",
        location="file:///t",
        last_snapshot_id=version,
        segments=segments,
    )


def test_segment_writer_tombstones_remerges_and_drops_dead_segments(tmp_path: Path) -> None:
    store = StatsStore(tmp_path, "table-1")
    writer = SegmentWriter(store, SETTINGS)
    a, b, c = data_file("a", 10), data_file("b", 20), data_file("c", 30)
    first = plan_commit(
        commit(1, (a, b)), schema=SCHEMA, current_schema=SCHEMA, sketches={}, located={}
    )
    stored = writer.write(_state(store, (), 0), first)
    (seg1,) = stored.segments
    assert stored.read_segments == 0
    assert store.read_aggregate(seg1.aggregate_path) == aggregate_files(
        [a, b], first.types, SETTINGS
    )

    second = plan_commit(
        commit(2, (c,), (a,)),
        schema=SCHEMA,
        current_schema=SCHEMA,
        sketches={},
        located={a.path: seg1},
    )
    stored2 = writer.write(_state(store, stored.segments, 1), second)
    seg1_after, seg2 = stored2.segments
    assert seg1_after.dead_files == {a.path} and seg1_after.path == seg1.path
    assert stored2.read_segments == 1
    # the tombstoned segment's aggregate covers exactly its live file
    assert store.read_aggregate(seg1_after.aggregate_path) == aggregate_files(
        [b], second.types, SETTINGS
    )
    assert stored2.removed == aggregate_files([a], second.types, SETTINGS)

    third = plan_commit(
        commit(3, (), (b,)),
        schema=SCHEMA,
        current_schema=SCHEMA,
        sketches={},
        located={b.path: seg1_after},
    )
    stored3 = writer.write(_state(store, stored2.segments, 2), third)
    assert stored3.segments == (seg2,)  # every file dead: the segment leaves the state
    assert stored3.added == ()


def test_merged_view_comes_from_memory_then_the_state_then_a_remerge(tmp_path: Path) -> None:
    store = StatsStore(tmp_path, "table-1")
    writer = SegmentWriter(store, SETTINGS)
    files = (data_file("a", 10), data_file("b", 20))
    stored = writer.write(
        _state(store, (), 0),
        plan_commit(
            commit(1, files), schema=SCHEMA, current_schema=SCHEMA, sketches={}, located={}
        ),
    )
    state = _state(store, stored.segments, 1)
    # a view's partitions hold their totals (``merge.counts_only``), the table the columns
    expected = tuple(counts_only(p) for p in merge_partitions(stored.added, SETTINGS))

    # no cache, no merged file: re-merged from the segment aggregates
    assert StatsStore(tmp_path, "table-1").merged_view(state, SETTINGS).partitions == expected
    # the state's merged aggregate is used when its key matches the segments …
    marker = merge_partitions(
        aggregate_files(files[:1], {1: "long", 2: "string"}, SETTINGS), SETTINGS
    )
    with_merged = StateVersion(
        **{
            **state.__dict__,
            "merged_path": store.write_aggregate(1, marker),
            "merged_key": merge_key(state),
        }
    )
    from_file = StatsStore(tmp_path, "table-1").merged_view(with_merged, SETTINGS)
    assert from_file.partitions == tuple(counts_only(p) for p in marker)
    assert from_file.table.columns == whole_table(marker, SETTINGS).columns
    # … and ignored when it was made from other segments
    stale = StateVersion(**{**with_merged.__dict__, "merged_key": "other"})
    assert StatsStore(tmp_path, "table-1").merged_view(stale, SETTINGS).partitions == expected
    # this process's memory wins over both
    warm = StatsStore(tmp_path, "table-1")
    warm.remember_merged(state, view_of((), SETTINGS))
    assert warm.merged_view(stale, SETTINGS).partitions == ()


def _in_day(name: str, day: int, records: int) -> DataFile:
    return replace(
        data_file(name, records), partition=PartitionKey(1, (("day", day),), PART.fields)
    )


@given(st.lists(st.integers(0, 5), min_size=1, max_size=24), st.data())
@settings(max_examples=40, deadline=None)
def test_a_removal_re_merges_only_its_partitions_of_a_segment(
    days: list[int], data: st.DataObject
) -> None:
    """The segment's partitions holding newly dead files re-merge from their live files,
    the others stay: the result equals a re-merge of every live file, over removals in
    turn, whether they go into the segment's aggregate chain or a whole new aggregate (an
    emptied partition leaves the aggregate; an unreadable file of the chain re-merges
    all)."""
    files = tuple(_in_day(f"f{i}", day, 10 + i) for i, day in enumerate(days))
    with tempfile.TemporaryDirectory() as tmp:
        store = StatsStore(tmp, "table-1")
        writer = SegmentWriter(store, SETTINGS)
        first = plan_commit(
            commit(1, files), schema=SCHEMA, current_schema=SCHEMA, sketches={}, located={}
        )
        stored = writer.write(_state(store, (), 0), first)
        live = list(files)
        for step in range(2, 6):
            if not live:
                break
            paths = [f.path for f in live]
            gone = data.draw(st.sets(st.sampled_from(paths), min_size=1, max_size=3))
            if data.draw(st.booleans()):  # an aggregate lost: the whole segment re-merges
                (seg,) = stored.segments
                Path(store.path(data.draw(st.sampled_from(seg.aggregate_files)))).unlink()
                store = StatsStore(tmp, "table-1")
                writer = SegmentWriter(store, SETTINGS)
            removed = tuple(f for f in live if f.path in gone)
            plan = plan_commit(
                commit(step, (), removed),
                schema=SCHEMA,
                current_schema=SCHEMA,
                sketches={},
                located={f.path: stored.segments[0] for f in removed},
            )
            stored = writer.write(_state(store, stored.segments, step - 1), plan)
            live = [f for f in live if f.path not in gone]
            assert stored.tombstoned_partitions == {f.partition for f in removed}
            if not live:
                assert stored.segments == ()
                break
            (seg,) = stored.segments
            expected = aggregate_files(live, plan.types, SETTINGS)
            assert store.segment_aggregate(seg) == expected  # as remembered
            assert StatsStore(tmp, "table-1").segment_aggregate(seg) == expected


def test_a_view_of_column_less_partitions_without_its_table_is_re_merged(tmp_path: Path) -> None:
    """Entries without columns cannot make the table: a state naming such a base without
    its table file (damaged by hand) is not taken for the view."""
    store = StatsStore(tmp_path, "table-1")
    files = (_in_day("a", 1, 10), _in_day("b", 2, 20))
    stored = SegmentWriter(store, SETTINGS).write(
        _state(store, (), 0),
        plan_commit(
            commit(1, files), schema=SCHEMA, current_schema=SCHEMA, sketches={}, located={}
        ),
    )
    state = _state(store, stored.segments, 1)
    view = view_of(merge_partitions(stored.added, SETTINGS), SETTINGS)
    written = store.write_merged_view(state, view, snapshot_id=1, previous=state, changed=None)
    assert written.merged_counts_only and written.merged_table_path is not None
    damaged = replace(written, merged_table_path=None)
    fresh = StatsStore(tmp_path, "table-1")
    assert fresh.merged_view(replace(damaged, merged_key=merge_key(damaged)), SETTINGS) == view
    assert view.table.columns  # the re-merge has the table's columns


@pytest.mark.parametrize("batch", [1, 2, 256])
def test_a_removals_table_merges_in_batches_to_the_whole_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """The table a removal re-merges from its groups, each merged a batch of partition
    entries at a time, equals one merge of them all, and each group the merge of its
    partitions; the partitions it asks for come back merged across segments."""
    monkeypatch.setattr("lakestats.store.store._TABLE_MERGE_BATCH", batch)
    store = StatsStore(tmp_path, "table-1")
    writer = SegmentWriter(store, SETTINGS)
    state = _state(store, (), 0)
    for step in range(1, 5):
        files = tuple(_in_day(f"s{step}-{d}", d, 10 * step + d) for d in range(step))
        plan = plan_commit(
            commit(step, files), schema=SCHEMA, current_schema=SCHEMA, sketches={}, located={}
        )
        state = _state(store, writer.write(state, plan).segments, step)
    parts = [p for s in state.segments for p in store.segment_aggregate(s)]
    keys = frozenset({parts[0].partition})
    every = range(TABLE_GROUPS)
    remerged, groups = store.remerge_partitions(state.segments, keys, SETTINGS, groups=every)
    assert sorted(groups) == list(every)
    table = table_of_groups([groups[i] for i in every], SETTINGS)
    assert table == whole_table(parts, SETTINGS)
    for index, group in groups.items():
        mine = [p for p in parts if group_of(p.partition) == index]
        assert group == whole_table(mine, SETTINGS)
    assert remerged == merge_partitions([p for p in parts if p.partition in keys], SETTINGS)
    assert store.remerge_partitions(state.segments, keys, SETTINGS) == (remerged, {})
    last = parts[-1].partition
    _, one = store.remerge_partitions(
        state.segments, frozenset({last}), SETTINGS, groups={group_of(last)}
    )
    assert one == {group_of(last): groups[group_of(last)]}  # the group asked for alone
