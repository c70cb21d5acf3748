"""Crash recovery of publishing: a run killed mid-batch strands no snapshot and no file.

The "kill" is an exception raised from ``on_commit``: core calls it after the commit's
state version and staged files are durable and before the batch's catalog commit, which
is exactly the state a SIGKILL at that point leaves (tests/daemon/test_crash_suite.py does
the same with real SIGKILLs of a daemon).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from publish_helpers import PySketcher, catalog_config, local, run_analyze
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform

from lakestats.analyze import CommitReport, read_stats
from lakestats.config import Config, MaintenanceConfig
from lakestats.maintenance import compact
from lakestats.model import ColumnSketch, TableSchema
from lakestats.publish.iceberg import FILE_PREFIX, IcebergPublisher
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])
VOLATILE = {"computed_at_ms", "published"}


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (not an ``Exception``, so no handler
    of the commit path catches it)."""


def commit_many(wh: IcebergWarehouse, n: int) -> None:
    wh.create_table("t", SCHEMA, partition_by=[("cat", IdentityTransform())])
    for i in range(n):
        wh.append("t", {"id": [i * 10 + k for k in range(10)], "cat": [f"c{i % 3}"] * 10})


def with_grace(config: Config, seconds: float) -> Config:
    maintenance = MaintenanceConfig.model_validate({"grace_period": seconds})
    return config.model_copy(update={"maintenance": maintenance})


def files_on_disk(table: Table) -> set[str]:
    folder = Path(local(table.metadata.location)) / "metadata"
    return {p.name for p in folder.iterdir() if p.name.startswith(FILE_PREFIX)}


def referenced(table: Table) -> set[str]:
    paths = [s.statistics_path for s in table.metadata.statistics]
    paths += [p.statistics_path for p in table.metadata.partition_statistics]
    return {Path(local(p)).name for p in paths}


def registered(table: Table) -> tuple[set[int], set[int]]:
    return (
        {s.snapshot_id for s in table.metadata.statistics},
        {p.snapshot_id for p in table.metadata.partition_statistics},
    )


def kill_after(n: int) -> Any:
    seen: list[int] = []

    def on_commit(report: CommitReport) -> None:
        seen.append(report.snapshot_id)
        if len(seen) == n:
            raise Killed

    return on_commit


def test_a_run_killed_mid_batch_strands_nothing(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    commit_many(wh, 12)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    config = with_grace(config, 3600)
    # batches of 1, 2, 4, 5 commits: the 5th commit is in the middle of the third batch
    with pytest.raises(Killed):
        run_analyze(config, opened, PySketcher(), on_commit=kill_after(5))
    state = opened.store.current()
    assert state is not None and len(state.stats) == 5
    stats_ids, partition_ids = registered(wh.table("t"))
    # registered: the first two batches; the third batch's 2 snapshots are stranded
    assert len(stats_ids) == len(partition_ids) == 3
    strays = files_on_disk(wh.table("t")) - referenced(wh.table("t"))
    assert len(strays) == 4  # their Puffin and partition stats files

    # the restart: everything processed ends up registered; the strays wait for the grace
    run_analyze(config, opened, PySketcher())
    table = wh.table("t")
    lineage = set(wh.lineage("t"))
    assert registered(table) == (lineage, lineage)
    assert strays <= files_on_disk(table)  # younger than the grace period: kept
    state = opened.store.current()
    assert state is not None
    assert set(state.published["iceberg"]["snapshots"]) == {str(s) for s in lineage}

    # past the grace period, compaction (the daemon's schedule) deletes them, and nothing else
    compact(opened, with_grace(config, 0))
    table = wh.table("t")
    assert files_on_disk(table) == referenced(table)
    assert registered(table) == (lineage, lineage)

    # the stats are those of a run that was never killed
    fresh_config, fresh = catalog_config(wh, "t", tmp_path / "fresh", publish=False)
    run_analyze(fresh_config, fresh, PySketcher())
    strip = lambda doc: {k: v for k, v in doc.items() if k not in VOLATILE}  # noqa: E731
    assert strip(read_stats(opened)) == strip(read_stats(fresh))


def test_the_next_run_past_the_grace_period_sweeps_the_strays(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    commit_many(wh, 4)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    with pytest.raises(Killed):
        run_analyze(config, opened, PySketcher(), on_commit=kill_after(3))
    assert files_on_disk(wh.table("t")) - referenced(wh.table("t"))  # strays
    run_analyze(with_grace(config, 0), opened, PySketcher())
    table = wh.table("t")
    assert files_on_disk(table) == referenced(table)
    lineage = set(wh.lineage("t"))
    assert registered(table) == (lineage, lineage)


def test_one_process_sweeps_a_table_once_per_grace_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep loads the table's metadata again and lists its metadata folder; a daemon
    runs once per commit, so one process sweeps a table at most once per grace period
    (what it deletes must be older than that anyway). Real runs, catalog and publisher;
    the sweeps counted around the real one."""
    wh = IcebergWarehouse(tmp_path / "wh")
    commit_many(wh, 2)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    sweeps: list[float] = []
    sweep = IcebergPublisher.sweep

    def counted(publisher: IcebergPublisher, older_than_s: float) -> int:
        sweeps.append(older_than_s)
        return sweep(publisher, older_than_s)

    monkeypatch.setattr(IcebergPublisher, "sweep", counted)
    run_analyze(config, opened, PySketcher())
    assert sweeps == [config.maintenance.grace_period_s]
    for i in range(3):
        wh.append("t", {"id": [100 + i], "cat": ["c0"]})
        run_analyze(config, opened, PySketcher())
    assert len(sweeps) == 1  # three runs within the grace period (1 h by default)
    lineage = set(wh.lineage("t"))
    assert registered(wh.table("t")) == (lineage, lineage)  # every run still registered
    # strays of a killed run go at the first run past the grace period (here 0: every run)
    for i in range(2):
        wh.append("t", {"id": [200 + i], "cat": ["c1"]})
    with pytest.raises(Killed):
        run_analyze(config, opened, PySketcher(), on_commit=kill_after(1))
    assert files_on_disk(wh.table("t")) - referenced(wh.table("t"))
    run_analyze(with_grace(config, 0), opened, PySketcher())
    assert len(sweeps) == 2
    table = wh.table("t")
    assert files_on_disk(table) == referenced(table)


def test_restaged_theta_sketches_describe_their_own_snapshot(tmp_path: Path) -> None:
    """A stranded snapshot is published with its own stats (from the state version that
    committed it), not the newest snapshot's."""
    wh = IcebergWarehouse(tmp_path / "wh")
    commit_many(wh, 4)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    with pytest.raises(Killed):  # batches 1, 2, 1: killed after the 3rd commit, mid-batch
        run_analyze(config, opened, PySketcher(), on_commit=kill_after(3))
    run_analyze(config, opened, PySketcher())
    table = wh.table("t")
    lineage = wh.lineage("t")
    ndv = {}
    for entry in table.metadata.statistics:
        blob = next(b for b in entry.blob_metadata if b.fields == [1])
        ndv[entry.snapshot_id] = float(blob.properties["ndv"])
    # 10 new ids per commit
    assert [ndv[s] for s in lineage] == [10.0, 20.0, 30.0, 40.0]


class RecordingSketcher:
    """PySketcher that records how many files each batch's job got."""

    def __init__(self) -> None:
        self.inner = PySketcher()
        self.batches: list[int] = []

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int] = ()
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        self.batches.append(len(paths))
        return self.inner(paths, schema, bounds_for)


def test_a_backlog_starts_with_a_one_commit_batch(tmp_path: Path) -> None:
    """However long the backlog, the first job of a run is one commit, so a process killed
    soon after each start still commits and registers something every time."""
    wh = IcebergWarehouse(tmp_path / "wh")
    commit_many(wh, 9)
    config, opened = catalog_config(wh, "t", tmp_path / "state")
    sketcher = RecordingSketcher()
    run_analyze(config, opened, sketcher)
    assert sketcher.batches == [1, 2, 4, 2]
    assert registered(wh.table("t"))[1] == set(wh.lineage("t"))
