"""The crash suite: a real daemon SIGKILLed over and over while a writer commits.

A writer thread commits to a partitioned catalog table (SQLite catalog, publishing on)
the whole time; a ``lakestatsd`` process is started, killed with SIGKILL at a random
moment — before, during or after a run, mid-batch, between a state commit and its catalog
commit — and started again, ≥ 50 times. Sketches are off so a restart takes a second
(no JVM); the commit path, the store and the publisher are the real ones.

It ends with: the stats advanced while being killed; every snapshot of the table has its
stats registered in the table metadata; no ``lakestats-*`` file that the metadata does not
reference is left (after the grace period); the stats equal those of a from-scratch run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakestatsd_harness import DaemonProcess, WriterLoop, fast_config_text, kill_while_writing
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform

from lakestats.analyze import analyze_table, read_stats
from lakestats.config import load_config
from lakestats.publish.iceberg import FILE_PREFIX
from lakestats.tables import open_configured
from lakestats.testing import IcebergWarehouse

KILLS = 50
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])
VOLATILE = {"computed_at_ms", "published"}


def config_text(wh: IcebergWarehouse, state_dir: Path) -> str:
    props = "".join(f'{k} = "{v}"\n' for k, v in wh.catalog_properties.items())
    tables = f"""[catalog.{wh.catalog_name}]
{props}
[[table]]
name = "t"
catalog = "{wh.catalog_name}"
identifier = "{wh.identifier("t")}"
"""
    return fast_config_text(state_dir, tables)


class Writer(WriterLoop):
    """Commits small appends until stopped; retries what a concurrent catalog commit of
    the daemon (a registration) makes fail, as a real writer would."""

    def __init__(self, wh: IcebergWarehouse) -> None:
        super().__init__("crash-suite-writer")
        self.wh = wh

    def commit(self, batch: dict[str, list[Any]]) -> None:
        for _ in range(50):
            try:
                self.wh.append("t", batch)
                return
            except CommitFailedException:
                time.sleep(0.02)
        raise AssertionError("the writer could not commit 50 times in a row")


def stats_files(table: Table) -> tuple[set[str], set[str]]:
    """(lakestats-* files in the metadata folder, file names the metadata references)."""
    folder = Path(table.metadata.location.removeprefix("file://")) / "metadata"
    on_disk = {p.name for p in folder.iterdir() if p.name.startswith(FILE_PREFIX)}
    paths = [s.statistics_path for s in table.metadata.statistics]
    paths += [p.statistics_path for p in table.metadata.partition_statistics]
    return on_disk, {Path(p).name for p in paths}


@pytest.mark.slow
def test_sigkill_while_a_writer_commits_strands_nothing(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("cat", IdentityTransform())])
    wh.append("t", {"id": [0], "cat": ["c0"]})
    state_dir = tmp_path / "state"
    text = config_text(wh, state_dir)
    writer = Writer(wh)
    progress = kill_while_writing(run_daemon, text, writer, state_dir, KILLS)
    assert writer.error is None, writer.error
    assert writer.commits >= KILLS
    # it kept advancing while being killed: every third life committed at least one
    # commit before its kill, and nothing committed was ever lost
    assert progress == sorted(progress), progress
    assert progress[-1] >= (KILLS + 2) // 3, progress

    # one undisturbed start catches up and registers everything
    daemon = run_daemon(text)
    current = wh.table("t").metadata.current_snapshot_id

    def settled() -> bool:
        table = wh.table("t")
        lineage = {s.snapshot_id for s in table.metadata.snapshots}
        registered = {p.snapshot_id for p in table.metadata.partition_statistics}
        resp = daemon.request("GET", "/v1/tables/t/stats")
        served = resp.json().get("snapshot_id") if resp.status == 200 else None
        return served == current and registered == lineage

    daemon.wait_until(settled)
    assert daemon.terminate() == 0
    failures = [e for e in daemon.events() if e.get("event") == "table_run_failed"]
    assert not failures, daemon.tail()  # recovering from the kills is not an error

    # past the grace period, the next run deletes the files killed runs left behind
    time.sleep(1.2)
    config = load_config(tmp_path / "lakestatsd.toml")
    opened = open_configured(config.table[0], config)
    analyze_table(opened, config=config, sketcher=None)
    table = wh.table("t")
    lineage = {s.snapshot_id for s in table.metadata.snapshots}
    assert {p.snapshot_id for p in table.metadata.partition_statistics} == lineage
    on_disk, referenced = stats_files(table)
    assert on_disk == referenced, sorted(on_disk - referenced)
    state = opened.store.current()
    assert state is not None and set(state.stats) == lineage

    # and the stats are exactly those of a from-scratch run
    fresh_config = config.model_copy(update={"state_dir": str(tmp_path / "fresh")})
    fresh = open_configured(config.table[0].model_copy(update={"publish": False}), fresh_config)
    analyze_table(fresh, config=fresh_config, sketcher=None)
    assert strip(read_stats(opened)) == strip(read_stats(fresh))


def strip(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}
