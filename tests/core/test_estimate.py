"""Histograms a cost-based optimizer can trust (issue 14): bucket counts within the stated
bound, hot values in buckets of their own, and ``lakestats.estimate`` against exact counts.

One real Iceberg table (three appends, skewed, low-cardinality, date, decimal, double and
string columns, nulls), analyzed once by the real pipeline (Spark); exact values come from
pyarrow over the table's own scan.
"""

from __future__ import annotations

import bisect
import datetime as dt
import io
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakestats
from lakestats.config import Config, SketchConfig
from lakestats.estimates import estimate_from, estimate_json
from lakestats.exceptions import ConfigError
from lakestats.model import SketchSettings
from lakestats.render import render_histogram, render_stats
from lakestats.selectivity import Predicate, PredicateError, parse_predicate, selectivity
from lakestats.sketches.spec import kll_k_for_error, kll_pmf_error, validate_sketch_settings
from lakestats.testing import IcebergWarehouse
from lakestats.values import from_json, to_physical

ROWS_PER_APPEND = 40_000
DAY0 = dt.date(1992, 1, 1)
SCHEMA = pa.schema(
    [
        pa.field("qty", pa.decimal128(15, 2)),  # whole numbers 1..50, like l_quantity
        pa.field("disc", pa.decimal128(15, 2)),  # 0.00 .. 0.10
        pa.field("skew", pa.int64()),  # 30 % one value, the rest spread
        pa.field("day", pa.date32()),
        pa.field("price", pa.float64()),
        pa.field("mode", pa.string()),
    ]
)
NUMERIC = ("qty", "disc", "skew", "day", "price")


@dataclass(frozen=True)
class Analyzed:
    doc: dict[str, Any]
    data: pa.Table
    location: str
    config: Config

    def __iter__(self) -> Iterator[Any]:
        return iter((self.doc, self.data))


def _batch(rng: random.Random) -> pa.Table:
    n = ROWS_PER_APPEND
    return pa.table(
        {
            "qty": [Decimal(rng.randint(1, 50)) for _ in range(n)],
            "disc": [Decimal(rng.randint(0, 10)) / 100 for _ in range(n)],
            "skew": [7 if rng.random() < 0.3 else rng.randint(0, 99_999) for _ in range(n)],
            "day": [DAY0 + dt.timedelta(days=int(rng.triangular(0, 2500, 300))) for _ in range(n)],
            "price": [None if rng.random() < 0.05 else rng.lognormvariate(7, 1) for _ in range(n)],
            "mode": [rng.choice(["AIR", "RAIL", "SHIP", "MAIL", None]) for _ in range(n)],
        },
        schema=SCHEMA,
    )


# value samples and frequent items are opt-in (docs/sketches.md); these tests use them
OPT_IN = SketchConfig(frequent_items=256, value_samples=True)


@pytest.fixture(scope="module")
def analyzed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Analyzed:
    """The stats document and the table's rows (Arrow) after three appends."""
    root = tmp_path_factory.mktemp("estimate")
    warehouse = IcebergWarehouse(root / "wh")
    warehouse.create_table("t", SCHEMA)
    rng = random.Random(14)
    for _ in range(3):
        warehouse.append("t", _batch(rng))
    location = warehouse.location("t")
    config = Config(state_dir=str(root / "state"), sketch=OPT_IN)
    lakestats.analyze_table(location, config=config)
    doc = lakestats.read_stats(location, config=config)
    return Analyzed(doc, warehouse.table("t").scan().to_arrow(), location, config)


def _kll_units(type_str: str, column: pa.ChunkedArray) -> list[float]:
    values = column.drop_null().to_pylist()
    if type_str == "date":
        return sorted(float(to_physical("date", v)) for v in values)
    return sorted(float(v) for v in values if v == v)  # noqa: PLR0124 - NaN check


def exact_count(data: pa.Table, predicate: Predicate) -> int:
    """The rows of ``data`` that satisfy ``predicate``, counted by pyarrow (the oracle)."""
    column = data.column(predicate.column)
    if predicate.op == "is null":
        return column.null_count
    typed = [pa.scalar(v, type=column.type) for v in _typed(column.type, predicate.values)]
    comparisons = {
        "=": lambda: pc.equal(column, typed[0]),
        "<": lambda: pc.less(column, typed[0]),
        "<=": lambda: pc.less_equal(column, typed[0]),
        ">": lambda: pc.greater(column, typed[0]),
        ">=": lambda: pc.greater_equal(column, typed[0]),
        "between": lambda: pc.and_(
            pc.greater_equal(column, typed[0]), pc.less_equal(column, typed[1])
        ),
        "in": lambda: pc.is_in(column, value_set=pa.array([t.as_py() for t in typed], column.type)),
    }
    return int(pc.sum(comparisons[predicate.op]()).as_py() or 0)


def _typed(arrow_type: pa.DataType, values: tuple[Any, ...]) -> list[Any]:
    if pa.types.is_date(arrow_type):
        return [dt.date.fromisoformat(v) if isinstance(v, str) else v for v in values]
    if pa.types.is_decimal(arrow_type):
        return [Decimal(str(v)) for v in values]
    return list(values)


def test_bucket_counts_are_within_the_stated_bound(analyzed: Analyzed) -> None:
    doc, data = analyzed
    for name in NUMERIC:
        column = doc["columns"][name]
        quantiles = column["sketch"]["quantiles"]
        assert quantiles["k"] == kll_k_for_error(0.0025) == 1481
        assert quantiles["error_rate"] == 0.0025
        values = _kll_units(column["type"], data.column(name))
        bound = quantiles["bucket_count_error"]  # rows; the sketch holds the non-null values
        assert bound == math.ceil(kll_pmf_error(1481) * len(values))
        histogram = column["histogram"]
        assert sum(b["count"] for b in histogram) == len(values)
        for j, bucket in enumerate(histogram):
            assert isinstance(bucket["count"], int) and bucket["approximate"] is True
            lower = _unit(column["type"], bucket["lower"])
            upper = _unit(column["type"], bucket["upper"])
            exact = sum(1 for v in values if (lower <= v if j == 0 else lower < v) and v <= upper)
            assert abs(bucket["count"] - exact) <= bound, (name, j, bucket, exact)


def _unit(type_str: str, value: Any) -> float:
    if type_str == "date":
        return float(to_physical("date", dt.date.fromisoformat(value)))
    return float(value)


def test_hot_values_get_a_bucket_of_their_own(analyzed: Analyzed) -> None:
    doc, data = analyzed
    skew = doc["columns"]["skew"]
    hot = [b for b in skew["histogram"] if b["upper"] == 7]
    assert len(hot) == 1 and hot[0]["lower"] == 6 and hot[0]["ndv"] == 1.0
    exact = int(pc.sum(pc.equal(data.column("skew"), 7)).as_py())
    assert abs(hot[0]["count"] - exact) <= skew["sketch"]["quantiles"]["bucket_count_error"]
    # every one of the 50 whole quantities holds 2 % of the rows: 50 single-value buckets
    qty = doc["columns"]["qty"]["histogram"]
    assert len(qty) == 50
    assert all(b["ndv"] == 1.0 for b in qty)
    assert [Decimal(b["upper"]) for b in qty] == [Decimal(i) for i in range(1, 51)]


def _q_error(estimate: float, exact: float) -> float:
    estimate, exact = max(estimate, 1.0), max(exact, 1.0)
    return max(estimate / exact, exact / estimate)


def test_estimates_against_exact_counts(analyzed: Analyzed) -> None:
    doc, data = analyzed
    rows = len(data)
    rng = random.Random(7)
    checked = 0
    for name in NUMERIC:
        column = doc["columns"][name]
        bound = column["sketch"]["quantiles"]["bucket_count_error"]
        bucket_rows = rows / doc["columns"][name]["sketch"]["quantiles"]["histogram_buckets"]
        values = data.column(name).drop_null().to_pylist()
        for _ in range(25):
            a, b = sorted(rng.sample(values, 2))
            constant = a.isoformat() if isinstance(a, dt.date) else a
            high = b.isoformat() if isinstance(b, dt.date) else b
            for predicate in (
                Predicate(name, "<", (constant,)),
                Predicate(name, "<=", (constant,)),
                Predicate(name, ">", (constant,)),
                Predicate(name, ">=", (constant,)),
                Predicate(name, "between", (constant, high)),
            ):
                est = selectivity(doc, predicate) * rows
                exact = exact_count(data, predicate)
                # a range is off by at most the buckets it cuts plus the rank errors
                cut = 2 if predicate.op == "between" else 1
                assert abs(est - exact) <= cut * bucket_rows + 2 * bound, (predicate, est, exact)
                checked += 1
    # equality where each value is a bucket of its own: within the rank error
    for predicate in (
        Predicate("qty", "=", (Decimal(17),)),
        Predicate("qty", "in", ("3.00", 4, 50)),
        Predicate("disc", "=", ("0.05",)),
        Predicate("skew", "=", (7,)),
        Predicate("mode", "=", ("AIR",)),  # strings: no histogram, their frequent values
        Predicate("mode", "in", ("AIR", "SHIP")),
        Predicate("price", "is null"),
        Predicate("mode", "is null"),
    ):
        est = selectivity(doc, predicate) * rows
        exact = exact_count(data, predicate)
        assert _q_error(est, exact) <= 1.1, (predicate, est, exact)
        checked += 1
    # outside [min, max] nothing matches
    assert selectivity(doc, Predicate("qty", "=", (51,))) == 0.0
    assert selectivity(doc, Predicate("day", "<", ("1991-12-31",))) == 0.0
    assert checked == 5 * 25 * 5 + 8


def test_estimate_reads_the_current_stats(analyzed: Analyzed) -> None:
    text = "day BETWEEN '1993-01-01' AND '1993-03-31'"
    predicate = parse_predicate(text)
    assert predicate == Predicate("day", "between", ("1993-01-01", "1993-03-31"))
    result = lakestats.estimate(analyzed.location, text, config=analyzed.config)
    rows = len(analyzed.data)
    assert result.table_rows == rows
    assert result.selectivity == selectivity(analyzed.doc, predicate)
    assert result.rows == pytest.approx(result.selectivity * rows)
    bound = analyzed.doc["columns"]["day"]["sketch"]["quantiles"]["bucket_count_error"]
    assert abs(result.rows - exact_count(analyzed.data, predicate)) <= 2 * rows / 100 + 2 * bound


def test_predicates_parse_and_bad_ones_fail_in_one_line(
    analyzed: Analyzed,
) -> None:
    doc, _ = analyzed
    assert parse_predicate("qty = 5") == Predicate("qty", "=", (5,))
    assert parse_predicate("price<=2.5") == Predicate("price", "<=", (2.5,))
    assert parse_predicate("mode IN ('AIR', 'it''s')") == Predicate("mode", "in", ("AIR", "it's"))
    assert parse_predicate("mode is not null") == Predicate("mode", "is not null")
    for text, message in (
        ("qty ~ 5", "cannot read predicate"),
        ("qty = abc", "cannot read predicate"),
    ):
        with pytest.raises(PredicateError, match=message):
            parse_predicate(text)
    for predicate, message in (
        (Predicate("nope", "=", (1,)), r"no column 'nope' in the stats \(columns: .*\bqty\b"),
        (Predicate("mode", "<", ("B",)), r"has no histogram .*only =, IN and IS \[NOT\] NULL"),
        (Predicate("qty", "between", (1,)), "between takes 2"),
        (Predicate("day", "=", ("not a date",)), "is not a value of type date"),
        (Predicate("qty", "=", (None,)), "IS NULL"),
    ):
        with pytest.raises(PredicateError, match=message) as caught:
            selectivity(doc, predicate)
        assert "\n" not in str(caught.value)


def test_kll_error_rate_derives_k_and_is_validated() -> None:
    assert SketchConfig().settings() == SketchSettings(
        kll_k=1481, kll_error_rate=0.0025, frequent_items=256, value_samples=True
    )
    assert SketchConfig(histogram_buckets=10).settings().kll_k == kll_k_for_error(0.025)
    assert SketchConfig(kll_error_rate=0.005).settings().kll_k == 710
    assert kll_pmf_error(710) <= 0.005 < kll_pmf_error(709)
    assert SketchConfig(kll_k=200).settings().kll_error_rate is None  # k given directly
    for bad, message in (
        ({"kll_k": 200, "kll_error_rate": 0.001}, "not both"),
        ({"kll_error_rate": 0.02}, "not below one histogram bucket's share"),
        ({"kll_error_rate": 1e-9}, "must be between"),
    ):
        with pytest.raises(ValueError, match=message):
            SketchConfig(**bad)
    with pytest.raises(ConfigError, match="does not match"):
        validate_sketch_settings(SketchSettings(kll_k=200, kll_error_rate=0.0025))


def test_show_draws_the_histogram_it_serves(
    analyzed: Analyzed, capsys: pytest.CaptureFixture[str]
) -> None:
    from lakestats.cli import main

    for name in ("day", "qty"):
        out = io.StringIO()
        state = ["--state-dir", analyzed.config.state_dir]
        assert main(["show", analyzed.location, *state, "--histogram", name], out=out) == 0
        text = out.getvalue()
        drawn = text[text.index(f"histogram of {name}") :].splitlines()
        served = analyzed.doc["columns"][name]["histogram"]
        assert len(drawn) == 3 + len(served)  # title, header, rule, a line per bucket
        for line, bucket in zip(drawn[3:], served, strict=True):
            assert f"{bucket['lower']}, {bucket['upper']}]" in line
            assert f"~{bucket['count']}" in line and "█" in line
    capsys.readouterr()
    args = ["show", analyzed.location, "--state-dir", analyzed.config.state_dir]
    out = io.StringIO()
    assert main([*args, "--histogram", "nope"], out=out) != 0
    err = capsys.readouterr().err
    assert "no column 'nope'" in err and "(columns: " in err and "Traceback" not in err
    assert out.getvalue() == ""  # the error alone, not the stats and then the error
    # a column without a histogram says why: the type gets one, its stats had no sketches
    doc = {"type": "int", "histogram": None}
    assert render_histogram("n", doc) == (
        "histogram of n: none (its stats were computed without sketches, or it holds no value)\n"
    )
    assert render_histogram("s", {"type": "string"}) == (
        "histogram of s: none (no column of type string has one)\n"
    )


def test_a_rare_minimum_below_a_hot_value_gets_its_own_bucket() -> None:
    """Zipf-like days: the minimum once, the next value half the rows. Without its own
    bucket the minimum shared one with the hot value and `< hot` came out as half the rows
    (q-error 265,888 in tests/bench/qerror.py)."""
    from datasketches import kll_doubles_sketch

    from lakestats.sketches.histogram import equi_depth_histogram

    values = [0.0] + [1.0] * 50_000 + [float(2 + i % 3000) for i in range(49_999)]
    sketch = kll_doubles_sketch(1481)
    for v in values:
        sketch.update(v)
    buckets = equi_depth_histogram(bytes(sketch.serialize()), 3002.0, 100, value_step=1.0)
    assert (buckets[0].lower, buckets[0].upper) == (0.0, 0.0)
    assert (buckets[1].lower, buckets[1].upper, buckets[1].ndv) == (0.0, 1.0, 1.0)
    error = math.ceil(kll_pmf_error(1481) * len(values))
    assert abs(buckets[1].count - 50_000) <= error
    histogram = [
        {"lower": b.lower, "upper": b.upper, "count": round(b.count), "ndv": b.ndv} for b in buckets
    ]
    doc = {
        "record_count": len(values),
        "columns": {"d": {"type": "long", "null_count": 0, "ndv": 3002, "histogram": histogram}},
    }
    assert selectivity(doc, Predicate("d", "<", (1,))) * len(values) <= error + 1
    assert abs(selectivity(doc, Predicate("d", "=", (1,))) * len(values) - 50_000) <= error


def _check_bucket_ndvs(doc: dict[str, Any], data: pa.Table) -> int:
    """Every numeric column's bucket NDVs are measured and within the sample's bound of
    the exact distinct count of the bucket's range; returns the estimated buckets checked."""
    checked = 0
    for name in NUMERIC:
        column = doc["columns"][name]
        sample = column["sketch"]["value_sample"]
        theta = sample["theta"]
        rows_error = column["sketch"]["quantiles"]["bucket_count_error"]
        distinct = sorted(set(_kll_units(column["type"], data.column(name))))
        misses = 0
        for j, bucket in enumerate(column["histogram"]):
            assert bucket["ndv_apportioned"] is False
            lower = _unit(column["type"], bucket["lower"])
            upper = _unit(column["type"], bucket["upper"])
            first = (bisect.bisect_left if j == 0 else bisect.bisect_right)(distinct, lower)
            exact = bisect.bisect_right(distinct, upper) - first
            if sample["exact"]:
                assert bucket["ndv"] == exact, (name, j, bucket)
                continue
            # the retained count in a range is binomial(exact, theta): 3 standard deviations
            # (normal approximation), +1 for the floor of one value, + the row-count cap's
            # own error
            bound = 3 * math.sqrt(exact * (1 - theta) / theta) + 1 + rows_error
            misses += abs(bucket["ndv"] - exact) > bound
            checked += 1
        assert misses <= 1, name  # ~0.3 % of buckets may fall outside 3 sigma
    return checked


def test_bucket_ndv_is_measured_within_the_sample_bound(analyzed: Analyzed) -> None:
    doc, data = analyzed
    samples = {name: doc["columns"][name]["sketch"]["value_sample"] for name in NUMERIC}
    # qty/disc/day hold fewer distinct values than the sample keeps: exact there
    assert {name for name, s in samples.items() if s["exact"]} == {"qty", "disc", "day"}
    assert all(s["kind"] == "tuple_min_double" and s["version"] == 1 for s in samples.values())
    assert _check_bucket_ndvs(doc, data) > 100  # skew and price: estimates, checked


@dataclass(frozen=True)
class Incremental:
    warehouse: IcebergWarehouse
    location: str
    config: Config


@pytest.fixture(scope="module")
def incremental(tmp_path_factory: pytest.TempPathFactory) -> Incremental:
    """The fixture's rows analyzed in two runs, with a file added in the first and removed
    in the second (its sketches re-merged out of the aggregates)."""
    root = tmp_path_factory.mktemp("incremental")
    warehouse = IcebergWarehouse(root / "wh")
    warehouse.create_table("t", SCHEMA)
    location = warehouse.location("t")
    config = Config(state_dir=str(root / "state"), sketch=OPT_IN)
    rng = random.Random(14)
    batches = [_batch(rng) for _ in range(3)]
    stray = _batch(random.Random(99))
    stray = stray.set_column(0, "qty", pa.array([Decimal(99)] * len(stray), SCHEMA.field(0).type))
    warehouse.append("t", batches[0])
    warehouse.append("t", stray)
    lakestats.analyze_table(location, config=config)
    warehouse.append("t", batches[1])
    warehouse.delete("t", "qty = 99")  # drops the stray file whole
    warehouse.append("t", batches[2])
    lakestats.analyze_table(location, config=config)
    return Incremental(warehouse, location, config)


def test_bucket_ndv_incremental_equals_from_scratch(
    analyzed: Analyzed, incremental: Incremental
) -> None:
    doc = lakestats.read_stats(incremental.location, config=incremental.config)
    assert doc["record_count"] == len(analyzed.data)
    for name in NUMERIC:
        ours, scratch = doc["columns"][name], analyzed.doc["columns"][name]
        # the same sample (theta and retained entries) and so the same NDV
        assert ours["sketch"]["value_sample"] == scratch["sketch"]["value_sample"], name
        assert ours["ndv"] == scratch["ndv"], name
        assert all(b["ndv_apportioned"] is False for b in ours["histogram"])


def test_an_older_store_without_value_samples_falls_back_to_apportioned_ndv(
    analyzed: Analyzed, incremental: Incremental
) -> None:
    """A store written before value samples and frequent items existed (no
    ``value_sample_v1``/``frequent_items_v1`` columns) stays readable; the next commit's
    document apportions bucket NDVs and says so, and has no frequent values."""
    stripped = 0
    new_columns = ["value_sample_v1", "frequent_items_v1"]
    for path in Path(incremental.config.state_dir).rglob("*.parquet"):
        table = pq.read_table(path)
        if set(new_columns) <= set(table.column_names):
            pq.write_table(table.drop_columns(new_columns), path)
            stripped += 1
    assert stripped >= 2  # segments and aggregates
    extra = _batch(random.Random(5))
    incremental.warehouse.append("t", extra)
    lakestats.analyze_table(incremental.location, config=incremental.config)
    doc = lakestats.read_stats(incremental.location, config=incremental.config)
    assert doc["record_count"] == len(analyzed.data) + len(extra)
    for name in NUMERIC:
        column = doc["columns"][name]
        assert "value_sample" not in column["sketch"]  # the older files have none
        assert "frequent_items" not in column["sketch"] and column["frequent_values"] is None
        histogram = column["histogram"]
        assert histogram and all(b["ndv_apportioned"] is True for b in histogram)
        assert sum(b["ndv"] for b in histogram) == pytest.approx(column["ndv"], rel=0.01)


def test_frequent_values_of_low_cardinality_columns_are_exact(analyzed: Analyzed) -> None:
    """50 quantities and 11 discounts: the frequent-items sketch never had to evict, so
    its counts are exact (maximum error 0) and every value is listed."""
    doc, data = analyzed
    for name, values in (("qty", 50), ("disc", 11)):
        column = doc["columns"][name]
        info = column["sketch"]["frequent_items"]
        assert info["maximum_error"] == 0 and info["complete"] is True
        exact = pc.value_counts(data.column(name)).to_pylist()
        counts = {str(c["values"]): c["counts"] for c in exact if c["values"] is not None}
        listed = {f["value"]: f["count"] for f in column["frequent_values"]}
        assert len(listed) == values and listed == counts
    for predicate in (Predicate("qty", "=", ("17",)), Predicate("disc", "in", ("0.01", "0.10"))):
        assert selectivity(doc, predicate) * len(data) == exact_count(data, predicate)


def test_the_estimate_command_answers_from_the_stored_stats(
    analyzed: Analyzed, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lakestats estimate``: each predicate's rows as the library estimates them (and so
    within its bounds of the exact count), in JSON and as a table; a bad predicate is one
    line naming it, exit 1, nothing printed on stdout."""
    import json

    from lakestats.cli import main
    from lakestats.estimates import estimate_from

    texts = [
        "day BETWEEN '1993-01-01' AND '1993-03-31'",
        "qty IN ('3.00', 4, 50)",
        "skew = 7",
        "price IS NULL",
        "mode = 'AIR'",
        "disc >= 0.05",
    ]
    state = ["--state-dir", analyzed.config.state_dir]
    out = io.StringIO()
    assert main(["estimate", analyzed.location, *state, "--json", *texts], out=out) == 0
    report = json.loads(out.getvalue())
    rows = len(analyzed.data)
    assert report["table_rows"] == rows
    assert report["snapshot_id"] == analyzed.doc["snapshot_id"]
    assert [e["predicate"] for e in report["estimates"]] == texts
    for entry, text in zip(report["estimates"], texts, strict=True):
        predicate = parse_predicate(text)
        [term] = entry["terms"]
        assert (term["column"], term["op"], tuple(term["values"])) == (
            predicate.column,
            predicate.op,
            predicate.values,
        )
        assert entry["independent_columns"] is False
        library = estimate_from(analyzed.doc, predicate)
        assert term["selectivity"] == library.selectivity
        assert entry["rows"] == library.rows and entry["selectivity"] == library.selectivity
        exact = exact_count(analyzed.data, predicate)
        if predicate.op == "between":
            bound = analyzed.doc["columns"]["day"]["sketch"]["quantiles"]["bucket_count_error"]
            assert abs(entry["rows"] - exact) <= 2 * rows / 100 + 2 * bound, (text, exact)
        elif predicate.op == ">=":
            bound = analyzed.doc["columns"]["disc"]["sketch"]["quantiles"]["bucket_count_error"]
            assert abs(entry["rows"] - exact) <= rows / 100 + 2 * bound, (text, exact)
        else:
            assert _q_error(entry["rows"], exact) <= 1.1, (text, entry["rows"], exact)
    capsys.readouterr()

    out = io.StringIO()
    assert main(["estimate", analyzed.location, *state, *texts], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        f"{Path(analyzed.location).name} at snapshot {analyzed.doc['snapshot_id']}: {rows:,} rows"
    )
    assert lines[2].split() == ["rows≈", "selectivity", "predicate"]
    for line, entry in zip(lines[4:], report["estimates"], strict=True):
        assert line.endswith(entry["predicate"])
        assert f"{entry['selectivity']:.4%}" in line
    assert len(lines) == 4 + len(texts)
    assert capsys.readouterr().err == ""  # the stats are current: no warning

    for bad, message in (
        ("nope = 1", "'nope = 1': no column 'nope' in the stats (columns: "),
        ("mode < 'B'", "has no histogram"),
        ("qty = 1e999", "'1e999' is out of range"),
        ("qty ~ 5", "cannot read predicate 'qty ~ 5'"),
    ):
        out = io.StringIO()
        assert main(["estimate", analyzed.location, *state, "skew = 7", bad], out=out) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert out.getvalue() == ""


def test_show_lists_the_most_common_values(analyzed: Analyzed) -> None:
    """``show`` lists, per column, the values holding at least 1 % of the rows each, with
    their share, from the served ``frequent_values``: checked against pyarrow's exact
    counts, for a string column too. A column without such values (dates spread over
    ~2,500 days) is not listed."""
    from lakestats.cli import main
    from lakestats.render import COMMON_SHARE, COMMON_SHOWN

    out = io.StringIO()
    assert main(["show", analyzed.location, "--state-dir", analyzed.config.state_dir], out=out) == 0
    text = out.getvalue()
    section = text[text.index("most common values") :].split("\n\n")[0].splitlines()[1:]
    listed = {line.split()[0]: line.split(maxsplit=1)[1] for line in section}
    rows = len(analyzed.data)
    expected = {}
    for name in (*NUMERIC, "mode"):
        counts = pc.value_counts(analyzed.data.column(name).drop_null()).to_pylist()
        common = sorted(
            (c for c in counts if c["counts"] >= COMMON_SHARE * rows),
            key=lambda c: (-c["counts"], str(c["values"])),
        )
        if common:
            expected[name] = common
    assert set(listed) == set(expected) == {"qty", "disc", "skew", "mode"}
    for name, common in expected.items():
        shown = listed[name].split(", ")
        assert len(shown) == min(COMMON_SHOWN, len(common))
        exact = {str(c["values"]): c["counts"] for c in common}
        served = {str(f["value"]): f for f in analyzed.doc["columns"][name]["frequent_values"]}
        for item in shown:
            value, share = item.split()
            if name == "mode":  # strings are quoted
                assert value[0] == value[-1] == "'"
                value = value[1:-1]
            entry = served[value]
            assert entry["count_lower"] <= exact[value] <= entry["count_upper"], (name, item)
            if entry["count_lower"] == entry["count_upper"]:  # the sketch's count is exact
                assert share == f"{exact[value] / rows:.1%}", (name, item)
            else:  # an estimate, said so
                assert share == f"{entry['count'] / rows:.1%}≈", (name, item)
    # 30 % of the rows; 100,000 other values, so the sketch holds its count within bounds
    assert listed["skew"].startswith("7 ") and listed["skew"].endswith("≈")
    assert "≈" not in listed["qty"] + listed["disc"]  # 50 and 11 values: counted exactly
    assert "≈" not in listed["mode"]  # 4 strings


def test_conjunctions_against_exact_counts(analyzed: Analyzed) -> None:
    """Comparisons joined by AND: on one column combined as one range or value set (the
    same count as the single comparison they amount to, and as close to the exact count);
    contradictions count nothing; different columns multiplied, and, where the data's
    columns are independent (drawn apart here), close to the exact count."""
    from lakestats.estimates import estimate_from, estimate_json
    from lakestats.predicates import parse_conjunction

    doc, data = analyzed
    rows = len(data)

    def est(text: str) -> float:
        return estimate_from(doc, text).rows

    def exact(text: str) -> int:
        mask = None
        for term in parse_conjunction(text):
            column = data.column(term.column)
            one = (
                pc.is_null(column)
                if term.op == "is null"
                else pc.is_valid(column)
                if term.op == "is not null"
                else _matches(column, term)
            )
            mask = one if mask is None else pc.and_kleene(mask, one)
        return int(pc.sum(pc.fill_null(mask, False)).as_py() or 0)

    day_bound = doc["columns"]["day"]["sketch"]["quantiles"]["bucket_count_error"]
    for same, single in (
        (
            "day >= '1993-01-01' AND day <= '1993-03-31'",
            "day BETWEEN '1993-01-01' AND '1993-03-31'",
        ),
        (
            "day <= '1993-03-31' AND day > '1992-06-30' AND day >= '1993-01-01'",
            "day BETWEEN '1993-01-01' AND '1993-03-31'",
        ),
        ("price < 1000 AND price IS NOT NULL", "price < 1000"),
        ("qty IN ('3.00', 4, 50) AND qty > 10", "qty = 50"),
        ("qty IN (3, 4, 50) AND qty IN (4, 50, 7) AND qty <= 4", "qty = 4"),
        ("skew = 7 AND skew BETWEEN 0 AND 10", "skew = 7"),
    ):
        assert est(same) == pytest.approx(est(single), abs=1e-6), same
        assert exact(same) == exact(single), same
        assert abs(est(same) - exact(same)) <= 2 * rows / 100 + 2 * day_bound, same
    for nothing in (
        "skew = 7 AND skew = 8",
        "price IS NULL AND price > 5",
        "day > '1995-01-01' AND day < '1994-01-01'",
        "qty > 5 AND qty < 5",
        "qty >= 5 AND qty < 5",
        "qty IN (1, 2) AND qty > 2",
    ):
        assert est(nothing) == 0 and exact(nothing) == 0, nothing
    # different columns: independent in this data (drawn apart), so the product is close
    for text in ("disc = 0.05 AND qty < 10", "mode = 'AIR' AND skew = 7 AND price IS NOT NULL"):
        answer = estimate_json(doc, text)
        assert answer["independent_columns"] is True
        product = math.prod(t["selectivity"] for t in answer["terms"])
        assert answer["selectivity"] == pytest.approx(product)
        assert _q_error(answer["rows"], exact(text)) <= 1.15, (text, answer["rows"], exact(text))


def _matches(column: pa.ChunkedArray, predicate: Predicate) -> pa.ChunkedArray:
    typed = [pa.scalar(v, type=column.type) for v in _typed(column.type, predicate.values)]
    if predicate.op == "in":
        return pc.is_in(column, value_set=pa.array([t.as_py() for t in typed], column.type))
    if predicate.op == "between":
        return pc.and_(pc.greater_equal(column, typed[0]), pc.less_equal(column, typed[1]))
    compare = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater}
    return compare.get(predicate.op, pc.greater_equal)(column, typed[0])


def test_an_unknown_column_names_the_known_ones_in_one_line() -> None:
    doc = {"columns": {f"c{i}": {} for i in range(25)}, "record_count": 1}
    with pytest.raises(PredicateError) as caught:
        selectivity(doc, Predicate("x", "=", (1,)))
    assert str(caught.value) == (
        "no column 'x' in the stats (columns: "
        + ", ".join(f"c{i}" for i in range(20))
        + ", … 5 more)"
    )


def test_a_range_error_offers_what_the_column_can_estimate() -> None:
    """A boolean without an NDV still answers = from its true/false counts; a column with
    neither answers only IS [NOT] NULL: the error offers exactly that."""
    boolean = {"type": "boolean", "null_count": 0, "true_count": 3, "false_count": 1}
    plain = {"type": "long", "null_count": 0}
    doc = {"record_count": 4, "columns": {"b": boolean, "n": plain}}
    assert selectivity(doc, Predicate("b", "=", (True,))) == 0.75
    with pytest.raises(PredicateError, match=r"only =, IN and IS \[NOT\] NULL can be"):
        selectivity(doc, Predicate("b", "<", (True,)))
    with pytest.raises(PredicateError, match=r"only IS \[NOT\] NULL can be"):
        selectivity(doc, Predicate("n", "<", (3,)))
    with pytest.raises(PredicateError, match="has no NDV"):
        selectivity(doc, Predicate("n", "=", (3,)))


def test_nan_is_equal_to_itself_and_above_every_number(spark: Any, tmp_path: Path) -> None:
    """Spark's semantics (DuckDB's and PostgreSQL's too, the oracle here): = 'NaN' matches
    the NaN rows, which every > and >= a number include, and < 'NaN' every other number.
    It was 0 rows for = 'NaN' and NaN left out of every range."""
    rng = random.Random(5)
    specials = [math.nan] * 60 + [math.inf] * 5 + [-math.inf] * 5 + [None] * 30
    values = [rng.uniform(-100, 100) for _ in range(900)] + specials
    rng.shuffle(values)
    warehouse = IcebergWarehouse(tmp_path / "wh")
    schema = pa.schema([pa.field("f", pa.float64())])
    warehouse.create_table("t", schema)
    warehouse.append("t", pa.table({"f": values}, schema=schema))
    config = Config(state_dir=str(tmp_path / "state"))
    lakestats.analyze_table(warehouse.location("t"), config=config)
    doc = lakestats.read_stats(warehouse.location("t"), config=config)
    assert doc["columns"]["f"]["nan_count"] == 60
    oracle = duckdb.connect()
    oracle.register("data", warehouse.table("t").scan().to_arrow())
    kll = doc["columns"]["f"]["sketch"]["quantiles"]
    error = 2 * kll["bucket_count_error"] + 0.02 * len(values)
    for text, sql, exact in [
        ("f = 'NaN'", "f = 'NaN'::DOUBLE", True),
        ("f IN ('NaN', 'Infinity')", "f IN ('NaN'::DOUBLE, 'Infinity'::DOUBLE)", False),
        ("f >= 'NaN'", "f >= 'NaN'::DOUBLE", True),
        ("f > 'NaN'", "f > 'NaN'::DOUBLE", True),
        ("f <= 'NaN'", "f <= 'NaN'::DOUBLE", True),
        ("f < 'NaN'", "f < 'NaN'::DOUBLE", True),
        ("f BETWEEN 'NaN' AND 'NaN'", "f BETWEEN 'NaN'::DOUBLE AND 'NaN'::DOUBLE", True),
        ("f > 50", "f > 50", False),
        ("f >= -1e300", "f >= -1e300", False),
        ("f BETWEEN 0 AND 'NaN'", "f BETWEEN 0 AND 'NaN'::DOUBLE", False),
        ("f BETWEEN 0 AND 50", "f BETWEEN 0 AND 50", False),
        ("f < 0", "f < 0", False),
    ]:
        # FILTER, not WHERE: DuckDB 1.5 pushes a WHERE into the Arrow scan, which compares
        # NaN as IEEE does (false) and folds f <= NaN to true, NULL rows too
        query = f"SELECT count(*) FILTER (WHERE {sql}) FROM data"  # noqa: S608
        want = oracle.sql(query).fetchone()[0]
        got = selectivity(doc, parse_predicate(text)) * len(values)
        assert abs(got - want) <= (1e-6 if exact else error), (text, got, want)


def test_a_constant_the_column_cannot_hold_matches_no_row() -> None:
    """1.5 in an integer column, digits past a decimal's scale or precision: no row holds
    them, whatever the NDV says of other values (it said 1/NDV of the rows)."""
    long = {"type": "long", "null_count": 0, "ndv": 4}
    dec = {"type": "decimal(4, 2)", "null_count": 0, "ndv": 4}
    doc = {"record_count": 8, "columns": {"n": long, "d": dec}}

    def rows(text: str) -> float:
        return selectivity(doc, parse_predicate(text)) * 8

    assert rows("n = 2") == rows("n = 2.0") == rows("n IN (1.5, 2)") == 2.0
    for none in ("n = 1.5", "n IN (0.5, 1e-3)", "d = 0.125", "d = '12.345'", "d = 123.45"):
        assert rows(none) == 0.0, none
    assert rows("d = 0.120") == rows("d = '12.3'") == rows("d IN (0.125, 12.3)") == 2.0


NUMBER_TYPES = ("int", "long", "float", "double", "decimal(10, 2)")


def _numbers_doc(type_str: str) -> dict[str, Any]:
    """Ten rows of ``type_str`` in the stats document's form: 0..9 once each, nulls and
    NaNs none, a histogram of two buckets (decimal bounds as text, as ``show --json``)."""

    def bound(number: int) -> Any:
        return f"{number}.00" if type_str.startswith("decimal") else number

    histogram = [
        {"lower": bound(0), "upper": bound(4), "count": 5, "ndv": 5},
        {"lower": bound(4), "upper": bound(9), "count": 5, "ndv": 5},
    ]
    column = {"type": type_str, "null_count": 0, "nan_count": 0, "ndv": 10}
    return {"record_count": 10, "columns": {"c": {**column, "histogram": histogram}}}


@pytest.mark.parametrize("type_str", NUMBER_TYPES)
@pytest.mark.parametrize(
    ("quoted", "plain"),
    [
        ("c > '3'", "c > 3"),
        ("c >= ' 2.5 '", "c >= 2.5"),
        ("c < '-1e1'", "c < -10"),
        ("c = '4'", "c = 4"),
        ("c = '0.125'", "c = 0.125"),
        ("c IN ('1.5', '7')", "c IN (1.5, 7)"),
        ("c BETWEEN '1' AND 6", "c BETWEEN 1 AND 6"),
        ("c > '10' AND c <= '6.00'", "c > 10 AND c <= 6"),
    ],
)
def test_a_quoted_number_is_the_number_on_every_number_column(
    type_str: str, quoted: str, plain: str
) -> None:
    """A quoted constant on a number column reads as the number it writes, as unquoted (as
    'id > 10' always did on a long): on a float or double it was a KeyError traceback."""
    doc = _numbers_doc(type_str)
    assert estimate_from(doc, quoted).rows == estimate_from(doc, plain).rows
    assert estimate_from(doc, "c > '3'").rows > 0


@pytest.mark.parametrize("type_str", NUMBER_TYPES)
@pytest.mark.parametrize(
    ("text", "value", "why"),
    [
        ("c = 'abc'", "'abc'", "is not a number"),
        ("c > 'abc'", "'abc'", "is not a number"),
        ("c IN (1, '1.5x')", "'1.5x'", "is not a number"),
        ("c BETWEEN '1' AND 'two'", "'two'", "is not a number"),
        ("c <= ''", "''", "is not a number"),
        ("c < '1e999'", "'1e999'", "is out of range"),  # as 1e999 unquoted
    ],
)
def test_a_quoted_constant_that_is_no_number_is_one_line_naming_the_column(
    type_str: str, text: str, value: str, why: str
) -> None:
    """Text that writes no number on a number column: a one-line PredicateError naming the
    column, its type and the text (the CLI's "lakestats: error:", the daemon's 400
    bad_predicate), not a KeyError (float, double) or Python's parser message."""
    doc = _numbers_doc(type_str)
    with pytest.raises(PredicateError) as caught:
        estimate_json(doc, text)
    assert str(caught.value) == f"{text!r}: column 'c' is of type {type_str}: {value} {why}"


@pytest.mark.parametrize("type_str", NUMBER_TYPES)
def test_nan_and_infinity_are_float_values_only(type_str: str) -> None:
    """A float's 'NaN' and 'Infinity' (as show --json prints them, any case) are read on a
    float or double column; on an integer or decimal one, which holds neither, they are
    an error, not a guess."""
    doc = _numbers_doc(type_str)
    texts = ("c < 'Infinity'", "c > '-INFINITY'", "c = 'NaN'", "c IN (1, 'nan')")
    if type_str in ("float", "double"):
        fractions = [selectivity(doc, parse_predicate(text)) for text in texts]
        assert fractions == [1.0, 1.0, 0.0, pytest.approx(0.1)]
        return
    for text in texts:
        with pytest.raises(PredicateError, match=r"is a value of float and double columns only"):
            selectivity(doc, parse_predicate(text))


def test_a_quoted_column_is_estimated_as_the_same_column_named_plainly() -> None:
    """A column whose name has a space or is AND, in double quotes or backticks, is the
    column of that name (it was "cannot read predicate", or cut at the quoted AND)."""
    column = _numbers_doc("long")["columns"]["c"]
    names = ("plain", "other", "my col", "AND", 'q"uo`te')
    doc = {"record_count": 10, "columns": dict.fromkeys(names, column)}
    plain = estimate_from(doc, "plain < 5").rows
    assert plain == 5.0  # 0..4 of 0..9
    for text in ('"my col" < 5', "`my col` < 5", '"AND" < 5', '"q""uo`te" < 5', '`q"uo``te` < 5'):
        assert estimate_from(doc, text).rows == plain, text
    both = estimate_json(doc, "\"AND\" < 5 AND `my col` >= '2'")
    assert [(t["column"], t["op"]) for t in both["terms"]] == [("AND", "<"), ("my col", ">=")]
    assert both["rows"] == estimate_from(doc, "plain < 5 AND other >= 2").rows == 4.0


def test_the_value_codec_reads_a_float_as_its_digits_or_fails_with_value_error() -> None:
    """``from_json`` of a float or double: its digits, or NaN/±Infinity; ValueError (which
    readers catch) for other text, where it was a KeyError."""
    assert from_json("double", "10") == from_json("float", "10.0") == 10.0
    assert from_json("double", "-Infinity") == -math.inf
    with pytest.raises(ValueError, match="abc"):
        from_json("float", "abc")


def test_an_empty_binary_value_is_one_more_than_the_ndv() -> None:
    """No theta sketch hashes an empty buffer: an exact min of b"" (hex "") says the binary
    column holds one value more than its NDV, as for strings."""
    binary = {"type": "binary", "null_count": 0, "ndv": 2, "min": "", "max": "ff"}
    doc = {"record_count": 9, "columns": {"b": {**binary, "min_max_exact": True}}}
    assert selectivity(doc, Predicate("b", "=", ("00",))) * 9 == pytest.approx(3.0)
    cut = {"record_count": 9, "columns": {"b": {**binary, "min_max_exact": False}}}
    assert selectivity(cut, Predicate("b", "=", ("00",))) * 9 == pytest.approx(4.5)


def test_what_the_stats_do_not_have_is_said_not_guessed() -> None:
    """A column without a null count (a Paimon TIMESTAMP(9) in the default stats mode: no
    metadata count, a type never sketched) answered IS NULL with 0 and IS NOT NULL with
    every row; = on a type never sketched blamed stats computed without sketches."""
    unknown = {"type": "timestamp", "null_count": None}
    time = {"type": "time", "null_count": 0}
    plain = {"type": "long", "null_count": 0}
    doc = {"record_count": 4, "columns": {"ts": unknown, "t": time, "n": plain}}
    for op in ("is null", "is not null"):
        with pytest.raises(PredicateError, match=r"'ts' has no null count .* cannot be estim"):
            selectivity(doc, Predicate("ts", op, ()))
        assert selectivity(doc, Predicate("t", op, ())) == (0.0 if op == "is null" else 1.0)
    with pytest.raises(PredicateError, match=r"no NDV \(no column of type time is sketched\)"):
        selectivity(doc, Predicate("t", "=", ("00:00:00",)))
    with pytest.raises(PredicateError, match=r"no NDV \(its stats were computed without sk"):
        selectivity(doc, Predicate("n", "=", (3,)))


@pytest.mark.parametrize("sketches", [True, False], ids=["sketched", "metadata-only"])
def test_string_equality_outside_the_exact_bounds_is_none_and_the_empty_string_counts(
    spark: Any, tmp_path: Path, sketches: bool
) -> None:
    """A string column has no histogram: without frequent values = and IN come from the
    NDV, but a constant outside its exact [min, max] matches no row (without sketches too),
    and the empty string, which no theta sketch counts (Iceberg's convention), is one
    distinct value more when the exact min says the column holds it. With frequent values
    (the default) every value of so few is counted exactly, "" too. Oracle: pyarrow over the
    table's scan."""
    warehouse = IcebergWarehouse(tmp_path / "wh")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    warehouse.create_table("t", schema)
    values = ["", "b", "c", None, "b", "c", "c", "b"]
    warehouse.append("t", pa.table({"id": list(range(80)), "s": values * 10}, schema=schema))
    location = warehouse.location("t")
    sketch = SketchConfig(enabled=sketches, frequent_items=0)
    config = Config(state_dir=str(tmp_path / "state"), sketch=sketch)
    lakestats.analyze_table(location, config=config)
    doc = lakestats.read_stats(location, config=config)
    data = warehouse.table("t").scan().to_arrow()
    column = doc["columns"]["s"]
    assert (column["min"], column["max"], column["min_max_exact"]) == ("", "c", True)
    rows = doc["record_count"]
    for outside in (Predicate("s", "=", ("d",)), Predicate("s", "in", ("cc", "zz"))):
        assert exact_count(data, outside) == 0
        assert selectivity(doc, outside) == 0.0
    if not sketches:
        with pytest.raises(PredicateError, match="has no NDV"):
            selectivity(doc, Predicate("s", "=", ("b",)))
        return
    distinct = pc.count_distinct(data.column("s").drop_null()).as_py()
    assert column["ndv"] == distinct - 1  # "" is in no sketch
    non_null = rows - data.column("s").null_count
    for value in ("", "b", "c"):
        predicate = Predicate("s", "=", (value,))
        assert selectivity(doc, predicate) * rows == pytest.approx(non_null / distinct)
    mixed = Predicate("s", "in", ("", "c", "zz"))
    assert selectivity(doc, mixed) * rows == pytest.approx(2 * non_null / distinct)
    assert exact_count(data, mixed) == 40
    # frequent values: exact counts, and none for a value inside [min, max] not among them
    counted = Config(state_dir=str(tmp_path / "counted"))
    lakestats.analyze_table(location, config=counted)
    with_frequent = lakestats.read_stats(location, config=counted)
    for predicate in (*(Predicate("s", "=", (v,)) for v in ("", "b", "c", "bb")), mixed):
        exact = exact_count(data, predicate)
        assert selectivity(with_frequent, predicate) * rows == exact, predicate
    # the human show quotes string values, so the empty string reads as one
    section = render_stats(with_frequent).split("most common values")[1].splitlines()
    (common,) = [line.split(maxsplit=1)[1] for line in section if line.split()[:1] == ["s"]]
    assert common == "'b' 37.5%, 'c' 37.5%, '' 12.5%"
