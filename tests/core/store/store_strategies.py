"""Hypothesis strategies for the store's model objects, and an exact comparison."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from lakestats.model import (
    AggregateDelta,
    ColumnAggregate,
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    JsonScalar,
    PartitionAggregate,
    PartitionKey,
    RetiredSegment,
    SegmentEntry,
    StateVersion,
)

TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
COUNT = st.none() | st.integers(0, 2**63 - 1)
SKETCH_BYTES = st.none() | st.binary(max_size=40)


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10**precision - 1
    # Built from a string so no decimal context rounds 38-digit values.
    return st.integers(-bound, bound).map(lambda u: Decimal(f"{u}E-{scale}"))


def _no_fold(value: dt.datetime) -> dt.datetime:
    return value.replace(fold=0)


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "decimal(9, 2)": _decimal(9, 2),
    "decimal(38, 10)": _decimal(38, 10),
    "decimal(5, 0)": _decimal(5, 0),
    "date": st.dates(),
    # fold only matters for local wall-clock times, which Iceberg values never are
    "time": st.times().map(lambda t: t.replace(fold=0)),
    "timestamp": st.datetimes().map(_no_fold),
    "timestamptz": st.datetimes(timezones=st.just(dt.UTC)).map(_no_fold),
    "timestamp_ns": st.datetimes(dt.datetime(1678, 1, 1), dt.datetime(2261, 12, 31)).map(_no_fold),
    "string": TEXT,
    "uuid": st.uuids(),
    "fixed[4]": st.binary(min_size=4, max_size=4),
    "binary": st.binary(max_size=20),
}
TYPES = st.sampled_from(sorted(VALUES))
JSON_SCALARS: st.SearchStrategy[JsonScalar] = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
PARTITIONS = st.builds(
    PartitionKey,
    spec_id=st.integers(0, 5),
    values=st.lists(st.tuples(TEXT, JSON_SCALARS), max_size=3).map(tuple),
)
FIELD_IDS = st.integers(1, 2**31 - 1)


@st.composite
def metrics(draw: st.DrawFn, type_str: str) -> ColumnMetrics:
    value = st.none() | VALUES[type_str]
    return ColumnMetrics(
        column_size=draw(COUNT),
        value_count=draw(COUNT),
        null_count=draw(COUNT),
        nan_count=draw(COUNT),
        lower=draw(value),
        upper=draw(value),
        bounds_may_be_truncated=draw(st.booleans()),
    )


@st.composite
def sketches(draw: st.DrawFn, type_str: str) -> ColumnSketch:
    value = st.none() | VALUES[type_str]
    return ColumnSketch(
        theta=draw(SKETCH_BYTES),
        kll=draw(SKETCH_BYTES),
        null_count=draw(COUNT),
        nan_count=draw(COUNT),
        min=draw(value),
        max=draw(value),
        len_sum=draw(COUNT),
        len_max=draw(COUNT),
        true_count=draw(COUNT),
        false_count=draw(COUNT),
        value_sample=draw(st.none() | SKETCH_BYTES),
        frequent_items=draw(st.none() | SKETCH_BYTES),
    )


@st.composite
def data_files(draw: st.DrawFn, types: Mapping[int, str]) -> DataFile:
    ids = sorted(types)
    chosen = st.sets(st.sampled_from(ids), max_size=len(ids)) if ids else st.just(set[int]())
    return DataFile(
        path="file:///wh/t/data/" + draw(TEXT) + ".parquet",
        content=draw(st.sampled_from(FileContent)),
        file_format=draw(st.sampled_from(["PARQUET", "ORC", "AVRO"])),
        record_count=draw(st.integers(0, 2**63 - 1)),
        file_size_bytes=draw(st.integers(0, 2**63 - 1)),
        partition=draw(PARTITIONS),
        columns={fid: draw(metrics(types[fid])) for fid in sorted(draw(chosen))},
        field_ids=frozenset(draw(chosen)),
        sketches={fid: draw(sketches(types[fid])) for fid in sorted(draw(chosen))},
    )


@st.composite
def segments(draw: st.DrawFn) -> tuple[list[DataFile], dict[int, str]]:
    """Files plus the field types they need (and some types no file uses)."""
    types = draw(st.dictionaries(FIELD_IDS, TYPES, max_size=6))
    files = draw(st.lists(data_files(types), max_size=5))
    return files, types


@st.composite
def column_aggregates(draw: st.DrawFn, field_id: int) -> ColumnAggregate:
    type_str = draw(TYPES)
    value = st.none() | VALUES[type_str]
    return ColumnAggregate(
        field_id=field_id,
        type=type_str,
        files=draw(st.integers(0, 2**40)),
        records=draw(st.integers(0, 2**62)),
        value_count=draw(COUNT),
        null_count=draw(COUNT),
        nan_count=draw(COUNT),
        column_size=draw(COUNT),
        lower=draw(value),
        upper=draw(value),
        bounds_complete=draw(st.booleans()),
        bounds_may_be_truncated=draw(st.booleans()),
        sketched_files=draw(st.integers(0, 2**40)),
        theta=draw(SKETCH_BYTES),
        kll=draw(SKETCH_BYTES),
        len_sum=draw(COUNT),
        len_max=draw(COUNT),
        true_count=draw(COUNT),
        false_count=draw(COUNT),
    )


@st.composite
def partition_aggregates(draw: st.DrawFn) -> PartitionAggregate:
    ids = draw(st.sets(FIELD_IDS, max_size=4))
    big = st.integers(0, 2**62)
    return PartitionAggregate(
        partition=draw(PARTITIONS),
        record_count=draw(big),
        file_count=draw(big),
        total_size_bytes=draw(big),
        position_delete_files=draw(big),
        position_delete_records=draw(big),
        equality_delete_files=draw(big),
        equality_delete_records=draw(big),
        columns={fid: draw(column_aggregates(fid)) for fid in sorted(ids)},
    )


JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
REL_PATHS = TEXT.map(lambda s: f"segments/{s}.parquet")
SEGMENT_ENTRIES = st.builds(
    SegmentEntry,
    snapshot_id=st.integers(-(2**63), 2**63 - 1),
    path=REL_PATHS,
    aggregate_path=REL_PATHS,
    file_count=st.integers(0, 10**6),
    dead_files=st.frozensets(TEXT, max_size=4),
    aggregate_deltas=st.lists(
        st.builds(AggregateDelta, REL_PATHS, st.integers(0, 10**6)), max_size=3
    ).map(tuple),
    last_listed=st.none() | st.integers(-(2**63), 2**63 - 1),
)
RETIRED_SEGMENTS = st.builds(
    RetiredSegment,
    path=REL_PATHS,
    listed_by=st.frozensets(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3),
)
_MERGED = st.none() | st.tuples(
    REL_PATHS,
    st.text("0123456789abcdef", min_size=64, max_size=64),
    st.none() | REL_PATHS,
    st.lists(st.builds(AggregateDelta, REL_PATHS, st.integers(0, 10**6)), max_size=3).map(tuple),
    st.booleans(),  # merged_counts_only
)
STATE_VERSIONS = st.builds(
    lambda merged, **kw: StateVersion(
        **kw,
        merged_path=merged[0] if merged else None,
        merged_key=merged[1] if merged else None,
        merged_table_path=merged[2] if merged else None,
        merged_deltas=merged[3] if merged else (),
        merged_counts_only=merged[4] if merged else False,
    ),
    merged=_MERGED,
    version=st.integers(1, 10**12),
    table_id=TEXT,
    format=st.sampled_from(["iceberg", "delta", "paimon"]),
    location=TEXT,
    last_snapshot_id=st.none() | st.integers(-(2**63), 2**63 - 1),
    segments=st.lists(SEGMENT_ENTRIES, max_size=4).map(tuple),
    stats=st.dictionaries(st.integers(-(2**63), 2**63 - 1), TEXT, max_size=4),
    created_at_ms=st.integers(0, 2**62),
    published=st.dictionaries(TEXT, JSON_VALUES, max_size=3),
    last_fingerprint=st.none() | TEXT,
    retired=st.lists(RETIRED_SEGMENTS, max_size=3).map(tuple),
)


def exact(obj: Any) -> str:
    """A rendering that tells apart what ``==`` conflates: -0.0/0.0, 1/True, Decimal
    exponents, naive/aware datetimes; mappings and sets are sorted so order is ignored."""
    if is_dataclass(obj) and not isinstance(obj, type):
        inner = ", ".join(f"{f.name}={exact(getattr(obj, f.name))}" for f in fields(obj))
        return f"{type(obj).__name__}({inner})"
    if isinstance(obj, Mapping):
        items = sorted(f"{exact(k)}: {exact(v)}" for k, v in obj.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(obj, frozenset | set):
        return "set(" + ", ".join(sorted(exact(v) for v in obj)) + ")"
    if isinstance(obj, list | tuple):
        return type(obj).__name__ + "[" + ", ".join(exact(v) for v in obj) + "]"
    return f"{type(obj).__name__}:{obj!r}"
