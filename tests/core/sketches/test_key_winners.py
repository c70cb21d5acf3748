"""The Arrow engine's primary-key winners against the SQL job's rules, written out row by
row (``deletes/key_merge.py``: ``_live_inputs`` then ``max_by``/``min_by`` of the order)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.arrow_sketch.file_sketch import read_footer
from lakestats.arrow_sketch.key_winners import (
    WinnerGroup,
    dead_rows,
    merge_shares,
    surviving_rows,
    winner_groups,
)
from lakestats.arrow_sketch.spill import MAX_SHARES
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
        "input with its key written otherwise": _merge(
            inputs=(MergeInput("/t/a.parquet", written_as=((1, "key", "int"),)),)
        ),
        "row kind is a column": _merge(row_kind_column="v"),
        "floating sequence field": _merge(sequence_field_ids=(3,)),
        "file outside its inputs": _merge(inputs=(MergeInput("/t/other.parquet"),)),
    }
    assert isinstance(winner_groups([(_merge(), 0)], paths, SCHEMA), list)  # the rest is fine
    # another column written otherwise: the merge reads only its key and sequence columns
    renamed = _merge(inputs=(MergeInput("/t/a.parquet", written_as=((2, "old_v", "long"),)),))
    assert isinstance(winner_groups([(renamed, 0)], paths, SCHEMA), list)
    for what, merge in cases.items():
        assert isinstance(winner_groups([(merge, 0)], paths, SCHEMA), str), what


# -- a bucket merged in shares (``dead_rows``) ----------------------------------------------


def _field(name: str, kind: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, kind, metadata={b"PARQUET:field_id": str(field_id).encode()})


BUCKET_SCHEMA = pa.schema(
    [
        _field("k", pa.int64(), 1),
        _field("name", pa.string(), 2),
        _field("_SEQUENCE_NUMBER", pa.int64(), 99),
        _field("_VALUE_KIND", pa.int8(), 98),
    ]
)


def _bucket(tmp_path: Any, runs: int, rows: int, seed: int) -> list[tuple[Any, ...]]:
    """``runs`` Parquet files of ``rows`` rows each, keyed (k, name) with NULL names and
    -U/-D rows, written in row groups of 97 rows; one more file with no rows. Returns
    every row as ``(path, position, key, order, kind)``."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    out: list[tuple[Any, ...]] = []
    for run in range(runs + 1):
        path = tmp_path / f"run-{run}.parquet"
        n = rows if run < runs else 0
        ks = np.sort(rng.integers(0, rows // 2, n))
        names = [None if k % 11 == 0 else f"n{k % 5}" for k in ks.tolist()]
        sequence = rng.permutation(n) + run * rows
        kinds = rng.choice([0, 0, 0, 2, 1, 3], n).astype(np.int8)
        table = pa.Table.from_arrays(
            [pa.array(ks), pa.array(names, pa.string()), pa.array(sequence), pa.array(kinds)],
            schema=BUCKET_SCHEMA,
        )
        pq.write_table(table, path, row_group_size=97)
        for i in range(n):
            key = (int(ks[i]), names[i])
            out.append((str(path), i, key, (int(sequence[i]),), int(kinds[i])))
    return out


def _bucket_group(paths: list[str], **rules: Any) -> WinnerGroup:
    from lakestats.arrow_sketch.file_sketch import ArrowColumn
    from lakestats.sketches.spec import type_spec

    def column(field_id: int, name: str, type_str: str) -> ArrowColumn:
        spec = type_spec(type_str)
        assert spec is not None
        return ArrowColumn(field_id, (name,), spec, False)

    return WinnerGroup(
        inputs=tuple(paths),
        requested=tuple(paths[::2]),
        keys=(column(1, "k", "long"), column(2, "name", "string")),
        order=(column(99, "_SEQUENCE_NUMBER", "long"),),
        kind=column(98, "_VALUE_KIND", "int"),
        first_row=rules.get("first_row", False),
        ignore_delete=rules.get("ignore_delete", False),
        remove_record_on_delete=rules.get("remove_record_on_delete", False),
    )


@pytest.mark.parametrize(
    "rules",
    [{}, {"ignore_delete": True}, {"first_row": True, "remove_record_on_delete": True}],
    ids=["deduplicate", "ignore-delete", "first-row"],
)
def test_a_bucket_merged_in_shares_loses_and_keeps_the_same_rows(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, rules: dict[str, bool]
) -> None:
    rows = _bucket(tmp_path, runs=4, rows=600, seed=3)
    paths = sorted({r[0] for r in rows} | {str(tmp_path / "run-4.parquet")})
    group = _bucket_group(paths, **rules)
    alive = reference(
        [(r[2], r[3], r[4]) for r in rows],
        first_row=rules.get("first_row", False),
        ignore_delete=rules.get("ignore_delete", False),
        remove_record_on_delete=rules.get("remove_record_on_delete", False),
    )
    want = {
        path: sorted(r[1] for i, r in enumerate(rows) if r[0] == path and i not in alive)
        for path in group.requested
    }
    assert any(want.values())
    spill = tmp_path / "spark-local"
    spill.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{spill},/nonexistent")
    for shares in (None, 1, 2, 3, 7):
        dead = dead_rows(group, shares=shares)
        assert {p: d.to_positions().tolist() for p, d in dead.items()} == want, shares
        assert not list(spill.iterdir())  # the spill files are gone


def test_a_failing_input_leaves_no_spill_behind(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakestats.arrow_sketch.file_sketch import UnreadableFileError

    rows = _bucket(tmp_path, runs=2, rows=300, seed=5)
    paths = sorted({r[0] for r in rows})
    bad = tmp_path / "run-1.parquet"
    data = bad.read_bytes()
    # the footer still reads; a data page in the middle does not
    bad.write_bytes(data[:200] + bytes(len(data) // 2) + data[200 + len(data) // 2 :])
    spill = tmp_path / "spark-local"
    spill.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(spill))
    with pytest.raises(UnreadableFileError, match=r"run-1\.parquet"):
        dead_rows(_bucket_group(paths), shares=3)
    assert not list(spill.iterdir())


def test_the_share_count_follows_the_buckets_size(tmp_path: Any) -> None:

    from lakestats.arrow_sketch.file_sketch import reading_job

    rows = _bucket(tmp_path, runs=3, rows=2000, seed=7)
    paths = sorted({r[0] for r in rows})
    group = _bucket_group(paths)
    job = reading_job(list(dict.fromkeys([*group.keys, *group.order, group.kind])), "field_id")
    files = [read_footer(p, job) for p in paths]
    assert [f.rows for f in files] == [2000, 2000, 2000]
    assert merge_shares(files, 1 << 40) == 1
    # estimated: the merge columns twice and a fixed overhead a row (6,000 rows here)
    shares = merge_shares(files, 10_000)
    assert 6000 * 64 / 10_000 < shares <= 6000 * (64 + 2 * 64) / 10_000 + 1
    assert merge_shares(files, 20_000) == -(-shares // 2) or shares % 2
    assert merge_shares(files, 1) == MAX_SHARES  # at most: open spill files


@pytest.mark.parametrize(
    "values",
    [
        pa.array([1, None, 3, 1 << 40, -5] * 40, pa.int64()),
        pa.array([1, None, 3, 7, -5] * 40, pa.int32()),
        pa.array(["a", None, "", "héllo", "a" * 100] * 40, pa.string()),
        pa.array([b"x", None, b"", b"\x00\x01", b"y" * 70] * 40, pa.large_binary()),
        pa.array([True, None, False, True, False] * 40, pa.bool_()),
        pa.array([b"abcd", None, b"efgh", b"\x00" * 4, b"zzzz"] * 40, pa.binary(4)),
        pa.array([1, None, -2, 10**20, 0] * 40, pa.decimal128(38, 2)),
        pa.array([0, None, 19000, -1, 5] * 40, pa.date32()),
        pa.array([0, None, 1 << 50, -1, 5] * 40, pa.timestamp("us")),
    ],
    ids=lambda v: str(v.type),
)
def test_equal_keys_hash_equally_wherever_they_are(values: pa.Array) -> None:
    from lakestats.arrow_sketch.arrays import key_hashes as partition_hashes

    whole = partition_hashes([values])
    # the same values at an offset, in chunks, and next to another key column
    sliced = partition_hashes([values.slice(5)])
    chunked = partition_hashes([pa.chunked_array([values.slice(0, 7), values.slice(7)])])
    assert sliced.tolist() == whole[5:].tolist() and chunked.tolist() == whole.tolist()
    assert whole[0] == whole[5] and whole[1] == whole[6]
    distinct = len({repr(v) for v in values[:5].to_pylist()})  # NULL one of them
    assert len(set(whole[:5].tolist())) == distinct
    pair = partition_hashes([values, values.slice(0, len(values))])
    assert pair[0] == pair[5] and pair[0] != whole[0]


def test_keys_hashed_in_pieces_hash_as_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are hashed a piece at a time (bounded memory): pieces of 7 rows, cut anywhere
    in a column at an offset, give every row the hash it has at once."""
    from lakestats.arrow_sketch import arrays

    keys = [
        pa.array([None if i % 11 == 0 else f"k{i * 7919 % 1000}" for i in range(300)]).slice(3),
        pa.array(np.arange(300) % 13, pa.int32()).slice(3),
    ]
    at_once = arrays.key_hashes(keys)
    monkeypatch.setattr(arrays, "_HASH_ROWS", 7)
    assert arrays.key_hashes(keys).tolist() == at_once.tolist()
    assert len(set(at_once.tolist())) > 200


def test_distinct_keys_spread_over_the_shares() -> None:
    from lakestats.arrow_sketch.arrays import key_hashes as partition_hashes

    for keys in (
        [pa.array([f"customer-{i:09d}" for i in range(70_000)])],
        [pa.array(np.arange(70_000) * 1024)],  # multiples of a power of two
        [pa.array(np.arange(70_000) % 3), pa.array([f"u{i}" for i in range(70_000)])],
    ):
        counts = np.bincount(partition_hashes(keys) % np.uint64(7), minlength=7)
        assert counts.min() > 0.9 * 10_000 and counts.max() < 1.1 * 10_000, counts


def test_a_merge_that_cannot_spill_is_left_to_the_sql_job(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakestats.arrow_sketch.file_sketch import Declined

    rows = _bucket(tmp_path, runs=2, rows=300, seed=6)
    paths = sorted({r[0] for r in rows})
    group = _bucket_group(paths)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "no-such-folder"))
    with pytest.raises(Declined, match="no room for the key merge's spill"):
        dead_rows(group, shares=2)
    # merged without a spill, or with one where it can: the same rows
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    at_once = dead_rows(group, shares=1)[paths[0]].to_positions().tolist()
    assert at_once and at_once == dead_rows(group, shares=3)[paths[0]].to_positions().tolist()


@pytest.mark.spark
def test_spark_workers_spill_a_big_bucket_and_find_the_same_rows(spark: Any, tmp_path: Any) -> None:
    """The key-merge job in Spark's own Python workers, with a share budget that makes a
    600-row bucket spill: the rules' dead rows, and no spill left in Spark's folder."""
    import contextlib
    import os as worker_os
    from pathlib import Path
    from types import SimpleNamespace

    from lakestats.arrow_sketch.engine import run_key_winners
    from lakestats.arrow_sketch.file_sketch import reading_job

    rows = _bucket(tmp_path, runs=4, rows=600, seed=11)
    paths = sorted({r[0] for r in rows} | {str(tmp_path / "run-4.parquet")})
    group = _bucket_group(paths)
    alive = reference(
        [(r[2], r[3], r[4]) for r in rows],
        first_row=False,
        ignore_delete=False,
        remove_record_on_delete=False,
    )
    want = {
        path: sorted(r[1] for i, r in enumerate(rows) if r[0] == path and i not in alive)
        for path in group.requested
    }
    sc = spark.sparkContext

    def monitor() -> Any:
        return contextlib.nullcontext(SimpleNamespace(reason=None))

    spilled = run_key_winners(sc, [group], monitor, share_bytes=20_000)  # ~10 shares
    whole = run_key_winners(sc, [group], monitor)

    assert not isinstance(spilled, str) and not isinstance(whole, str)
    assert {p: d.to_positions().tolist() for p, d in spilled.items()} == want
    assert {p: d.to_positions().tolist() for p, d in whole.items()} == want
    folders = sc.parallelize([0], 1).map(lambda _: worker_os.environ["SPARK_LOCAL_DIRS"]).collect()
    for folder in folders[0].split(","):
        assert not list(Path(folder).glob("lakestats-key-merge-*"))
    # the budget made it spill (the shares the task computes from the same footers)
    job = reading_job(list(dict.fromkeys([*group.keys, *group.order, group.kind])), "field_id")
    assert merge_shares([read_footer(p, job) for p in paths], 20_000) > 1


def test_a_bucket_of_more_runs_than_open_files_allowed_merges(tmp_path: Any) -> None:
    """One input is open at a time: 60 sorted runs merge under a limit of 40 descriptors
    (in a child process: the limit is the process's)."""
    import subprocess
    import sys

    rows = _bucket(tmp_path, runs=60, rows=40, seed=13)
    paths = sorted({r[0] for r in rows})
    alive = reference(
        [(r[2], r[3], r[4]) for r in rows],
        first_row=False,
        ignore_delete=False,
        remove_record_on_delete=False,
    )
    want = sum(1 for i, r in enumerate(rows) if r[0] == paths[0] and i not in alive)
    child = f"""
import resource, sys
sys.path[:0] = {sys.path!r}
from tests.core.sketches.test_key_winners import _bucket_group
from lakestats.arrow_sketch.key_winners import dead_rows
resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
group = _bucket_group({paths!r})
print(len(dead_rows(group, shares=3)[{paths[0]!r}]), len(dead_rows(group)[{paths[0]!r}]))
"""
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(want), str(want)]
