"""End to end over real pyiceberg tables: `analyze` + `show --json` against exact values.

These runs are metadata-only (`--no-sketches`): every number they check comes from
manifests, and is compared with a full scan of the live data by pyarrow.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import LongType

from call_counts import count_calls
from lakestats.analyze import analyze_table, read_stats
from lakestats.cli import main
from lakestats.config import Config, SketchConfig, TableConfig
from lakestats.tables import OpenedTable, open_configured
from lakestats.testing import IcebergWarehouse, exact_stats
from lakestats.values import to_json


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def show_json(location: str, state: Path, *extra: str) -> dict[str, Any]:
    code, text = run_cli("show", location, "--state-dir", str(state), "--json", *extra)
    assert code == 0, text
    doc: dict[str, Any] = json.loads(text)
    return doc


def analyze(location: str, state: Path) -> None:
    code, text = run_cli("analyze", location, "--state-dir", str(state), "--no-sketches", "-q")
    assert code == 0, text


def assert_matches_exact(
    doc: dict[str, Any], wh: IcebergWarehouse, name: str, *, sketches_off: bool = True
) -> None:
    table = wh.table(name)
    exact = exact_stats(table)
    assert doc["snapshot_id"] == table.metadata.current_snapshot_id
    assert doc["record_count"] == exact["record_count"]
    assert doc["merged_record_count"] == exact["record_count"]
    assert set(doc["columns"]) == set(exact["columns"])
    for column, want in exact["columns"].items():
        got = doc["columns"][column]
        assert got["null_count"] == want["null_count"], column
        # pyiceberg's writer records no NaN counts; metadata-only stats must say "unknown"
        # rather than guess (the sketch pipeline fills them in from a scan).
        assert (
            got["nan_count"] in (want["nan_count"], None)
            if sketches_off
            else (got["nan_count"] == want["nan_count"])
        ), column
        if sketches_off and got["nan_count"] is None and got["type"] in ("float", "double"):
            # a file without bounds may hold only NaN, or values: metadata cannot tell
            pass
        else:
            assert got["min_max_exact"] is True, column
        assert got["min"] == to_json(want["min"]), column
        assert got["max"] == to_json(want["max"]), column
    live = list(table.scan().plan_files())
    assert doc["file_count"] == len(live)
    assert doc["total_size_bytes"] == sum(t.file.file_size_in_bytes for t in live)


SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("day", pa.date32()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("flag", pa.bool_()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "name": [None if i % 7 == 0 else f"név-{i % 13}" for i in ids],
            "score": [
                float("nan") if i % 11 == 0 else (None if i % 5 == 0 else i * 0.5 - 20) for i in ids
            ],
            "day": [dt.date(2026, 1, 1) + dt.timedelta(days=i % 40) for i in ids],
            "price": [Decimal(i) / 4 for i in ids],
            "flag": [None if i % 3 == 0 else i % 2 == 0 for i in ids],
            "ts": [dt.datetime(2026, 1, 1) + dt.timedelta(minutes=i) for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def wh(tmp_path: Path) -> IcebergWarehouse:
    return IcebergWarehouse(tmp_path / "wh")


def test_appends_delete_overwrite_match_exact(wh: IcebergWarehouse, tmp_path: Path) -> None:
    wh.create_table("t", SCHEMA)
    state = tmp_path / "state"
    loc = wh.location("t")
    wh.append("t", rows(0, 300))
    wh.append("t", rows(300, 200))
    analyze(loc, state)
    assert_matches_exact(show_json(loc, state), wh, "t")
    wh.delete("t", "id < 50")  # rewrites part of the first file
    wh.append("t", rows(1000, 10))
    analyze(loc, state)
    assert_matches_exact(show_json(loc, state), wh, "t")
    wh.overwrite("t", rows(5000, 120))
    analyze(loc, state)
    doc = show_json(loc, state)
    assert_matches_exact(doc, wh, "t")
    # the removed files' bounds are gone: min id is now the overwrite's first id
    assert doc["columns"]["id"]["min"] == 5000


def test_schema_evolution_keys_stats_by_field_id(wh: IcebergWarehouse, tmp_path: Path) -> None:
    wh.create_table("t", SCHEMA)
    state = tmp_path / "state"
    loc = wh.location("t")
    wh.append("t", rows(0, 100))
    analyze(loc, state)
    before = show_json(loc, state)
    wh.rename_column("t", "score", "points")
    wh.add_column("t", "extra", LongType())
    wh.drop_column("t", "flag")
    table = wh.table("t")
    table.append(
        pa.table(
            {
                "id": pa.array([1000, 1001], pa.int64()),
                "name": ["x", None],
                "points": pa.array([1.5, None], pa.float64()),
                "day": pa.array([dt.date(2030, 1, 1)] * 2, pa.date32()),
                "price": pa.array([Decimal("1.00")] * 2, pa.decimal128(10, 2)),
                "ts": pa.array([dt.datetime(2030, 1, 1)] * 2, pa.timestamp("us")),
                "extra": pa.array([7, None], pa.int64()),
            },
            schema=table.schema().as_arrow(),
        )
    )
    analyze(loc, state)
    doc = show_json(loc, state)
    assert_matches_exact(doc, wh, "t")
    assert "flag" not in doc["columns"] and "score" not in doc["columns"]
    renamed = doc["columns"]["points"]
    assert renamed["field_id"] == before["columns"]["score"]["field_id"]
    assert renamed["null_count"] == before["columns"]["score"]["null_count"] + 1
    assert doc["columns"]["extra"]["null_count"] == 101  # 100 old rows never had it


def test_a_baseline_after_expiry_lists_files_written_with_a_dropped_column(
    wh: IcebergWarehouse, tmp_path: Path
) -> None:
    """The snapshots that wrote a file before a column was dropped are expired: a run from
    scratch starts at a baseline whose file carries that column's metrics (decoded with
    the older schema's type). The run succeeds (it used to fail encoding the dropped
    column's bounds) and matches the rows; the column is in no output."""
    wh.create_table("t", SCHEMA)
    wh.append("t", rows(0, 50))
    wh.drop_column("t", "flag")
    table = wh.table("t")
    wh.append("t", rows(50, 10).drop_columns(["flag"]).cast(table.schema().as_arrow()))
    wh.expire_snapshots("t", wh.lineage("t")[:-1])
    state = tmp_path / "state"
    analyze(wh.location("t"), state)
    doc = show_json(wh.location("t"), state)
    assert "flag" not in doc["columns"]
    assert_matches_exact(doc, wh, "t")


def test_a_baseline_after_expiry_counts_a_column_added_since_as_null(
    wh: IcebergWarehouse, tmp_path: Path
) -> None:
    """The snapshot that wrote a file before a column was added is expired: the baseline
    takes the schema its manifest was written with (pyiceberg records it in the header's
    schema JSON only), so the column is absent from the file (null), not unknown, as for
    the incremental run that saw the commit."""
    wh.create_table("t", SCHEMA)
    wh.append("t", rows(0, 50))
    incremental = tmp_path / "incremental"
    analyze(wh.location("t"), incremental)
    wh.add_column("t", "extra", LongType())
    table = wh.table("t")
    later = rows(50, 10).append_column("extra", pa.array(range(10), pa.int64()))
    wh.append("t", later.cast(table.schema().as_arrow()))
    analyze(wh.location("t"), incremental)
    wh.expire_snapshots("t", wh.lineage("t")[:-1])
    scratch = tmp_path / "scratch"
    analyze(wh.location("t"), scratch)
    doc = show_json(wh.location("t"), scratch)
    assert doc["columns"]["extra"]["null_count"] == 50
    assert_matches_exact(doc, wh, "t")
    assert doc["columns"] == show_json(wh.location("t"), incremental)["columns"]


def test_partitioned_table(wh: IcebergWarehouse, tmp_path: Path) -> None:
    wh.create_table(
        "p", SCHEMA, partition_by=[("day", DayTransform()), ("flag", IdentityTransform())]
    )
    state = tmp_path / "state"
    loc = wh.location("p")
    wh.append("p", rows(0, 120))
    wh.append("p", rows(120, 60))
    wh.delete("p", "id >= 150")
    analyze(loc, state)
    doc = show_json(loc, state)
    assert_matches_exact(doc, wh, "p")
    scanned = wh.table("p").scan().to_arrow()
    expected: dict[tuple[Any, Any], int] = {}
    for day, flag in zip(scanned["day"].to_pylist(), scanned["flag"].to_pylist(), strict=True):
        key = (day.isoformat(), flag)
        expected[key] = expected.get(key, 0) + 1
    got = {
        (p["partition"]["day_day"], p["partition"]["flag"]): p["record_count"]
        for p in doc["partitions"]
    }
    assert got == expected
    assert sum(p["file_count"] for p in doc["partitions"]) == doc["file_count"]


def test_incremental_equals_single_pass(wh: IcebergWarehouse, tmp_path: Path) -> None:
    wh.create_table("t", SCHEMA, partition_by=[("flag", IdentityTransform())])
    loc = wh.location("t")
    every = tmp_path / "every"
    ops = [
        lambda: wh.append("t", rows(0, 80)),
        lambda: wh.append("t", rows(80, 80)),
        lambda: wh.delete("t", "id < 30"),
        lambda: wh.append("t", rows(500, 5)),
        lambda: wh.overwrite("t", rows(900, 40), "id >= 100"),
        lambda: wh.delete("t", "name = 'név-3'"),
    ]
    for op in ops:
        op()
        analyze(loc, every)
    once = tmp_path / "once"
    analyze(loc, once)
    for snapshot in wh.lineage("t"):
        a = show_json(loc, every, "--snapshot", str(snapshot))
        b = show_json(loc, once, "--snapshot", str(snapshot))
        for doc in (a, b):
            doc.pop("computed_at_ms")
        assert a == b
    assert_matches_exact(show_json(loc, once), wh, "t")
    code, text = run_cli("commits", loc, "--state-dir", str(once), "--json")
    assert code == 0
    commits = json.loads(text)
    assert [c["snapshot_id"] for c in commits] == wh.lineage("t")
    first = commits[0]
    assert first["added"]["record_count"] == 80 and first["removed"]["data_files"] == 0


def test_show_snapshot_and_errors(
    wh: IcebergWarehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh.create_table("t", SCHEMA)
    loc = wh.location("t")
    state = tmp_path / "state"
    s1 = wh.append("t", rows(0, 10))
    wh.append("t", rows(10, 10))
    analyze(loc, state)
    assert show_json(loc, state, "--snapshot", str(s1))["record_count"] == 10
    code, _ = run_cli("show", loc, "--state-dir", str(state), "--snapshot", "12345")
    assert code == 1
    assert "snapshot 12345 of table t does not exist or was expired" in capsys.readouterr().err
    code, human = run_cli("show", loc, "--state-dir", str(state))
    assert code == 0 and "column" in human and "id" in human


def test_an_append_merges_into_the_stored_merge_without_rereading_segments(
    wh: IcebergWarehouse, tmp_path: Path
) -> None:
    from lakestats.store import StatsStore, merge_key

    wh.create_table("t", SCHEMA)
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    for i in range(3):
        wh.append("t", rows(i * 50, 50))
    analyze(loc, state_dir)
    (table_dir,) = [p for p in state_dir.iterdir() if p.is_dir()]
    state = StatsStore(state_dir, table_dir.name).current()
    assert state is not None and state.merged_path is not None
    assert state.merged_key == merge_key(state)
    # A new process appending one commit needs only the merged aggregate: take the old
    # segments' aggregates away and it still gets the exact answer.
    for segment in state.segments:
        (table_dir / segment.aggregate_path).unlink()
    wh.append("t", rows(1000, 7))
    analyze(loc, state_dir)
    assert_matches_exact(show_json(loc, state_dir), wh, "t")


def test_a_run_on_a_table_its_caller_just_refreshed_does_not_load_it_again(
    wh: IcebergWarehouse, tmp_path: Path
) -> None:
    """``refreshed=True`` (the daemon's poll refreshes the table to see that there is
    work): the run takes the table as the caller left it — for a catalog table a load
    parses the whole metadata file. A commit that lands in between is the next run's."""
    wh.create_table("t", SCHEMA)
    first = wh.append("t", rows(0, 20))
    table = TableConfig(name="t", catalog=wh.catalog_name, identifier=wh.identifier("t"))
    config = Config(
        state_dir=str(tmp_path / "state"),
        sketch=SketchConfig(enabled=False),
        catalog={wh.catalog_name: dict(wh.catalog_properties)},
        table=(table,),
    )
    opened = open_configured(table, config)
    calls: Counter[str] = Counter()
    count_calls(opened.table, "refresh", calls)
    second = wh.append("t", rows(20, 20))  # after the caller's look (its open)
    result = analyze_table(opened, config=config, sketcher=None, refreshed=True)
    assert calls["refresh"] == 0
    assert result.last_snapshot_id == first
    assert read_stats(opened)["snapshot_id"] == first
    result = analyze_table(opened, config=config, sketcher=None)  # looks again
    assert calls["refresh"] == 1
    assert result.last_snapshot_id == second
    assert_matches_exact(read_stats(opened), wh, "t")


def delta_backlog(tmp_path: Path, commits: int) -> OpenedTable:
    """A Delta table of ``commits`` small appends, opened metadata-only, none analyzed."""
    from deltalake import write_deltalake

    location = tmp_path / "t"
    for i in range(commits):
        write_deltalake(location, pa.table({"id": [i, i + 100]}), mode="append")
    config = Config.model_validate(
        {"state_dir": str(tmp_path / "state"), "sketch": {"enabled": False}}
    )
    return open_configured(TableConfig(name="t", location=str(location)), config)


def assert_as_from_scratch(opened: OpenedTable, tmp_path: Path) -> None:
    """The stats of ``opened`` equal one run's over the whole table into a fresh store."""
    config = Config.model_validate(
        {"state_dir": str(tmp_path / "fresh"), "sketch": {"enabled": False}}
    )
    fresh = open_configured(opened.config, config)
    analyze_table(fresh, sketcher=None)
    volatile = {"computed_at_ms", "published"}  # the sidecar each run wrote is its own
    assert {k: v for k, v in read_stats(opened).items() if k not in volatile} == {
        k: v for k, v in read_stats(fresh).items() if k not in volatile
    }


def test_a_run_that_gave_way_hands_its_batch_size_to_its_next_turn(tmp_path: Path) -> None:
    """A run that stopped early reports the size its next batch would have had, and a run
    started with it (``first_batch_commits``) begins there instead of at one commit: the
    daemon's fair share does not pay the ramp-up again on every turn."""
    opened = delta_backlog(tmp_path, 20)
    first, sizes = 1, []
    for _ in range(3):
        reports: list[Any] = []
        result = analyze_table(
            opened,
            sketcher=None,
            on_commit=reports.append,
            should_yield=lambda: True,
            first_batch_commits=first,
        )
        assert result.stopped_early
        # one batch a run (the yield is asked after the first), of the size handed on
        assert {r.batch_commits for r in reports} == {len(reports)}
        sizes.append(len(reports))
        first = result.next_batch_commits
    # metadata-only batches take far under half of batch_target_s: each size doubles
    assert sizes == [1, 2, 4]
    finished = analyze_table(opened, sketcher=None, first_batch_commits=first)
    assert not finished.stopped_early and finished.commits[0].batch_commits == 8
    assert_as_from_scratch(opened, tmp_path)


def test_should_yield_ends_a_run_between_batches_only(tmp_path: Path) -> None:
    """``should_yield`` (the daemon's fair share) is asked before each batch but the first
    and never inside one: a run told to yield always does one batch, ends there like a
    stopped run, and the runs after it reach what one run does."""
    opened = delta_backlog(tmp_path, 12)
    asked: list[int] = []
    runs: list[tuple[bool, int]] = []  # (stopped early, commits)
    while not runs or runs[-1][0]:
        reports: list[Any] = []
        result = analyze_table(
            opened,
            sketcher=None,
            on_commit=reports.append,
            should_yield=lambda reports=reports: asked.append(len(reports)) is None,
        )
        runs.append((result.stopped_early, len(reports)))
        assert len(runs) < 20
    # batches double from one commit: each yielding run did exactly its first batch
    assert [n for _, n in runs] == [1] * (len(runs) - 1) + [runs[-1][1]]
    assert sum(n for _, n in runs) == 12 and len(runs) > 2
    assert 0 not in asked  # never before a run's first batch
    assert_as_from_scratch(opened, tmp_path)
