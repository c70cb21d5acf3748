"""Sketch statistics end to end on real tables and a real SparkSession.

NDV, quantiles, lengths and boolean counts from `show --json` are checked against exact
values from pyarrow over the live rows; incremental runs against from-scratch runs; and a
commit that only removes files must run no Spark job at all.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import random
from bisect import bisect_left, bisect_right
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakestats.cli import main
from lakestats.pipeline import JOB_GROUP
from lakestats.sketches.merge import kll_normalized_rank_error
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("zipf", pa.int64()),
        pa.field("dup", pa.string()),
        pa.field("text", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("day", pa.date32()),
        pa.field("price", pa.decimal128(12, 2)),
        pa.field("empty", pa.int32()),
    ]
)
RSE_LG12 = 1 / math.sqrt(2**12)
RANK_ERROR = kll_normalized_rank_error(200)


def batch(rng: random.Random, start: int, n: int) -> pa.Table:
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0]
    return pa.table(
        {
            "id": list(range(start, start + n)),
            "zipf": [min(int(rng.paretovariate(1.2)), 10**6) for _ in range(n)],
            "dup": [rng.choice(["a", "b", "c", None]) for _ in range(n)],
            "text": [
                None
                if rng.random() < 0.1
                else "ünïcødé-" + "x" * rng.randint(0, 40) + str(rng.randint(0, 3000))
                for _ in range(n)
            ],
            "score": [
                rng.choice(specials)
                if rng.random() < 0.05
                else (None if rng.random() < 0.05 else rng.gauss(0, 100))
                for _ in range(n)
            ],
            "flag": [None if rng.random() < 0.1 else rng.random() < 0.3 for _ in range(n)],
            "day": [
                dt.date(2020, 1, 1) + dt.timedelta(days=rng.randint(0, 2000)) for _ in range(n)
            ],
            "price": [Decimal(rng.randint(0, 10**7)).scaleb(-2) for _ in range(n)],
            "empty": pa.nulls(n, pa.int32()),
        },
        schema=SCHEMA,
    )


def cli(*args: str) -> dict[str, Any] | None:
    out = io.StringIO()
    assert main(list(args), out=out) == 0
    text = out.getvalue()
    return json.loads(text) if text.lstrip().startswith("{") else None


def exact_rank_ok(values: list[float], q: float, v: float) -> bool:
    n = len(values)
    lo, hi = bisect_left(values, v) / n, bisect_right(values, v) / n
    return lo - RANK_ERROR <= q <= hi + RANK_ERROR


def check_against_exact(doc: dict[str, Any], data: pa.Table) -> None:
    assert doc["record_count"] == data.num_rows
    cols = doc["columns"]
    for name in ("id", "zipf", "dup", "text", "day", "price", "score"):
        col = data.column(name)
        present = col.drop_null()
        if name == "score":
            present = present.filter(pc.invert(pc.is_nan(present)))
            # Iceberg counts NaN apart; -0.0 and 0.0 are one value for NDV purposes
        exact_ndv = len(set(present.to_pylist()))
        ndv = cols[name]["ndv"]
        assert abs(ndv - exact_ndv) <= 3 * RSE_LG12 * exact_ndv + 1, (name, ndv, exact_ndv)
        assert cols[name]["null_count"] == col.null_count, name
    score = data.column("score").drop_null()
    assert cols["score"]["nan_count"] == pc.sum(pc.is_nan(score)).as_py()
    # quantiles: the exact rank of each reported value is within KLL's bound
    for name, convert in (
        ("id", float),
        ("zipf", float),
        ("price", lambda s: float(Decimal(s))),
        ("day", lambda s: float((dt.date.fromisoformat(s) - dt.date(1970, 1, 1)).days)),
    ):
        raw = data.column(name).drop_null().to_pylist()
        if name == "day":
            values = sorted(float((d - dt.date(1970, 1, 1)).days) for d in raw)
        else:
            values = sorted(float(v) for v in raw)
        for q, v in cols[name]["quantiles"].items():
            assert exact_rank_ok(values, float(q), convert(v)), (name, q, v)
        hist = cols[name]["histogram"]
        assert 1 <= len(hist) <= 100
        assert abs(sum(b["count"] for b in hist) - len(values)) <= 1
    # strings: exact min/max (manifest bounds are truncated at 16 chars), lengths
    text = data.column("text").drop_null().to_pylist()
    assert cols["text"]["min"] == min(text) and cols["text"]["max"] == max(text)
    assert cols["text"]["min_max_exact"] is True
    assert cols["text"]["max_len"] == max(len(t) for t in text)
    assert cols["text"]["avg_len"] == pytest.approx(sum(len(t) for t in text) / len(text))
    flags = data.column("flag").to_pylist()
    assert cols["flag"]["true_count"] == flags.count(True)
    assert cols["flag"]["false_count"] == flags.count(False)
    assert cols["empty"]["null_count"] == data.num_rows
    assert cols["empty"]["ndv"] == 0
    assert cols["empty"]["min"] is None and cols["empty"]["min_max_exact"] is True


def spark_jobs(spark: Any) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP))


def test_sketches_incremental_deletes_and_compaction(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # k given directly (the default derives k from sketch.kll_error_rate): RANK_ERROR's k
    monkeypatch.setenv("LAKESTATS_SKETCH__KLL_K", "200")
    rng = random.Random(42)
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    loc = wh.location("t")
    every = tmp_path / "every"

    def analyze(state: Path) -> None:
        cli("analyze", loc, "--state-dir", str(state), "-q")

    for i in range(3):
        wh.append("t", batch(rng, i * 6000, 6000))
        analyze(every)
    doc = cli("show", loc, "--state-dir", str(every), "--json")
    assert doc is not None
    check_against_exact(doc, wh.table("t").scan().to_arrow())
    assert doc["columns"]["id"]["sketch"]["ndv"]["kind"] == "theta"
    assert doc["columns"]["id"]["sketch"]["quantiles"]["k"] == 200

    # A delete of whole files: no data file is read, no Spark job runs.
    before = spark_jobs(spark)
    wh.delete("t", "id < 6000")  # exactly the first append's file
    assert wh.table("t").current_snapshot().summary.operation.value == "delete"  # type: ignore[union-attr]
    analyze(every)
    assert spark_jobs(spark) == before
    doc = cli("show", loc, "--state-dir", str(every), "--json")
    assert doc is not None
    check_against_exact(doc, wh.table("t").scan().to_arrow())

    # A partial delete (rewrite) and a compaction (all rows rewritten into one file).
    wh.delete("t", "id >= 10000 and id < 11000")
    analyze(every)
    live = wh.table("t").scan().to_arrow()
    wh.overwrite("t", live)
    analyze(every)
    assert spark_jobs(spark) > before
    final = cli("show", loc, "--state-dir", str(every), "--json")
    assert final is not None
    check_against_exact(final, wh.table("t").scan().to_arrow())

    # From scratch over the same history: exact stats and NDV identical, quantiles in bound.
    once = tmp_path / "once"
    analyze(once)
    scratch = cli("show", loc, "--state-dir", str(once), "--json")
    assert scratch is not None
    for name, col in final["columns"].items():
        other = scratch["columns"][name]
        for key in (
            "null_count",
            "nan_count",
            "min",
            "max",
            "ndv",
            "avg_len",
            "max_len",
            "true_count",
            "false_count",
            "column_size_bytes",
        ):
            assert col[key] == other[key], (name, key)


def test_missing_data_file_is_one_clear_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", batch(random.Random(1), 0, 50))
    loc = wh.location("t")
    (task,) = list(wh.table("t").scan().plan_files())
    path = Path(task.file.file_path.removeprefix("file://"))
    path.unlink()
    state = tmp_path / "state"
    assert main(["analyze", loc, "--state-dir", str(state), "-q"], out=io.StringIO()) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and path.name in err[0] and "Traceback" not in err[0]
    assert not any(p.is_file() for p in state.rglob("log/*"))  # nothing was committed
