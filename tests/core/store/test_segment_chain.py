"""A segment's aggregate as a chain, over real pyiceberg tables: a removal in a segment of
many partitions writes only the partitions it changed as one more delta (the base file
stays), the chain is bounded and then written whole again, compaction flattens it, cleanup
keeps its files, and every run agrees with a from-scratch run and with exact values.

Metadata-only runs (``--no-sketches``): the chain holds aggregates, not data.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.transforms import DayTransform

from lakestats.analyze import analyze_table
from lakestats.cli import main
from lakestats.maintenance import MaintenanceSettings, cleanup, compact
from lakestats.model import AggregateDelta, SegmentEntry, SketchSettings, StateVersion
from lakestats.store import StatsStore
from lakestats.store import store as store_module
from lakestats.store.store import merge_key, referenced_files
from lakestats.tables import open_table
from lakestats.testing import IcebergWarehouse, exact_stats
from lakestats.values import to_json
from stores import metadata_only_config, store_of

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.date32())])
DAYS = 40  # one file per day in the first append: a segment of 40 files and partitions
FIRST = dt.date(2026, 1, 1)


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    days = [FIRST + dt.timedelta(days=i % DAYS) for i in ids]
    return pa.table({"id": ids, "day": days}, schema=SCHEMA)


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def analyze(location: str, state: Path) -> None:
    cli("analyze", location, "--state-dir", str(state), "-q", "--no-sketches")


def show(location: str, state: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cli("show", location, "--state-dir", str(state), "--json"))
    doc.pop("computed_at_ms")
    return doc


def log_doc(store: StatsStore, state: StateVersion) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (store.table_dir / "log" / f"{state.version:020d}.json").read_text()
    )
    return doc


def assert_from_scratch(wh: IcebergWarehouse, location: str, state: Path, tmp: Path) -> None:
    """The incremental stats equal a run over the table's history in a fresh state
    folder, and the exact counts, bounds and partitions of a scan."""
    scratch = tmp / f"scratch-{len(list(tmp.glob('scratch-*')))}"
    analyze(location, scratch)
    doc = show(location, state)
    assert doc == show(location, scratch)
    exact = exact_stats(wh.table("t"))
    assert doc["record_count"] == exact["record_count"]
    for column, want in exact["columns"].items():
        got = doc["columns"][column]
        assert got["null_count"] == want["null_count"], column
        assert got["min"] == to_json(want["min"]) and got["max"] == to_json(want["max"]), column
    per_day: dict[str, int] = {}
    for day in wh.table("t").scan().to_arrow()["day"].to_pylist():
        per_day[day.isoformat()] = per_day.get(day.isoformat(), 0) + 1
    assert {p["partition"]["day_day"]: p["record_count"] for p in doc["partitions"]} == per_day


@pytest.fixture
def day_table(tmp_path: Path) -> tuple[IcebergWarehouse, str, Path]:
    """A table of 40 days, one file each, analyzed once: one segment of 40 partitions."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    wh.append("t", rows(0, 4 * DAYS))
    location = wh.location("t")
    state = tmp_path / "state"
    analyze(location, state)
    return wh, location, state


def test_a_removal_in_a_big_segment_writes_only_its_partitions(
    day_table: tuple[IcebergWarehouse, str, Path], tmp_path: Path
) -> None:
    wh, location, state = day_table
    store, first = store_of(state)
    (segment,) = first.segments
    assert segment.file_count == DAYS and segment.aggregate_deltas == ()
    assert log_doc(store, first)["format_version"] == 1
    base = segment.aggregate_path

    # a day dropped (its file removed: the partition emptied), then a day's rows deleted
    # (its file rewritten: removed from the segment, the new file in a segment of its own)
    wh.delete("t", "day = '2026-01-05'")
    analyze(location, state)
    wh.delete("t", "id = 7")
    analyze(location, state)
    store, state_now = store_of(state)
    (chained, *_) = state_now.segments
    assert chained.aggregate_path == base  # the 40 partitions' file is not written again
    assert [d.partitions for d in chained.aggregate_deltas] == [1, 1]
    emptied = store.read_aggregate(chained.aggregate_deltas[0].path)
    assert [p.file_count for p in emptied] == [0]  # the emptied day, as an all-zero entry
    days = {p.partition.values[0][1] for p in store.segment_aggregate(chained)}
    assert len(days) == DAYS - 2  # the emptied day and the rewritten day left it
    raw = log_doc(store, state_now)
    # a reader knowing only version 1 would take the base for the segment's aggregate
    assert raw["format_version"] == 2
    assert len(raw["segments"][0]["aggregate_deltas"]) == 2
    assert set(chained.aggregate_files) <= referenced_files(state_now)
    assert_from_scratch(wh, location, state, tmp_path)
    # the stored merged view is the merge of the chained aggregate, read anew
    view = store.merged_view(state_now, SketchSettings())
    assert sum(p.record_count for p in view.partitions) == wh.table("t").scan().count()


def test_the_chain_is_bounded_then_written_whole(
    day_table: tuple[IcebergWarehouse, str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh, location, state = day_table
    monkeypatch.setattr(store_module, "MAX_SEGMENT_DELTAS", 3)
    lengths = []
    for day in range(5):
        wh.delete("t", f"day = '{FIRST + dt.timedelta(days=day)}'")
        analyze(location, state)
        store, now = store_of(state)
        (segment,) = now.segments
        lengths.append(len(segment.aggregate_deltas))
        assert log_doc(store, now)["format_version"] == (2 if segment.aggregate_deltas else 1)
    assert lengths == [1, 2, 3, 0, 1]  # the fourth removal wrote the whole aggregate again
    assert_from_scratch(wh, location, state, tmp_path)

    # many partitions at once (over a quarter of the segment's files): whole, not a delta
    wh.delete("t", "id < 40")
    analyze(location, state)
    _, now = store_of(state)
    assert [len(s.aggregate_deltas) for s in now.segments] == [0]
    assert_from_scratch(wh, location, state, tmp_path)


def test_compaction_flattens_the_chain_and_cleanup_keeps_its_files(
    day_table: tuple[IcebergWarehouse, str, Path], tmp_path: Path
) -> None:
    wh, location, state = day_table
    for day in (3, 9):
        wh.delete("t", f"day = '{FIRST + dt.timedelta(days=day)}'")
        analyze(location, state)
    wh.append("t", rows(1000, 3))
    analyze(location, state)
    store, chained = store_of(state)
    assert len(chained.segments[0].aggregate_deltas) == 2
    before = show(location, state)

    # cleanup keeping only the current version deletes every older aggregate, not the chain's
    keep_one = MaintenanceSettings(grace_ms=0, log_retention_ms=0, min_log_versions=1)
    report = cleanup(store, keep_one, now_ms=2**62)
    assert report.files_deleted  # the older versions' files went
    assert not set(report.files_deleted) & set(chained.segments[0].aggregate_files)
    assert show(location, state) == before

    # compaction with nothing to merge but the tombstones: cleanup runs after it
    config = tmp_path / "lakestats.toml"
    config.write_text(
        f'state_dir = "{state}"\n[maintenance]\ngrace_period = "0s"\nsegment_target_files = 1\n'
    )
    cli("compact", location, "--config", str(config))
    store, flat = store_of(state)
    assert all(s.aggregate_deltas == () and not s.dead_files for s in flat.segments)
    assert log_doc(store, flat)["format_version"] == 1
    assert show(location, state) == before
    assert_from_scratch(wh, location, state, tmp_path)


def test_a_chain_renames_the_merged_view_key() -> None:
    """The merged view's key names the chains too (a segment's base stays while its
    chain grows, and a view of the shorter chain is stale); a segment without a chain
    keys as store-format.md says, as before chains existed (stored views stay valid)."""
    segment = SegmentEntry(
        snapshot_id=1, path="segments/s.parquet", aggregate_path="a/b.parquet", file_count=8
    )
    plain = StateVersion(1, "table-1", "iceberg", "/t", 1, segments=(segment,))
    chained = replace(
        plain, segments=(replace(segment, aggregate_deltas=(AggregateDelta("a/d.parquet", 1),)),)
    )
    longer = replace(
        chained,
        segments=(
            replace(
                chained.segments[0],
                aggregate_deltas=(
                    *chained.segments[0].aggregate_deltas,
                    AggregateDelta("a/e.parquet", 1),
                ),
            ),
        ),
    )
    assert len({merge_key(plain), merge_key(chained), merge_key(longer)}) == 3
    documented = hashlib.sha256(b"table-1" + b"\0" + b"a/b.parquet").hexdigest()
    assert merge_key(plain) == documented


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.filterwarnings("ignore:Delete operation did not match any records")  # a no-op
def test_random_commits_in_a_daemon_agree_with_a_from_scratch_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Appends, deletes of days and rows, overwrites and compactions in a random order,
    through one open table (groups kept in memory) with short chains and one-file row
    groups: after each, the stats equal a from-scratch run's and a scan's."""
    monkeypatch.setattr(store_module, "MAX_SEGMENT_DELTAS", 2)
    monkeypatch.setattr("lakestats.store.segments.SEGMENT_ROW_GROUP_BYTES", 256)
    rng = random.Random(seed)
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    location = wh.location("t")
    state = tmp_path / "state"
    config = metadata_only_config(state)
    wh.append("t", rows(0, 4 * DAYS))
    opened = open_table(location, config)
    analyze_table(opened, config=config)
    next_id = 10_000
    for _ in range(10):
        kind = rng.choice(["append", "day", "rows", "overwrite", "compact"])
        day = FIRST + dt.timedelta(days=rng.randrange(DAYS))
        if kind == "append":
            wh.append("t", rows(next_id, rng.randrange(1, 60)))
            next_id += 100
        elif kind == "day":
            wh.delete("t", f"day = '{day}'")
        elif kind == "rows":
            ids = ", ".join(str(rng.randrange(next_id)) for _ in range(rng.randrange(1, 30)))
            wh.delete("t", f"id in ({ids})")
        elif kind == "overwrite":
            wh.overwrite("t", rows(next_id, 5), f"day = '{day}'")
            next_id += 100
        else:
            few = {"max_segments": 2, "segment_target_files": 8}
            maintenance = config.maintenance.model_copy(update=few)
            compact(opened, config.model_copy(update={"maintenance": maintenance}))
        analyze_table(opened, config=config)
        assert_from_scratch(wh, location, state, tmp_path)
