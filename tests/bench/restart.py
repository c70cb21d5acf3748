"""A run that starts over, against a run from scratch (what every start-over cost before
it reused the stored sketches: segments dropped, every live file sketched again).

A delta-rs table of ``--files`` appends of ``--rows`` rows (no log retention) is analyzed
with sketches on. Then, by ``--case``:

* ``cut`` (the default): one more file is appended, one file's rows deleted (its file
  removed), and a VACUUM and a log cleanup (checkpoint, older commits deleted) cut the
  processed version: the start-over is a baseline rebased onto the stored segments.
* ``rollback``: a bad write — an overwrite replacing every file with a small one — is
  analyzed too, then rolled back by cutting the log back to the version before it: the
  walk from the first version adds every file again, files the store sketched before and
  removed since (their segments left the state; earlier state versions reference them).

Timed, median of ``--repeat``, each from a copy of the state before the start-over: the
start-over run, and a run into an empty state (every file read). Both end with the same
stats (NDV equal; checked).

    .venv/bin/python tests/bench/restart.py --rows 1000000                    # ~3 min
    .venv/bin/python tests/bench/restart.py --rows 1000000 --case rollback
    PYTHONPATH=<checkout of the older code>/core .venv/bin/python tests/bench/restart.py …
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

try:
    from deltalake import DeltaTable, write_deltalake

    from lakestats.analyze import AnalyzeResult, SparkSketcher, analyze_table, read_stats
    from lakestats.config import Config, SparkConfig, TableConfig
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import open_configured
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats or deltalake ({exc}): run `make bench`") from exc


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests/bench/restart.py", description=__doc__)
    parser.add_argument("--files", type=int, default=40, help="files (appends) before the cut")
    parser.add_argument("--rows", type=int, default=100_000, help="rows per file")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each kind")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument(
        "--case",
        choices=("cut", "rollback"),
        default="cut",
        help="history cut past the processed version, or a rollback (above)",
    )
    return parser.parse_args(argv)


def batch(start: int, rows: int) -> pa.Table:
    ids = pa.array(range(start, start + rows), pa.int64())
    return pa.table(
        {
            "id": ids,
            "name": pa.array([f"name-{i % 5000}" for i in range(start, start + rows)]),
            "price": pa.array([(i * 37 % 10_000) / 100 for i in range(start, start + rows)]),
        }
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lakestats-restart-") as tmp:
        root = Path(tmp)
        location = str(root / "t")
        print(f"writing {args.files} files of {args.rows:,} rows with delta-rs", flush=True)
        configuration = {"delta.logRetentionDuration": "interval 0 seconds"}
        for i in range(args.files):
            data = batch(i * args.rows, args.rows)
            write_deltalake(location, data, mode="append", configuration=configuration)
        config = Config(
            state_dir=str(root / "state"),
            spark=SparkConfig(master=args.spark_master, conf={"spark.ui.enabled": "false"}),
        )
        get_spark(SparkSettings(master=config.spark.master, conf=config.spark.conf))
        first, seconds = timed(partial(run, location, config))
        print(f"first analyze: {seconds:.1f} s, {sketched(first)} files sketched", flush=True)

        if args.case == "cut":
            cut_history(location, args)
            change = "1 added and 1 removed since the processed version"
        else:
            roll_back(location, config, args)
            change = "all removed by the processed version, which the rollback undid"

        rebased: list[float] = []
        scratch: list[float] = []
        docs: list[dict[str, Any]] = []
        for i in range(args.repeat):
            copy = root / f"state-{i}"
            shutil.copytree(root / "state", copy)
            empty = root / f"scratch-{i}"
            for kind, state, times in (
                ("start-over", copy, rebased),
                ("from scratch", empty, scratch),
            ):
                state_config = config.model_copy(update={"state_dir": str(state)})
                result, seconds = timed(partial(run, location, state_config))
                times.append(seconds)
                print(
                    f"  {kind}: {seconds:.2f} s, {sketched(result)} sketched, "
                    f"{sum(getattr(r, 'reused_files', 0) for r in result.commits)} reused",
                    flush=True,
                )
                opened = open_configured(TableConfig(name="t", location=location), state_config)
                docs.append(read_stats(opened))
        ndvs = {tuple((n, c["ndv"]) for n, c in sorted(d["columns"].items())) for d in docs}
        records = {d["record_count"] for d in docs}
        assert len(ndvs) == 1 and len(records) == 1, (ndvs, records)
        stop_spark()
    a, b = statistics.median(rebased), statistics.median(scratch)
    print(
        f"\n{args.case}: {args.files} files of {args.rows:,} rows, {change}; median of "
        f"{args.repeat}:\n"
        f"| run | seconds |\n|---|---|\n| start-over | {a:.2f} |\n"
        f"| from scratch (the start-over before) | {b:.2f} |\n"
        f"ratio: the start-over takes {a / b:.2f}x a run from scratch "
        f"(same stats: record count {records.pop():,}, NDV equal)"
    )
    return 0


def cut_history(location: str, args: argparse.Namespace) -> None:
    write_deltalake(location, batch(args.files * args.rows, args.rows), mode="append")
    table = DeltaTable(location)
    table.delete(f"id < {args.rows}")  # the first file's rows: that file is removed
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    table.create_checkpoint()
    table.cleanup_metadata()


def roll_back(location: str, config: Config, args: argparse.Namespace) -> None:
    before = DeltaTable(location).version()
    write_deltalake(location, batch(0, 1000), mode="overwrite")  # the bad write
    result = run(location, config)
    print(f"the overwrite analyzed: {sketched(result)} file sketched", flush=True)
    log = Path(location) / "_delta_log"
    for entry in log.iterdir():  # Delta's rollback: the log cut back to before it
        head = entry.name.split(".")[0]
        if entry.is_file() and head.isdigit() and int(head) > before:
            entry.unlink()


def run(location: str, config: Config) -> AnalyzeResult:
    opened = open_configured(TableConfig(name="t", location=location), config)
    return analyze_table(opened, config=config, sketcher=SparkSketcher(config))


def sketched(result: AnalyzeResult) -> int:
    return sum(r.sketched_files for r in result.commits)


def timed(work: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = work()
    return out, time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
