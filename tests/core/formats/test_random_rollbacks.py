"""Random histories of a pyiceberg table with rollbacks, kept by one open table as the daemon
keeps it, sketched by Spark: appends, deletes of whole days and of rows (copy-on-write),
overwrites, rollbacks to an ancestor, snapshot expiry and lakestats' own compaction. After
every run the stats equal a from-scratch run's and the exact values of a scan, and no data
file is ever read twice: whatever a walk that starts over adds again, the store's sketches
of it stand in (``docs/architecture.md``, "Lineage") — even after compaction and a cleanup
that keeps no earlier state version, through the retired segments.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.transforms import DayTransform
from test_contract import COLUMNS, DRIVERS
from test_contract import rows as contract_rows

from lakestats.analyze import AnalyzeResult, analyze_table
from lakestats.config import load_config
from lakestats.maintenance import compact
from lakestats.read import read_stats
from lakestats.sketching import SparkSketcher
from lakestats.tables import OpenedTable, open_table
from lakestats.testing import IcebergWarehouse
from reading import ReadingSketcher, location_of

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.date32())])
DAYS = 8
FIRST = dt.date(2026, 1, 1)
STEPS = 12
KINDS = {"append": 3, "day": 2, "rows": 2, "overwrite": 1, "rollback": 3, "expire": 1, "compact": 1}


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    days = [FIRST + dt.timedelta(days=i % DAYS) for i in ids]
    return pa.table({"id": ids, "day": days}, schema=SCHEMA)


def summary(opened: OpenedTable, *, day_partitions: bool = True) -> dict[str, Any]:
    """What a from-scratch run must give exactly (merged KLL and frequent items depend on
    the merge order once they compact: not compared)."""
    doc = read_stats(opened)
    out = {
        "snapshot_id": doc["snapshot_id"],
        "record_count": doc["record_count"],
        "columns": {
            name: {k: c[k] for k in ("null_count", "min", "max", "ndv")}
            for name, c in doc["columns"].items()
        },
    }
    if day_partitions:
        out["partitions"] = sorted(
            (p["partition"]["day_day"], p["record_count"]) for p in doc["partitions"]
        )
    return out


def assert_agrees(wh: IcebergWarehouse, opened: OpenedTable, tmp: Path, step: int) -> None:
    config = load_config(None).model_copy(update={"state_dir": tmp / f"scratch-{step}"})
    scratch = open_table(wh.location("t"), config)
    analyze_table(scratch, config=config, sketcher=SparkSketcher(config))
    got = summary(opened)
    assert got == summary(scratch), step
    data = wh.table("t").scan().to_arrow()
    assert got["record_count"] == data.num_rows
    assert got["columns"]["id"]["ndv"] == len(pc.unique(data["id"]))  # theta: exact here
    if data.num_rows:
        assert (got["columns"]["id"]["min"], got["columns"]["id"]["max"]) == (
            pc.min(data["id"]).as_py(),
            pc.max(data["id"]).as_py(),
        )
    per_day: dict[str, int] = {}
    for day in data["day"].to_pylist():
        per_day[day.isoformat()] = per_day.get(day.isoformat(), 0) + 1
    assert dict(got["partitions"]) == per_day


@pytest.mark.parametrize("seed", [1])
@pytest.mark.filterwarnings("ignore:Delete operation did not match any records")  # a no-op
def test_random_histories_with_rollbacks_read_each_file_once(
    tmp_path: Path, spark: Any, seed: int
) -> None:
    rng = random.Random(seed)
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
    config = load_config(None).model_copy(update={"state_dir": tmp_path / "state"})
    opened = open_table(wh.location("t"), config)
    sketcher = ReadingSketcher(config)

    def run() -> AnalyzeResult:
        return analyze_table(opened, config=config, sketcher=sketcher)

    wh.append("t", rows(0, 4 * DAYS))
    run()
    next_id = 1000
    reused = rollbacks = 0
    plan = list(KINDS) + rng.choices(list(KINDS), weights=list(KINDS.values()), k=STEPS)
    for step, kind in enumerate(plan):
        day = FIRST + dt.timedelta(days=rng.randrange(DAYS))
        lineage = wh.lineage("t")
        if kind == "append":
            wh.append("t", rows(next_id, rng.randrange(1, 40)))
            next_id += 100
        elif kind == "day":
            wh.delete("t", f"day = '{day}'")
        elif kind == "rows":
            ids = ", ".join(str(rng.randrange(next_id)) for _ in range(rng.randrange(1, 20)))
            wh.delete("t", f"id in ({ids})")
        elif kind == "overwrite":
            wh.overwrite("t", rows(next_id, 5), f"day = '{day}'")
            next_id += 100
        elif kind == "rollback" and len(lineage) > 1:
            wh.rollback("t", rng.choice(lineage[:-1]))
            rollbacks += 1
        elif kind == "expire" and len(lineage) > 2:
            wh.expire_snapshots("t", lineage[: rng.randrange(1, len(lineage) - 1)])
        elif kind == "compact":
            # and cleanup with no retention: only what the current state references stays
            few = {"max_segments": 2, "segment_target_files": 4, "min_log_versions": 1}
            now = {"grace_period_s": 0.0, "log_retention_s": 0.0}
            maintenance = config.maintenance.model_copy(update={**few, **now})
            compact(opened, config.model_copy(update={"maintenance": maintenance}))
        before = len(sketcher.read)
        result = run()
        reused += sum(r.reused_files for r in result.commits)
        assert sum(r.sketched_files for r in result.commits) == len(sketcher.read) - before
        assert len(sketcher.read) == len(set(sketcher.read)), (step, kind)  # each file once
        assert_agrees(wh, opened, tmp_path, step)
    assert rollbacks and reused  # the walks took stored sketches


# -- Paimon and Delta, through the contract suite's drivers ---------------------------------

FORMAT_KINDS = {"append": 4, "delete": 2, "rollback": 3, "expire": 1, "compact": 1}


@pytest.mark.parametrize("name", ["paimon", "paimon-probing", "delta"])
def test_random_paimon_and_delta_histories_with_rollbacks(
    tmp_path: Path, spark: Any, name: str
) -> None:
    """Appends (one file each), deletes of whole files, rollbacks (Paimon's rollback_to;
    Delta's log cut back: ids reused when as many commits follow), Paimon's snapshot
    expiry, and compaction with no-retention cleanup. After every run the stats equal a
    from-scratch run and the ids written; Paimon never reads a data file twice (its
    removed files' sketches are retired while a snapshot lists them). Delta retires
    nothing (VACUUM), so after a compaction it may read a removed file again: only its
    correctness is asserted. ``paimon-probing`` refreshes by asking for snapshot files by
    name (rollbacks, ids reused and expiry all seen by the probe)."""
    rng = random.Random(1)
    driver = DRIVERS[name](tmp_path / "table")
    driver.create(COLUMNS)
    location = location_of(driver)
    config = load_config(None).model_copy(update={"state_dir": tmp_path / "state"})
    opened = open_table(location, config)
    sketcher = ReadingSketcher(config)
    files: list[list[int]] = []  # the live files' ids, oldest first
    written: dict[int, list[list[int]]] = {}  # snapshot → its live files
    next_id = 0
    kinds = [k for k in FORMAT_KINDS if k != "expire" or name.startswith("paimon")]
    weights = [FORMAT_KINDS[k] for k in kinds]
    for step, kind in enumerate(["append", *kinds, *rng.choices(kinds, weights, k=STEPS)]):
        lineage = [c.snapshot_id for c in driver.open().commits_since(None)]
        if kind == "append":
            ids = list(range(next_id, next_id + rng.randrange(1, 30)))
            next_id += 100
            files = [*files, ids]
            written[driver.append(contract_rows(ids))] = files
        elif kind == "delete" and len(files) > 1:
            first_kept = rng.randrange(1, len(files))  # files before it go, whole
            written[driver.delete_where_id_below(files[first_kept][0])] = files[first_kept:]
            files = files[first_kept:]
        elif kind == "rollback" and len(lineage) > 1:
            target = rng.choice([s for s in lineage[:-1] if s in written])
            driver.rollback(target)
            files = written[target]
        elif kind == "expire" and len(lineage) > 2:
            driver.expire(lineage[: rng.randrange(1, len(lineage) - 1)])
        elif kind == "compact":
            now = {"grace_period_s": 0.0, "log_retention_s": 0.0, "min_log_versions": 1}
            maintenance = config.maintenance.model_copy(update={**now, "max_segments": 2})
            compact(opened, config.model_copy(update={"maintenance": maintenance}))
        analyze_table(opened, config=config, sketcher=sketcher)
        if name.startswith("paimon"):
            assert len(sketcher.read) == len(set(sketcher.read)), (step, kind)
        scratch_config = load_config(None).model_copy(
            update={"state_dir": tmp_path / f"scratch-{step}"}
        )
        scratch = open_table(location, scratch_config)
        analyze_table(scratch, config=scratch_config, sketcher=SparkSketcher(scratch_config))
        got = summary(opened, day_partitions=False)
        assert got == summary(scratch, day_partitions=False), (step, kind)
        ids = [i for f in files for i in f]
        assert got["record_count"] == len(ids), (step, kind)
        if ids:
            assert (got["columns"]["id"]["min"], got["columns"]["id"]["max"]) == (
                min(ids),
                max(ids),
            )
            assert got["columns"]["id"]["ndv"] == len(ids)  # theta: exact here
