"""A run publishes the new snapshot's Paimon statistics and rebuilds no older ones.

The bookkeeping remembers the newest 20 processed snapshots' records and, beyond them,
``settled_through``: older snapshots were settled by a flush (a Paimon snapshot names one
statistics file, so their stats were superseded). Found by the
SF 1 benchmark (100 commits): every incremental run rebuilt, wrote and deleted a statistics
file for up to 64 older snapshots, about 8 s of a 1-file update. A real table written by
pypaimon; the pure-Python sketcher stands in for Spark; ``stage`` is wrapped (it still
runs) only to count what a run builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_paimon_publish import COLUMNS, analyze, config_for, java_reads, rows, snapshot_doc

from lakestats.publish.base import SnapshotStats
from lakestats.publish.paimon import PaimonPublisher
from paimon_tables import PaimonWarehouse

WRITES = 25  # more than the 20 snapshots the bookkeeping remembers


def test_a_run_after_many_commits_stages_only_the_new_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", COLUMNS)
    for i in range(WRITES):
        warehouse.write("t", rows([2 * i, 2 * i + 1]))
    config = config_for(location, tmp_path / "state", publish=True)
    staged: list[int] = []
    real_stage = PaimonPublisher.stage

    def counting_stage(self: PaimonPublisher, stats: SnapshotStats, published: Any) -> None:
        staged.append(stats.snapshot_id)
        real_stage(self, stats, published)

    monkeypatch.setattr(PaimonPublisher, "stage", counting_stage)
    analyze(config)  # every commit, then one ANALYZE snapshot naming the newest stats
    assert warehouse.current("t") == WRITES + 1
    assert (
        java_reads(location, snapshot_doc(location, WRITES + 1)["statistics"])["snapshotId"]
        == WRITES
    )

    staged.clear()
    new = warehouse.write("t", rows([1000]))
    analyze(config)
    # not the older snapshots the bookkeeping no longer lists; lakestats' own ANALYZE
    # snapshot (new - 1) reaches ``stage`` too, which skips it without writing a file
    assert [s for s in staged if s != new - 1] == [new]
    latest = snapshot_doc(location, new + 1)
    assert latest["commitKind"] == "ANALYZE"
    stats = java_reads(location, latest["statistics"])
    assert (stats["snapshotId"], stats["mergedRecordCount"]) == (new, 2 * WRITES + 1)
    assert len(list((location / "statistics").iterdir())) == 2  # one per ANALYZE snapshot

    staged.clear()
    analyze(config)  # nothing new: nothing built, nothing committed
    assert warehouse.current("t") == new + 1
    assert new not in staged
