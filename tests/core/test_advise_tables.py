"""``lakestats advise`` over a real Iceberg table with known answers (issue 15).

One table, written by pyiceberg and analyzed once (with sketches, one Spark run for the
module), partitioned by ``region`` (2 values) and appended to 8 times, so 16 files:

* ``sorted_id`` (long): append i holds ids [2000 i, 2000 (i + 1)): sorted across appends,
  the two region files of one append overlap each other — ≈ 2 files per lookup in the
  table, exactly 1 within a partition;
* ``shuffled_id`` (long): the same ids shuffled over all files — ≈ every file;
* ``category`` (string): 5 values, every file holds all of them;
* ``token`` (string): a random 16-hex-digit key per row, high cardinality;
* ``status`` (string): 3 values in every file, 85 / 10 / 5 % of the rows.

Every figure is checked against an independent calculation from the files' true min/max,
read from the Parquet data files with pyarrow.compute (not lakestats' code), and the
recommendations against the rule in docs/advisor.md.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.transforms import IdentityTransform

from lakestats.cli import main
from lakestats.sketches.merge import kll_normalized_rank_error
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark

APPENDS, ROWS = 8, 2000
SCHEMA = pa.schema(
    [
        pa.field("region", pa.string()),
        pa.field("sorted_id", pa.int64()),
        pa.field("shuffled_id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("token", pa.string()),
        pa.field("status", pa.string()),
    ]
)
# KLL's single-rank error at k = 200 (~99 % confidence) plus the quadrature step of 512
# evaluation points: the expectation's error is at most the total variation of the
# files-covering-v step function (2 per file) times the rank error.
RANK_ERROR = kll_normalized_rank_error(200) + 1 / 512


@pytest.fixture(scope="module")
def table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("advise")
    rng = random.Random(15)
    wh = IcebergWarehouse(root / "wh")
    wh.create_table("events", SCHEMA, partition_by=[("region", IdentityTransform())])
    shuffled = list(range(APPENDS * ROWS))
    rng.shuffle(shuffled)
    for i in range(APPENDS):
        wh.append(
            "events",
            {
                "region": [rng.choice(["east", "west"]) for _ in range(ROWS)],
                "sorted_id": list(range(i * ROWS, (i + 1) * ROWS)),
                "shuffled_id": shuffled[i * ROWS : (i + 1) * ROWS],
                "category": [rng.choice("abcde") for _ in range(ROWS)],
                "token": [f"{rng.getrandbits(64):016x}" for _ in range(ROWS)],
                "status": rng.choices(["ok", "warn", "err"], [85, 10, 5], k=ROWS),
            },
        )
    location = wh.location("events")
    state = root / "state"
    code, text, _ = run("analyze", location, "--state-dir", str(state), "-q")
    assert code == 0, text
    return location, state


def run(*args: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue(), ""


def advise_json(location: str, state: Path, *extra: str) -> dict[str, Any]:
    code, text, _ = run("advise", location, "--state-dir", str(state), "--json", *extra)
    assert code == 0, text
    doc: dict[str, Any] = json.loads(text)
    return doc


# -- the independent side: true bounds from the Parquet files ------------------------------


def true_files(location: str) -> list[dict[str, Any]]:
    """Every data file of the table, with its rows and true per-column min/max."""
    files = []
    for path in sorted((Path(location) / "data").rglob("*.parquet")):
        data = pq.ParquetFile(path).read()  # one file: no hive-partition inference
        entry: dict[str, Any] = {"path": path, "region": data.column("region")[0].as_py()}
        entry["bytes"] = path.stat().st_size
        for name in ("sorted_id", "shuffled_id", "category", "token"):
            bounds = pc.min_max(data.column(name))
            entry[name] = (bounds["min"].as_py(), bounds["max"].as_py())
            entry[f"{name}_values"] = data.column(name).to_pylist()
        files.append(entry)
    return files


def covering(files: Sequence[dict[str, Any]], name: str, lo: Any, hi: Any) -> int:
    return sum(1 for f in files if f[name][0] <= hi and f[name][1] >= lo)


def max_depth(files: Sequence[dict[str, Any]], name: str) -> tuple[int, int]:
    """Most files (and bytes) one value must read: the deepest point is some file's min."""
    best = (0, 0)
    for f in files:
        v = f[name][0]
        hits = [g for g in files if g[name][0] <= v <= g[name][1]]
        best = max(best, (len(hits), 0))
    heaviest = max(
        sum(g["bytes"] for g in files if g[name][0] <= f[name][0] <= g[name][1]) for f in files
    )
    return best[0], heaviest


def row_expectation(files: Sequence[dict[str, Any]], name: str) -> float:
    """Files read by a point lookup of each row's value, averaged over all rows."""
    values = [v for f in files for v in f[f"{name}_values"]]
    lows = sorted(f[name][0] for f in files)
    highs = sorted(f[name][1] for f in files)
    import bisect

    return sum(bisect.bisect_right(lows, v) - bisect.bisect_left(highs, v) for v in values) / len(
        values
    )


def range_expectation(files: Sequence[dict[str, Any]], name: str, s: float) -> float:
    """Ranges of share s of the sorted true values, start uniform (512 starts, as the
    advisor evaluates them)."""
    values = sorted(v for f in files for v in f[f"{name}_values"])
    n, m = len(values), 512
    total = 0
    for j in range(m):
        t = (j + 0.5) / m * (1 - s)
        lo = values[min(int(t * n), n - 1)]
        hi = values[min(int((t + s) * n), n - 1)]
        total += covering(files, name, lo, hi)
    return total / m


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["columns"]}


# -- the tests ------------------------------------------------------------------------------


def test_figures_match_true_bounds(table: tuple[str, Path]) -> None:
    location, state = table
    files = true_files(location)
    assert len(files) == 2 * APPENDS
    doc = advise_json(location, state)
    assert doc["files"] == len(files)
    cols = by_name(doc)
    for name in ("sorted_id", "shuffled_id", "category", "token"):
        got = cols[name]
        point = got["point_lookup"]
        want_max, want_bytes = max_depth(files, name)
        assert point["files_max"] == want_max, name
        assert point["bytes_max"] == want_bytes, name
        exact = row_expectation(files, name)
        if got["distribution"] == "kll":
            tolerance = 2 * len(files) * RANK_ERROR
        else:  # strings: the spread model; here every file spans (nearly) the domain
            tolerance = 0.05 * len(files)
        assert point["files_expected"] == pytest.approx(exact, abs=tolerance), name
        assert got["records"] == APPENDS * ROWS
        assert got["null_fraction"] == 0.0
        bins = got["overlap"]["bins"]
        assert len(bins) == 20
        if got["distribution"] == "kll":
            # each part of the chart: the files whose true bounds meet (lower, upper]
            assert got["overlap"]["split"] == "kll_quantiles"
            for b in bins[1:]:
                lo, hi = b["lower"], b["upper"]
                want = sum(1 for f in files if f[name][0] <= hi and f[name][1] > lo)
                assert b["files"] == want, (name, lo, hi)
        else:
            # strings: equal parts of the range; every file spans (nearly) all of it, so
            # the first and last twentieth meet every file
            assert got["overlap"]["split"] == "equal_width"
            assert bins[0]["lower"] == min(f[name][0] for f in files)
            assert bins[-1]["upper"] == max(f[name][1] for f in files)
            assert bins[0]["files"] == bins[-1]["files"] == len(files)
    # sorted across appends: the two region files of an append overlap, nothing else
    assert cols["sorted_id"]["point_lookup"]["files_max"] == 2
    assert cols["sorted_id"]["point_lookup"]["files_expected"] == pytest.approx(2.0, abs=0.05)
    assert cols["shuffled_id"]["point_lookup"]["files_expected"] == pytest.approx(16.0, abs=0.1)
    # every file holds all 5 categories: every lookup reads every file, exactly
    assert cols["category"]["point_lookup"]["files_expected"] == 16.0
    for s_index, s in enumerate((0.01, 0.1)):
        for name in ("sorted_id", "shuffled_id"):
            got_range = cols[name]["range_lookups"][s_index]
            assert got_range["selectivity"] == s
            want = range_expectation(files, name, s)
            assert got_range["files_expected"] == pytest.approx(
                want, abs=2 * len(files) * RANK_ERROR
            ), (name, s)


def test_recommendations_follow_the_rule(table: tuple[str, Path]) -> None:
    location, state = table
    files = true_files(location)
    cols = by_name(advise_json(location, state))
    # well clustered: ≈ 2 ≤ 1 + 0.1 × 15
    assert cols["sorted_id"]["recommendation"]["kind"] == "none"
    # unique long key, every file spans it: Bloom filter sized for ≈ 1,000 values per file
    rec = cols["shuffled_id"]["recommendation"]
    assert rec["kind"] == "bloom_filter", rec["reason"]
    assert rec["bloom_filter"]["ndv_per_file"] == pytest.approx(1000, rel=0.05)
    assert rec["bloom_filter"]["bits_per_file"] == pytest.approx(9586, rel=0.05)
    assert cols["shuffled_id"]["files_per_lookup_sorted"] == pytest.approx(1.0, abs=0.01)
    # 5 values over 16 files, a file's worth each: partition; ≈ 1 + 16 / 5 files after
    rec = cols["category"]["recommendation"]
    assert rec["kind"] == "partition", rec["reason"]
    assert rec["files_per_lookup_after"] == pytest.approx(1 + 16 / 5, rel=0.05)
    assert cols["category"]["ndv_per_file"]["max"] == pytest.approx(5, abs=0.01)
    # random strings: not range-queried, high NDV: a Bloom filter
    assert cols["token"]["recommendation"]["kind"] == "bloom_filter"
    assert cols["token"]["ndv"] == pytest.approx(APPENDS * ROWS, rel=0.05)
    # 3 statuses, 85 % of the rows one of them: the stored frequent-items sketches count
    # them, so a lookup matches Σ p² of the rows, not 1 / 3, and partitioning would leave
    # the hot value over most files: nothing to gain
    counts = pc.value_counts(
        pa.chunked_array([pq.ParquetFile(f["path"]).read(["status"])["status"] for f in files])
    ).to_pylist()
    exact = sum((c["counts"] / (APPENDS * ROWS)) ** 2 for c in counts)
    assert cols["status"]["point_selectivity"] == pytest.approx(exact, rel=1e-9)
    assert cols["status"]["recommendation"]["kind"] == "none", cols["status"]["recommendation"]
    # one column asked for: the store read decodes only its stats, the same advice
    assert advise_json(location, state, "--column", "status")["columns"] == [cols["status"]]


def test_a_wide_table_is_advised_a_group_of_columns_at_a_time(
    table: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``PAIRS_PER_PASS`` (file, column) pairs, the store is read once per group of
    columns, each read decoding only its group's stats: the analysis gets the same inputs
    and the report is the same report (the figures from merged KLL sketches aside: a KLL
    merge compacts at random, so two runs' quantile figures differ slightly either way)."""
    from lakestats import advise_io
    from lakestats.store import StatsStore

    location, state = table
    inputs: list[Any] = []
    reads: list[frozenset[int] | None] = []
    analyse, read_segment = advise_io.advise, StatsStore.read_segment

    def recorded(*args: Any) -> Any:
        inputs.extend(args[2])
        return analyse(*args)

    def counted(self: StatsStore, rel: str, **kwargs: Any) -> Any:
        fields = kwargs.get("field_ids")
        reads.append(None if fields is None else frozenset(fields))
        return read_segment(self, rel, **kwargs)

    monkeypatch.setattr(advise_io, "advise", recorded)
    monkeypatch.setattr(StatsStore, "read_segment", counted)
    whole = advise_json(location, state)
    whole_inputs, inputs[:] = list(inputs), []
    assert set(reads) == {None}  # 16 files × 6 columns: one pass, every field
    reads.clear()

    monkeypatch.setattr(advise_io, "PAIRS_PER_PASS", 2 * whole["files"])
    grouped = advise_json(location, state)
    assert inputs == whole_inputs  # every column's every file, alike
    columns = len(SCHEMA.names)
    assert len(set(reads)) == -(-columns // 2)  # two columns a pass
    assert all(fields is not None and len(fields) <= 2 for fields in reads)

    def exact_parts(report: dict[str, Any]) -> Any:
        keep = ("name", "files", "records", "ndv", "point_selectivity", "null_fraction")
        return (
            report["files"],
            [{k: c[k] for k in keep} for c in report["columns"]],
            [(p["partition"], [c["name"] for c in p["columns"]]) for p in report["partitions"]],
        )

    assert exact_parts(grouped) == exact_parts(whole)


def test_per_partition_view(table: tuple[str, Path]) -> None:
    location, state = table
    files = true_files(location)
    doc = advise_json(location, state, "--column", "sorted_id")
    assert [c["name"] for c in doc["columns"]] == ["sorted_id"]
    parts = {p["partition"]["region"]: p for p in doc["partitions"]}
    assert set(parts) == {"east", "west"}
    for region, part in parts.items():
        mine = [f for f in files if f["region"] == region]
        col = part["columns"][0]
        assert part["files"] == col["files"] == len(mine)
        # within a partition the ids are sorted across files: exactly one file per lookup
        assert col["point_lookup"]["files_expected"] == 1.0
        assert col["point_lookup"]["files_max"] == max_depth(mine, "sorted_id")[0] == 1
        assert col["recommendation"]["kind"] == "none"
    code, text, _ = run(
        "advise", location, "--state-dir", str(state), "--column", "sorted_id", "--per-partition"
    )
    assert code == 0
    assert "region=east  sorted_id: 8 files, lookup ≈ 1.00 (max 1) → none" in text


def test_terminal_output_and_errors(
    table: tuple[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    location, state = table
    code, text, _ = run("advise", location, "--state-dir", str(state))
    assert code == 0
    assert "shuffled_id (long): 16 files, 16,000 rows" in text
    assert "→ bloom_filter:" in text and "→ partition:" in text
    assert text.count("│") >= 2 * 20  # the overlap chart of each column
    capsys.readouterr()
    code, _, _ = run("advise", location, "--state-dir", str(state), "--column", "nope")
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "unknown column(s) nope" in err and "sorted_id" in err
    code, _, _ = run("advise", location, "--state-dir", str(tmp_path / "empty"))
    err = capsys.readouterr().err
    assert code == 1 and "run `lakestats analyze` first" in err and err.count("\n") == 1
