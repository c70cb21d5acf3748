"""Two runs over one table's backlog (a CLI analyze beside a daemon, two hooks at once):
each loses races to the other, reloads and carries on — a race lost after a commit of its
own is turn-taking, not failure — and a rebuild that loses its first race still rebuilds.
The competitor runs inside the first run's callbacks, so every race is lost on purpose."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from lakestats.analyze import CommitReport, analyze_table, read_stats
from lakestats.config import Config, TableConfig
from lakestats.tables import OpenedTable, open_configured
from paimon_tables import PaimonWarehouse

SCHEMA = pa.schema([("id", pa.int64())])
COMMITS = 8
VOLATILE = {"computed_at_ms", "published"}


def delta_table(location: Path, commits: int, first: int = 0) -> None:
    for i in range(first, first + commits):
        write_deltalake(location, pa.table({"id": [i, i + 100]}, schema=SCHEMA), mode="append")


def opened(location: Path, state: Path) -> OpenedTable:
    config = Config.model_validate({"state_dir": str(state), "sketch": {"enabled": False}})
    return open_configured(TableConfig(name="t", location=str(location)), config)


def one_commit_of(location: Path, state: Path) -> int:
    """Another process's run that processes one commit and stops; how many it did."""
    reports: list[CommitReport] = []
    analyze_table(
        opened(location, state),
        sketcher=None,
        on_commit=reports.append,
        should_stop=lambda: bool(reports),
    )
    return len(reports)


def stable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}


def test_two_runs_take_turns_over_a_backlog(tmp_path: Path) -> None:
    location, state = tmp_path / "t", tmp_path / "state"
    delta_table(location, COMMITS)
    competitor = 0

    def after_each_of_ours(_report: CommitReport) -> None:
        nonlocal competitor
        competitor += one_commit_of(location, state)  # it takes the next version first

    ours = analyze_table(opened(location, state), sketcher=None, on_commit=after_each_of_ours)
    # every commit processed once, by one run or the other, and every race lost by ours
    assert len(ours.commits) + competitor == COMMITS
    assert competitor >= 3  # more lost races than the retries once allowed in a whole run
    assert ours.last_snapshot_id == COMMITS - 1
    fresh = opened(location, tmp_path / "fresh")
    analyze_table(fresh, sketcher=None)
    assert stable(read_stats(opened(location, state))) == stable(read_stats(fresh))


def test_a_rebuild_that_loses_its_first_race_still_rebuilds(tmp_path: Path) -> None:
    location, state = tmp_path / "t", tmp_path / "state"
    delta_table(location, 3)
    analyze_table(opened(location, state), sketcher=None)
    table = opened(location, state)
    before = {s.path for s in table.store.current().segments}  # type: ignore[union-attr]
    delta_table(location, 3, first=3)
    raced = False

    def before_its_first_commit(_pending: Any) -> None:
        nonlocal raced
        if not raced:
            raced = True
            assert one_commit_of(location, state) == 1

    result = analyze_table(table, sketcher=None, rebuild=True, on_pending=before_its_first_commit)
    assert raced and result.last_snapshot_id == 5
    after = opened(location, state).store.current()
    assert after is not None
    # rebuilt: no segment of before the rebuild is one of the stats now
    assert before and not before & {s.path for s in after.segments}
    fresh = opened(location, tmp_path / "fresh")
    analyze_table(fresh, sketcher=None)
    assert stable(read_stats(opened(location, state))) == stable(read_stats(fresh))


def test_snapshots_expired_under_a_run_are_contention_not_damage(tmp_path: Path) -> None:
    """A Paimon writer expires snapshots as it commits: their files go between the
    daemon's look at the table and its run's walk over them. The run reloads and finishes
    from what is left (a baseline), as a from-scratch run of the table as it is now does."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", SCHEMA)
    for i in range(5):
        warehouse.write("t", {"id": [i, i + 100]})
    state = tmp_path / "state"
    table = opened(location, state)
    table.table.refresh()  # the daemon's look: five snapshots
    oldest = sorted(table.table.snapshot_ids())[:3]
    opened(location, tmp_path / "writer").table.expire_snapshots(oldest)  # type: ignore[attr-defined]
    result = analyze_table(table, sketcher=None, refreshed=True)
    assert result.last_snapshot_id == warehouse.current("t")
    fresh = opened(location, tmp_path / "fresh")
    analyze_table(fresh, sketcher=None)
    assert stable(read_stats(opened(location, state))) == stable(read_stats(fresh))
    assert read_stats(fresh)["record_count"] == 10
