"""What keeping the sketches of removed files costs in store bytes, and what it buys a
rollback (``docs/maintenance.md``, "What needed means for the sketches of a dead file").

A pyiceberg table (SQLite catalog) partitioned by day: ``--days`` days of ``--rows`` rows in
one append, analyzed with sketches on (Spark ``local[2]``, the default settings). Then
``--rounds`` overwrites of one day each, every one analyzed and followed by ``compact``
with no retention (grace period and log retention 0, one state version kept): the store
then holds only what its current state references. Its bytes are printed after each
round. Then the table is rolled back to its first snapshot (every overwrite undone) and
analyzed: the walk adds the overwritten days' files again — files read and seconds
printed. Last, every snapshot but the current one is expired and the store compacted
again: what no live snapshot lists leaves.

    .venv/bin/python tests/bench/retired.py [--days 40 --rows 50000 --rounds 8]
    PYTHONPATH=<checkout of the older code>/core .venv/bin/python tests/bench/retired.py …
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.transforms import DayTransform

try:
    from lakestats.analyze import SparkSketcher, analyze_table
    from lakestats.config import Config, SparkConfig, load_config
    from lakestats.maintenance import compact
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import OpenedTable, open_table
    from lakestats.testing import IcebergWarehouse
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats ({exc}): run `make bench`") from exc

START = dt.date(2024, 1, 1)
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("price", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("day", pa.date32()),
    ]
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests/bench/retired.py", description=__doc__)
    parser.add_argument("--days", type=int, default=40, help="partitions (one file each)")
    parser.add_argument("--rows", type=int, default=50_000, help="rows per day")
    parser.add_argument("--rounds", type=int, default=8, help="one-day overwrites")
    parser.add_argument("--spark-master", default="local[2]")
    return parser.parse_args(argv)


def days(rng: np.random.Generator, first: int, count: int, rows: int) -> pa.Table:
    day = np.repeat(
        np.array([START + dt.timedelta(days=d) for d in range(first, first + count)]), rows
    )
    n = len(day)
    return pa.table(
        {
            "id": pa.array(rng.integers(0, 10**12, n)),
            "price": pa.array(np.round(rng.random(n) * 1000, 2)),
            "name": pa.array([f"name-{i % 5000}" for i in rng.integers(0, 10**6, n)]),
            "day": pa.array(day, pa.date32()),
        },
        schema=SCHEMA,
    )


def no_retention(config: Config) -> Config:
    now = {"grace_period_s": 0.0, "log_retention_s": 0.0, "min_log_versions": 1}
    return config.model_copy(update={"maintenance": config.maintenance.model_copy(update=now)})


def mib(opened: OpenedTable) -> float:
    return opened.store.usage()[1] / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="lakestats-retired-") as tmp:
        root = Path(tmp)
        wh = IcebergWarehouse(root / "wh")
        wh.create_table("t", SCHEMA, partition_by=[("day", DayTransform())])
        first = wh.append("t", days(rng, 0, args.days, args.rows))
        config = load_config(None).model_copy(
            update={
                "state_dir": root / "state",
                "spark": SparkConfig(master=args.spark_master, conf={"spark.ui.enabled": "false"}),
            }
        )
        get_spark(SparkSettings(master=config.spark.master, conf=config.spark.conf))
        opened = open_table(wh.location("t"), config)
        sketcher = SparkSketcher(config)

        def run() -> Any:
            return analyze_table(opened, config=config, sketcher=sketcher)

        run()
        compact(opened, no_retention(config))
        sizes = [mib(opened)]
        print(f"{args.days} days x {args.rows:,} rows analyzed: store {sizes[0]:.2f} MiB")
        for i in range(args.rounds):
            day = START + dt.timedelta(days=i)
            wh.overwrite("t", days(rng, i, 1, args.rows), f"day = '{day}'")
            run()
            compact(opened, no_retention(config))
            sizes.append(mib(opened))
            print(f"  overwrite {i + 1}: store {sizes[-1]:.2f} MiB", flush=True)

        wh.rollback("t", first)
        started = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - started
        read = sum(r.sketched_files for r in result.commits)
        reused = sum(getattr(r, "reused_files", 0) for r in result.commits)
        print(f"rollback to the first snapshot: {seconds:.2f} s, {read} read, {reused} reused")

        wh.expire_snapshots("t", [s for s in opened.table.snapshot_ids() if s != first])
        run()  # follows the expiry
        compact(opened, no_retention(config))
        after = mib(opened)
        print(f"every other snapshot expired: store {after:.2f} MiB")
        stop_spark()
    print(
        "\n| store after | MiB |\n|---|---|\n"
        f"| the first analyze | {sizes[0]:.2f} |\n"
        + "".join(f"| overwrite {i} + compact | {s:.2f} |\n" for i, s in enumerate(sizes[1:], 1))
        + f"| expiry of all but the first snapshot | {after:.2f} |\n"
        f"rollback of {args.rounds} overwrites: {seconds:.2f} s, {read} files read, "
        f"{reused} reused"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
