"""Equality deletes in the Arrow engine's tasks (``arrow_sketch/equality.py``): the lookup
(``KeyLookup``) answers what ``pc.is_in`` answers on the rows' key bytes (``key_values``:
the SQL job's null-safe equality) for rows of typed columns, NULL parts, repeats, tags and
forced hash collisions included; a task's delete sets kill each data file's rows by its own
delete files only, at once and spilled in shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakestats.arrow_sketch import equality
from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.equality import EqualityTask, KeyLookup, equality_partition
from lakestats.arrow_sketch.file_sketch import (
    ArrowColumn,
    UnreadableFileError,
    read_footer,
    reading_job,
)
from lakestats.arrow_sketch.key_sketch import key_values
from lakestats.arrow_sketch.spill import MAX_SHARES
from lakestats.sketches.spec import type_spec

TYPES = ("long", "string")


def _columns(ids: list[int | None], names: list[str | None]) -> list[pa.Array]:
    return [pa.array(ids, pa.int64()), pa.array(names, pa.string())]


def _bytes(columns: list[pa.Array]) -> pa.Array:
    return key_values(list(zip(columns, TYPES, strict=True)))


def test_probes_answer_what_is_in_answers_on_the_key_bytes() -> None:
    rng = np.random.default_rng(2)
    deleted_ids = rng.integers(0, 500, 3_000).tolist()  # repeats: a key deleted twice
    deleted_names = [None if i % 7 == 0 else f"n{i % 11}" for i in deleted_ids]
    deletes = _columns(deleted_ids, deleted_names)
    lookup = KeyLookup(deletes, TYPES)
    assert len(lookup) == 3_000

    for seed in range(5):
        probe = np.random.default_rng(seed)
        ids = [None if x < 5 else int(x) for x in probe.integers(0, 700, 10_000)]
        names = [None if (i or 0) % 7 == 0 else f"n{(i or 0) % 11}" for i in ids]
        values = _columns(ids, names)
        want = pc.is_in(_bytes(values), value_set=_bytes(deletes)).to_numpy(zero_copy_only=False)
        got = lookup.contains(values)
        assert got.tolist() == want.tolist()
        assert 0 < got.sum() < len(ids)
        # at an offset, as a batch of a longer column is
        assert lookup.contains([c.slice(17) for c in values]).tolist() == want[17:].tolist()


def test_equal_hashes_of_different_keys_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # every row hashes alike: each probe walks the whole run, comparing bytes
    monkeypatch.setattr(
        equality, "key_hashes", lambda columns: np.zeros(len(columns[0]), np.uint64)
    )
    lookup = KeyLookup(_columns([1, 2, 3, 3, None], ["a", "b", None, None, "z"]), TYPES)
    values = _columns([3, 2, 2, None, 9, 1], [None, "b", "c", "z", "a", "a"])

    assert lookup.contains(values).tolist() == [True, True, False, True, False, True]


def test_nothing_is_found_in_an_empty_set_or_for_no_rows() -> None:
    empty = KeyLookup(_columns([], []), TYPES)
    assert empty.contains(_columns([1], ["a"])).tolist() == [False]
    one = KeyLookup(_columns([1], ["a"]), TYPES)
    assert one.contains([c.slice(0, 0) for c in _columns([2], ["b"])]).tolist() == []


def test_a_row_matches_only_rows_its_input_allows() -> None:
    """Tagged rows (the delete file each comes from): a probed row of input ``i`` matches
    only rows whose tag ``allowed[i]`` holds, whichever of a key's rows comes first."""
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 60, 900).tolist()
    names = [None if i % 5 == 0 else f"n{i % 3}" for i in ids]
    tags = rng.integers(0, 4, 900).astype(np.int32)
    allowed = rng.random((3, 4)) < 0.5
    lookup = KeyLookup(_columns(ids, names), TYPES, tags)
    tagged = {}
    for key, tag in zip(zip(ids, names, strict=True), tags.tolist(), strict=True):
        tagged.setdefault(key, set()).add(tag)

    probe_ids = rng.integers(0, 80, 2_000).tolist()
    probe_names = [None if i % 5 == 0 else f"n{i % 3}" for i in probe_ids]
    inputs = rng.integers(0, 3, 2_000)
    got = lookup.contains(_columns(probe_ids, probe_names), allowed, inputs)

    want = [
        any(allowed[i, t] for t in tagged.get((k, n), ()))
        for k, n, i in zip(probe_ids, probe_names, inputs.tolist(), strict=True)
    ]
    assert got.tolist() == want
    assert 0 < sum(want) < sum(1 for k in zip(probe_ids, probe_names, strict=True) if k in tagged)
    # every tag allowed: any equal row matches, by the hash-table path too (a small set)
    everything = np.ones((3, 4), dtype=bool)
    anywhere = [(k, n) in tagged for k, n in zip(probe_ids, probe_names, strict=True)]
    assert lookup.contains(_columns(probe_ids, probe_names), everything, inputs).tolist() == (
        anywhere
    )


# -- a task's delete sets, at once and in shares ----------------------------------------------


def _column(field_id: int, name: str, type_str: str) -> ArrowColumn:
    spec = type_spec(type_str)
    assert spec is not None
    return ArrowColumn(field_id, (name,), spec, False)


ID_NAME = (_column(1, "id", "long"), _column(2, "name", "string"))
NAME = (_column(2, "name", "string"),)


def _write(path: Path, ids: list[int], names: list[str | None]) -> str:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
            pa.field("name", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
        ]
    )
    table = pa.Table.from_arrays([pa.array(ids, pa.int64()), pa.array(names)], schema=schema)
    pq.write_table(table, path, row_group_size=97)  # several batches' worth of row groups
    return str(path)


def _keys(rng: np.random.Generator, rows: int) -> tuple[list[int], list[str | None]]:
    ids = rng.integers(0, 150, rows).tolist()  # few keys: each is in several files
    return ids, [None if i % 9 == 0 else f"c{i % 4}" for i in ids]


@pytest.fixture
def upserts(tmp_path: Path) -> tuple[list[EqualityTask], dict[str, list[int]]]:
    """Flink's upserts: data files A, B, C of successive checkpoints and the equality
    delete files written after each (d1 applies to A, d2 to A and B, d3 to all three), and
    a delete file on ``name`` alone for C. The tasks, and each file's dead rows by hand."""
    rng = np.random.default_rng(8)
    data = {name: _keys(rng, 400) for name in "ABC"}
    paths = {name: _write(tmp_path / f"{name}.parquet", *keys) for name, keys in data.items()}
    deletes = {name: _keys(rng, 60) for name in ("d1", "d2", "d3")}
    on = {name: _write(tmp_path / f"{name}.parquet", *k) for name, k in deletes.items()}
    on["d4"] = _write(tmp_path / "d4.parquet", [0, 0], ["c1", None])
    applies = {"A": ("d1", "d2", "d3"), "B": ("d2", "d3"), "C": ("d3",)}
    tasks = []
    for name, path in paths.items():
        groups: list[tuple[tuple[ArrowColumn, ...], tuple[str, ...]]] = [
            (ID_NAME, tuple(on[d] for d in applies[name]))
        ]
        if name == "C":
            groups.append((NAME, (on["d4"],)))
        tasks.append(EqualityTask(path, tuple(groups)))
    want = {}
    for name, (ids, names) in data.items():
        killing = {k for d in applies[name] for k in zip(*deletes[d], strict=True)}
        gone_names = {"c1", None} if name == "C" else set()
        want[paths[name]] = [
            i
            for i, key in enumerate(zip(ids, names, strict=True))
            if key in killing or key[1] in gone_names
        ]
    # d1's keys alone would kill rows of C: the applying files matter
    d1 = set(zip(*deletes["d1"], strict=True))
    assert any(k in d1 for k in zip(*data["C"], strict=True))
    return tasks, want


def _found(tasks: list[EqualityTask], share_bytes: int) -> dict[str, list[int]]:
    out = {}
    for path, status, dead in equality_partition("field_id", iter(tasks), share_bytes):
        assert status == "ok", dead
        assert isinstance(dead, DeadRows)
        out[path] = dead.to_positions().tolist()
    return out


def test_each_data_file_loses_the_rows_of_its_own_delete_files(
    upserts: tuple[list[EqualityTask], dict[str, list[int]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At once and in 2, a few and 256 shares (the budget decides): each file loses
    exactly the rows of the delete files that apply to it; the spill is gone after."""
    tasks, want = upserts
    assert all(want.values())
    spill = tmp_path / "spark-local"
    spill.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(spill))
    job = reading_job(ID_NAME, "field_id")
    footers = [read_footer(p, job) for p in tasks[0].groups[0][1]]
    for budget in (1 << 40, 8_000, 2_000, 1):
        shares = equality.lookup_shares(footers, budget)
        assert (shares == 1) == (budget == 1 << 40)  # the budget decides: at once or shares
        assert _found(tasks, budget) == want, (budget, shares)
        assert not list(spill.iterdir())
    assert equality.lookup_shares(footers, 1 << 40) == 1
    assert equality.lookup_shares(footers, 1) == MAX_SHARES


def test_shares_tell_colliding_keys_apart(
    upserts: tuple[list[EqualityTask], dict[str, list[int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every key hashes alike: one share holds them all, each probe walks the whole run."""
    from lakestats.arrow_sketch import spill

    def same(columns: list[pa.Array]) -> np.ndarray:
        return np.full(len(columns[0]), 7, np.uint64)

    monkeypatch.setattr(equality, "key_hashes", same)
    monkeypatch.setattr(spill, "key_hashes", same)
    tasks, want = upserts
    assert _found(tasks, 1) == want
    assert _found(tasks, 1 << 40) == want


def test_a_lookup_that_cannot_spill_is_left_to_the_sql_job(
    upserts: tuple[list[EqualityTask], dict[str, list[int]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks, want = upserts
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "no-such-folder"))
    results = list(equality_partition("field_id", iter(tasks), 1))
    assert [(p, s) for p, s, _ in results] == [(t.path, "declined") for t in tasks]
    assert "no room for the equality lookup's spill" in str(results[0][2])
    assert _found(tasks, 1 << 40) == want  # no spill needed: found in memory


def test_an_unreadable_data_file_leaves_no_spill_behind(
    upserts: tuple[list[EqualityTask], dict[str, list[int]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks, _ = upserts
    Path(tasks[1].path).unlink()
    spill = tmp_path / "spark-local"
    spill.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(spill))
    with pytest.raises(UnreadableFileError, match=r"B\.parquet"):
        list(equality_partition("field_id", iter(tasks), 1))
    assert not list(spill.iterdir())


@pytest.mark.spark
def test_spark_workers_look_up_a_big_set_in_shares(
    spark: Any, upserts: tuple[list[EqualityTask], dict[str, list[int]]]
) -> None:
    """The equality job in Spark's own Python workers, with a budget that makes the set
    spill: the same dead rows as at once, and no spill left in Spark's folder."""
    import contextlib
    import os as worker_os
    from types import SimpleNamespace

    from lakestats.arrow_sketch.engine import run_equality

    tasks, want = upserts
    sc = spark.sparkContext

    def monitor() -> Any:
        return contextlib.nullcontext(SimpleNamespace(reason=None))

    for budget in (2_000, 1 << 40):
        found = run_equality(sc, tasks, "field_id", monitor, share_bytes=budget)
        assert not isinstance(found, str)
        assert {p: d.to_positions().tolist() for p, d in found.items()} == want
    folders = sc.parallelize([0], 1).map(lambda _: worker_os.environ["SPARK_LOCAL_DIRS"]).collect()
    for folder in folders[0].split(","):
        assert not list(Path(folder).glob("lakestats-equality-lookup-*"))
