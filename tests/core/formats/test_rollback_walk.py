"""A table rolled back past the snapshot lakestats processed, then committed to: the run
starts over from the table's lineage (``lakestats.lineage``). With the real writers of
every format and Spark: the walk reads only the files the store never sketched — the files
it sketched before are the same files, so their stored sketches stand in — and ends with
the stats a from-scratch run computes, for the current snapshot and every earlier one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_contract import COLUMNS, DRIVERS, rows

from delta_tables import DeltaWriter
from lakestats.analyze import AnalyzeResult, analyze_table
from lakestats.config import Config, TableConfig, load_config
from lakestats.maintenance import compact
from lakestats.read import read_stats
from lakestats.store import referenced_files
from lakestats.tables import OpenedTable, open_configured
from reading import ReadingSketcher, location_of

pytestmark = pytest.mark.spark

VOLATILE = {"computed_at_ms", "published"}


def opened(location: str, state: Path) -> tuple[Config, OpenedTable]:
    config = load_config(None).model_copy(update={"state_dir": state})
    return config, open_configured(TableConfig(name="t", location=location), config)


def analyze(location: str, state: Path) -> tuple[AnalyzeResult, ReadingSketcher]:
    config, table = opened(location, state)
    sketcher = ReadingSketcher(config)
    return analyze_table(table, config=config, sketcher=sketcher), sketcher


def stable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}


@pytest.mark.parametrize("name", ["iceberg-catalog", "paimon", "delta"])
def test_a_rollback_reads_only_the_files_the_store_never_sketched(
    name: str, spark: Any, tmp_path: Path
) -> None:
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    kept = rows(range(0, 60))
    first = driver.append(kept)
    driver.append(rows(range(100, 160)))
    driver.append(rows(range(200, 260)))
    location = location_of(driver)
    before, sketcher = analyze(location, tmp_path / "state")
    assert sum(r.sketched_files for r in before.commits) == len(set(sketcher.read)) == 3

    driver.rollback(first)  # the two later snapshots leave the lineage
    new = rows(range(1000, 1009))
    newest = driver.append(new)
    after, sketcher = analyze(location, tmp_path / "state")

    assert after.last_snapshot_id == newest
    assert [r.snapshot_id for r in after.commits][-2:] == [first, newest]
    # the first snapshot's file is the one the store sketched: only the new one is read
    (read,) = sketcher.read
    assert sum(r.sketched_files for r in after.commits) == 1
    assert sum(r.reused_files for r in after.commits) == 1
    assert after.commits[-1].sketched_files == 1 and after.commits[-1].reused_files == 0

    scratch, fresh = analyze(location, tmp_path / "scratch")
    assert sum(r.sketched_files for r in scratch.commits) == len(fresh.read) == 2
    assert read in fresh.read
    _, table = opened(location, tmp_path / "state")
    _, from_scratch = opened(location, tmp_path / "scratch")
    for snapshot_id in (first, newest):
        assert stable(read_stats(table, snapshot_id)) == stable(
            read_stats(from_scratch, snapshot_id)
        ), snapshot_id

    # and against the rows written, computed here
    live = pa.table({column: [*kept[column], *new[column]] for column in kept})
    doc = read_stats(table)
    assert doc["record_count"] == live.num_rows
    for column in ("id", "name", "day"):
        stats = doc["columns"][column]
        assert stats["null_count"] == live[column].null_count, column
        assert stats["ndv"] == len(pc.unique(live[column].drop_null())), column  # < k: exact
    assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["max"]) == (0, 1008)


@pytest.mark.parametrize("name", ["iceberg-catalog", "paimon", "delta"])
def test_a_file_sketched_before_and_removed_since_is_not_read_again(
    name: str, spark: Any, tmp_path: Path
) -> None:
    """Rolled back to before a delete: the file it removed is live again; the store holds
    its sketches tombstoned, and they stand in."""
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    driver.append(rows(range(0, 40)))
    second = driver.append(rows(range(100, 140)))
    driver.delete_where_id_below(50)  # removes the first file
    location = location_of(driver)
    analyze(location, tmp_path / "state")

    driver.rollback(second)
    after, sketcher = analyze(location, tmp_path / "state")

    assert sketcher.read == []
    assert sum(r.reused_files for r in after.commits) == 2
    assert after.last_snapshot_id == second
    _, table = opened(location, tmp_path / "state")
    doc = read_stats(table)
    analyze(location, tmp_path / "scratch")
    _, from_scratch = opened(location, tmp_path / "scratch")
    assert stable(doc) == stable(read_stats(from_scratch))
    assert doc["record_count"] == 80
    assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["max"]) == (0, 139)


@pytest.mark.parametrize("name", ["iceberg-catalog", "paimon", "delta"])
def test_files_sketched_before_a_column_was_added_equal_a_fresh_read(
    name: str, spark: Any, tmp_path: Path
) -> None:
    """The stored sketches of a file written (and sketched) before a column was added stand
    in for a read under the newer schema: the column is absent from it either way."""
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    driver.append(rows(range(0, 30)))
    location = location_of(driver)
    analyze(location, tmp_path / "state")
    driver.add_column("extra", "long")
    second = driver.append({**rows(range(100, 130)), "extra": [None] * 10 + list(range(20))})
    driver.append({**rows(range(200, 210)), "extra": list(range(10))})
    analyze(location, tmp_path / "state")

    driver.rollback(second)
    after, sketcher = analyze(location, tmp_path / "state")

    assert sketcher.read == [] and sum(r.reused_files for r in after.commits) == 2
    analyze(location, tmp_path / "scratch")
    _, table = opened(location, tmp_path / "state")
    _, from_scratch = opened(location, tmp_path / "scratch")
    doc = read_stats(table)
    assert stable(doc) == stable(read_stats(from_scratch))
    assert doc["columns"]["extra"]["null_count"] == 30 + 10
    assert (doc["columns"]["extra"]["min"], doc["columns"]["extra"]["max"]) == (0, 19)


@pytest.mark.parametrize("name", ["iceberg-catalog", "paimon"])
def test_a_rollback_and_expiry_rebase_the_baseline_and_reuse_what_it_lists_again(
    name: str, spark: Any, tmp_path: Path
) -> None:
    """Rolled back to before a delete, then the first snapshot expired: the walk starts
    with a baseline. The live file the store holds keeps its segment (the rebase); the
    file the delete removed is listed again, and its stored sketches stand in."""
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    first = driver.append(rows(range(0, 40)))
    second = driver.append(rows(range(100, 140)))
    driver.delete_where_id_below(50)  # removes the first file
    location = location_of(driver)
    analyze(location, tmp_path / "state")

    driver.rollback(second)
    driver.expire([first])
    after, sketcher = analyze(location, tmp_path / "state")

    (baseline,) = after.commits
    assert (baseline.operation, baseline.snapshot_id) == ("baseline", second)
    assert sketcher.read == []
    assert (baseline.added_files, baseline.reused_files, baseline.sketched_files) == (1, 1, 0)
    analyze(location, tmp_path / "scratch")
    _, table = opened(location, tmp_path / "state")
    _, from_scratch = opened(location, tmp_path / "scratch")
    doc = read_stats(table)
    volatile = {"commit"}  # the rebased baseline's commit lists what changed (architecture.md)
    assert {k: v for k, v in stable(doc).items() if k not in volatile} == {
        k: v for k, v in stable(read_stats(from_scratch)).items() if k not in volatile
    }
    assert doc["record_count"] == 80


def no_retention(config: Config) -> Config:
    """Cleanup deletes every state version but the newest and every file it does not
    reference, at once: only what the current state keeps is left."""
    now = {"grace_period_s": 0.0, "log_retention_s": 0.0, "min_log_versions": 1}
    return config.model_copy(update={"maintenance": config.maintenance.model_copy(update=now)})


@pytest.mark.parametrize("name", ["iceberg-catalog", "paimon"])
@pytest.mark.parametrize("removal", ["overwrite", "delete"])
def test_sketches_of_removed_files_outlive_compaction_and_cleanup_while_listed(
    name: str, removal: str, spark: Any, tmp_path: Path
) -> None:
    """A removal that kills a whole segment retires it; compaction writes the dead rows of
    a partly dead one apart, retired too; cleanup with no retention keeps both (the state
    references them) while the snapshot that listed the files is live, so a rollback to it
    reads nothing. Once that snapshot is expired, they go."""
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    driver.append(rows(range(0, 40)))
    second = driver.append(rows(range(100, 140)))
    if removal == "overwrite":
        driver.delete_where_id_below(10**6)  # every file: both segments die
    else:
        driver.delete_where_id_below(50)  # the first file: the rest of its segment lives
        driver.append(rows(range(200, 210)))
    location = location_of(driver)
    config, table = opened(location, tmp_path / "state")
    analyze(location, tmp_path / "state")
    compact(table, no_retention(config))
    state = table.store.current()
    assert state is not None and state.retired
    assert all(path in referenced_files(state) for path in (r.path for r in state.retired))
    assert state.version == min(table.store.versions())  # every earlier version deleted

    driver.rollback(second)
    after, sketcher = analyze(location, tmp_path / "state")

    assert sketcher.read == []
    assert sum(r.reused_files for r in after.commits) == 2
    doc = read_stats(table)
    assert doc["record_count"] == 80
    assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["max"]) == (0, 139)


@pytest.mark.parametrize("name", ["iceberg-catalog", "paimon"])
def test_a_retired_segment_goes_once_no_snapshot_that_listed_its_files_is_live(
    name: str, spark: Any, tmp_path: Path
) -> None:
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    first = driver.append(rows(range(0, 40)))
    second = driver.delete_where_id_below(50)
    driver.append(rows(range(100, 110)))
    location = location_of(driver)
    config, table = opened(location, tmp_path / "state")
    analyze(location, tmp_path / "state")
    state = table.store.current()
    assert state is not None
    (retired,) = state.retired
    assert retired.listed_by == {first}

    driver.expire([first, second])
    analyze(location, tmp_path / "state")  # follows the expiry
    state = table.store.current()
    assert state is not None and state.retired == ()
    compact(table, no_retention(config))
    assert not (table.store.table_dir / retired.path).exists()


@pytest.mark.parametrize("removal", ["overwrite", "delete"])
def test_delta_keeps_no_sketches_of_removed_files_past_compaction_and_cleanup(
    removal: str, spark: Any, tmp_path: Path
) -> None:
    """VACUUM deletes removed files while the log still lists their versions, so a Delta
    version in the log says nothing about its files being there: nothing is retired, and
    after compaction and cleanup a rollback reads the files again (as before)."""
    driver = DRIVERS["delta"](tmp_path / "table")
    driver.create(COLUMNS)
    driver.append(rows(range(0, 40)))
    second = driver.append(rows(range(100, 140)))
    driver.delete_where_id_below(10**6 if removal == "overwrite" else 50)
    location = location_of(driver)
    config, table = opened(location, tmp_path / "state")
    analyze(location, tmp_path / "state")
    compact(table, no_retention(config))
    state = table.store.current()
    assert state is not None and state.retired == ()
    assert all(s.last_listed is None for s in state.segments)

    driver.rollback(second)
    _, sketcher = analyze(location, tmp_path / "state")
    assert len(sketcher.read) == (2 if removal == "overwrite" else 1)
    assert read_stats(table)["record_count"] == 80


@pytest.mark.parametrize("name", ["paimon", "delta"])
def test_after_a_reused_id_only_new_files_are_read(name: str, spark: Any, tmp_path: Path) -> None:
    """Rolled back, then as many commits as were undone: the processed id names another
    commit. The walk writes every snapshot's stats again, but the file the kept snapshot
    lists is the file the store sketched: only the two new ones are read."""
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    kept = rows(range(0, 30))
    first = driver.append(kept)
    driver.append(rows(range(100, 130)))
    processed = driver.append(rows(range(200, 230)))
    location = location_of(driver)
    analyze(location, tmp_path / "state")

    driver.rollback(first)
    driver.append(rows(range(300, 305)))
    assert driver.append(rows(range(400, 402))) == processed  # the id, another commit
    after, sketcher = analyze(location, tmp_path / "state")

    assert len(sketcher.read) == 2
    assert sum(r.reused_files for r in after.commits) == 1
    analyze(location, tmp_path / "scratch")
    _, table = opened(location, tmp_path / "state")
    _, from_scratch = opened(location, tmp_path / "scratch")
    assert stable(read_stats(table)) == stable(read_stats(from_scratch))
    assert read_stats(table)["record_count"] == 30 + 5 + 2


def test_a_delta_restore_adds_back_a_file_the_store_holds_tombstoned(
    spark: Any, tmp_path: Path
) -> None:
    """Delta's RESTORE is an ordinary commit that adds removed files again: one whose
    tombstone is still in a live segment (not compacted yet) is not read again. The
    incremental path looks for them in the state's tombstones only: no store read when
    there is none."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create((("id", "long"), ("part", "string")), partition_by=["part"])
    ids = list(range(0, 60))
    kept = writer.append({"id": ids, "part": ["a" if i % 2 else "b" for i in ids]})
    location = writer.path
    analyze(location, tmp_path / "state")
    writer.delete("part = 'a'")  # one of the commit's two files: its segment lives on
    analyze(location, tmp_path / "state")
    _, table = opened(location, tmp_path / "state")
    state = table.store.current()
    assert state is not None and [len(s.dead_files) for s in state.segments] == [1]

    writer.table().restore(kept)
    after, sketcher = analyze(location, tmp_path / "state")

    (restore,) = after.commits
    assert sketcher.read == []
    assert (restore.added_files, restore.reused_files, restore.sketched_files) == (1, 1, 0)
    analyze(location, tmp_path / "scratch")
    _, from_scratch = opened(location, tmp_path / "scratch")
    doc = read_stats(table)
    volatile = {"commit"}  # this store saw the restore as a commit, scratch as history
    assert {k: v for k, v in stable(doc).items() if k not in volatile} == {
        k: v for k, v in stable(read_stats(from_scratch)).items() if k not in volatile
    }
    assert doc["record_count"] == 60
