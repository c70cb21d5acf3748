"""What the Paimon primary-key merge costs (``key_merge = "apply"`` vs ``"estimate"``), and
the Arrow engine's merge against the SQL job's (``[sketch] engine = "auto"`` vs ``"sql"``).

A pypaimon deduplicate table (``--rows`` keys in ``--buckets`` buckets, loaded in
``--commits`` commits), then one update-heavy commit (``--update`` of the keys rewritten).
Each setting analyzes the load (full build) and then the update (incremental) in its own
state, on one SparkSession started (and each engine run once) before the clock; printed:
seconds, files and rows re-read for the merge (``deletes_reread_*``), and whether
``mergedRecordCount`` is exact. Run: ``.venv/bin/python tests/bench/paimon_key_merge.py``
(results in docs/benchmarks.md, "Paimon primary-key merge").
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema

from lakestats.analyze import analyze_table
from lakestats.config import Config, SketchConfig, SparkConfig, TableConfig
from lakestats.formats.paimon.testing import write_arrow
from lakestats.read import read_stats
from lakestats.sketches.spark import get_spark
from lakestats.sketching import SparkSketcher
from lakestats.tables import open_configured


def rows(keys: range, step: int) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "customer": pa.array([f"customer-{(k * 7 + step) % 5000:05d}" for k in keys]),
            "amount": pa.array([(k % 1000) / 10 + step for k in keys], pa.float64()),
            "quantity": pa.array([(k + step) % 50 for k in range(n)], pa.int64()),
        }
    )


def write(catalog: Any, table: pa.Table) -> None:
    write_arrow(catalog.get_table("db.t"), table)


def timed(config: Config) -> tuple[float, Any]:
    started = time.perf_counter()
    result = analyze_table(
        open_configured(config.table[0], config), config=config, sketcher=SparkSketcher(config)
    )
    return time.perf_counter() - started, result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--commits", type=int, default=4)
    parser.add_argument("--update", type=float, default=0.1)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lakestats-keymerge-"))
    try:
        catalog = CatalogFactory.create({"warehouse": str(work / "wh")})
        catalog.create_database("db", True)
        schema = rows(range(1), 0).schema
        catalog.create_table(
            "db.t",
            Schema.from_pyarrow_schema(
                schema,
                primary_keys=["id"],
                options={"bucket": str(args.buckets), "metadata.stats-mode": "full"},
            ),
            False,
        )
        location = work / "wh" / "db.db" / "t"
        per = args.rows // args.commits
        for c in range(args.commits):
            write(catalog, rows(range(c * per, (c + 1) * per), 1))
        configs = {
            f"{mode}, {engine} engine": Config(
                state_dir=str(work / f"state-{mode}-{engine}"),
                table=(TableConfig(name="t", location=str(location), key_merge=mode),),
                spark=SparkConfig(master="local[2]"),
                sketch=SketchConfig(engine=engine),
            )
            for mode, engine in (("apply", "auto"), ("apply", "sql"), ("estimate", "auto"))
        }
        get_spark(SparkSketcher(next(iter(configs.values()))).settings())  # not timed
        for n, config in enumerate(configs.values()):  # warm each engine's paths, not timed
            timed(config.model_copy(update={"state_dir": str(work / f"warm-{n}")}))
        build = {mode: timed(config)[0] for mode, config in configs.items()}
        updated = int(args.rows * args.update)
        write(catalog, rows(range(0, args.rows, max(1, args.rows // updated)), 2))
        print(f"{args.rows} keys, {args.buckets} buckets, {args.commits} load commits; ")
        print(f"update commit: {updated} keys rewritten")
        for mode, config in configs.items():
            seconds, result = timed(config)
            report = result.commits[-1]
            doc = read_stats("t", config=config)["paimon"]
            print(
                f"key_merge={mode}: full build {build[mode]:.1f} s; update {seconds:.2f} s, "
                f"re-read {report.deletes_reread_files} files / {report.deletes_reread_rows} "
                f"rows; mergedRecordCount {doc['merged_record_count']} "
                f"({doc['merged_record_count_is']})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
