"""Exact round trips of segment, aggregate and state-version files, and their error paths."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_strategies import (
    STATE_VERSIONS,
    exact,
    partition_aggregates,
    segments,
)

from lakestats.exceptions import StoreError
from lakestats.model import (
    UNPARTITIONED,
    ColumnAggregate,
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    PartitionAggregate,
    PartitionKey,
    StateVersion,
)
from lakestats.store import (
    read_aggregate,
    read_segment,
    read_segment_contents,
    read_segment_paths,
    version_from_json,
    version_to_json,
    write_aggregate,
    write_segment,
)
from lakestats.store.statelog import latest_version, list_versions, read_version, version_path

ROUND_TRIP = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _file(path: str = "file:///t/a.parquet", **kwargs: object) -> DataFile:
    base: dict[str, object] = {
        "path": path,
        "content": FileContent.DATA,
        "file_format": "PARQUET",
        "record_count": 10,
        "file_size_bytes": 100,
        "partition": UNPARTITIONED,
    }
    base.update(kwargs)
    return DataFile(**base)  # type: ignore[arg-type]


@ROUND_TRIP
@given(case=segments())
def test_segment_round_trip(tmp_path: Path, case: tuple[list[DataFile], dict[int, str]]) -> None:
    files, types = case
    path = tmp_path / "seg.parquet"
    write_segment(path, files, types)
    back = read_segment(path)
    assert back == tuple(files)
    assert exact(back) == exact(tuple(files))
    assert read_segment_paths(path) == list(dict.fromkeys(f.path for f in files))


@ROUND_TRIP
@given(case=segments(), data=st.data(), group_bytes=st.sampled_from([1, 2_000, 2**30]))
def test_a_segment_read_for_some_partitions_is_the_full_reads_files_of_them(
    tmp_path: Path,
    case: tuple[list[DataFile], dict[int, str]],
    data: st.DataObject,
    group_bytes: int,
) -> None:
    """``partitions_of`` keeps exactly the files in the partitions of the given files,
    in order, whatever the row groups (one row each, a few, one for all)."""
    files, types = case
    path = tmp_path / "seg.parquet"
    with mock.patch("lakestats.store.segments.SEGMENT_ROW_GROUP_BYTES", group_bytes):
        write_segment(path, files, types)
    paths = sorted({f.path for f in files})
    chosen = data.draw(st.lists(st.sampled_from(paths), max_size=3)) if paths else []
    keys = {f.partition for f in files if f.path in chosen}
    want = tuple(f for f in files if f.partition in keys)
    assert exact(read_segment(path, partitions_of=chosen)) == exact(want)


@ROUND_TRIP
@given(case=segments(), data=st.data(), group_bytes=st.sampled_from([1, 2_000, 2**30]))
def test_a_segment_read_for_some_fields_is_the_full_read_narrowed_to_them(
    tmp_path: Path,
    case: tuple[list[DataFile], dict[int, str]],
    data: st.DataObject,
    group_bytes: int,
) -> None:
    """``field_ids`` keeps every file, in order, with exactly those fields' metrics,
    sketches and field ids (a file holding none of them too), whatever the row groups;
    ``value_samples=False`` the same without value samples."""
    files, types = case
    path = tmp_path / "seg.parquet"
    with mock.patch("lakestats.store.segments.SEGMENT_ROW_GROUP_BYTES", group_bytes):
        write_segment(path, files, types)
    chosen = set(data.draw(st.lists(st.sampled_from([*types, 999]), max_size=3)))
    samples = data.draw(st.booleans())
    want = tuple(
        replace(
            f,
            columns={k: v for k, v in f.columns.items() if k in chosen},
            sketches={
                k: v if samples else replace(v, value_sample=None)
                for k, v in f.sketches.items()
                if k in chosen
            },
            field_ids=f.field_ids & chosen,
        )
        for f in files
    )
    assert exact(read_segment(path, field_ids=chosen, value_samples=samples)) == exact(want)
    with pytest.raises(ValueError, match="does not combine"):
        read_segment(path, field_ids=chosen, only=[])


def test_a_segment_read_for_some_partitions_reads_only_their_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal's read of a big segment (``partitions_of``) decodes the row groups that
    hold its partitions' rows and no other: one of the others damaged, the full read fails
    and the partial one still gives exactly the full read's files of those partitions."""
    monkeypatch.setattr("lakestats.store.segments.SEGMENT_ROW_GROUP_BYTES", 64 * 1024)
    rng = random.Random(3)
    files = [
        _file(
            f"file:///t/d{day}-{i}.parquet",
            partition=PartitionKey(1, (("day", day),)),
            sketches={1: ColumnSketch(theta=rng.randbytes(20_000), kll=rng.randbytes(5_000))},
        )
        for day in range(6)
        for i in range(5)
    ]
    path = tmp_path / "seg.parquet"
    write_segment(path, files, {})
    metadata = pq.ParquetFile(path).metadata
    assert metadata.num_row_groups >= 6
    day_two = [f for f in read_segment(path) if f.partition.values == (("day", 2),)]
    assert len(day_two) == 5
    assert read_segment(path, partitions_of=[day_two[0].path]) == tuple(day_two)

    # the last row group holds day 5's files alone: overwrite its pages, but for those of
    # the columns that tell each row's partition (read in every group to find the others)
    last = metadata.row_group(metadata.num_row_groups - 1)
    data = bytearray(path.read_bytes())
    for column in range(last.num_columns):
        chunk = last.column(column)
        if chunk.path_in_schema in ("file_path", "spec_id", "partition"):
            continue
        start = chunk.dictionary_page_offset or chunk.data_page_offset
        data[start : start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError):
        read_segment(path)
    assert read_segment(path, partitions_of=[day_two[0].path]) == tuple(day_two)
    assert read_segment(path, partitions_of=["file:///t/unknown.parquet"]) == ()


def test_segment_keeps_empty_objects_apart_from_absent(tmp_path: Path) -> None:
    files = [
        _file("a", field_ids=frozenset({1, 2}), columns={3: ColumnMetrics()}),
        _file("b", sketches={4: ColumnSketch()}),
        _file("c"),  # no fields at all: one row with a null field id
        _file("a", record_count=0),  # same path twice stays two files
    ]
    path = tmp_path / "seg.parquet"
    write_segment(path, files, {})
    assert read_segment(path) == tuple(files)
    assert read_segment_paths(path) == ["a", "b", "c"]


def test_segment_contents_say_which_files_stats_hold_every_row(tmp_path: Path) -> None:
    files = [
        _file("plain", field_ids=frozenset({1})),
        _file("deletes applied", live_record_count=7),
        _file("deletes that deleted none", live_record_count=10),
        _file("deletes unapplied", live_rows_unknown=True),
        _file("positions", content=FileContent.POSITION_DELETES),
    ]
    path = tmp_path / "seg.parquet"
    write_segment(path, files, {})
    contents = read_segment_contents(path)
    assert {p: (held.content, held.whole) for p, held in contents.items()} == {
        "plain": (FileContent.DATA, True),
        "deletes applied": (FileContent.DATA, False),
        "deletes that deleted none": (FileContent.DATA, True),
        "deletes unapplied": (FileContent.DATA, False),
        "positions": (FileContent.POSITION_DELETES, False),
    }
    # a segment written before the store recorded deletes vouches for no file
    older = tmp_path / "older.parquet"
    table = pq.read_table(path)
    pq.write_table(
        table.drop_columns(["live_record_count", "live_rows_unknown"]).replace_schema_metadata(
            table.schema.metadata
        ),
        older,
    )
    assert {held.whole for held in read_segment_contents(older).values()} == {False}
    # the facts that tell a file listed again apart from another under its path
    assert (contents["plain"].record_count, contents["plain"].file_size_bytes) == (
        files[0].record_count,
        files[0].file_size_bytes,
    )


def test_a_file_listed_twice_keeps_the_entry_that_holds_every_row(tmp_path: Path) -> None:
    """Removed, then added again with its deletes, in one (compacted) segment: the first
    entry describes every row, the second its live rows."""
    files = [_file("a"), _file("b"), _file("a", live_record_count=4)]
    path = tmp_path / "seg.parquet"
    write_segment(path, files, {})
    assert read_segment_contents(path)["a"].whole
    reversed_path = tmp_path / "reversed.parquet"
    write_segment(reversed_path, files[::-1], {})
    assert read_segment_contents(reversed_path)["a"].whole
    assert read_segment(path, only=["a"]) == (files[0], files[2])
    assert read_segment(path, only=["b", "unknown"]) == (files[1],)
    assert read_segment(path, only=[]) == ()


def test_segment_special_floats_and_partition_order(tmp_path: Path) -> None:
    partition = PartitionKey(spec_id=3, values=(("z", 1), ("a", True), ("m", -0.0), ("n", None)))
    metrics = ColumnMetrics(lower=-math.inf, upper=-0.0)
    files = [_file(partition=partition, columns={7: metrics}, field_ids=frozenset({7}))]
    path = tmp_path / "seg.parquet"
    write_segment(path, files, {7: "double"})
    (back,) = read_segment(path)
    assert back.partition.values == partition.values
    assert [type(v) for _, v in back.partition.values] == [int, bool, float, type(None)]
    assert math.copysign(1.0, back.columns[7].upper) == -1.0
    assert back.columns[7].lower == -math.inf


def test_segment_bound_without_type_is_rejected(tmp_path: Path) -> None:
    files = [_file(columns={5: ColumnMetrics(lower=1)})]
    with pytest.raises(ValueError, match="field 5"):
        write_segment(tmp_path / "seg.parquet", files, {})
    files = [_file(sketches={5: ColumnSketch(max=1)})]
    with pytest.raises(ValueError, match="no type"):
        write_segment(tmp_path / "seg.parquet", files, {})
    assert not (tmp_path / "seg.parquet").exists()


def test_segment_unencodable_bound_is_rejected(tmp_path: Path) -> None:
    files = [_file(columns={5: ColumnMetrics(lower="x")})]
    with pytest.raises(ValueError, match="cannot encode"):
        write_segment(tmp_path / "seg.parquet", files, {5: "long"})


@ROUND_TRIP
@given(parts=st.lists(partition_aggregates(), max_size=4))
def test_aggregate_round_trip(tmp_path: Path, parts: list[PartitionAggregate]) -> None:
    path = tmp_path / "agg.parquet"
    write_aggregate(path, parts)
    back = read_aggregate(path)
    assert back == tuple(parts)
    assert exact(back) == exact(tuple(parts))


def test_aggregate_partition_without_columns(tmp_path: Path) -> None:
    parts = [
        PartitionAggregate(partition=PartitionKey(1, (("d", "2024-01-01"),)), record_count=5),
        PartitionAggregate(
            partition=UNPARTITIONED,
            columns={1: ColumnAggregate(field_id=1, type="int", lower=-1, upper=9)},
        ),
        PartitionAggregate(partition=PartitionKey(1, (("d", "2024-01-01"),)), record_count=6),
    ]
    path = tmp_path / "agg.parquet"
    write_aggregate(path, parts)
    assert read_aggregate(path) == tuple(parts)


def test_aggregate_key_must_match_field_id(tmp_path: Path) -> None:
    parts = [PartitionAggregate(UNPARTITIONED, columns={2: ColumnAggregate(1, "int")})]
    with pytest.raises(ValueError, match="keyed 2"):
        write_aggregate(tmp_path / "agg.parquet", parts)


@settings(max_examples=100, deadline=None)
@given(state=STATE_VERSIONS)
def test_state_version_round_trip(state: StateVersion) -> None:
    data = version_to_json(state)
    doc = json.loads(data)
    # 2 only when a segment's aggregate is a chain, which a reader of 1 would misread
    chained = any(seg.aggregate_deltas for seg in state.segments)
    assert doc["format_version"] == (2 if chained else 1)
    for seg in doc["segments"]:
        assert seg["dead_files"] == sorted(seg["dead_files"])
    back = version_from_json(data, "x.json")
    assert back == state
    assert exact(back) == exact(state)


def test_state_version_json_is_stable() -> None:
    state = StateVersion(
        version=3, table_id="t", format="iceberg", location="/l", last_snapshot_id=9
    )
    assert json.loads(version_to_json(state)) == {
        "format_version": 1,
        "version": 3,
        "table_id": "t",
        "format": "iceberg",
        "location": "/l",
        "last_snapshot_id": 9,
        "created_at_ms": 0,
        "segments": [],
        "stats": {},
        "published": {},
    }


@settings(max_examples=50, deadline=None)
@given(state=STATE_VERSIONS)
def test_a_state_version_is_one_line_per_entry(state: StateVersion) -> None:
    """Written with the C encoder entry by entry (a version is written with every commit
    and grows with the history; the round trip above reads it back): one line per
    top-level field, per segment and per snapshot's stats file."""
    text = version_to_json(state).decode()
    doc = json.loads(text)
    *lines, last = text.split("\n")  # not splitlines: values may hold U+0085 and the like
    assert last == ""
    entries = {line.removesuffix(",") for line in lines}
    for seg in doc["segments"]:
        assert f"    {json.dumps(seg, ensure_ascii=False)}" in entries
    for snapshot, path in doc["stats"].items():
        assert f"    {json.dumps(snapshot)}: {json.dumps(path, ensure_ascii=False)}" in entries
    assert len(lines) == 2 + len(doc) + sum(
        1 + len(v) for v in doc.values() if isinstance(v, list | dict) and v
    )


@pytest.mark.parametrize(
    "retired",
    [
        {"path": "segments/a.parquet", "listed_by": [1]},  # not a list
        [{"path": "segments/a.parquet", "listed_by": [True]}],
        [{"path": "segments/a.parquet", "listed_by": 1}],
        [{"listed_by": [1]}],
        ["segments/a.parquet"],
    ],
)
def test_a_malformed_retired_list_is_not_ours(retired: Any) -> None:
    state = StateVersion(3, "t", "iceberg", "/l", 9)
    doc = {**json.loads(version_to_json(state)), "retired": retired}
    with pytest.raises(StoreError, match="not a lakestats state version"):
        version_from_json(json.dumps(doc).encode(), "x.json")


def test_state_version_rejects_non_finite_published() -> None:
    state = StateVersion(1, "t", "iceberg", "/l", None, published={"x": math.nan})
    with pytest.raises(ValueError):
        version_to_json(state)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"version": 1', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (b'{"format_version": 3}', "format_version"),  # 2: chained segments (readable)
        (b'{"format_version": true}', "format_version"),
        (b'{"format_version": 1, "version": 1}', "missing field 'table_id'"),
    ],
)
def test_corrupt_log_file_names_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    good = StateVersion(1, "t", "iceberg", "/l", None)
    (tmp_path / "log").mkdir()
    version_path(tmp_path, 1).write_bytes(version_to_json(good))
    bad = version_path(tmp_path, 2)
    bad.write_bytes(content)
    with pytest.raises(StoreError, match=message) as info:
        latest_version(tmp_path)
    assert str(bad) in str(info.value)
    assert read_version(tmp_path, 1) == good  # the older version stays readable


def test_log_ignores_temporaries_and_checks_numbering(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.mkdir()
    (log / ".00000000000000000009.json.tmp-abc").write_bytes(b"{partial")
    (log / "README").write_text("not a version")
    assert latest_version(tmp_path) is None
    state = StateVersion(5, "t", "iceberg", "/l", None)
    version_path(tmp_path, 4).write_bytes(version_to_json(state))
    assert list_versions(tmp_path) == [4]
    with pytest.raises(StoreError, match="holds version 5, not 4"):
        latest_version(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        read_version(tmp_path, 1)


@pytest.mark.parametrize("reader", [read_segment, read_aggregate, read_segment_paths])
def test_missing_or_foreign_parquet_names_the_file(tmp_path: Path, reader: object) -> None:
    assert callable(reader)
    missing = tmp_path / "missing.parquet"
    with pytest.raises(StoreError, match="missing") as info:
        reader(missing)
    assert str(missing) in str(info.value)

    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 not really")
    with pytest.raises(StoreError, match="unreadable") as info:
        reader(garbage)
    assert str(garbage) in str(info.value)

    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"file_path": ["x"]}), foreign)
    with pytest.raises(StoreError, match="not a lakestats") as info:
        reader(foreign)
    assert str(foreign) in str(info.value)


def test_segment_and_aggregate_are_not_interchangeable(tmp_path: Path) -> None:
    seg = tmp_path / "seg.parquet"
    write_segment(seg, [_file()], {})
    with pytest.raises(StoreError, match="not a lakestats aggregate"):
        read_aggregate(seg)


def test_corrupt_bound_bytes_name_the_file(tmp_path: Path) -> None:
    seg = tmp_path / "seg.parquet"
    write_segment(seg, [_file(columns={1: ColumnMetrics(lower=1)})], {1: "long"})
    table = pq.read_table(seg)
    index = table.schema.get_field_index("lower_bound")
    broken = table.set_column(
        index, table.schema.field(index), pa.array([b"\x01"], type=pa.binary())
    )
    pq.write_table(broken.replace_schema_metadata(table.schema.metadata), seg)
    with pytest.raises(StoreError, match="corrupt segment") as info:
        read_segment(seg)
    assert str(seg) in str(info.value)
