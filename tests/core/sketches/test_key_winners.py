"""The Arrow engine's primary-key winners against the SQL job's rules, written out row by
row (``deletes/key_merge.py``: ``_live_inputs`` then ``max_by``/``min_by`` of the order)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.arrow_sketch.key_winners import WinnerGroup, surviving_rows, winner_groups
from lakestats.model import Column, KeyMerge, MergeInput, TableSchema

RETRACT = (1, 3)


def _rank(value: Any) -> tuple[int, Any]:
    return (0, 0) if value is None else (1, value)  # NULL lowest, as Spark orders structs


def reference(
    rows: list[tuple[tuple[Any, ...], tuple[Any, ...], int]],
    *,
    first_row: bool,
    ignore_delete: bool,
    remove_record_on_delete: bool,
) -> set[int]:
    by_key: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int, int]]] = {}
    for index, (key, order, kind) in enumerate(rows):
        by_key.setdefault(key, []).append((tuple(_rank(v) for v in order), index, kind))
    alive = set()
    for versions in by_key.values():
        if not first_row:
            kept = [v for v in versions if v[2] not in RETRACT] if ignore_delete else versions
        elif remove_record_on_delete and not ignore_delete:
            deletes = [v[0] for v in versions if v[2] == 3]
            last = max(deletes) if deletes else None
            kept = [v for v in versions if (last is None or v[0] > last) and v[2] not in RETRACT]
        else:
            kept = [v for v in versions if v[2] not in RETRACT]
        if not kept:
            continue
        pick = min(kept) if first_row else max(kept)
        if not first_row and pick[2] in RETRACT:
            continue
        alive.add(pick[1])
    return alive


@st.composite
def merged_rows(draw: st.DrawFn) -> tuple[list[Any], int]:
    n = draw(st.integers(0, 40))
    key_columns = draw(st.integers(1, 2))
    keys = [
        tuple(draw(st.one_of(st.none(), st.integers(0, 4))) for _ in range(key_columns))
        for _ in range(n)
    ]
    sequence_field = [draw(st.one_of(st.none(), st.integers(0, 3))) for _ in range(n)]
    sequence_numbers = draw(st.permutations(list(range(n))))  # unique: no ties to break
    kinds = [draw(st.integers(0, 3)) for _ in range(n)]
    rows = [(keys[i], (sequence_field[i], sequence_numbers[i]), kinds[i]) for i in range(n)]
    return rows, key_columns


@settings(max_examples=300, deadline=None)
@given(
    merged_rows(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_winners_follow_the_sql_jobs_rules(
    case: tuple[list[Any], int], first_row: bool, ignore_delete: bool, remove: bool
) -> None:
    rows, key_columns = case
    keys = pa.table(
        {f"k{c}": pa.array([r[0][c] for r in rows], pa.int64()) for c in range(key_columns)}
    )
    order = pa.table(
        {
            "o0": pa.array([r[1][0] for r in rows], pa.int32()),
            "o1": pa.array([r[1][1] for r in rows], pa.int64()),
        }
    )
    kinds = np.array([r[2] for r in rows], dtype=np.int64)

    alive = surviving_rows(
        keys,
        order,
        kinds,
        first_row=first_row,
        ignore_delete=ignore_delete,
        remove_record_on_delete=remove,
    )

    expected = reference(
        rows, first_row=first_row, ignore_delete=ignore_delete, remove_record_on_delete=remove
    )
    assert set(np.flatnonzero(alive).tolist()) == expected


SCHEMA = TableSchema(
    schema_id=0,
    columns=(
        Column(1, "k", "long"),
        Column(2, "v", "string"),
        Column(3, "ts", "double"),
    ),
)


def _merge(**rules: Any) -> KeyMerge:
    defaults: dict[str, Any] = {
        "inputs": (MergeInput("/t/a.parquet"), MergeInput("/t/b.parquet")),
        "key_field_ids": (1,),
        "sequence_field_id": 99,  # as Paimon's files carry them
        "row_kind_field_id": 98,
    }
    return KeyMerge(**(defaults | rules))


def test_groups_name_their_inputs_and_requested_files() -> None:
    merge = _merge(sequence_field_ids=(2,))
    (group,) = winner_groups([(merge, 0), (merge, 1)], ["/t/a.parquet", "/t/b.parquet"], SCHEMA)

    assert isinstance(group, WinnerGroup)
    assert group.inputs == ("/t/a.parquet", "/t/b.parquet")
    assert group.requested == ("/t/a.parquet", "/t/b.parquet")
    assert [(c.field_id, c.path) for c in group.keys] == [(1, ("k",))]
    assert [(c.field_id, c.path) for c in group.order] == [
        (2, ("v",)),
        (99, ("_SEQUENCE_NUMBER",)),
    ]
    assert (group.kind.field_id, group.kind.path) == (98, ("_VALUE_KIND",))
    assert not group.first_row


def test_merges_the_sql_job_must_make_are_refused_with_a_reason() -> None:
    paths = ["/t/a.parquet"]
    cases = {
        "aggregation engine": _merge(engine="aggregation"),
        "row kind without a field id": _merge(row_kind_field_id=None),
        "partial-update engine": _merge(engine="partial-update"),
        "retyped input": _merge(inputs=(MergeInput("/t/a.parquet", retyped=((2, "int"),)),)),
        "row kind is a column": _merge(row_kind_column="v"),
        "floating sequence field": _merge(sequence_field_ids=(3,)),
        "file outside its inputs": _merge(inputs=(MergeInput("/t/other.parquet"),)),
    }
    assert isinstance(winner_groups([(_merge(), 0)], paths, SCHEMA), list)  # the rest is fine
    for what, merge in cases.items():
        assert isinstance(winner_groups([(merge, 0)], paths, SCHEMA), str), what
