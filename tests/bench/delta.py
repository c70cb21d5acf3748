"""``make bench`` (Delta variant): lakestats on TPC-H lineitem as a Delta table.

1. generate lineitem (tpchgen-cli, the parts ``tpch.py`` generates) and load it with
   delta-rs as a Delta table in ``--commits`` appends;
2. lakestats' initial analyze (every commit, sketches on), then the full build against a
   plain scan: ``sketch_files`` over every live file against a Spark ``min()`` of every
   column over the same files (``--repeat`` runs each, DESIGN §11: ≤ 1.5×);
3. append one more part (1 % at 100 commits) with delta-rs and time lakestats'
   incremental update (``--repeat`` runs, each from a copy of the state after step 2);
4. Spark ``ANALYZE TABLE … COMPUTE STATISTICS FOR ALL COLUMNS`` (histograms on) over the
   same live files;

then print a summary and write it into docs/benchmarks.md (its own section, replaced by
the next run with the same scale factor and commits).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import baseline
import options
import sections
import tpch
from measure import load_average, machine, timed
from options import progress

try:
    from deltalake import write_deltalake

    from lakestats.analyze import SparkSketcher, analyze_table, read_stats
    from lakestats.config import Config, SparkConfig, TableConfig
    from lakestats.pipeline import sketch_files
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import open_configured
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats or deltalake ({exc}): run `make bench`") from exc

REPO = options.REPO


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests/bench/delta.py", description=__doc__)
    return options.parse(parser, argv, keep="keep the generated parts")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = args.work_dir.resolve() / f"delta-sf{args.scale_factor:g}-c{args.commits}"
    parts = root / "parts"
    if not (args.keep and (parts / "lineitem").is_dir()):
        shutil.rmtree(root, ignore_errors=True)
        progress(f"generating lineitem SF {args.scale_factor:g} in {args.commits + 1} parts")
        tpch.generate(parts, args.scale_factor, args.commits + 1)
    run = root / "run"
    shutil.rmtree(run, ignore_errors=True)
    try:
        lines = measure(args, parts / "lineitem", run)
    finally:
        stop_spark()
        shutil.rmtree(run, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print("\n".join(lines))
    if not args.no_report:
        write_section(args.report, args, lines)
        progress(f"wrote the results into {args.report}")
    return 0


def measure(args: argparse.Namespace, parts: Path, run: Path) -> list[str]:
    location = run / "lineitem"
    progress(f"loading {args.commits} parts as {args.commits} delta-rs append commits")
    started = time.perf_counter()
    for i in range(1, args.commits + 1):
        write_deltalake(
            str(location), tpch.read_part(parts / f"lineitem.{i}.parquet"), mode="append"
        )
    load_seconds = time.perf_counter() - started
    loads = {"start": load_average()}
    config = Config(
        state_dir=str(run / "state"),
        spark=SparkConfig(master=args.spark_master, conf={"spark.ui.enabled": "false"}),
        table=(TableConfig(name="lineitem", location=str(location)),),
    )
    table_config = config.table[0]
    spark, spark_start = timed(
        lambda: get_spark(SparkSettings(master=config.spark.master, conf=config.spark.conf))
    )
    opened = open_configured(table_config, config)
    progress(f"lakestats initial analyze over {args.commits} commits")
    result, initial = timed(
        lambda: analyze_table(opened, config=config, sketcher=SparkSketcher(config))
    )
    rows_before = int(read_stats(opened)["record_count"])
    version = opened.table.current_snapshot_id()
    assert version is not None
    built = [tpch.local_path(f.path) for f in opened.table.live_files(version)]
    schema, settings = opened.table.schema(), config.sketch.settings()
    build = baseline.full_build(
        spark, built, lambda: sketch_files(spark, built, schema, settings), args.repeat, progress
    )

    progress("appending one more part with delta-rs")
    append_part = parts / f"lineitem.{args.commits + 1}.parquet"
    append_rows = tpch.read_part(append_part).num_rows
    _, append_seconds = timed(
        lambda: write_deltalake(str(location), tpch.read_part(append_part), mode="append")
    )
    state = Path(config.state_dir)
    updates: list[float] = []
    for i in range(args.repeat):
        copy = state.with_name(f"state-{i}")
        shutil.copytree(state, copy)
        run_config = config.model_copy(update={"state_dir": str(copy)})

        _, seconds = timed(partial(_update, table_config, run_config))
        updates.append(seconds)
        progress(f"  incremental update {i + 1}/{args.repeat}: {seconds:.2f} s")

    loads["after the updates"] = load_average()
    opened.table.refresh()
    current = opened.table.current_snapshot_id()
    assert current is not None
    live = [f.path.removeprefix("file://") for f in opened.table.live_files(current)]
    progress(f"Spark ANALYZE TABLE … FOR ALL COLUMNS over the same {len(live)} files")
    session = baseline.create_table(spark, live, run / "spark-table")
    columns = [c.name for c in opened.table.schema().columns]
    spark_result = baseline.analyze(session, columns, args.repeat, progress)
    loads["after ANALYZE"] = load_average()
    best_update, best_analyze = min(updates), min(spark_result.seconds.seconds)
    load_line = ", ".join(f"{name} {value:.2f}" for name, value in loads.items())
    return [
        f"### TPC-H lineitem SF {args.scale_factor:g} as a Delta table, {args.commits} delta-rs "
        f"appends + 1 % — {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "",
        f"Command: `.venv/bin/python tests/bench/delta.py --scale-factor {args.scale_factor:g} "
        f"--commits {args.commits} --repeat {args.repeat}` on {_machine()}.",
        "",
        f"1-minute load average: {load_line} (this run's Spark adds up to 2; the machine "
        "is shared, so other work inflates absolute times — compare ratios).",
        "",
        "| measurement | seconds |",
        "| --- | --- |",
        f"| load: {args.commits} delta-rs appends ({rows_before:,} rows) | {load_seconds:.2f} |",
        f"| Spark start | {spark_start:.2f} |",
        f"| lakestats initial analyze ({len(result.commits)} commit(s): a baseline at the "
        f"newest checkpoint, then the commits after it) | {initial:.2f} |",
        f"| lakestats `sketch_files` over the {len(built)} files (best of {args.repeat}; "
        f"median {build.sketch.median:.2f}) | {build.sketch.best:.2f} |",
        f"| Spark `min()` of every column over the same files (best of {args.repeat}; "
        f"median {build.scan.median:.2f}) | {build.scan.best:.2f} |",
        f"| ratio `sketch_files` / scan (target ≤ 1.5×) | {build.ratio:.2f}× |",
        f"| delta-rs append of {append_rows:,} rows | {append_seconds:.2f} |",
        f"| **lakestats incremental update** (best of {args.repeat}; median "
        f"{statistics.median(updates):.2f}) | **{best_update:.2f}** |",
        f"| **Spark ANALYZE TABLE … FOR ALL COLUMNS** (best of {args.repeat}) over the same "
        f"{len(live)} files | **{best_analyze:.2f}** |",
        f"| ratio ANALYZE / update | {best_analyze / best_update:.1f}× |",
    ]


def _machine() -> str:
    m = machine()
    return f"{m['cpus']} CPUs ({m['cpu']}), {m['memory']}, {m['os']}, Python {m['python']}"


def _update(table_config: TableConfig, config: Config) -> None:
    done = analyze_table(
        open_configured(table_config, config), config=config, sketcher=SparkSketcher(config)
    )
    if len(done.commits) != 1:
        raise RuntimeError(f"expected one new commit, lakestats processed {len(done.commits)}")


def write_section(path: Path, args: argparse.Namespace, lines: list[str]) -> None:
    sections.write_section(
        path,
        f"delta-sf{args.scale_factor:g}-c{args.commits}",
        lines,
        anchor="<!-- bench:delta -->",
        heading="## Delta: TPC-H lineitem in delta-rs appends",
    )


if __name__ == "__main__":
    sys.exit(main())
