"""``lakestats advise`` over real tables whose bounds are hard to place on a number line.

Metadata-only runs (``analyze --no-sketches``: no Spark, no KLL), so every lookup figure
comes from the spread-within-bounds model of docs/advisor.md: each file's rows spread
evenly over its own [min, max]. The tables, written by pyiceberg:

* ``shifts``: a ``time`` column; append i holds times of day from i h to (i + 2) h, so
  each file overlaps its neighbours (time of day is placed by microseconds since
  midnight);
* ``extremes``: two ``double`` columns: ``edge`` with files bounded by ±Infinity and by
  ±1e308, ``wide`` with files [−1.5e308, 0] and [0, 1.5e308] (their span overflows a
  double) next to two narrow ones.

The figures are checked against the model computed here independently, in exact
fractions, from the files' true min/max read from the Parquet data files with
pyarrow.compute (not lakestats' code), with ±Infinity placed as docs/advisor.md says: at
the column's lowest / highest finite bound.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakestats.cli import main
from lakestats.testing import IcebergWarehouse

PARTS = 20  # AdviceSettings.overlap_bins
HOUR = 3_600_000_000  # microseconds


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def _reject(token: str) -> Any:
    raise AssertionError(f"not JSON: {token}")


def advise_json(location: str, state: Path, column: str) -> dict[str, Any]:
    code, text = run("advise", location, "--state-dir", str(state), "--json", "--column", column)
    assert code == 0, text
    doc: dict[str, Any] = json.loads(text, parse_constant=_reject)  # NaN, Infinity: fail
    (advice,) = doc["columns"]
    return advice


def analyzed(root: Path, name: str, schema: pa.Schema, appends: Sequence[pa.Table]) -> str:
    wh = IcebergWarehouse(root / "wh")
    wh.create_table(name, schema)
    for data in appends:
        wh.append(name, data)
    location = wh.location(name)
    code, text = run("analyze", location, "--state-dir", str(root / "state"), "--no-sketches")
    assert code == 0, text
    return location


# -- the independent side ------------------------------------------------------------------


def true_files(location: str, column: str) -> list[dict[str, Any]]:
    """Every data file: its rows, size and the column's true min/max."""
    files = []
    for path in sorted((Path(location) / "data").rglob("*.parquet")):
        values = pq.ParquetFile(path).read().column(column)
        bounds = pc.min_max(values)
        files.append(
            {
                "lo": bounds["min"].as_py(),
                "hi": bounds["max"].as_py(),
                "rows": len(values) - values.null_count,
                "bytes": path.stat().st_size,
            }
        )
    return files


def micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def clamped(files: Sequence[dict[str, Any]]) -> Callable[[float], Fraction]:
    """docs/advisor.md: ±Infinity at the column's lowest / highest finite bound."""
    finite = [v for f in files for v in (f["lo"], f["hi"]) if math.isfinite(v)]
    low, high = min(finite), max(finite)

    def place(v: float) -> Fraction:
        return Fraction(low if v == -math.inf else high if v == math.inf else v)

    return place


def spread_model(spans: Sequence[tuple[Fraction, Fraction, int, int]]) -> tuple[float, float]:
    """Expected (files, bytes) of a point lookup for the value of a random row, each file's
    rows spread evenly over its placed [lo, hi]: integrate the cover piece by piece."""
    cuts = sorted({x for lo, hi, _, _ in spans for x in (lo, hi)})
    e_files = e_bytes = Fraction(0)
    total = sum(rows for _, _, rows, _ in spans)
    for lo, hi, rows, _ in spans:
        assert hi > lo  # no file of these tables is a single point
        files = size = Fraction(0)
        for a, b in pairwise(cuts):
            if lo <= a and b <= hi:
                over = [s for s in spans if s[0] <= a and b <= s[1]]
                files += (b - a) * len(over)
                size += (b - a) * sum(s[3] for s in over)
        e_files += Fraction(rows, total) * files / (hi - lo)
        e_bytes += Fraction(rows, total) * size / (hi - lo)
    return float(e_files), float(e_bytes)


def deepest(spans: Sequence[tuple[Fraction, Fraction, int, int]]) -> int:
    """Most files one value must read: the deepest point is some file's lower bound."""
    return max(sum(1 for lo, hi, _, _ in spans if lo <= x <= hi) for x, _, _, _ in spans)


def equal_parts(
    spans: Sequence[tuple[Fraction, Fraction, int, int]],
) -> tuple[list[Fraction], list[int]]:
    """20 equal-width parts of the placed range: the cuts, and the files meeting each part
    ((lower, upper], the first [lower, upper])."""
    a = min(lo for lo, _, _, _ in spans)
    b = max(hi for _, hi, _, _ in spans)
    cuts = [a + (b - a) * i / PARTS for i in range(PARTS + 1)]
    counts = [
        sum(
            1
            for lo, hi, _, _ in spans
            if lo <= cuts[i + 1] and (hi >= cuts[i] if i == 0 else hi > cuts[i])
        )
        for i in range(PARTS)
    ]
    return cuts, counts


def finite_numbers(doc: Any) -> bool:
    if isinstance(doc, float):
        return math.isfinite(doc)
    if isinstance(doc, dict):
        return all(finite_numbers(v) for v in doc.values())
    if isinstance(doc, list):
        return all(finite_numbers(v) for v in doc)
    return True


def follows_the_model(
    advice: dict[str, Any],
    spans: Sequence[tuple[Fraction, Fraction, int, int]],
    e_files: float,
    e_bytes: float,
) -> tuple[dict[str, Any], list[Fraction]]:
    """Assert the advice's lookup figures and chart counts are the independent model's
    (``spread_model``'s ``e_files``, ``e_bytes``; ``deepest``; ``equal_parts``); its
    point lookup and the cuts."""
    point = advice["point_lookup"]
    assert point["files_expected"] == pytest.approx(e_files, rel=1e-12)
    assert point["bytes_expected"] == pytest.approx(e_bytes, rel=1e-12)
    assert point["files_max"] == deepest(spans)
    cuts, counts = equal_parts(spans)
    assert [b["files"] for b in advice["overlap"]["bins"]] == counts
    return point, cuts


# -- time of day ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shifts(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("advise_time")
    schema = pa.schema([pa.field("at", pa.time64("us"))])
    appends = []
    for i in range(5):
        n = 10 + 5 * i  # unequal row counts: the expectation is weighted by rows
        ticks = [i * HOUR + k * 2 * HOUR // (n - 1) for k in range(n)]
        times = [(dt.datetime.min + dt.timedelta(microseconds=t)).time() for t in ticks]
        appends.append(pa.table({"at": pa.array(times, pa.time64("us"))}, schema=schema))
    return analyzed(root, "shifts", schema, appends), root / "state"


def test_a_time_column_is_placed_by_microseconds_since_midnight(
    shifts: tuple[str, Path],
) -> None:
    location, state = shifts
    files = true_files(location, "at")
    spans = [
        (Fraction(micros(f["lo"])), Fraction(micros(f["hi"])), f["rows"], f["bytes"]) for f in files
    ]
    e_files, e_bytes = spread_model(spans)
    # each file [i h, (i + 2) h] meets its neighbours on each half: 2 files, the two end
    # files 1.5 on average; weighted by rows 10, 15, 20, 25, 30
    assert e_files == pytest.approx((10 * 1.5 + 15 * 2 + 20 * 2 + 25 * 2 + 30 * 1.5) / 100)

    advice = advise_json(location, state, "at")
    assert advice["type"] == "time" and advice["distribution"] == "spread_within_bounds"
    point, cuts = follows_the_model(advice, spans, e_files, e_bytes)
    assert point["files_max"] == 3  # at 1 h … 4 h: three files meet
    # 1.8 > 1 + 0.1 · 4 (not clustered); no NDV without sketches: rule 11
    assert advice["recommendation"]["kind"] == "min_max"

    bins = advice["overlap"]["bins"]
    assert advice["overlap"]["split"] == "equal_width"
    assert bins[0]["lower"] == "00:00:00" and bins[-1]["upper"] == "06:00:00"
    at_cuts = [(dt.datetime.min + dt.timedelta(microseconds=round(c))).time() for c in cuts]
    assert [b["lower"] for b in bins] == [t.isoformat() for t in at_cuts[:-1]]

    code, text = run("advise", location, "--state-dir", str(state), "--column", "at")
    assert code == 0, text
    assert "at (time): 5 files, 100 rows" in text
    assert f"point lookup   files ≈ {e_files:,.2f}" in text
    assert "00:18:00 │" in text and "→ min_max" in text


# -- infinite and overflowing double bounds ------------------------------------------------


@pytest.fixture(scope="module")
def extremes(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("advise_inf")
    schema = pa.schema([pa.field("edge", pa.float64()), pa.field("wide", pa.float64())])
    rows = [
        ([-math.inf, 1.0, 2.0], [-1.5e308, 0.0, -1.0]),
        ([math.inf, 3.0, 4.0], [0.0, 1.5e308, 1.0]),
        ([-1e308, 1e308, 0.0], [0.25, 0.5, 0.75]),
        ([5.0, 6.0, 5.5], [-0.75, -0.5, -0.25]),
    ]
    appends = [pa.table({"edge": e, "wide": w}, schema=schema) for e, w in rows]
    return analyzed(root, "extremes", schema, appends), root / "state"


def test_infinite_bounds_are_placed_at_the_finite_extremes(
    extremes: tuple[str, Path],
) -> None:
    location, state = extremes
    files = true_files(location, "edge")
    assert sorted((f["lo"], f["hi"]) for f in files)[0] == (-math.inf, 2.0)
    place = clamped(files)
    spans = [(place(f["lo"]), place(f["hi"]), f["rows"], f["bytes"]) for f in files]
    e_files, e_bytes = spread_model(spans)
    # placed on [−1e308, 1e308]: [−1e308, 2], [3, 1e308], [−1e308, 1e308], [5, 6]; the
    # file spanning everything adds 1 to the others' 1, the narrow [5, 6] meets three
    assert e_files == pytest.approx((3 * 2 + 3 * 2 + 3 * 2 + 3 * 3) / 12)

    advice = advise_json(location, state, "edge")
    assert finite_numbers(advice)
    point, cuts = follows_the_model(advice, spans, e_files, e_bytes)
    assert point["share_expected"] == pytest.approx(e_files / 4, rel=1e-12)
    assert point["files_max"] == 3

    bins = advice["overlap"]["bins"]
    # the chart's ends are the true bounds; the cuts between, on the finite range
    assert bins[0]["lower"] == "-Infinity" and bins[-1]["upper"] == "Infinity"
    assert [b["lower"] for b in bins[1:]] == [float(c) for c in cuts[1:-1]]


def test_a_span_wider_than_the_largest_double_stays_finite(
    extremes: tuple[str, Path],
) -> None:
    location, state = extremes
    files = true_files(location, "wide")
    spans = [(Fraction(f["lo"]), Fraction(f["hi"]), f["rows"], f["bytes"]) for f in files]
    # the column's span, 3e308, is no double: hi − lo overflows to inf
    span = max(hi for _, hi, _, _ in spans) - min(lo for lo, _, _, _ in spans)
    assert span > Fraction(sys.float_info.max)
    e_files, e_bytes = spread_model(spans)
    # [−1.5e308, 0] and [0, 1.5e308] read themselves (the narrow files are a vanishing
    # share of their spans); [0.25, 0.75] and [−0.75, −0.25] read themselves and one wide
    assert e_files == pytest.approx((3 * 1 + 3 * 1 + 3 * 2 + 3 * 2) / 12)

    advice = advise_json(location, state, "wide")
    assert finite_numbers(advice)
    point, cuts = follows_the_model(advice, spans, e_files, e_bytes)
    assert point["files_max"] == 2
    bins = advice["overlap"]["bins"]
    assert [b["lower"] for b in bins] == [float(c) for c in cuts[:-1]]
    assert bins[-1]["upper"] == 1.5e308

    code, text = run("advise", location, "--state-dir", str(state))
    assert code == 0, text
    assert not re.search(r"\bnan\b|\binf\b", text, re.IGNORECASE), text
    assert "edge (double): 4 files, 12 rows" in text
    assert f"point lookup   files ≈ {e_files:,.2f} ({e_files / 4:.1%})" in text
