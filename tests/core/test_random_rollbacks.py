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
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.transforms import DayTransform

from lakestats.analyze import AnalyzeResult, analyze_table
from lakestats.config import Config, load_config
from lakestats.maintenance import compact
from lakestats.model import ColumnSketch, TableSchema
from lakestats.read import read_stats
from lakestats.sketching import SparkSketcher
from lakestats.tables import OpenedTable, open_table
from lakestats.testing import IcebergWarehouse

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


class ReadingSketcher:
    """The Spark sketcher, recording every data file it reads."""

    def __init__(self, config: Config) -> None:
        self.inner = SparkSketcher(config)
        self.read: list[str] = []

    @property
    def startup_s(self) -> float:
        return self.inner.startup_s

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int], **kw: Any
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        self.read.extend(paths)
        return self.inner(paths, schema, bounds_for, **kw)


def summary(opened: OpenedTable) -> dict[str, Any]:
    """What a from-scratch run must give exactly (merged KLL and frequent items depend on
    the merge order once they compact: not compared)."""
    doc = read_stats(opened)
    return {
        "snapshot_id": doc["snapshot_id"],
        "record_count": doc["record_count"],
        "columns": {
            name: {k: c[k] for k in ("null_count", "min", "max", "ndv")}
            for name, c in doc["columns"].items()
        },
        "partitions": sorted(
            (p["partition"]["day_day"], p["record_count"]) for p in doc["partitions"]
        ),
    }


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
