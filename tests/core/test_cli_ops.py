"""Operating the CLI (issue 13): freshness at a glance (`status`, `show` behind),
`analyze --all`, progress, human rendering, and `show --json | head`."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from datasketches import kll_doubles_sketch

from lakestats.cli import EXIT_BROKEN_PIPE, main
from lakestats.progress import AnalyzeProgress
from lakestats.render import render_stats, sparkline
from lakestats.testing import IcebergWarehouse

REPO = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("price", pa.float64())])


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": list(range(start, start + n)), "price": [1026.46 + i for i in range(n)]},
        schema=SCHEMA,
    )


def config_file(tmp_path: Path, wh: IcebergWarehouse, names: list[str], extra: str = "") -> Path:
    text = f'state_dir = "{tmp_path / "state"}"\n'
    for name in names:
        text += f'[[table]]\nname = "{name}"\nlocation = "{wh.location(name)}"\n'
    text += extra
    path = tmp_path / "lakestats.toml"
    path.write_text(text)
    return path


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = main(list(args), out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def two_tables(tmp_path: Path) -> tuple[IcebergWarehouse, Path]:
    wh = IcebergWarehouse(tmp_path / "wh")
    for name in ("a", "b"):
        wh.create_table(name, SCHEMA)
        wh.append(name, rows(0, 10))
    return wh, config_file(tmp_path, wh, ["a", "b"])


def test_status_lists_every_table_with_commits_behind(
    two_tables: tuple[IcebergWarehouse, Path],
) -> None:
    wh, config = two_tables
    assert run("analyze", "--all", "--config", str(config), "--no-sketches", "-q")[0] == 0
    wh.append("b", rows(10, 5))
    wh.append("b", rows(15, 5))
    code, out, _ = run("status", "--config", str(config), "--json")
    assert code == 0
    doc = json.loads(out)
    by_name = {t["name"]: t for t in doc["tables"]}
    assert set(by_name) == {"a", "b"}
    assert by_name["a"]["commits_behind"] == 0 and by_name["a"]["up_to_date"]
    b = by_name["b"]
    assert b["format"] == "iceberg"
    assert b["commits_behind"] == 2 and not b["up_to_date"]
    assert b["current_snapshot_id"] == wh.lineage("b")[-1]
    assert b["last_snapshot_id"] == wh.lineage("b")[0]
    assert b["newest_unprocessed_age_s"] <= b["oldest_unprocessed_age_s"]
    assert b["last_error"] is None
    assert doc["daemon_reachable"] is False

    code, out, _ = run("status", "--config", str(config))
    assert code == 0
    line_b = next(line for line in out.splitlines() if line.startswith("b "))
    assert " 2 " in line_b


def test_status_shards_and_show_print_names_whole(tmp_path: Path) -> None:
    """Two tables (and columns) whose long names share their first 24 characters read
    alike when names are cut like values: the tables that list names print them whole."""
    long_names = ["orders_by_region_and_day_2024", "orders_by_region_and_day_2025"]
    wh = IcebergWarehouse(tmp_path / "wh")
    wide = pa.schema([pa.field(f"{n}_amount", pa.int64()) for n in long_names])
    for name in long_names:
        wh.create_table(name, wide)
        wh.append(name, pa.table({f"{n}_amount": [1] for n in long_names}, schema=wide))
    config = str(config_file(tmp_path, wh, long_names))
    assert run("analyze", "--all", "--config", config, "--no-sketches", "-q")[0] == 0
    for args in (("status",), ("shards", "--count", "2"), ("show", long_names[0])):
        code, out, _ = run(*args, "--config", config)
        assert code == 0, out
        names = long_names if args[0] != "show" else [f"{n}_amount" for n in long_names]
        for name in names:
            assert any(line.split()[:1] == [name] for line in out.splitlines()), (name, out)


def test_status_reports_a_broken_table_and_exits_1(
    two_tables: tuple[IcebergWarehouse, Path], tmp_path: Path
) -> None:
    wh, _ = two_tables
    config = config_file(
        tmp_path, wh, ["a"], f'[[table]]\nname = "gone"\nlocation = "{tmp_path}/nope"\n'
    )
    code, out, _ = run("status", "--config", str(config), "--json")
    assert code == 1
    gone = next(t for t in json.loads(out)["tables"] if t["name"] == "gone")
    assert gone["last_error"] and gone["commits_behind"] is None


def test_show_says_when_stats_are_behind(two_tables: tuple[IcebergWarehouse, Path]) -> None:
    wh, config = two_tables
    assert run("analyze", "a", "--config", str(config), "--no-sketches", "-q")[0] == 0
    code, out, _ = run("show", "a", "--config", str(config))
    assert code == 0 and "BEHIND" not in out
    wh.append("a", rows(10, 5))
    wh.append("a", rows(15, 5))
    code, out, _ = run("show", "a", "--config", str(config))
    assert code == 0
    assert "BEHIND    stats are 2 commit(s) behind the table" in out
    code, out, err = run("show", "a", "--config", str(config), "--json")
    assert code == 0
    json.loads(out)  # stdout stays the contract
    assert "2 commit(s) behind" in err


def test_a_table_named_by_path_is_told_the_analyze_command_that_reaches_its_stats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table given by path is named by its folder in the stats, but ``lakestats analyze
    <folder name>`` would not find it, nor the stats of another ``--state-dir``: the hints
    of ``show`` (no stats yet, stats behind) give the command line as the user wrote it."""
    import shlex

    from deltalake import write_deltalake

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKESTATS_CONFIG", raising=False)
    write_deltalake("wh/my events", rows(0, 5))
    given = ("show", "wh/my events", "--state-dir", "other state")
    code, _, err = run(*given)
    assert code == 1
    command = "lakestats analyze 'wh/my events' --state-dir 'other state'"
    assert f"run `{command}`" in err
    assert run(*shlex.split(command)[1:], "--no-sketches", "-q")[0] == 0
    write_deltalake("wh/my events", rows(5, 5), mode="append")
    code, out, _ = run(*given)
    assert code == 0 and f"run `{command}`" in out


def test_estimate_says_when_stats_are_behind(two_tables: tuple[IcebergWarehouse, Path]) -> None:
    """``estimate`` answers from the stats it has (metadata only here: null counts, exact)
    and warns on stderr when the table has moved on; an unknown snapshot is one line."""
    wh, config = two_tables
    assert run("analyze", "a", "--config", str(config), "--no-sketches", "-q")[0] == 0
    first = wh.lineage("a")[-1]
    code, out, err = run("estimate", "a", "price IS NOT NULL", "--config", str(config), "--json")
    assert code == 0 and err == ""
    answer = json.loads(out)
    assert answer["snapshot_id"] == first and answer["table_rows"] == 10
    assert answer["estimates"][0]["rows"] == 10 and answer["estimates"][0]["selectivity"] == 1
    assert answer["estimates"][0]["terms"][0]["op"] == "is not null"
    wh.append("a", rows(10, 5))
    code, out, err = run("estimate", "a", "id IS NULL", "--config", str(config))
    assert code == 0
    assert out.splitlines()[0] == f"a at snapshot {first}: 10 rows"
    assert out.splitlines()[-1].split() == ["0", "0.0000%", "id", "IS", "NULL"]
    assert "1 commit(s) behind" in err and err.startswith("lakestats: warning:")
    code, out, err = run("estimate", "a", "id IS NULL", "--config", str(config), "--snapshot", "7")
    assert code == 1 and out == "" and err.count("\n") == 1 and "7" in err, err
    # metadata-only stats: no histogram to estimate a range from, and the error says why
    code, out, err = run("estimate", "a", "id < 3", "--config", str(config))
    assert code == 1 and out == "" and "stats were computed without sketches" in err, err
    assert "only IS [NOT] NULL can be estimated" in err, err  # not =/IN: no NDV either
    code, out, err = run("estimate", "a", "id = 3", "--config", str(config))  # nor an NDV
    assert code == 1 and out == "" and "has no NDV" in err, err


def test_analyze_all_keeps_going_past_a_failing_table(
    two_tables: tuple[IcebergWarehouse, Path], tmp_path: Path
) -> None:
    wh, _ = two_tables
    # the failing table comes first; the good one after it must still be analyzed
    config = tmp_path / "all.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[[table]]\nname = "gone"\nlocation = "{tmp_path}/nope"\n'
        f'[[table]]\nname = "a"\nlocation = "{wh.location("a")}"\n'
    )
    code, out, err = run("analyze", "--all", "--config", str(config), "--no-sketches", "-q")
    assert code == 1
    assert "a: analyzed 1 commit(s)" in out
    assert "analyzed 1 of 2 table(s); failed: gone" in out
    assert "lakestats: error: gone:" in err and "Traceback" not in err
    code, _, err = run("analyze", "--config", str(config))
    assert code == 2 and "give one TABLE or --all" in err


def test_analyze_warns_of_a_kll_k_coarser_than_a_bucket_and_honours_it(
    spark: Any, tmp_path: Path
) -> None:
    """``kll_k = 200`` (the old example configs') is valid, but its bucket-mass error is
    more than a bucket: analyze says so once on stderr, then sketches with it."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", rows(0, 50))
    config = config_file(tmp_path, wh, ["t"], "[sketch]\nkll_k = 200\n")
    code, _, err = run("analyze", "t", "--config", str(config), "-q")
    assert code == 0, err
    (warning,) = [line for line in err.splitlines() if line.startswith("lakestats: warning:")]
    error = kll_doubles_sketch.get_normalized_rank_error(200, True)  # DataSketches' own
    assert "sketch.kll_k 200 bounds" in warning and f"±{error:.2%} of the rows" in warning
    assert "(1.00% at 100 buckets)" in warning and "Remove kll_k" in warning
    code, out, _ = run("show", "t", "--config", str(config), "--json")
    assert code == 0
    assert {c["sketch"]["quantiles"]["k"] for c in json.loads(out)["columns"].values()} == {200}

    quiet = config_file(tmp_path, wh, ["t"], "[sketch]\nkll_k = 800\n")  # 0.4 % < 1 %
    code, _, err = run("analyze", "t", "--config", str(quiet), "-q")
    assert code == 0 and "warning" not in err, err


def test_progress_lines_when_not_a_terminal(
    spark: Any, two_tables: tuple[IcebergWarehouse, Path]
) -> None:
    wh, config = two_tables
    wh.append("a", rows(10, 30))
    code, _, err = run("analyze", "a", "--config", str(config))
    assert code == 0
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    progress = [e for e in events if e["event"] == "analyze_progress"]
    # a run's first batch is one commit (so a process killed often still advances), the
    # next grows: two commits here make two batches of one
    assert [e["phase"] for e in progress] == ["sketching", "sketched"] * 2
    assert [e["batches"] for e in progress] == [2, 2, 2, 2]
    first, done = progress[1], progress[-1]
    assert first["files_done"] == 1 and first["files_total"] == 2
    assert done["batch"] == done["batches"] == 2
    assert done["files_done"] == done["files_total"] == 2
    assert done["rows_done"] == done["rows_total"] == 40
    assert done["eta_s"] == 0.0
    commits = [e for e in events if e["event"] == "commit_processed"]
    assert len(commits) == 2
    # one commit per batch: its sketch time is the whole job, not a share
    assert all(not c["sketch_is_share_of_batch"] and c["batch_commits"] == 1 for c in commits)


def test_progress_bar_on_a_terminal(spark: Any, two_tables: tuple[IcebergWarehouse, Path]) -> None:
    from lakestats.analyze import analyze_table, make_sketcher
    from lakestats.config import load_config

    _wh, config_path = two_tables
    config = load_config(config_path)
    err = io.StringIO()
    sketcher = make_sketcher(config)
    with AnalyzeProgress(err, rich=True) as progress:
        sketcher.on_progress = progress.job
        analyze_table(
            "a",
            config=config,
            sketcher=sketcher,
            on_commit=progress.commit,
            on_progress=progress.batch,
        )
    text = err.getvalue()
    assert "a: batch 1/1" in text and "10/10" in text and "files 1/1" in text
    assert "snapshot " in text


def test_show_json_into_head_ends_quietly(two_tables: tuple[IcebergWarehouse, Path]) -> None:
    _wh, config = two_tables
    assert run("analyze", "a", "--config", str(config), "--no-sketches", "-q")[0] == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "core"), str(REPO / "daemon")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakestats.cli", "show", "a", "--config", str(config), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte: like `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(60) == EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_a_closed_stdout_is_one_line(tmp_path: Path) -> None:
    """``lakestats status >&-``: Python has no sys.stdout at all."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "core"), str(REPO / "daemon")])}
    config = tmp_path / "lakestats.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    proc = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -m lakestats.cli status --config "{config}" >&-'],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == "lakestats: error: standard output is closed"


def _doc(columns: dict[str, dict[str, Any]]) -> dict[str, Any]:
    base = {
        "null_count": 0,
        "nan_count": None,
        "min_max_exact": True,
        "column_size_bytes": 1,
        "quantiles": None,
    }
    return {
        "table": "t",
        "format": "iceberg",
        "snapshot_id": 1,
        "schema_id": 0,
        "record_count": 10,
        "file_count": 1,
        "total_size_bytes": 100,
        "columns": {name: {**base, **col} for name, col in columns.items()},
    }


def test_exact_floats_print_in_full_and_dates_and_decimals_get_a_bar() -> None:
    dates = [
        {"lower": str(dt.date(2024, 1, 1 + i)), "upper": str(dt.date(2024, 1, 2 + i)), "count": 5.0}
        for i in range(3)
    ]
    decimals = [
        {"lower": str(Decimal("1.50") + i), "upper": str(Decimal("2.50") + i), "count": 5.0}
        for i in range(3)
    ]
    stamps = [
        {"lower": "2024-01-01T00:00:00", "upper": "2024-01-01T01:00:00", "count": 3.0},
        {"lower": "2024-01-01T01:00:00", "upper": "2024-01-02T00:00:00", "count": 3.0},
    ]
    assert sparkline(dates) and sparkline(decimals) and sparkline(stamps)
    assert sparkline([{"lower": "a", "upper": "b", "count": 1.0}]) is None
    # buckets reaching ±infinity (JSON strings) are left out: the rest is drawn
    infinite = [
        {"lower": "-Infinity", "upper": 0.0, "count": 5.0},
        {"lower": 0.0, "upper": 10.0, "count": 5.0},
        {"lower": 10.0, "upper": 20.0, "count": 5.0},
        {"lower": 20.0, "upper": "Infinity", "count": 5.0},
    ]
    finite = [
        {"lower": 0.0, "upper": 10.0, "count": 10.0},
        {"lower": 10.0, "upper": 20.0, "count": 10.0},
    ]
    assert sparkline(infinite) == sparkline(finite)
    text = render_stats(
        _doc(
            {
                "price": {"type": "double", "min": 3.25, "max": 1026.46, "histogram": None},
                "day": {
                    "type": "date",
                    "min": "2024-01-01",
                    "max": "2024-01-04",
                    "histogram": dates,
                },
                "amount": {
                    "type": "decimal(10, 2)",
                    "min": "1.50",
                    "max": "4.50",
                    "histogram": decimals,
                },
            }
        )
    )
    assert "1026.46" in text
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("distribution")))
    drawn = {line.split()[0]: line for line in lines[start + 1 :] if line.startswith("  ")}
    assert set(drawn) == {"day", "amount"}
    assert all(any(c in line for c in "▁▂▃▄▅▆▇█") for line in drawn.values())


def test_histogram_counts_are_whole_numbers() -> None:
    from datasketches import kll_doubles_sketch

    from lakestats.sketches.histogram import equi_depth_histogram

    sketch = kll_doubles_sketch(200)
    for i in range(6400):
        sketch.update(float(i % 997) * 1.1)
    buckets = equi_depth_histogram(bytes(sketch.serialize()), None, 10)
    assert all(b.count == int(b.count) for b in buckets)
    assert sum(b.count for b in buckets) == 6400


def test_analyze_keeps_stdout_for_results_and_logs_json_on_stderr(
    two_tables: tuple[IcebergWarehouse, Path],
) -> None:
    """A table opened by location cannot publish to Iceberg: that warning is a log event,
    and it belongs on stderr (JSON lines, as the progress), not among the results."""
    _wh, config = two_tables
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "core"), str(REPO / "daemon")])}
    done = subprocess.run(
        [sys.executable, "-m", "lakestats.cli", "analyze", "b", "--config", str(config),
         "--no-sketches"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1  # the result line only
    assert done.stdout.startswith("b: analyzed ")
    events = [json.loads(line) for line in done.stderr.splitlines()]
    assert all(isinstance(e, dict) for e in events)
    (warning,) = [e for e in events if e["event"] == "stats_not_published"]
    assert warning["level"] == "warning" and "location" in warning["reason"]


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "soon"])
def test_notify_refuses_a_timeout_the_socket_cannot_take(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad --timeout is a command-line mistake: argparse's one line and exit 2, before
    any daemon is asked (none runs here)."""
    with pytest.raises(SystemExit) as stopped:
        main(["notify", "t", "--wait", "--timeout", timeout])
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert "argument --timeout:" in err and "Traceback" not in err


def test_a_table_without_commits_and_one_of_an_empty_append(tmp_path: Path) -> None:
    """No commit: nothing to analyze, and show says so rather than "run analyze". An
    append of no rows (no data file): status counts it until stats describe it."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    config = config_file(tmp_path, wh, ["t"])
    code, out, _ = run("analyze", "t", "--config", str(config), "--no-sketches", "-q")
    assert code == 0 and out.strip() == "t: no commits yet, nothing to analyze"
    code, _, err = run("show", "t", "--config", str(config))
    assert code == 1 and "table t has no commits yet: there are no stats to show" in err
    status = json.loads(run("status", "--config", str(config), "--json")[1])["tables"][0]
    assert (status["current_snapshot_id"], status["up_to_date"]) == (None, True)

    empty = wh.append("t", rows(0, 0))
    status = json.loads(run("status", "--config", str(config), "--json")[1])["tables"][0]
    assert (status["current_snapshot_id"], status["commits_behind"]) == (empty, 1)
    assert status["up_to_date"] is False
    code, _, err = run("show", "t", "--config", str(config))
    assert code == 1 and "run `lakestats analyze t`" in err
    code, _, err = run("advise", "t", "--config", str(config))
    assert code == 1 and "no stats stored for table 't' yet" in err  # its name, not its id
    assert run("analyze", "t", "--config", str(config), "--no-sketches", "-q")[0] == 0
    status = json.loads(run("status", "--config", str(config), "--json")[1])["tables"][0]
    assert (status["last_snapshot_id"], status["up_to_date"]) == (empty, True)
    doc = json.loads(run("show", "t", "--config", str(config), "--json")[1])
    assert (doc["snapshot_id"], doc["record_count"]) == (empty, 0)


def test_a_stats_file_of_the_wrong_shape_is_named_by_every_reader(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", rows(0, 10))
    config = config_file(tmp_path, wh, ["t"])
    assert run("analyze", "t", "--config", str(config), "--no-sketches", "-q")[0] == 0
    [stats_file] = (tmp_path / "state").glob("*/stats/*.json")
    stats_file.write_text('{"table": "t", "snapshot_id": "one"}')
    for command in (
        ["show", "t"],
        ["show", "t", "--json"],
        ["commits", "t"],
        ["estimate", "t", "id < 5"],
    ):
        code, out, err = run(*command, "--config", str(config))
        assert code == 1 and out == "", (command, out)
        assert f"{stats_file.name}: not a stats document: " in err, (command, err)
        assert "snapshot_id, record_count, columns, partitions, commit" in err
