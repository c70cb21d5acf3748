"""A rollback followed by exactly as many new commits, with the real writers: the processed
id exists again but names another commit (Delta versions and Paimon snapshot ids are
reused). ``analyze`` must notice (``lakestats.lineage``), start over, and end with the
stats a from-scratch run computes, equal to the live rows the format's own reader gives.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from delta_tables import DeltaWriter
from lakestats.analyze import analyze_table
from lakestats.cli import main
from lakestats.config import Config, SketchConfig, TableConfig
from lakestats.freshness import freshness
from lakestats.read import read_stats
from lakestats.sketching import SparkSketcher
from lakestats.tables import open_configured
from paimon_tables import PaimonWarehouse

pytestmark = pytest.mark.spark

COLUMNS = (("id", "long"), ("name", "string"), ("v", "double"))
THETA_RSE = 1 / 64  # lg_k 12


def batch(first: int, count: int) -> dict[str, list[Any]]:
    ids = list(range(first, first + count))
    return {
        "id": ids,
        "name": [f"n{i % 17}" if i % 5 else None for i in ids],
        "v": [i / 8 for i in ids],
    }


def config_for(location: Path | str, state: Path) -> Config:
    return Config(
        state_dir=str(state),
        table=(TableConfig(name="t", location=str(location)),),
        sketch=SketchConfig(),
    )


def analyze(config: Config, *, sketches: bool = True) -> tuple[dict[str, Any], list[int]]:
    processed: list[int] = []
    analyze_table(
        open_configured(config.table[0], config),
        config=config,
        sketcher=SparkSketcher(config) if sketches else None,
        on_commit=lambda report: processed.append(report.snapshot_id),
    )
    doc = read_stats("t", config=config)
    doc.pop("computed_at_ms")
    doc.pop("published")  # where this store's copy went (each run publishes its own)
    return doc, processed


def assert_is_the_live_table(doc: dict[str, Any], rows: pa.Table) -> None:
    """Counts and bounds exact against the format's own reader; NDV within its bound."""
    assert doc["record_count"] == rows.num_rows
    for name in ("id", "v"):
        column = doc["columns"][name]
        assert (column["min"], column["max"]) == (
            pc.min(rows[name]).as_py(),
            pc.max(rows[name]).as_py(),
        ), name
        assert column["null_count"] == rows[name].null_count, name
    assert doc["columns"]["name"]["null_count"] == rows["name"].null_count
    exact_ndv = len(pc.unique(rows["id"]))
    assert abs(doc["columns"]["id"]["ndv"] - exact_ndv) <= 3 * THETA_RSE * exact_ndv


def assert_restarts_and_equals_from_scratch(
    config: Config, scratch: Config, reused: int, rows: pa.Table
) -> None:
    opened = open_configured(config.table[0], config)
    fresh = freshness(opened)
    assert fresh.last_snapshot_id == fresh.current_snapshot_id == reused
    assert fresh.commits_behind and not fresh.up_to_date
    assert fresh.starts_over is not None and "no longer the commit" in fresh.starts_over

    doc, processed = analyze(config)
    assert processed[-1] == reused and len(processed) == fresh.commits_behind
    assert_is_the_live_table(doc, rows)
    assert doc == analyze(scratch)[0]
    assert freshness(opened).up_to_date
    assert analyze(config)[1] == []


def test_paimon_rollback_then_as_many_commits(spark: Any, tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", COLUMNS)
    for start in (0, 100, 200):
        warehouse.write("t", batch(start, 40))
    config = config_for(location, tmp_path / "state")
    # metadata only (no Spark job): the run after the rollback sketches every file again
    before, processed = analyze(config, sketches=False)
    assert processed == [1, 2, 3] and before["record_count"] == 120

    warehouse.rollback("t", 1)  # pypaimon's rollback_to, as Paimon's own rollback does:
    snapshots = location / "snapshot"
    assert sorted(p.name for p in snapshots.glob("snapshot-*")) == ["snapshot-1"]
    assert (snapshots / "LATEST").read_text().strip() == "1"  # the hint reset
    warehouse.write("t", batch(1000, 7))
    assert warehouse.write("t", batch(2000, 3)) == 3  # the processed id, another commit

    read = warehouse.table("t").new_read_builder()
    rows = read.new_read().to_arrow(read.new_scan().plan().splits())
    assert rows.num_rows == 40 + 7 + 3
    assert_restarts_and_equals_from_scratch(config, config_for(location, tmp_path / "s"), 3, rows)


def show(location: str, state: Path, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["show", location, "--state-dir", str(state), *extra], out=out)
    return code, out.getvalue()


def cut_log_back(writer: DeltaWriter, version: int) -> None:
    """Delta's rollback by cutting the log: every commit and checkpoint after ``version``
    deleted, ``_last_checkpoint`` pointed at the newest checkpoint left (or removed)."""
    writer.cut_log_after(version)
    left = sorted(int(p.name.split(".")[0]) for p in writer.log.glob("*.checkpoint*.parquet"))
    hint = writer.log / "_last_checkpoint"
    if hint.exists() and json.loads(hint.read_text())["version"] > version:
        if left:
            hint.write_text(json.dumps({"version": left[-1], "size": 0}))
        else:
            hint.unlink()


def test_delta_log_cut_back_then_as_many_commits(spark: Any, tmp_path: Path) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create(COLUMNS)
    for start in (0, 100, 200):
        writer.append(batch(start, 40))
    writer.checkpoint()  # at version 3: cut away below, with its _last_checkpoint hint
    config = config_for(writer.path, tmp_path / "state")
    before, processed = analyze(config, sketches=False)
    assert processed[-1] == 3 and before["record_count"] == 120

    cut_log_back(writer, 1)
    assert not (writer.log / "_last_checkpoint").exists()
    writer.append(batch(1000, 7))
    assert writer.append(batch(2000, 3)) == 3  # the processed version, another commit

    rows = writer.table().to_pyarrow_table()
    assert rows.num_rows == 40 + 7 + 3
    # `show` says so before the next run, of the current stats and of --snapshot 3
    for extra in ((), ("--snapshot", "3")):
        code, text = show(writer.path, tmp_path / "state", *extra)
        assert code == 0, text
        assert "BEHIND" in text and "no longer the commit the stats describe" in text, extra
    assert_restarts_and_equals_from_scratch(
        config, config_for(writer.path, tmp_path / "s"), 3, rows
    )
    # the sidecar lists version 3's new stats, not those of the commit it replaced
    sidecar = writer.log / "_lakestats"
    listed = json.loads((sidecar / "index.json").read_text())["versions"]["3"]
    assert json.loads((sidecar / listed).read_text())["record_count"] == rows.num_rows
