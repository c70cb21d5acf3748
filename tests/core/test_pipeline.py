"""The sketch pipeline against exact statistics computed independently with pyarrow."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakestats.exceptions import ConfigError, DataFileError, SparkUnavailableError
from lakestats.model import Column, ColumnSketch, SketchSettings, TableSchema
from lakestats.pipeline import JOB_GROUP, JobLimits, JobProgress, sketch_files
from lakestats.sketches.merge import (
    kll_count,
    kll_normalized_rank_error,
    kll_quantiles,
    merge_kll,
    theta_bounds,
    theta_estimate,
    theta_relative_standard_error,
    union_theta,
)

pytestmark = pytest.mark.spark

SETTINGS = SketchSettings()
_UNICODE_WORDS = ["straße", "日本語", "🦆🦆", "naïve", "ελληνικά", "ascii", "", "x" * 3000]

# (name, field id, Iceberg type, arrow type)
COLUMNS: list[tuple[str, int, str, pa.DataType]] = [
    ("uniform", 1, "long", pa.int64()),
    ("zipf", 2, "int", pa.int32()),
    ("dups", 3, "long", pa.int64()),
    ("dbl", 4, "double", pa.float64()),
    ("flt", 5, "float", pa.float32()),
    ("txt", 6, "string", pa.string()),
    ("dec", 7, "decimal(12, 3)", pa.decimal128(12, 3)),
    ("day", 8, "date", pa.date32()),
    ("ts", 9, "timestamp", pa.timestamp("us")),
    ("tstz", 10, "timestamptz", pa.timestamp("us", tz="UTC")),
    ("flag", 11, "boolean", pa.bool_()),
    ("blob", 12, "binary", pa.binary()),
    ("nothing", 13, "long", pa.int64()),
]
SCHEMA = TableSchema(1, tuple(Column(fid, name, t) for name, fid, t, _ in COLUMNS))


def _field(name: str, field_id: int, arrow_type: pa.DataType) -> pa.Field:
    return pa.field(name, arrow_type, metadata={b"PARQUET:field_id": str(field_id).encode()})


def _with_nulls(values: np.ndarray, rng: np.random.Generator, rate: float) -> list[Any]:
    mask = rng.random(len(values)) < rate
    return [None if m else v for v, m in zip(values.tolist(), mask, strict=True)]


def _make_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    dbl = rng.normal(100.0, 30.0, n)
    special = rng.random(n)
    dbl[special < 0.01] = np.nan
    dbl[(special >= 0.01) & (special < 0.015)] = -0.0
    dbl[(special >= 0.015) & (special < 0.02)] = 0.0
    dbl[(special >= 0.02) & (special < 0.021)] = np.inf
    dbl[(special >= 0.021) & (special < 0.022)] = -np.inf
    flt = rng.uniform(-1, 1, n).astype(np.float32)
    flt[rng.random(n) < 0.02] = np.nan
    words = rng.zipf(1.5, n) % len(_UNICODE_WORDS)
    txt = [_UNICODE_WORDS[w] + ("" if w == 6 else str(i % 997)) for i, w in enumerate(words)]
    txt = [t if i % 50 else "" for i, t in enumerate(txt)]
    days = rng.integers(-800_000, 30_000, n)  # back to year ~-220: proleptic calendar
    micros = rng.integers(-(2**55), 2**55, n)
    blobs = [rng.bytes(int(k)) for k in rng.integers(0, 24, n)]
    columns = {
        "uniform": _with_nulls(rng.integers(0, 10**12, n), rng, 0.0),
        "zipf": _with_nulls(np.minimum(rng.zipf(1.2, n), 2**31 - 1), rng, 0.03),
        "dups": _with_nulls(rng.integers(0, 50, n) * 1_000_003, rng, 0.1),
        "dbl": _with_nulls(dbl, rng, 0.05),
        "flt": _with_nulls(flt, rng, 0.05),
        "txt": _with_nulls(np.array(txt, dtype=object), rng, 0.05),
        "dec": [
            None if v is None else Decimal(v).scaleb(-3)
            for v in _with_nulls(rng.integers(-(10**11), 10**11, n), rng, 0.05)
        ],
        "day": [
            None if d is None else dt.date(1970, 1, 1) + dt.timedelta(days=d)
            for d in _with_nulls(np.clip(days, -719_162, 2_932_896), rng, 0.05)
        ],
        "ts": _with_nulls(micros, rng, 0.05),
        "tstz": _with_nulls(micros // 7, rng, 0.05),
        "flag": _with_nulls(rng.random(n) < 0.3, rng, 0.1),
        "blob": _with_nulls(np.array(blobs, dtype=object), rng, 0.05),
        "nothing": [None] * n,
    }
    arrays = [pa.array(columns[name], type=arrow_type) for name, _, _, arrow_type in COLUMNS]
    schema = pa.schema([_field(name, fid, arrow_type) for name, fid, _, arrow_type in COLUMNS])
    return pa.Table.from_arrays(arrays, schema=schema)


@pytest.fixture(scope="module")
def data(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("pipeline")
    tables = {"a": _make_table(60_000, 1), "b": _make_table(40_000, 2)}
    tables["empty"] = tables["a"].slice(0, 0)
    paths = {}
    for key, table in tables.items():
        local = root / f"part {key}.parquet"  # a space: Spark reports it URL-encoded
        pq.write_table(table, local, row_group_size=25_000)
        paths[key] = f"file://{local}" if key != "b" else str(local)
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(JOB_GROUP))
    result = sketch_files(spark, list(paths.values()), SCHEMA, SETTINGS)
    jobs = set(tracker.getJobIdsForGroup(JOB_GROUP)) - before
    return {"tables": tables, "paths": paths, "result": result, "jobs": jobs}


# -- exact statistics, computed with pyarrow ---------------------------------------------


def _kll_values(type_str: str, arr: pa.ChunkedArray) -> np.ndarray:
    """The column in KLL's unit (days, micros, plain numbers), nulls and NaN dropped."""
    arr = arr.drop_null()
    if type_str == "date":
        return np.asarray(arr.cast(pa.int32()).to_numpy(), dtype=float)
    if type_str.startswith("timestamp"):
        return np.asarray(arr.cast(pa.int64()).to_numpy(), dtype=float)
    if type_str.startswith("decimal"):
        return np.asarray(arr.cast(pa.float64()).to_numpy(), dtype=float)
    values = np.asarray(arr.to_numpy(), dtype=float)
    return values[~np.isnan(values)]


def _exact_ndv(type_str: str, arr: pa.ChunkedArray) -> int:
    """Distinct single-value serializations: raw float bits (NaN and -0.0 count), no
    empty strings/binaries (Iceberg does not hash empty buffers)."""
    arr = arr.combine_chunks().drop_null()
    if type_str == "double":
        arr = arr.view(pa.int64())
    elif type_str == "float":
        arr = arr.view(pa.int32())
    elif type_str in ("string", "binary"):
        arr = arr.filter(pc.greater(pc.binary_length(arr), 0))
    return int(pc.count_distinct(arr).as_py())


def _exact_bounds(type_str: str, arr: pa.ChunkedArray) -> tuple[Any, Any]:
    if type_str in ("float", "double"):
        arr = arr.filter(pc.invert(pc.is_nan(arr)))
    result = pc.min_max(arr)
    lo, hi = result["min"].as_py(), result["max"].as_py()
    if type_str == "timestamptz" and lo is not None:
        lo, hi = lo.astimezone(dt.UTC), hi.astimezone(dt.UTC)
    return lo, hi


def _check_quantiles(kll: bytes, exact: np.ndarray, label: str) -> None:
    eps = kll_normalized_rank_error(SETTINGS.kll_k, pmf=True)  # 1.65 % at k = 200
    ordered = np.sort(exact)
    assert kll_count(kll) == len(ordered), label
    for q, value in kll_quantiles(kll, SETTINGS.quantiles).items():
        below = np.searchsorted(ordered, value, "left") / len(ordered)
        at_or_below = np.searchsorted(ordered, value, "right") / len(ordered)
        assert below - eps <= q <= at_or_below + eps, (label, q, value, below, at_or_below)


def _check_ndv(theta: bytes, exact: int, label: str) -> None:
    estimate = theta_estimate(theta)
    rse = theta_relative_standard_error(SETTINGS.theta_lg_k)
    assert abs(estimate - exact) <= 3 * rse * exact, (label, estimate, exact)
    lower, upper = theta_bounds(theta, 3)
    assert lower <= exact <= upper, (label, lower, exact, upper)


# -- tests ---------------------------------------------------------------------------------


def test_one_spark_job_per_call(data: dict[str, Any]) -> None:
    assert len(data["jobs"]) == 1


def test_results_keyed_by_the_paths_as_given(data: dict[str, Any]) -> None:
    assert set(data["result"]) == set(data["paths"].values())
    for sketches in data["result"].values():
        assert set(sketches) == {fid for _, fid, _, _ in COLUMNS}


@pytest.mark.parametrize(("name", "field_id", "type_str"), [c[:3] for c in COLUMNS])
@pytest.mark.parametrize("part", ["a", "b"])
def test_per_file_stats_match_exact(
    data: dict[str, Any], part: str, name: str, field_id: int, type_str: str
) -> None:
    table: pa.Table = data["tables"][part]
    sketch: ColumnSketch = data["result"][data["paths"][part]][field_id]
    arr = table.column(name)
    label = f"{part}.{name}"

    assert sketch.null_count == arr.null_count, label
    if type_str in ("float", "double"):
        assert sketch.nan_count == pc.sum(pc.is_nan(arr)).as_py(), label
    else:
        assert sketch.nan_count is None
    if type_str == "boolean":
        assert sketch.true_count == pc.sum(arr).as_py()
        assert sketch.false_count == pc.sum(pc.invert(arr)).as_py()
    if type_str in ("string", "binary"):
        lengths = pc.utf8_length(arr) if type_str == "string" else pc.binary_length(arr)
        assert sketch.len_sum == pc.sum(lengths).as_py(), label
        assert sketch.len_max == pc.max(lengths).as_py(), label
    assert (sketch.min, sketch.max) == _exact_bounds(type_str, arr), label

    assert sketch.theta is not None
    _check_ndv(sketch.theta, _exact_ndv(type_str, arr), label)
    if type_str in ("string", "binary", "boolean"):
        assert sketch.kll is None
    else:
        assert sketch.kll is not None
        values = _kll_values(type_str, arr)
        if len(values):
            _check_quantiles(sketch.kll, values, label)
        else:
            assert kll_quantiles(sketch.kll, [0.5]) == {}


@pytest.mark.parametrize(("name", "field_id", "type_str"), [c[:3] for c in COLUMNS])
def test_merged_sketches_match_exact_over_both_files(
    data: dict[str, Any], name: str, field_id: int, type_str: str
) -> None:
    sketches = [data["result"][p][field_id] for p in data["paths"].values()]
    combined = pa.chunked_array(
        [data["tables"][k].column(name).combine_chunks() for k in ("a", "b")]
    )
    theta = union_theta([s.theta for s in sketches], SETTINGS.theta_lg_k)
    assert theta is not None
    _check_ndv(theta, _exact_ndv(type_str, combined), name)
    if type_str not in ("string", "binary", "boolean"):
        kll = merge_kll([s.kll for s in sketches], SETTINGS.kll_k)
        assert kll is not None
        values = _kll_values(type_str, combined)
        if len(values):
            _check_quantiles(kll, values, name)


def test_empty_file_comes_back_with_empty_sketches(data: dict[str, Any]) -> None:
    sketches = data["result"][data["paths"]["empty"]]
    for _, field_id, type_str, _ in COLUMNS:
        s = sketches[field_id]
        assert s.null_count == 0
        assert s.theta is not None and theta_estimate(s.theta) == 0
        assert (s.min, s.max) == (None, None)
        if s.kll is not None:
            assert kll_count(s.kll) == 0
        if type_str == "boolean":
            assert (s.true_count, s.false_count) == (0, 0)


def test_all_null_column(data: dict[str, Any]) -> None:
    s = data["result"][data["paths"]["a"]][13]
    assert s.null_count == 60_000
    assert s.theta is not None and theta_estimate(s.theta) == 0
    assert s.kll is not None and kll_count(s.kll) == 0
    assert (s.min, s.max) == (None, None)


def _write(path: Path, columns: dict[str, tuple[int, pa.DataType, list[Any]]]) -> str:
    fields = [_field(name, fid, t) for name, (fid, t, _) in columns.items()]
    arrays = [pa.array(values, type=t) for _, t, values in columns.values()]
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)
    return str(path)


def test_renamed_columns_are_matched_by_field_id(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "old.parquet", {"a": (1, pa.int64(), [1, 2, 3])})
    schema = TableSchema(2, (Column(1, "b", "long"), Column(2, "a", "long")))
    result = sketch_files(spark, [path], schema, SETTINGS)[path]
    assert result[1].null_count == 0 and (result[1].min, result[1].max) == (1, 3)
    # a column named like the file's but with another id did not exist when it was written
    assert result[2].null_count == 3


def test_files_without_field_ids_can_be_matched_by_name(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "no_ids.parquet")
    pq.write_table(pa.table({"v": pa.array([3, 4], pa.int64())}), path)
    schema = TableSchema(1, (Column(7, "v", "long"),))
    result = sketch_files(spark, [path], schema, SETTINGS, match_by="name")[path]
    assert (result[7].null_count, result[7].min, result[7].max) == (0, 3, 4)


def test_signed_zero_bounds_follow_iceberg_order(spark: Any, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "zeros.parquet",
        {
            "both": (1, pa.float64(), [0.0, -0.0, math.nan, None]),
            "neg": (2, pa.float32(), [-0.0, math.nan, -0.0, None]),
            "nan": (3, pa.float64(), [math.nan, None, None, None]),
        },
    )
    schema = TableSchema(
        1, (Column(1, "both", "double"), Column(2, "neg", "float"), Column(3, "nan", "double"))
    )
    result = sketch_files(spark, [path], schema, SETTINGS)[path]
    both, neg, nan = result[1], result[2], result[3]
    assert math.copysign(1, both.min) == -1 and math.copysign(1, both.max) == 1
    assert math.copysign(1, neg.min) == -1 and math.copysign(1, neg.max) == -1
    assert (nan.min, nan.max, nan.nan_count, nan.null_count) == (None, None, 1, 3)
    assert both.theta is not None and theta_estimate(both.theta) == 3  # 0.0, -0.0, NaN


def test_bounds_are_scanned_only_where_asked(spark: Any, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bounds.parquet",
        {
            "n": (1, pa.int64(), [5, 1, None]),
            "s": (2, pa.string(), ["b" * 20, "a" * 20, None]),
            "x": (3, pa.float64(), [-0.0, 2.5, math.nan]),
        },
    )
    schema = TableSchema(
        1, (Column(1, "n", "long"), Column(2, "s", "string"), Column(3, "x", "double"))
    )
    result = sketch_files(spark, [path], schema, SETTINGS, bounds_for={2})[path]
    assert (result[2].min, result[2].max) == ("a" * 20, "b" * 20)
    # no min/max where the caller has exact manifest bounds; every other statistic stays
    assert (result[1].min, result[1].max, result[3].min, result[3].max) == (None,) * 4
    assert (result[1].null_count, result[3].nan_count) == (1, 1)
    assert result[1].theta is not None and theta_estimate(result[1].theta) == 2


def test_same_file_given_twice_is_read_once(spark: Any, tmp_path: Path) -> None:
    local = _write(tmp_path / "x.parquet", {"v": (1, pa.int64(), [5, 6])})
    spellings = [local, f"file://{local}", f"file:{local}"]
    result = sketch_files(spark, spellings, TableSchema(1, (Column(1, "v", "long"),)), SETTINGS)
    assert set(result) == set(spellings)
    for sketch in result.values():
        assert sketch[1].kll is not None and kll_count(sketch[1].kll) == 2


def test_missing_data_file_is_named(spark: Any, tmp_path: Path) -> None:
    present = _write(tmp_path / "here.parquet", {"v": (1, pa.int64(), [1])})
    missing = f"file://{tmp_path}/gone.parquet"
    schema = TableSchema(1, (Column(1, "v", "long"),))
    with pytest.raises(DataFileError, match=r"gone\.parquet"):
        sketch_files(spark, [present, missing], schema, SETTINGS)


def test_unreadable_data_file_is_named(spark: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not a parquet file at all")
    with pytest.raises(DataFileError, match=r"bad\.parquet"):
        sketch_files(spark, [str(bad)], TableSchema(1, (Column(1, "v", "long"),)), SETTINGS)


def test_unsupported_columns_are_omitted(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "t.parquet", {"v": (1, pa.int64(), [1])})
    schema = TableSchema(1, (Column(1, "v", "long"), Column(2, "at", "time")))
    assert set(sketch_files(spark, [path], schema, SETTINGS)[path]) == {1}


def test_invalid_settings_fail_before_spark(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sketch\.kll_k"):
        sketch_files(None, ["x"], SCHEMA, SketchSettings(kll_k=4))
    assert sketch_files(None, [], SCHEMA, SETTINGS) == {}


def test_a_job_past_its_time_limit_is_cancelled_with_the_cause(
    spark: Any, data: dict[str, Any]
) -> None:
    paths = list(data["paths"].values())
    progress: list[JobProgress] = []
    # a limit no Spark job can meet (two small files with warm Python workers took less
    # than 0.05 s, and a job that finishes before the monitor's first look is not late)
    with pytest.raises(SparkUnavailableError, match=r"did not finish within 0\.001s"):
        sketch_files(
            spark,
            paths,
            SCHEMA,
            SETTINGS,
            limits=JobLimits(timeout_s=0.001, poll_s=0.001),
            on_progress=progress.append,
        )
    # the session survives a cancelled job, and the next job reports its tasks
    again = sketch_files(
        spark, paths, SCHEMA, SETTINGS, limits=JobLimits(poll_s=0.01), on_progress=progress.append
    )
    assert again.keys() == data["result"].keys()
    assert all(0 <= p.tasks_done <= p.tasks_total for p in progress)
