"""Dates and timestamps at the edges of what Python holds: 9999-12-31 23:59:59.999999, the
"valid until" of slowly changing dimensions, is a double of year 10000 in a KLL sketch; and
Parquet, Spark and Iceberg hold years past 9999, which no Python datetime does. ``analyze``
failed on both with a traceback (OverflowError) and never advanced again. Written by
delta-rs and pyiceberg; expected values from pyarrow over the rows each writer reads back."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from cli_runs import analyzed_stats, cli
from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.testing import IcebergWarehouse
from lakestats.values import bound_from_physical, clamp_physical

pytestmark = pytest.mark.spark

END_OF_TIME = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
ROWS = {
    "id": pa.array([1, 2, 3, 4], pa.int64()),
    "valid_to": pa.array(
        [dt.datetime(2024, 1, 1), END_OF_TIME, END_OF_TIME, None], pa.timestamp("us")
    ),
    "day": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31), None, dt.date(2024, 5, 6)]),
    # doubles round these past the column's max (…59.999008; 2^63 for a long)
    "valid_ms": pa.array(
        [dt.datetime(2024, 1, 1), END_OF_TIME.replace(microsecond=999000)] * 2, pa.timestamp("us")
    ),
    "big": pa.array([2**63 - 1, 2**63 - 2, 2**63 - 1, 0], pa.int64()),
}


def test_python_holds_the_edges_a_sketch_rounds_past() -> None:
    micros = (END_OF_TIME - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    assert float(micros) > micros  # the double KLL keeps is of year 10000
    assert clamp_physical("timestamp", round(float(micros))) == micros
    assert clamp_physical("date", -(10**9)) == (dt.date.min - dt.date(1970, 1, 1)).days
    assert clamp_physical("timestamp", 5) == 5
    assert bound_from_physical("timestamp", micros + 86_400_000_000) is None  # year 10000
    assert bound_from_physical("timestamp", micros) == END_OF_TIME


def _check(doc: dict[str, object]) -> None:
    columns = doc["columns"]
    assert isinstance(columns, dict)
    valid_to = columns["valid_to"]
    assert (valid_to["min"], valid_to["max"]) == ("2024-01-01T00:00:00", END_OF_TIME.isoformat())
    assert valid_to["min_max_exact"] is True
    assert valid_to["null_count"] == 1
    assert valid_to["ndv"] == 2
    assert valid_to["quantiles"]["0.99"] == END_OF_TIME.isoformat()
    assert valid_to["histogram"][-1]["upper"] == END_OF_TIME.isoformat()
    assert {f["value"]: f["count"] for f in valid_to["frequent_values"]}[
        END_OF_TIME.isoformat()
    ] == 2
    day = columns["day"]
    assert (day["min"], day["max"]) == ("0001-01-01", "9999-12-31")
    assert day["ndv"] == 3
    # what a sketch shows stays within the exact min and max
    for name in ("valid_ms", "big"):
        column = columns[name]
        shown = [*column["quantiles"].values(), *(f["value"] for f in column["frequent_values"])]
        shown += [b[k] for b in column["histogram"] for k in ("lower", "upper")]
        assert max(shown) == column["max"], name
        assert min(shown) == column["min"], name


def test_a_delta_table_ending_at_the_end_of_time(tmp_path: Path) -> None:
    table = str(tmp_path / "scd2")
    write_deltalake(table, pa.table(ROWS))
    doc = analyzed_stats(table, tmp_path / "state")
    _check(doc)

    # and every reader of the stats: the estimator, the advisor, the histogram view
    state = str(tmp_path / "state")
    out = cli(
        "estimate", table, "valid_to = TIMESTAMP '9999-12-31 23:59:59.999999'", "--state-dir", state
    )
    assert "valid_to =" in out
    advice = json.loads(cli("advise", table, "--state-dir", state, "--json"))
    assert advice
    assert "histogram of valid_to" in cli(
        "show", table, "--state-dir", state, "--histogram", "valid_to"
    )


def test_an_iceberg_table_ending_at_the_end_of_time(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    data = pa.table(ROWS)
    wh.create_table("t", data.schema)
    wh.append("t", data)
    _check(analyzed_stats(wh.location("t"), tmp_path / "state"))


def test_a_timestamp_past_year_9999_leaves_the_max_unknown(tmp_path: Path) -> None:
    """Such a bound is kept as unknown, as if the writer kept none: the table's stats go on."""
    past = (END_OF_TIME - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1) + 86_400_000_000
    table = str(tmp_path / "far")
    ts = pa.array([0, 1_000_000, past], pa.timestamp("us"))
    write_deltalake(table, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "ts": ts}))
    doc = analyzed_stats(table, tmp_path / "state")

    column = doc["columns"]["ts"]
    assert column["min"] == "1970-01-01T00:00:00"
    assert column["max"] is None
    assert column["min_max_exact"] is False
    assert column["null_count"] == 0
    assert column["ndv"] == 3
    assert doc["columns"]["id"]["max"] == 3


@pytest.mark.parametrize("engine", ["sql", "auto"])
def test_both_engines_scan_a_year_past_9999_as_an_unknown_bound(
    spark: Any, tmp_path: Path, engine: Literal["sql", "auto"]
) -> None:
    past = (END_OF_TIME - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1) + 1
    path = str(tmp_path / "far.parquet")
    ts = pa.array([-(10**18), 0, past], pa.timestamp("us"))  # year -29719 … year 10000
    pq.write_table(pa.table({"ts": ts, "d": pa.array([0, 3_000_000, None], pa.date32())}), path)
    schema = TableSchema(0, (Column(1, "ts", "timestamp"), Column(2, "d", "date")))

    (sketches,) = sketch_files(
        spark, [path], schema, SketchSettings(), match_by="name", engine=engine
    ).values()

    assert (sketches[1].min, sketches[1].max) == (None, None)
    assert sketches[1].null_count == 0
    assert (sketches[2].min, sketches[2].max) == (dt.date(1970, 1, 1), None)  # 3 M days: 10183
    assert sketches[2].null_count == 1
