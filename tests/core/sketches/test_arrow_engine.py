"""The Arrow sketch engine against the SQL job: the same statistics, type by type.

Real files written by pyiceberg (``IcebergWarehouse``), one per schema version: the first
before a column was added and before ``i`` was promoted from int to long, the second
after, with enough distinct values for the theta sketches' estimation mode; and an empty
file. ``sketch_files`` with ``engine="sql"`` and ``engine="auto"`` must give identical
theta bytes, counts, bounds and lengths, and KLL sketches of the same count whose
quantiles agree within the published rank bound (KLL compaction is randomised).
"""

from __future__ import annotations

import datetime as dt
import math
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from datasketches import PyDoublesSerDe, frequent_items_sketch, kll_doubles_sketch
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)
from pyroaring import BitMap64
from structlog.testing import capture_logs

from lakestats import pipeline
from lakestats.arrow_sketch.engine import marked_error, worker_cannot_run
from lakestats.arrow_sketch.murmur import hash_bytes, hash_words
from lakestats.arrow_sketch.strings import python_string
from lakestats.config import Config, SketchConfig, load_config
from lakestats.deletes.plan import plan_live_read
from lakestats.deletes.spark_filter import LiveRowFilter
from lakestats.exceptions import ConfigError, DataFileError
from lakestats.formats.iceberg.opening import open_iceberg_location
from lakestats.locations import LocationMap
from lakestats.model import (
    Column,
    ColumnSketch,
    DeletionVector,
    EqualityDeletes,
    PositionDeletes,
    SketchSettings,
    TableSchema,
)
from lakestats.pipeline import sketch_files, warm_arrow_workers
from lakestats.sketches.frequent import STRINGS, frequent_values
from lakestats.sketches.hashing import theta_hash
from lakestats.sketches.merge import kll_normalized_rank_error, theta_estimate
from lakestats.sketching import SparkSketcher
from lakestats.testing import IcebergWarehouse

SETTINGS = SketchSettings()

# -- the hash -----------------------------------------------------------------------------------


def test_numpy_hash_is_the_reference_murmur_on_keys_of_0_to_40_bytes() -> None:
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(41)) for _ in range(4000)]
    lengths = np.array([len(k) for k in keys])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)

    hashed = hash_bytes(data, starts, lengths)

    assert [int(h) for h in hashed] == [theta_hash(k) or 0 for k in keys]
    short = [k for k in keys if 1 <= len(k) <= 8]
    words = np.array([int.from_bytes(k, "little") for k in short], dtype=np.uint64)
    by_word = hash_words(words, np.array([len(k) for k in short]))
    assert [int(h) for h in by_word] == [theta_hash(k) for k in short]


# -- the table ----------------------------------------------------------------------------------

_DEC_UNSCALED = [0, 1, -1, 127, -127, 128, -128, 255, -255, 256, -256, 32767, 32768, -32769]
_DEC_UNSCALED += [256**k + d for k in range(1, 4) for d in (-1, 0, 1)]
_DEC_UNSCALED += [-(256**k) + d for k in range(1, 4) for d in (-1, 0, 1)]


def _schema() -> Schema:
    fields = [
        ("i", IntegerType()),
        ("l", LongType()),
        ("d", DateType()),
        ("dec9", DecimalType(9, 2)),
        ("dec18", DecimalType(18, 4)),
        ("s", StringType()),
        ("b", BooleanType()),
        ("f", FloatType()),
        ("db", DoubleType()),
        ("ts", TimestampType()),
        ("tstz", TimestamptzType()),
        ("bin", BinaryType()),
        ("fx", FixedType(3)),
        ("u", UUIDType()),
    ]
    columns = [NestedField(n + 1, name, t, required=False) for n, (name, t) in enumerate(fields)]
    nested = StructType(
        NestedField(101, "a", IntegerType(), required=False),
        NestedField(102, "c", StringType(), required=False),
    )
    return Schema(*columns, NestedField(100, "st", nested, required=False))


def _big_decimal_schema() -> Schema:
    """Decimals of 19 to 38 digits: a table of their own, kept small (the SQL job's
    16-byte decimal hashing costs ~1 ms a row, so the reference would dominate)."""
    return Schema(
        NestedField(1, "dec38", DecimalType(38, 10), required=False),
        NestedField(2, "dec20", DecimalType(20, 0), required=False),
    )


def _decimals(unscaled: list[int], scale: int, limit: int) -> list[Decimal | None]:
    kept = [u for u in unscaled if abs(u) < limit] + [limit - 1, -(limit - 1)]
    return [Decimal(u).scaleb(-scale) for u in kept]


def _edge_rows() -> dict[str, list[Any]]:
    """Nulls, NaN, ±0.0, "", unicode, decimal edges, dates before 1970; 33 rows."""
    n = 33
    dec9 = _decimals(_DEC_UNSCALED, 2, 10**9)
    dec18 = _decimals(_DEC_UNSCALED + [256**k for k in range(4, 8)], 4, 10**18)
    big = _DEC_UNSCALED + [256**k + d for k in range(4, 16) for d in (-1, 0)] + [-(2**63)]
    dec38 = _decimals(big, 10, 10**38)
    dec20 = _decimals([*_DEC_UNSCALED, 2**63, -(2**63) - 1, 2**64], 0, 10**20)
    floats = [float("nan"), -0.0, 0.0, float("inf"), float("-inf"), 1.5, -2.25, None]
    words = ["", "straße", "日本語", "🦆🦆", "naïve", "x" * 40, "a", None]
    days = [dt.date(1, 1, 1), dt.date(1900, 3, 1), dt.date(1969, 12, 31), dt.date(1970, 1, 1)]
    stamps = [dt.datetime(1960, 5, 1, 12, 0, 0, 123456), dt.datetime(2024, 2, 29, 23, 59, 59)]

    def cycle(values: list[Any]) -> list[Any]:
        return [values[i % len(values)] for i in range(n)]

    return {
        "i": cycle([0, 1, -1, 2**31 - 1, -(2**31), None]),
        "l": cycle([0, -1, 2**63 - 1, -(2**63), 2**53 + 1, None]),
        "d": cycle([*days, None]),
        "dec9": cycle([*dec9, None]),
        "dec18": cycle([*dec18, None]),
        "s": cycle(words),
        "b": cycle([True, False, None]),
        "f": cycle(floats),
        "db": cycle(floats[::-1]),
        "ts": cycle([*stamps, None]),
        "tstz": cycle([*(s.replace(tzinfo=dt.UTC) for s in stamps), None]),
        "bin": cycle([b"", b"\x00", b"\xff\x00", b"abc", None]),
        "fx": cycle([b"\x00\x00\x00", b"\xff\xfe\x01", None]),
        "u": cycle([uuid.UUID(int=0).bytes, uuid.UUID(int=2**128 - 1).bytes, None]),
        "dec38": cycle([*dec38, None]),
        "dec20": cycle([*dec20, None]),
        "st": cycle([{"a": 1, "c": "x"}, {"a": None, "c": "y"}, None]),
    }


def _random_rows(n: int, seed: int) -> dict[str, list[Any]]:
    """Enough distinct values for estimation mode (> 2**12), a 10 % of nulls."""
    rng = np.random.default_rng(seed)

    def nulls(values: list[Any]) -> list[Any]:
        return [None if r < 0.1 else v for v, r in zip(values, rng.random(n), strict=True)]

    def ints(lo: int, hi: int) -> list[int]:
        return [int(x) for x in rng.integers(lo, hi, n)]

    doubles = rng.normal(0, 1e6, n)
    return {
        "i": nulls(ints(-(2**40), 2**40)),  # long after the promotion
        "l": nulls(ints(-(2**62), 2**62)),
        "d": nulls([dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in ints(-40000, 40000)]),
        "dec9": nulls([Decimal(u).scaleb(-2) for u in ints(-(10**9) + 1, 10**9)]),
        "dec18": nulls([Decimal(u).scaleb(-4) for u in ints(-(10**18) + 1, 10**18)]),
        "s": nulls([f"v{x}é" * (x % 5) for x in ints(0, 10**6)]),
        "b": nulls([bool(x) for x in ints(0, 2)]),
        "f": nulls([float(np.float32(x)) for x in doubles]),
        "db": nulls([float(x) for x in doubles]),
        "ts": nulls(
            [dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=x) for x in ints(0, 10**15)]
        ),
        "tstz": nulls(
            [
                dt.datetime(1950, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=x)
                for x in ints(0, 10**9)
            ]
        ),
        "bin": nulls([rng.bytes(int(k)) for k in rng.integers(0, 30, n)]),
        "fx": nulls([rng.bytes(3) for _ in range(n)]),
        "u": nulls([rng.bytes(16) for _ in range(n)]),
        "dec38": nulls(
            [
                Decimal(int(a) * 10**20 + int(b)).scaleb(-10)
                for a, b in zip(
                    rng.integers(-(10**17), 10**17, n), rng.integers(0, 10**18, n), strict=True
                )
            ]
        ),
        "dec20": nulls([Decimal(int(x) * 1000) for x in rng.integers(-(10**16), 10**16, n)]),
        "st": nulls([{"a": int(x), "c": str(x)} for x in ints(0, 1000)]),
        "late": nulls([f"late{x}" for x in ints(0, 50)]),
    }


_BIG = ("dec38", "dec20")


def _split(rows: dict[str, list[Any]], big: bool, limit: int | None = None) -> dict[str, list[Any]]:
    return {k: v[:limit] for k, v in rows.items() if (k in _BIG) == big}


def _written(warehouse: IcebergWarehouse, name: str) -> tuple[TableSchema, list[str]]:
    # each file once, in the order written: the commit after the int → long promotion
    # lists the file written before it again
    opened = open_iceberg_location(warehouse.location(name))
    added = [f.path for c in opened.commits_since(None) for f in c.added_files]
    return opened.schema(), list(dict.fromkeys(added))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[TableSchema, list[str]]]:
    root = tmp_path_factory.mktemp("arrow_engine")
    warehouse = IcebergWarehouse(root)
    edges, randoms = _edge_rows(), _random_rows(6000, 3)
    warehouse.create_table("t", _schema())
    warehouse.append("t", _split(edges, big=False))
    warehouse.add_column("t", "late", StringType())
    with warehouse.table("t").update_schema() as update:
        update.update_column("i", LongType())
    warehouse.append("t", _split(randoms, big=False))
    warehouse.create_table("big", _big_decimal_schema())
    warehouse.append("big", _split(edges, big=True))
    warehouse.append("big", _split(randoms, big=True, limit=300))
    schema, paths = _written(warehouse, "t")
    empty = root / "empty.parquet"
    pq.write_table(pq.read_table(paths[0].removeprefix("file://")).slice(0, 0), empty)
    return {"t": (schema, [*paths, str(empty)]), "big": _written(warehouse, "big")}


@pytest.fixture(scope="module")
def both(spark: Any, files: dict[str, tuple[TableSchema, list[str]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"logs": []}
    for name, (schema, paths) in files.items():
        sql = sketch_files(spark, paths, schema, SETTINGS, engine="sql")
        with capture_logs() as logs:
            arrow = sketch_files(spark, paths, schema, SETTINGS, engine="auto")
        out[name] = {"sql": sql, "arrow": arrow, "schema": schema, "paths": paths}
        out["logs"] += logs
    return out


def test_every_file_went_through_the_arrow_engine(both: dict[str, Any]) -> None:
    events = [e["event"] for e in both["logs"]]
    assert "arrow_engine_declined" not in events, both["logs"]
    assert events.count("arrow_engine_sketched") == 2
    for name in ("t", "big"):
        result = both[name]
        assert set(result["arrow"]) == set(result["sql"]) == set(result["paths"])


def _kll_agrees(want: bytes, got: bytes) -> None:
    a, b = kll_doubles_sketch.deserialize(want), kll_doubles_sketch.deserialize(got)
    assert a.n == b.n
    if a.is_empty():
        return
    assert (a.get_min_value(), a.get_max_value()) == (b.get_min_value(), b.get_max_value())
    eps = 2 * kll_normalized_rank_error(SETTINGS.kll_k)
    for q in np.linspace(0.05, 0.95, 19):
        # the rank of one sketch's quantile in the other: its ties span [below, at or below]
        value = b.get_quantile(q)
        assert a.get_rank(value, False) - eps <= q <= a.get_rank(value, True) + eps, q


def _same(want: ColumnSketch, got: ColumnSketch, label: str) -> None:
    for name in ("theta", "null_count", "nan_count", "len_sum", "len_max"):
        assert getattr(got, name) == getattr(want, name), (label, name)
    for name in ("true_count", "false_count", "value_sample", "frequent_items"):
        assert getattr(got, name) == getattr(want, name), (label, name)
    # repr: -0.0 is not 0.0, Decimal("1.50") is not Decimal("1.5")
    assert repr(got.min) == repr(want.min), (label, "min", got.min, want.min)
    assert repr(got.max) == repr(want.max), (label, "max", got.max, want.max)
    assert (want.kll is None) == (got.kll is None), label
    if want.kll is not None and got.kll is not None:
        _kll_agrees(want.kll, got.kll)


def _columns() -> list[tuple[str, str]]:
    names = [f.name for f in _schema().fields if f.name != "st"] + ["st.a", "st.c", "late"]
    return [("t", n) for n in names] + [("big", n) for n in _BIG]


@pytest.mark.parametrize(("table", "column"), _columns())
def test_arrow_engine_gives_the_sql_jobs_statistics(
    both: dict[str, Any], table: str, column: str
) -> None:
    result = both[table]
    schema: TableSchema = result["schema"]
    (field_id,) = [c.field_id for c in schema.columns if c.name == column]
    for path in result["paths"]:
        _same(result["sql"][path][field_id], result["arrow"][path][field_id], f"{path} {column}")


def test_the_files_cover_what_they_must(both: dict[str, Any]) -> None:
    """The comparison above is only as good as its data: estimation mode, nulls, NaN, ±0.0,
    a column missing from the first file, the promoted int."""
    schema: TableSchema = both["t"]["schema"]
    ids = {c.name: c.field_id for c in schema.columns}
    first, second, empty = (both["t"]["arrow"][p] for p in both["t"]["paths"])
    assert theta_estimate(second[ids["l"]].theta) > 2**12  # estimation mode
    assert first[ids["late"]].null_count == 33  # added later: all NULL in the first file
    assert first[ids["f"]].nan_count and repr(first[ids["db"]].min) == "-inf"
    assert second[ids["i"]].max > 2**31  # long values after the int → long promotion
    assert first[ids["st.a"]].null_count == 22  # a NULL struct's leaves are NULL
    assert empty[ids["l"]].null_count == 0
    assert schema.columns[[c.name for c in schema.columns].index("i")].type == "long"


class _KeepEveryRow:
    """A row filter that removes nothing: a job with deletes to apply, minus the deletes."""

    needs_row_index = False
    columns: Sequence[str] = ()
    aggregates: Sequence[tuple[str, str]] = ()

    def __init__(self) -> None:
        self.live_rows: dict[str, int] = {}

    def apply(self, session: Any, df: Any) -> Any:
        return df

    def check(self, rows: Sequence[Any]) -> None:
        return None

    def arrow_deletes(self) -> None:  # removes rows only the SQL job removes (here: none)
        return None


def test_jobs_the_engine_does_not_implement_keep_the_sql_job(
    spark: Any, files: dict[str, tuple[TableSchema, list[str]]]
) -> None:
    schema, paths = files["t"]
    with capture_logs() as logs:
        sketch_files(spark, paths[:1], schema, SETTINGS, row_filter=_KeepEveryRow())
    assert "arrow_engine_sketched" not in [e["event"] for e in logs]


# -- value samples and frequent items -------------------------------------------------------------

SAMPLED = SketchSettings(value_samples=True, frequent_items=8)


@pytest.fixture(scope="module")
def sampled(spark: Any, files: dict[str, tuple[TableSchema, list[str]]]) -> dict[str, Any]:
    schema, paths = files["t"]
    sql = sketch_files(spark, paths, schema, SAMPLED, engine="sql")
    with capture_logs() as logs:
        arrow = sketch_files(spark, paths, schema, SAMPLED, engine="auto")
    return {"sql": sql, "arrow": arrow, "schema": schema, "paths": paths, "logs": logs}


def _sampled_columns() -> list[str]:
    spec_columns = ("i", "l", "d", "dec9", "dec18", "f", "db", "ts", "tstz")
    return [*spec_columns, "st.a"]


def test_sampled_jobs_go_through_the_arrow_engine(sampled: dict[str, Any]) -> None:
    events = [e["event"] for e in sampled["logs"]]
    assert "arrow_engine_sketched" in events and "arrow_engine_declined" not in events


@pytest.mark.parametrize("column", _sampled_columns())
def test_arrow_value_samples_are_the_sql_jobs_bytes(sampled: dict[str, Any], column: str) -> None:
    schema: TableSchema = sampled["schema"]
    (field_id,) = [c.field_id for c in schema.columns if c.name == column]
    for path in sampled["paths"]:
        want, got = sampled["sql"][path][field_id], sampled["arrow"][path][field_id]
        assert want.value_sample is not None
        assert got.value_sample == want.value_sample, (path, column)
        assert got.theta == want.theta, (path, column)


def _exact_counts(path: str, column: str, type_str: str) -> Counter[float]:
    """Rows per KLL double (dates in days, timestamps in micros, decimals as floats), NaN
    and NULL left out: counted by pyarrow and Python, not by the engine."""
    parent, _, leaf = column.rpartition(".")
    table = pq.read_table(path.removeprefix("file://"))
    values = table.column(parent or leaf).to_pylist()
    if parent:
        values = [None if v is None else v[leaf] for v in values]
    epoch = dt.datetime(1970, 1, 1)
    out: Counter[float] = Counter()
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if type_str == "date":
            out[float((v - dt.date(1970, 1, 1)).days)] += 1
        elif type_str in ("timestamp", "timestamptz"):
            out[float((v.replace(tzinfo=None) - epoch) // dt.timedelta(microseconds=1))] += 1
        else:
            out[float(v)] += 1
    return out


@pytest.mark.parametrize("column", _sampled_columns())
def test_arrow_frequent_items_bound_every_exact_count_tighter_than_the_sql_job(
    sampled: dict[str, Any], column: str
) -> None:
    """The two sketches differ in bytes (Misra-Gries depends on the row order; the engine
    counts exactly): both must bound every value's exact count, over the same rows, and
    the engine's maximum error must be within the published one."""
    schema: TableSchema = sampled["schema"]
    (entry,) = [c for c in schema.columns if c.name == column]
    for path in sampled["paths"][:2]:  # the empty file: both give the empty sketch
        exact = _exact_counts(path, column, entry.type)
        rows = sum(exact.values())
        for engine in ("sql", "arrow"):
            blob = sampled[engine][path][entry.field_id].frequent_items
            sketch = frequent_items_sketch.deserialize(blob, PyDoublesSerDe())
            assert sketch.total_weight == rows, (engine, path, column)
            for value, count in exact.items():
                lower, upper = sketch.get_lower_bound(value), sketch.get_upper_bound(value)
                assert lower <= count <= upper, (engine, path, column, value)
        arrow = frequent_values(sampled["arrow"][path][entry.field_id].frequent_items, 100)
        sql = frequent_values(sampled["sql"][path][entry.field_id].frequent_items, 100)
        assert arrow.maximum_error <= max(sql.maximum_error, arrow.epsilon * rows)
        listed = {v.value for v in arrow.values}
        assert all(value in listed for value, c in exact.items() if c > 2 * arrow.maximum_error)


def test_the_sampled_files_cut_the_frequent_items(sampled: dict[str, Any]) -> None:
    """More distinct values than the 8-item map holds: the cut and the offset are tested."""
    schema: TableSchema = sampled["schema"]
    (field_id,) = [c.field_id for c in schema.columns if c.name == "st.a"]
    second = sampled["arrow"][sampled["paths"][1]][field_id].frequent_items
    assert frequent_values(second, 100).maximum_error > 0


def test_a_corrupt_file_is_a_data_file_error_naming_it(
    spark: Any, files: dict[str, tuple[TableSchema, list[str]]], tmp_path: Path
) -> None:
    schema, paths = files["t"]
    bad = tmp_path / "corrupt.parquet"
    bad.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(DataFileError, match=r"cannot read data file .*corrupt\.parquet"):
        sketch_files(spark, [paths[0], str(bad)], schema, SETTINGS)


def test_engine_setting_is_validated(tmp_path: Path) -> None:
    config = tmp_path / "lakestats.toml"
    config.write_text('[sketch]\nengine = "sql"\n')
    assert load_config(config, env={}).sketch.engine == "sql"
    config.write_text('[sketch]\nengine = "fast"\n')
    with pytest.raises(ConfigError, match=r"key sketch\.engine") as info:
        load_config(config, env={})
    assert "\n" not in str(info.value)


def test_workers_without_the_engine_are_told_apart_from_bad_files() -> None:
    """A cluster whose executors' Python lacks lakestats cannot exist here (the local
    workers run this interpreter): the classifier is checked on the messages such a task
    failure carries, and against a marked data-file failure."""
    lacking = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):"
        "\n  ...\nModuleNotFoundError: No module named 'lakestats'"
    )
    assert worker_cannot_run(lacking)
    assert worker_cannot_run('java.io.IOException: Cannot run program "python3": error=2')
    bad_file = "RuntimeError: lakestats-arrow-data-file:unreadable:4:/x/y:Parquet magic bytes"
    assert not worker_cannot_run(bad_file)
    error = marked_error(bad_file)
    assert error is not None and str(error) == "cannot read data file /x/y: Parquet magic bytes"


# -- warming the Python workers -----------------------------------------------------------------


def test_warm_starts_the_python_workers_that_the_engine_runs_in(spark: Any, tmp_path: Path) -> None:
    """The daemon warms Spark at start; with the Arrow engine on, that includes one job that
    starts a Python worker and imports the engine's dependencies there."""
    with capture_logs() as logs:
        SparkSketcher(Config(state_dir=str(tmp_path))).warm()
    ready = [e for e in logs if e["event"] == "arrow_workers_ready"]
    assert len(ready) == 1 and isinstance(ready[0]["pid"], int), logs
    with capture_logs() as logs:
        sql_only = Config(state_dir=str(tmp_path), sketch=SketchConfig(engine="sql"))
        SparkSketcher(sql_only).warm()
    assert "arrow_workers_ready" not in [e["event"] for e in logs]


def test_warm_skips_a_context_whose_workers_cannot_run_the_engine(spark: Any) -> None:
    sc = spark.sparkContext
    pipeline._arrow_unusable[id(sc)] = (sc, "ModuleNotFoundError: No module named 'lakestats'")
    try:
        with capture_logs() as logs:
            assert warm_arrow_workers(spark, timeout_s=60) is False
        assert logs == []
    finally:
        del pipeline._arrow_unusable[id(sc)]


def test_warm_that_finds_no_free_worker_in_time_says_so(spark: Any) -> None:
    """Both task slots of the session busy with another job: the warm-up job gets no
    worker within its limit, is cancelled, and the warning says that (not Py4J's "An
    error occurred while calling …"); the other job is not cancelled with it."""
    sc = spark.sparkContext
    slots = sc.defaultParallelism
    # a lambda (pickled by value: the workers cannot import this test module)
    hold = sc.parallelize(range(slots), slots).mapPartitions(lambda r: (time.sleep(4), r)[1])
    counted: list[int] = []
    busy = threading.Thread(target=lambda: counted.append(hold.count()))
    busy.start()
    deadline = time.monotonic() + 60
    while len(sc.statusTracker().getActiveJobsIds()) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        with capture_logs() as logs:
            assert warm_arrow_workers(spark, timeout_s=0.5) is False
    finally:
        busy.join(60)
    (warning,) = [e for e in logs if e["event"] == "arrow_workers_not_warmed"]
    assert warning["error"].startswith("no Python worker answered within 0.5s"), warning
    assert counted == [slots]


# -- row positions deleted: applied in the task ---------------------------------------------------


def _live_filter(plan_input: dict[str, tuple[Any, ...]], schema: TableSchema) -> LiveRowFilter:
    return LiveRowFilter(plan_live_read(plan_input), schema, LocationMap())


def _deletes_on_both_engines(
    spark: Any, plan_input: dict[str, tuple[Any, ...]], schema: TableSchema, label: str = ""
) -> dict[str, int]:
    """Sketch the files with their deletes by the SQL job and by the Arrow engine: the
    Arrow engine takes the job and gives the same sketches and live rows; those rows."""
    results = {}
    for engine in ("sql", "auto"):
        row_filter = _live_filter(plan_input, schema)
        with capture_logs() as logs:
            sketched = sketch_files(
                spark, list(plan_input), schema, SAMPLED, row_filter=row_filter, engine=engine
            )
        results[engine] = (sketched, dict(row_filter.live_rows), logs)
    sql, arrow = results["sql"], results["auto"]
    events = [e for e in arrow[2] if e["event"] == "arrow_engine_sketched"]
    assert events and events[0]["deletes"] is True and events[0]["declined"] == 0, label
    assert arrow[1] == sql[1], label  # live rows
    for path in plan_input:
        for field_id, want in sql[0][path].items():
            got = arrow[0][path][field_id]
            for name in ("theta", "null_count", "nan_count", "value_sample", "len_sum"):
                assert getattr(got, name) == getattr(want, name), (label, path, name)
            assert repr(got.min) == repr(want.min) and repr(got.max) == repr(want.max)
    return sql[1]


def test_position_deletes_and_vectors_are_applied_in_the_task_as_by_the_sql_job(
    spark: Any, files: dict[str, tuple[TableSchema, list[str]]], tmp_path: Path
) -> None:
    """A position-delete file (Parquet, naming both data files, positions past the end and
    twice), a deletion vector on the second file, a file without deletes, and one whose
    rows are all deleted: the same sketches and live rows from both engines, with the
    Arrow engine taking the job."""
    schema, paths = files["t"]
    first, second, _empty = paths
    rows = [pq.ParquetFile(p.removeprefix("file://")).metadata.num_rows for p in (first, second)]
    deletes_file = tmp_path / "pos.parquet"
    named = [first] * 4 + [second] * 3
    positions = [0, 5, 5, rows[0] + 10, 1, 2, 3]
    pq.write_table(
        pa.table({"file_path": named, "pos": pa.array(positions, pa.int64())}), deletes_file
    )
    position_file = PositionDeletes(str(deletes_file), "PARQUET")
    vector = DeletionVector(BitMap64(range(100, 200)).serialize(), 100)
    whole = DeletionVector(BitMap64(range(rows[0])).serialize(), rows[0])
    plans = {
        "positions": {first: (position_file,), second: (position_file, vector)},
        "everything": {first: (whole,), second: ()},
    }
    live = {label: _deletes_on_both_engines(spark, p, schema, label) for label, p in plans.items()}
    assert live["everything"] == {first: 0, second: rows[1]}


def test_equality_deletes_are_applied_by_the_arrow_engine_as_by_the_sql_job(
    spark: Any, files: dict[str, tuple[TableSchema, list[str]]], tmp_path: Path
) -> None:
    """Equality-delete files on a string (with a NULL, which deletes the NULL rows) and on
    a long and a date together (Parquet with field ids, as Iceberg writes them), one
    applying to both data files and one to the second only, beside a position delete: the
    same sketches and live rows from both engines, the Arrow engine taking the job. A
    missing delete file is the ``DataFileError`` naming it."""
    schema, paths = files["t"]
    first, second, _empty = paths
    data = pq.read_table(second.removeprefix("file://"), columns=["s", "l", "d"])
    strings = [v for v in data.column("s").to_pylist() if v is not None][:40]

    def delete_file(name: str, table: pa.Table, ids: dict[str, int]) -> str:
        fields = [
            pa.field(f.name, f.type, metadata={b"PARQUET:field_id": str(ids[f.name]).encode()})
            for f in table.schema
        ]
        path = tmp_path / name
        pq.write_table(pa.Table.from_arrays(table.columns, schema=pa.schema(fields)), path)
        return str(path)

    on_s = delete_file("eq-s.parquet", pa.table({"s": pa.array([*strings, None])}), {"s": 6})
    pairs = data.select(["l", "d"]).slice(100, 30)
    on_l_d = delete_file("eq-ld.parquet", pairs, {"l": 2, "d": 3})
    by_s, by_l_d = (
        EqualityDeletes(on_s, "PARQUET", (6,)),
        EqualityDeletes(on_l_d, "PARQUET", (2, 3)),
    )
    positions = tmp_path / "pos.parquet"
    pq.write_table(pa.table({"file_path": [first], "pos": pa.array([3], pa.int64())}), positions)
    plan_input = {
        first: (by_s, PositionDeletes(str(positions), "PARQUET")),
        second: (by_s, by_l_d),
    }
    live = _deletes_on_both_engines(spark, plan_input, schema)
    # the second file's live rows, by hand: NULL and listed strings, listed (l, d) pairs
    s_dead = pc.or_(pc.is_in(data.column("s"), pa.array(strings)), pc.is_null(data.column("s")))
    pair_keys = {(r["l"], r["d"]) for r in pairs.to_pylist()}
    pair_dead = [(r["l"], r["d"]) in pair_keys for r in data.select(["l", "d"]).to_pylist()]
    dead = pc.or_(s_dead, pa.array(pair_dead))
    assert live[second] == data.num_rows - pc.sum(dead.cast(pa.int64())).as_py()
    assert 0 < live[second] < data.num_rows

    Path(on_l_d).unlink()
    with pytest.raises(DataFileError, match=r"eq-ld\.parquet"):
        sketch_files(
            spark, list(plan_input), schema, SAMPLED, row_filter=_live_filter(plan_input, schema)
        )


def test_strings_that_are_not_utf8_are_sketched_as_the_sql_job_reads_them(
    spark: Any, tmp_path: Path
) -> None:
    """A STRING column holding bytes that are not UTF-8 (Hive and Impala write any bytes):
    Spark reads them as it reads any string, and so must the Arrow engine, not leave the
    file to the SQL job. Both give every statistic alike, the malformed bytes of a value
    replaced (U+FFFD) where it is a Python string: frequent values and bounds."""
    raw = [b"ok", b"\xff\xfebad", b"caf\xc3\xa9", b"\xc3", b"\x80x", b"ok\x00", b"\xed\xa0\x80"]
    values = [raw[i % len(raw)] if i % 11 else None for i in range(700)]
    binary = pa.array(values, pa.binary())
    strings = pa.Array.from_buffers(pa.string(), len(binary), binary.buffers(), binary.null_count)
    field = pa.field("s", pa.string(), metadata={b"PARQUET:field_id": b"1"})
    path = str(tmp_path / "bytes.parquet")
    pq.write_table(pa.Table.from_arrays([strings], schema=pa.schema([field])), path)
    schema = TableSchema(1, (Column(1, "s", "string"),))
    settings = SketchSettings(frequent_items=256)
    sql = sketch_files(spark, [path], schema, settings, engine="sql")[path][1]
    with capture_logs() as logs:
        arrow = sketch_files(spark, [path], schema, settings, engine="auto")[path][1]
    assert "arrow_engine_declined" not in [e["event"] for e in logs], logs
    # the frequent items' bytes differ (Spark's Misra-Gries pass, the engine's exact
    # counts): their values and counts are compared with the exact ones
    _same(replace(sql, frequent_items=None), replace(arrow, frequent_items=None), "bytes")
    exact = Counter(python_string(v) for v in values if v is not None)
    for sketch in (sql, arrow):
        assert sketch.frequent_items is not None
        found = frequent_values(sketch.frequent_items, 20, STRINGS)
        assert {v.value: v.count for v in found.values} == dict(exact)
    assert arrow.len_sum == sum(len(v) for v in exact.elements())
    assert (arrow.min, arrow.max) == ("caf\u00e9", "\ufffd\ufffdbad")
