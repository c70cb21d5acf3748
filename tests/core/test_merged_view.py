"""The merged view over real pyiceberg tables: a commit updates only the partitions it
touches (an append merges its files into the stored view, a removal re-merges its
partitions from their live segments), the view is stored as a base plus a chain of
deltas, and every run, in a new process or not, agrees with a from-scratch run and with
exact values from a scan.

Metadata-only runs (``--no-sketches``) except the last test, which sketches on Spark.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.transforms import DayTransform, IdentityTransform

from lakestats.analyze import analyze_table
from lakestats.cli import main
from lakestats.config import load_config
from lakestats.merge import TABLE_GROUPS, group_of, merge_partitions, view_of, whole_table
from lakestats.model import MergedView, PartitionAggregate, SketchSettings, StateVersion
from lakestats.sketches.merge import kll_count, kll_normalized_rank_error
from lakestats.store import StatsStore
from lakestats.store.store import MAX_MERGED_DELTAS, merge_key
from lakestats.tables import open_table
from lakestats.testing import IcebergWarehouse, exact_stats
from lakestats.values import to_json
from stores import metadata_only_config, store_of

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("day", pa.date32()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("name", pa.string()),
    ]
)
DAYS = 40


def rows(start: int, n: int, *, day: int | None = None, days: int = DAYS) -> pa.Table:
    """Rows ``start`` … on day ``day``, else spread over ``days`` days (row i: i % days)."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "day": [
                dt.date(2026, 1, 1) + dt.timedelta(days=i % days if day is None else day)
                for i in ids
            ],
            "price": [Decimal(i) / 4 for i in ids],
            "name": [None if i % 7 == 0 else f"n-{i % 13}" for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def wh(tmp_path: Path) -> IcebergWarehouse:
    return IcebergWarehouse(tmp_path / "wh")


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def analyze(location: str, state: Path, *, sketches: bool = False) -> None:
    no_sketches = () if sketches else ("--no-sketches",)
    cli("analyze", location, "--state-dir", str(state), "-q", *no_sketches)


def show(location: str, state: Path, *extra: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        cli("show", location, "--state-dir", str(state), "--json", *extra)
    )
    doc.pop("computed_at_ms")
    return doc


def remerged(store: StatsStore, state: StateVersion) -> MergedView:
    """The merged view from every live segment's aggregate (what no stored view helps)."""
    parts: list[PartitionAggregate] = []
    for segment in state.segments:
        parts.extend(store.segment_aggregate(segment))
    return view_of(merge_partitions(parts, SketchSettings()), SketchSettings())


def exact_partitions(wh: IcebergWarehouse, name: str) -> dict[str, int]:
    """Live rows per day partition, from a scan."""
    counts: dict[str, int] = {}
    for day in wh.table(name).scan().to_arrow()["day"].to_pylist():
        counts[day.isoformat()] = counts.get(day.isoformat(), 0) + 1
    return counts


def doc_partitions(doc: dict[str, Any]) -> dict[str, int]:
    keys = [p["partition"]["day_day"] for p in doc["partitions"]]
    assert len(keys) == len(set(keys)), "a partition listed twice"
    assert keys == sorted(keys), "days out of order (typed and read-back keys sort alike)"
    return {p["partition"]["day_day"]: p["record_count"] for p in doc["partitions"]}


def assert_exact(doc: dict[str, Any], wh: IcebergWarehouse, name: str) -> None:
    exact = exact_stats(wh.table(name))
    assert doc["record_count"] == exact["record_count"]
    assert doc["file_count"] == sum(1 for _ in wh.table(name).scan().plan_files())
    for column, want in exact["columns"].items():
        got = doc["columns"][column]
        assert got["null_count"] == want["null_count"], column
        assert got["min"] == to_json(want["min"]) and got["max"] == to_json(want["max"]), column
    assert doc_partitions(doc) == exact_partitions(wh, name)


def test_day_partitions_stay_one_entry_each_across_runs(
    wh: IcebergWarehouse, tmp_path: Path
) -> None:
    """Dates are partition values whose JSON differs from the Python value: a run that
    reads the stored view must find the same partitions the new files name."""
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    loc = wh.location("t")
    every = tmp_path / "every"
    ops = [
        lambda: wh.append("t", rows(0, 80)),
        lambda: wh.append("t", rows(80, 80)),  # the same 40 days again
        lambda: wh.delete("t", "id < 30"),  # rewrites some days, empties none
        lambda: wh.append("t", rows(500, 5, day=3)),
        lambda: wh.delete("t", "day = '2026-01-05'"),  # empties one day
        lambda: wh.overwrite("t", rows(900, 40), "id >= 100"),
    ]
    for op in ops:
        op()
        analyze(loc, every)  # each a new store object: the view comes from its files
        assert_exact(show(loc, every), wh, "t")
    once = tmp_path / "once"
    analyze(loc, once)
    for snapshot in wh.lineage("t"):
        assert show(loc, every, "--snapshot", str(snapshot)) == show(
            loc, once, "--snapshot", str(snapshot)
        )


def test_the_view_is_a_chain_of_the_partitions_each_commit_changed(
    wh: IcebergWarehouse, tmp_path: Path
) -> None:
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    wh.append("t", rows(0, 4 * DAYS))
    analyze(loc, state_dir)
    store, state = store_of(state_dir)
    assert state.merged_deltas == () and state.merged_table_path is not None
    base = state.merged_path

    # one day per commit: each adds one delta of one partition, the base stays
    for i in range(3):
        wh.append("t", rows(1000 + 10 * i, 10, day=i))
        analyze(loc, state_dir)
        store, state = store_of(state_dir)
        assert state.merged_path == base
        assert [d.partitions for d in state.merged_deltas] == [1] * (i + 1)
    # aggregates carry no partition_fields: the reader before this revision fails on it
    assert "partition_fields" not in pq.read_schema(store.path(state.merged_path or "")).names
    raw = json.loads((store.table_dir / "log" / f"{state.version:020d}.json").read_text())
    # a reader that knows only "merged" must not take the base for the whole view, nor
    # one that knows "merged_chain" re-merge the table from entries without sketches
    assert "merged" not in raw and "merged_chain" not in raw
    assert len(raw["merged_view"]["deltas"]) == 3

    # a removal touching two days: one delta of those two, re-merged from their segments
    wh.delete("t", "id >= 1000 and id < 1005 or id = 1")
    analyze(loc, state_dir)
    store, state = store_of(state_dir)
    assert [d.partitions for d in state.merged_deltas] == [1, 1, 1, 2]
    stored = store.merged_view(state, SketchSettings())
    assert stored == remerged(store, state)
    assert_exact(show(loc, state_dir), wh, "t")

    # past half the partitions in deltas, the whole view is written again
    budget = DAYS // 2 - 5
    for i in range(budget + 1):
        wh.append("t", rows(2000 + i, 1, day=10 + i))
        analyze(loc, state_dir)
    store, state = store_of(state_dir)
    assert state.merged_path != base
    assert sum(d.partitions for d in state.merged_deltas) <= DAYS // 2
    assert store.merged_view(state, SketchSettings()) == remerged(store, state)
    assert_exact(show(loc, state_dir), wh, "t")


def test_the_chain_is_bounded_in_length(wh: IcebergWarehouse, tmp_path: Path) -> None:
    days = 4 * MAX_MERGED_DELTAS  # the partition budget allows more than the length cap
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    wh.append("t", rows(0, days, days=days))
    analyze(loc, state_dir)
    lengths = []
    for i in range(MAX_MERGED_DELTAS + 1):
        wh.append("t", rows(10_000 + i, 1, day=i))
        analyze(loc, state_dir)
        lengths.append(len(store_of(state_dir)[1].merged_deltas))
    assert lengths == [*range(1, MAX_MERGED_DELTAS + 1), 0]
    store, state = store_of(state_dir)
    assert store.merged_view(state, SketchSettings()) == remerged(store, state)


def test_a_lost_chain_file_is_re_merged_not_fatal(
    wh: IcebergWarehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    wh.append("t", rows(0, 80))
    analyze(loc, state_dir)
    wh.append("t", rows(100, 5, day=2))
    analyze(loc, state_dir)
    store, state = store_of(state_dir)
    (delta,) = state.merged_deltas
    (store.table_dir / delta.path).unlink()
    capsys.readouterr()
    wh.append("t", rows(200, 5, day=3))
    analyze(loc, state_dir)
    assert "merged_view_unreadable" in capsys.readouterr().out
    assert_exact(show(loc, state_dir), wh, "t")
    # the new version does not extend the broken chain: it wrote the whole view
    store, state = store_of(state_dir)
    assert state.merged_deltas == ()
    assert store.merged_view(state, SketchSettings()) == remerged(store, state)


def test_an_unpartitioned_table_writes_the_whole_view(wh: IcebergWarehouse, tmp_path: Path) -> None:
    wh.create_table("t", SCHEMA)
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    for i in range(3):
        wh.append("t", rows(100 * i, 50))
        analyze(loc, state_dir)
        store, state = store_of(state_dir)
        # one partition is the table: no chain, no table file of its own
        assert state.merged_deltas == () and state.merged_table_path is None
        (part,) = store.read_aggregate(state.merged_path or "")
        view = store.merged_view(state, SketchSettings())
        assert view.table.record_count == part.record_count == 50 * (i + 1)
        assert view.table.columns == part.columns


@pytest.mark.spark
@pytest.mark.parametrize("daemon", [False, True], ids=["runs", "daemon"])
def test_sketches_of_a_partitioned_table_match_a_from_scratch_run(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, daemon: bool
) -> None:
    """The table aggregate an append extends (never re-merged from its partitions) and the
    partitions a removal re-merges give what a from-scratch run gives: the same exact
    counts, bounds and theta NDV; quantiles within KLL's bound of exact ranks. ``runs``:
    a new process per commit (the view read from the store); ``daemon``: one open table
    (as lakestatsd), whose removals merge the table from the view's groups."""
    monkeypatch.setenv("LAKESTATS_SKETCH__KLL_K", "200")
    rng = random.Random(7)
    wh = IcebergWarehouse(tmp_path / "wh")
    schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("v", pa.float64()), pa.field("g", pa.int32())]
    )
    wh.create_table("t", schema, partition_by=[("g", IdentityTransform())])
    loc = wh.location("t")

    def batch(start: int, n: int, groups: int) -> pa.Table:
        return pa.table(
            {
                "id": list(range(start, start + n)),
                "v": [rng.gauss(0, 100) for _ in range(n)],
                "g": [rng.randrange(groups) for _ in range(n)],
            },
            schema=schema,
        )

    every = tmp_path / "every"
    config = load_config(None).model_copy(update={"state_dir": every})
    opened = open_table(loc, config) if daemon else None

    def run() -> None:
        if opened is None:
            analyze(loc, every, sketches=True)
        else:
            analyze_table(opened, config=config)

    wh.append("t", batch(0, 4000, 12))
    run()
    for i in range(3):
        wh.append("t", batch(10_000 * (i + 1), 300, 2))  # two partitions per commit
        run()
    _, state = store_of(every)
    assert state.merged_deltas, "appends of two partitions out of 12 extend the chain"
    wh.delete("t", "g = 1 and id < 2000")  # rewrites one partition's file
    run()
    wh.append("t", batch(90_000, 200, 12))
    run()
    wh.delete("t", "g = 5 and id < 3000")  # a second removal: its group alone, in a daemon
    run()
    if opened is not None:
        view = opened.store.merged_view(opened.store.current() or state, config.sketch.settings())
        assert view.groups is not None

    once = tmp_path / "once"
    analyze(loc, once, sketches=True)
    final, scratch = show(loc, every), show(loc, once)
    live = wh.table("t").scan().to_arrow()
    rank_error = kll_normalized_rank_error(200)
    for name in ("id", "v", "g"):
        a, b = final["columns"][name], scratch["columns"][name]
        for key in ("null_count", "min", "max", "ndv"):
            assert a[key] == b[key], (name, key)
        values = sorted(live[name].to_pylist())
        n = len(values)
        for q, v in a["quantiles"].items():
            lo = sum(1 for x in values if x < v) / n
            hi = sum(1 for x in values if x <= v) / n
            assert lo - 3 * rank_error <= float(q) <= hi + 3 * rank_error, (name, q, v)
    counts = pc.value_counts(live["g"])
    assert {p["partition"]["g"]: p["record_count"] for p in final["partitions"]} == dict(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    )
    assert final["record_count"] == live.num_rows

    # the stored view keeps columns for the table alone: its partition entries hold totals
    store, state = store_of(every)
    assert state.merged_counts_only and state.merged_table_path is not None
    entries = [
        part
        for rel in (state.merged_path or "", *(d.path for d in state.merged_deltas))
        for part in store.read_aggregate(rel)
    ]
    assert {p.partition for p in store.merged_view(state, SketchSettings()).partitions} <= {
        p.partition for p in entries
    }
    assert all(p.columns == {} for p in entries)
    (table,) = store.read_aggregate(state.merged_table_path)
    assert all(c.theta is not None and c.kll is not None for c in table.columns.values())


@pytest.mark.spark
def test_a_view_stored_with_partition_sketches_is_read_and_then_rewritten(
    spark: Any, tmp_path: Path
) -> None:
    """A view written before partitions dropped their sketches (``merged_chain`` or
    ``merged``, every partition with sketches) is read as counts per partition; the next
    commit writes the whole view again rather than extend a chain of the other shape."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    wh.append("t", rows(0, 200, days=8))
    analyze(loc, state_dir, sketches=True)
    store, state = store_of(state_dir)
    parts = merge_partitions(
        [p for s in state.segments for p in store.segment_aggregate(s)],
        SketchSettings(),
    )
    assert all(c.theta is not None for p in parts for c in p.columns.values())
    older = replace(
        state,
        version=state.version + 1,
        merged_path=store.write_aggregate(0, parts),  # partitions with their sketches
        merged_table_path=store.write_aggregate(0, (remerged(store, state).table,)),
        merged_deltas=(),
        merged_counts_only=False,
    )
    store.commit(replace(older, merged_key=merge_key(older)))
    raw = json.loads((store.table_dir / "log" / f"{older.version:020d}.json").read_text())
    assert "merged" in raw and "merged_view" not in raw  # the older shape

    store, state = store_of(state_dir)
    view = store.merged_view(state, SketchSettings())
    assert view == remerged(store, state)
    assert all(p.columns == {} for p in view.partitions)

    wh.append("t", rows(1000, 20, day=3))
    analyze(loc, state_dir, sketches=True)
    store, state = store_of(state_dir)
    assert state.merged_counts_only and state.merged_deltas == ()
    view, again = store.merged_view(state, SketchSettings()), remerged(store, state)
    assert view.partitions == again.partitions
    for fid, column in view.table.columns.items():
        other = again.table.columns[fid]
        for name in ("records", "null_count", "lower", "upper", "sketched_files", "theta"):
            assert getattr(column, name) == getattr(other, name), (fid, name)
        # KLL merges compact at random: equal counts, not bytes (quantiles: the test above)
        assert (column.kll is None) == (other.kll is None), fid
        if column.kll is not None and other.kll is not None:
            assert kll_count(column.kll) == kll_count(other.kll), fid
    once = tmp_path / "once"
    analyze(loc, once, sketches=True)
    final, scratch = show(loc, state_dir), show(loc, once)
    assert final["partitions"] == scratch["partitions"]
    assert final["record_count"] == scratch["record_count"] == 220
    for name in ("id", "day", "price", "name"):
        for key in ("null_count", "min", "max", "ndv"):
            assert final["columns"][name][key] == scratch["columns"][name][key], (name, key)


def _groups_match_their_partitions(
    store: StatsStore, state: StateVersion, view: MergedView
) -> None:
    """Each kept group is the merge of its partitions' live segment entries, and the table
    the merge of the groups: what a re-merge of every partition gives (exact fields)."""
    assert view.groups is not None and len(view.groups) == TABLE_GROUPS
    parts = [p for s in state.segments for p in store.segment_aggregate(s)]
    settings = SketchSettings()
    for index, group in enumerate(view.groups):
        mine = whole_table([p for p in parts if group_of(p.partition) == index], settings)
        assert replace(group, columns={}) == replace(mine, columns={}), index
        assert group.columns.keys() == mine.columns.keys()
        for field_id, column in group.columns.items():
            assert replace(column, kll=None) == replace(mine.columns[field_id], kll=None)
    table = remerged(store, state).table
    assert replace(view.table, columns={}) == replace(table, columns={})


def test_a_daemon_keeps_groups_and_re_merges_only_the_removals_groups(
    wh: IcebergWarehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One open table across commits (as lakestatsd keeps it): the first removal re-merges
    every group, later ones only the groups of their partitions (counted), appends keep
    the groups up to date, and every state's stats equal a from-scratch run's."""
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    loc = wh.location("t")
    state_dir = tmp_path / "state"
    config = metadata_only_config(state_dir)
    opened = open_table(loc, config)
    wh.append("t", rows(0, 4 * DAYS))
    analyze_table(opened, config=config)
    asked: list[frozenset[int]] = []
    real = StatsStore.remerge_partitions

    def counting(self: StatsStore, *args: Any, **kwargs: Any) -> Any:
        asked.append(frozenset(kwargs.get("groups", ())))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(StatsStore, "remerge_partitions", counting)
    steps = [
        ("delete", lambda: wh.delete("t", "day = '2026-01-05'")),  # empties a day
        ("append", lambda: wh.append("t", rows(500, 6, day=9))),
        ("delete", lambda: wh.delete("t", "id = 9 or id = 500")),  # rewrites day 9's files
        ("delete", lambda: wh.delete("t", "day = '2026-01-20' or day = '2026-01-21'")),
        ("append", lambda: wh.append("t", rows(900, 40))),
        ("delete", lambda: wh.overwrite("t", rows(2000, 3, day=30), "day = '2026-01-31'")),
    ]
    for number, (kind, step) in enumerate(steps):
        step()
        before = len(asked)
        analyze_table(opened, config=config)
        state = opened.store.current()
        assert state is not None
        view = opened.store.merged_view(state, config.sketch.settings())
        if kind == "delete":
            assert len(asked) == before + 1
            if before == 0:
                assert asked[-1] == frozenset(range(TABLE_GROUPS))  # the first: all of them
            else:  # a day or two: their groups alone
                assert 1 <= len(asked[-1]) <= 2
        _groups_match_their_partitions(opened.store, state, view)
        once = tmp_path / f"once-{number}"
        analyze(loc, once)
        assert show(loc, state_dir) == show(loc, once)
        assert_exact(show(loc, state_dir), wh, "t")
