"""A file sketched a batch at a time (``arrow_sketch/column_stream.py``) gives the sketches of
the whole file at once, on real Parquet files of several row groups: theta sketches, value
samples and key sketches byte for byte, counts, bounds and lengths exactly, KLL quantiles
and frequent-item counts within their published bounds of the exact values (pyarrow)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from datasketches import (
    PyDoublesSerDe,
    frequent_items_sketch,
    frequent_strings_sketch,
    kll_doubles_sketch,
)
from structlog.testing import capture_logs

from lakestats.arrow_sketch import column_stream
from lakestats.arrow_sketch.column_stream import (
    MAX_BATCH_ROWS,
    MIN_BATCH_ROWS,
    batch_rows_for,
)
from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.engine import arrow_job
from lakestats.arrow_sketch.equality import EqualityTask, equality_partition
from lakestats.arrow_sketch.file_sketch import ArrowColumn, ArrowJob, sketch_file
from lakestats.formats.iceberg.opening import open_iceberg_location
from lakestats.model import (
    KEY_SKETCH_ID,
    RETRACTED_KEY_SKETCH_ID,
    Column,
    KeySketch,
    SketchSettings,
)
from lakestats.pipeline import sketch_files
from lakestats.sketches.spec import type_spec
from lakestats.testing import IcebergWarehouse

ROWS = 40_000
COLUMNS = [
    (1, "id", "long"),
    (2, "qty", "int"),
    (3, "name", "string"),
    (4, "price", "double"),
    (5, "day", "date"),
    (6, "at", "timestamptz"),
    (7, "flag", "boolean"),
    (8, "blob", "binary"),
    (9, "kind", "int"),
]


def _table(rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    # hot values, a long tail, nulls, NaN, -0.0 and 0.0: what batches must combine exactly
    qty = np.where(rng.random(rows) < 0.3, 7, rng.integers(0, 5_000, rows)).astype(np.int32)
    price = np.abs(rng.normal(100, 30, rows))  # so that -0.0 and 0.0 are the smallest
    price[rng.random(rows) < 0.01] = np.nan
    price[5] = -0.0
    price[rows - 3] = 0.0
    names = [f"n{int(v)}" for v in rng.zipf(1.3, rows) % 20_000]
    null = rng.random(rows) < 0.05
    return pa.table(
        {
            "id": pa.array(ids),
            "qty": pa.array(qty, mask=null),
            "name": pa.array(names, mask=rng.random(rows) < 0.05),
            "price": pa.array(price),
            "day": pa.array(
                (np.datetime64("2020-01-01") + (ids % 900)).astype("datetime64[D]"), pa.date32()
            ),
            "at": pa.array(
                (np.datetime64("2024-01-01T00:00:00", "us") + ids * 1_000_003).astype(
                    "datetime64[us]"
                ),
                pa.timestamp("us", tz="UTC"),
            ),
            "flag": pa.array(ids % 3 == 0, mask=null),
            "blob": pa.array([bytes([i % 251, (i * 7) % 256]) * (1 + i % 5) for i in ids]),
            "kind": pa.array((ids % 4).astype(np.int32)),
        }
    )


def _job(settings: SketchSettings, *, key: KeySketch | None = None) -> ArrowJob:
    columns = [(Column(fid, name, t), type_spec(t), True) for fid, name, t in COLUMNS]
    job = arrow_job([(c, s, b) for c, s, b in columns if s is not None], settings, "name", key)
    assert job is not None
    return job


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    path = tmp_path_factory.mktemp("stream") / "f.parquet"
    table = _table(ROWS)
    pq.write_table(table, path, row_group_size=6_000)  # 7 row groups
    return str(path), table


SETTINGS = [
    SketchSettings(kll_k=200, theta_lg_k=6, frequent_items=16, value_samples=True),
    SketchSettings(kll_k=1481, theta_lg_k=12, frequent_items=256, value_samples=True),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=["small-sketches", "defaults"])
@pytest.mark.parametrize("batch_rows", [1_000, 6_000, 9_999])
def test_batches_give_the_whole_files_sketches(
    written: tuple[str, pa.Table], settings: SketchSettings, batch_rows: int
) -> None:
    path, table = written
    whole_job = replace(_job(settings), batch_rows=10 * ROWS)
    whole, whole_rows = sketch_file(path, whole_job, None)
    batched, rows = sketch_file(path, replace(whole_job, batch_rows=batch_rows), None)
    assert whole is not None and batched is not None
    assert rows == whole_rows == ROWS
    for fid, name, type_str in COLUMNS:
        one, many = whole[fid], batched[fid]
        assert many.theta == one.theta, name
        assert many.value_sample == one.value_sample, name
        for field in ("null_count", "nan_count", "min", "max", "len_sum", "len_max"):
            assert getattr(many, field) == getattr(one, field), (name, field)
        assert (many.true_count, many.false_count) == (one.true_count, one.false_count)
        if type_str in ("long", "int", "double", "date"):
            _assert_kll(many.kll, table.column(name), settings.kll_k, name)
        if type_str in ("long", "int", "double", "date", "string"):
            _assert_frequent(many.frequent_items, table.column(name), name)
        if type_str in ("boolean", "binary"):
            assert many.frequent_items is None, name
    assert batched[4].min == -0.0 and str(batched[4].min) == "-0.0"  # -0.0 before 0.0
    assert batched[4].nan_count == int(pc.sum(pc.is_nan(table.column("price"))).as_py())


def _doubles(column: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_date(column.type):
        column = column.cast(pa.int32())
    values = column.drop_null().cast(pa.float64()).to_numpy()
    return np.asarray(values[~np.isnan(values)])


def _assert_kll(blob: bytes | None, column: pa.ChunkedArray, k: int, name: str) -> None:
    """Every quantile's rank within KLL's published normalized rank error (at 99 %) of the
    exact ranks."""
    assert blob is not None
    sketch = kll_doubles_sketch.deserialize(blob)
    values = np.sort(_doubles(column))
    assert sketch.n == len(values), name
    error = kll_doubles_sketch.get_normalized_rank_error(k, False)
    for q in (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
        value = sketch.get_quantile(q)
        # a value held by many rows spans ranks: q must fall inside its span, give or take
        below = np.searchsorted(values, value, side="left") / len(values)
        through = np.searchsorted(values, value, side="right") / len(values)
        slack = error + 1 / len(values)
        assert below - slack <= q <= through + slack, (name, q, below, through)


def _assert_frequent(blob: bytes | None, column: pa.ChunkedArray, name: str) -> None:
    """Each value's exact count lies within the sketch's lower and upper bounds, listed or
    not (an unlisted value's upper bound is the offset); strings as themselves."""
    assert blob is not None
    if pa.types.is_string(column.type):
        sketch = frequent_strings_sketch.deserialize(blob)
        values, counts = np.unique(np.array(column.drop_null().to_pylist()), return_counts=True)
    else:
        sketch = frequent_items_sketch.deserialize(blob, PyDoublesSerDe())
        values, counts = np.unique(_doubles(column), return_counts=True)
    assert sketch.total_weight == counts.sum(), name
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        assert sketch.get_lower_bound(value) <= count <= sketch.get_upper_bound(value), (
            name,
            value,
        )
    if counts.max() > 0.1 * counts.sum():  # a hot value (qty's 7) is listed
        hot = values[np.argmax(counts)]
        assert sketch.get_lower_bound(str(hot) if values.dtype.kind == "U" else float(hot)) > 0


def test_dead_rows_across_batches_are_left_out(tmp_path: Path) -> None:
    """Positions deleted in every batch, on batch edges and past the end: the batched
    sketches are the sketches of the file without those rows, read whole."""
    table = _table(ROWS, seed=11)
    rng = np.random.default_rng(3)
    dead = np.concatenate(
        [rng.choice(ROWS, 3_000, replace=False), [0, 999, 1_000, ROWS - 1, ROWS + 5, ROWS + 9]]
    )
    full, pruned = tmp_path / "full.parquet", tmp_path / "pruned.parquet"
    pq.write_table(table, full, row_group_size=5_000)
    keep = np.ones(ROWS, dtype=bool)
    keep[dead[dead < ROWS]] = False
    pq.write_table(table.filter(pa.array(keep)), pruned)
    job = _job(SETTINGS[0])

    expected, expected_rows = sketch_file(str(pruned), replace(job, batch_rows=10 * ROWS), None)
    unique = np.unique(dead)
    bitmap = DeadRows.of(dead)  # 3,005 of 40,010 rows: more than one in 64, a bitmap
    positions = DeadRows(unique, None, int(unique[-1]) + 1, len(unique))  # the other form
    assert bitmap.bits is not None

    for form in (positions, bitmap):
        batched, rows = sketch_file(str(full), replace(job, batch_rows=1_000), form)
        assert rows == expected_rows == int(keep.sum())
        assert batched is not None and expected is not None
        for fid, name, _ in COLUMNS:
            assert batched[fid].theta == expected[fid].theta, name
            assert batched[fid].value_sample == expected[fid].value_sample, name
            assert (batched[fid].min, batched[fid].max) == (expected[fid].min, expected[fid].max)
            assert batched[fid].null_count == expected[fid].null_count, name
    everything = DeadRows.of(np.arange(ROWS + 10))
    assert everything.bits is not None
    assert sketch_file(str(full), replace(job, batch_rows=1_000), everything) == (None, 0)


def test_key_sketches_in_batches_are_the_whole_files(written: tuple[str, pa.Table]) -> None:
    path, _ = written
    key = KeySketch(
        field_ids=(1, 3),
        row_kind_column="kind",
        row_kind_field_id=9,
        non_add_kinds=(2, 3),
        retract_kinds=(3,),
    )
    job = _job(SketchSettings(kll_k=200, theta_lg_k=6), key=key)
    whole, _ = sketch_file(path, replace(job, batch_rows=10 * ROWS), None)
    batched, _ = sketch_file(path, replace(job, batch_rows=777), None)
    assert whole is not None and batched is not None
    for sketch_id in (KEY_SKETCH_ID, RETRACTED_KEY_SKETCH_ID):
        assert batched[sketch_id].theta == whole[sketch_id].theta


def test_a_batch_holds_128_ki_rows_or_32_mib_of_the_planned_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = 20_000
    rng = np.random.default_rng(5)
    text = [rng.bytes(250).hex() for _ in range(rows)]  # 500 bytes, all distinct
    table = pa.table({"a": pa.array(np.arange(rows, dtype=np.int32)), "s": pa.array(text)})
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path, compression="zstd", use_dictionary=False)
    parquet = pq.ParquetFile(path)
    assert batch_rows_for(parquet, [0]) == MAX_BATCH_ROWS  # 4 bytes a row: the ceiling
    # ~504 bytes a row uncompressed (the footer's size, not the compressed one)
    assert 60_000 < batch_rows_for(parquet, [0, 1]) < 70_000
    assert 60_000 < batch_rows_for(parquet, [1]) < 70_000
    monkeypatch.setattr(column_stream, "BATCH_BYTES", 1 << 20)
    assert batch_rows_for(parquet, [0, 1]) == MIN_BATCH_ROWS  # the floor
    empty = tmp_path / "empty.parquet"
    pq.write_table(table.slice(0, 0), empty)
    assert batch_rows_for(pq.ParquetFile(empty), [0]) == MAX_BATCH_ROWS
    assert sketch_file(str(empty), _job(SETTINGS[0]), None) == (None, 0)


def test_columns_missing_from_the_file_are_null_rows_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"unrelated": pa.array(range(2_500))}), path)
    sketches, rows = sketch_file(str(path), replace(_job(SETTINGS[0]), batch_rows=1_000), None)
    assert rows == 2_500 and sketches is not None
    assert all(sketches[fid].null_count == 2_500 for fid, _, _ in COLUMNS)
    assert sketches[1].min is None and sketches[3].len_max is None


def test_date_and_timestamp_bounds_survive_the_batches(written: tuple[str, pa.Table]) -> None:
    path, table = written
    batched, _ = sketch_file(path, replace(_job(SETTINGS[0]), batch_rows=1_000), None)
    assert batched is not None
    assert batched[5].min == dt.date(2020, 1, 1)
    assert batched[5].max == pc.max(table.column("day")).as_py()
    assert batched[6].max == pc.max(table.column("at")).as_py()


def test_equality_deletes_find_their_rows_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data file's equality columns are read in batches (here of 1,000 rows, across 7
    row groups): the dead positions are the rows whose (qty, name) a delete file holds, as
    pyarrow finds them in the whole file."""
    monkeypatch.setattr(column_stream, "MAX_BATCH_ROWS", 1_000)
    monkeypatch.setattr(column_stream, "MIN_BATCH_ROWS", 1_000)
    table = _table(ROWS, seed=13)
    data, deletes = tmp_path / "data.parquet", tmp_path / "deletes.parquet"
    pq.write_table(table, data, row_group_size=6_000)
    keys = table.select(["qty", "name"]).slice(100, 400)  # NULLs among them match NULLs
    pq.write_table(keys, deletes)
    by_name = {name: (fid, t) for fid, name, t in COLUMNS}
    columns = tuple(
        ArrowColumn(by_name[n][0], (n,), type_spec(by_name[n][1]), False)  # type: ignore[arg-type]
        for n in ("qty", "name")
    )
    task = EqualityTask(str(data), ((columns, (str(deletes),)),))

    ((path, status, dead),) = list(equality_partition("name", iter([task])))

    wanted = {(r["qty"], r["name"]) for r in keys.to_pylist()}
    expected = [
        i
        for i, r in enumerate(table.select(["qty", "name"]).to_pylist())
        if (r["qty"], r["name"]) in wanted
    ]
    assert (path, status) == (str(data), "ok")
    assert isinstance(dead, DeadRows)
    assert dead.to_positions().tolist() == expected and len(expected) > 400


@pytest.mark.spark
def test_a_file_of_several_batches_gets_the_sql_jobs_statistics(spark: Any, tmp_path: Path) -> None:
    """Through the real path — ``sketch_files``, Spark's Python workers, the default batch
    size — a pyiceberg file of 300,000 rows (three batches) gets from the Arrow engine what
    Spark's SQL job computes: the same theta and value-sample bytes, counts and bounds, KLL
    quantiles within the rank bound of each other, frequent items bounding the exact counts."""
    rows = 300_000
    assert rows > 2 * column_stream.MAX_BATCH_ROWS
    warehouse = IcebergWarehouse(tmp_path / "wh")
    table = _table(rows, seed=21).select(["id", "qty", "name", "price", "day"])
    warehouse.create_table("t", table.schema)
    warehouse.append("t", table)
    opened = open_iceberg_location(warehouse.location("t"))
    schema = opened.schema()
    paths = [f.path for c in opened.commits_since(None) for f in c.added_files]
    settings = SketchSettings(value_samples=True, frequent_items=256)

    sql = sketch_files(spark, paths, schema, settings, engine="sql")
    with capture_logs() as logs:
        arrow = sketch_files(spark, paths, schema, settings, engine="auto")

    assert [e for e in logs if e["event"] == "arrow_engine_sketched"]
    assert not [e for e in logs if e["event"] == "arrow_engine_declined"]
    (path,) = paths
    for column in schema.columns:
        want, got = sql[path][column.field_id], arrow[path][column.field_id]
        label = column.name
        assert got.theta == want.theta, label
        assert got.value_sample == want.value_sample, label
        for field in ("null_count", "nan_count", "len_sum", "len_max"):
            assert getattr(got, field) == getattr(want, field), (label, field)
        assert repr((got.min, got.max)) == repr((want.min, want.max)), label
        if want.kll is not None:
            assert got.kll is not None
            _assert_kll(got.kll, table.column(label), settings.kll_k, label)
            _assert_kll(want.kll, table.column(label), settings.kll_k, label)
            _assert_frequent(got.frequent_items, table.column(label), label)
        if column.type == "string":  # counted by both engines, each within its bounds
            _assert_frequent(got.frequent_items, table.column(label), label)
            _assert_frequent(want.frequent_items, table.column(label), label)
