"""Commit after commit in one process: what a run costs on an Iceberg catalog table.

A daemon (or a notebook, a long-lived hook host) runs ``analyze_table`` once per commit on
the same opened table. This builds a pyiceberg table (SQLite catalog) with ``--history``
one-row commits (built once under ``--work-dir``), processes it once, then makes
``--commits`` more one-row appends (kept: the next invocation starts from a table that
many snapshots longer), each followed by a run, metadata only (no Spark),
publishing on (the catalog table's Puffin and partition statistics, as the daemon does).
It prints the median run time and how many times a run loaded the table from the catalog
(each load reads and parses the whole metadata JSON, which grows with the snapshots the
table keeps), counted around pyiceberg's ``SqlCatalog.load_table``. ``--poll`` runs as the
daemon does: the poll refreshes the table first (is there work?) and the run takes it as
refreshed (``refreshed=True``, where this checkout's ``analyze_table`` has it).

    .venv/bin/python tests/bench/iceberg_commits.py            # --history 300 --commits 30
    PYTHONPATH=<checkout>/core:<checkout>/daemon .venv/bin/python tests/bench/iceberg_commits.py
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

import lakestats
from lakestats.analyze import analyze_table
from lakestats.config import Config, SketchConfig, TableConfig
from lakestats.tables import open_configured
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
_loads = [0]
_load_table = SqlCatalog.load_table


def _counted_load(self: SqlCatalog, *args: Any, **kwargs: Any) -> Any:
    _loads[0] += 1
    return _load_table(self, *args, **kwargs)


def row(i: int) -> pa.Table:
    return pa.table({"id": [i], "name": [f"n{i}"]}, schema=SCHEMA)


def warehouse(root: Path, history: int) -> IcebergWarehouse:
    built = root / "built"
    if not built.exists():
        shutil.rmtree(root, ignore_errors=True)
        wh = IcebergWarehouse(root / "wh", catalog_name="bench")
        wh.create_table("t", SCHEMA)
        for i in range(history):
            wh.append("t", row(i))
        built.touch()
    return IcebergWarehouse(root / "wh", catalog_name="bench")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=300)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--work-dir", default=".bench/iceberg-commits")
    parser.add_argument("--poll", action="store_true", help="refresh first, as the daemon's poll")
    args = parser.parse_args()
    root = Path(args.work_dir).resolve() / f"h{args.history}"
    print(f"lakestats from {Path(lakestats.__file__).parent}", flush=True)
    wh = warehouse(root, args.history)
    SqlCatalog.load_table = _counted_load  # type: ignore[method-assign]
    shutil.rmtree(root / "state", ignore_errors=True)
    config = Config(
        state_dir=str(root / "state"),
        sketch=SketchConfig(enabled=False),
        catalog={"bench": dict(wh.catalog_properties)},
        table=(TableConfig(name="t", catalog="bench", identifier=wh.identifier("t")),),
    )
    opened = open_configured(config.table[0], config)
    analyze_table(opened, config=config, sketcher=None)
    snapshots = len(opened.table.snapshot_ids())
    seconds, loads = [], []
    knows_refreshed = "refreshed" in inspect.signature(analyze_table).parameters
    extra = {"refreshed": True} if args.poll and knows_refreshed else {}
    for i in range(args.commits):
        wh.append("t", row(10**6 + i))
        before = _loads[0]
        started = time.perf_counter()
        if args.poll:
            opened.table.refresh()
        analyze_table(opened, config=config, sketcher=None, **extra)
        seconds.append(time.perf_counter() - started)
        loads.append(_loads[0] - before)
    print(
        f"{snapshots} snapshots at the start, {args.commits} runs"
        f"{' after a poll' if args.poll else ''}: median "
        f"{statistics.median(seconds) * 1000:.1f} ms a run, "
        f"{statistics.median(loads):g} catalog loads a run"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
