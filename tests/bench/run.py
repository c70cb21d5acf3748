"""``make bench``: lakestats against Spark ANALYZE TABLE on TPC-H lineitem (issue 3).

One process, one warm SparkSession, one dataset:

1. generate lineitem (tpchgen-cli) and load it as an Iceberg table in ``--commits``
   pyiceberg appends (cached under ``--work-dir`` with ``--keep``);
2. full build: a plain Spark ``min`` scan of every column vs ``sketch_files`` over the same
   files vs lakestats' initial ``analyze_table`` over all commits;
3. append 1 % more rows (one more generated part) and time lakestats' incremental update,
   then Spark ``ANALYZE TABLE … COMPUTE STATISTICS FOR ALL COLUMNS`` (histograms on) over
   the same live files;
4. accuracy of NDV and quantiles against exact values (DuckDB), next to Spark's NDV;
5. peak memory per phase of this process and of the Spark driver JVM;

then print a summary and write it into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import accuracy
import baseline
import report
import tpch
from measure import PeakMemory, Timing, cpus, load_average, machine, timed
from results import ColumnCost, Incremental, Results

try:
    from lakestats.analyze import CommitReport, SparkSketcher, analyze_table, read_stats
    from lakestats.config import Config, SparkConfig, TableConfig
    from lakestats.model import SketchSettings, TableSchema
    from lakestats.pipeline import sketch_files
    from lakestats.sketches.merge import (
        kll_normalized_rank_error,
        theta_relative_standard_error,
    )
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import open_configured
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats ({exc}): run `make bench` (installs it)") from exc

REPO = Path(__file__).resolve().parents[2]
CATALOG = "bench"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tests/bench/run.py",
        description="Benchmark lakestats against Spark ANALYZE TABLE on TPC-H lineitem.",
    )
    parser.add_argument("--scale-factor", type=float, default=1.0, help="TPC-H SF (default 1)")
    parser.add_argument(
        "--commits", type=int, default=100, help="append commits to load (default 100)"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=REPO / ".bench",
        help="generated data, tables and stats (default .bench/ at the repo root)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="reuse the generated data and table of an earlier run (same SF and commits) "
        "and keep them afterwards",
    )
    parser.add_argument("--spark-master", default="local[2]", help="default local[2]")
    parser.add_argument(
        "--driver-memory", default=None, help="spark.driver.memory (default: Spark's, 1g)"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark conf for the session (repeatable), e.g. "
        "spark.driver.extraJavaOptions=-XX:-DontCompileHugeMethods",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each measurement that can be repeated; ratios use the best run (default 3)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=REPO / "docs" / "benchmarks.md",
        help="markdown file to write the run into (default docs/benchmarks.md)",
    )
    parser.add_argument("--no-report", action="store_true", help="print only")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print the cProfile of one incremental update even when the target is met",
    )
    args = parser.parse_args(argv)
    if args.commits < 1 or args.repeat < 1 or args.scale_factor <= 0:
        parser.error("--commits and --repeat must be >= 1, --scale-factor > 0")
    if any("=" not in kv for kv in args.spark_conf):
        parser.error("--spark-conf takes KEY=VALUE")
    return args


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work_dir: Path = args.work_dir.resolve()
    memory = PeakMemory()
    run_dir = work_dir / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)

    with memory.phase("generate + load"):
        dataset = tpch.prepare(
            work_dir, args.scale_factor, args.commits, reuse=args.keep, progress=progress
        )
    table = tpch.RunTable(dataset, run_dir)
    try:
        command = shlex.join(sys.argv[1:] if argv is None else argv)
        results = _measure(
            args, command=command, dataset=dataset, table=table, run_dir=run_dir, memory=memory
        )
    finally:
        table.cleanup()
        stop_spark()
        if not args.keep:
            shutil.rmtree(dataset.root, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)

    print()
    print(report.console(results))
    if not args.no_report:
        report.write_markdown(args.report, results)
        progress(f"wrote the results into {args.report}")
    return 0


def _measure(
    args: argparse.Namespace,
    *,
    command: str,
    dataset: tpch.Dataset,
    table: tpch.RunTable,
    run_dir: Path,
    memory: PeakMemory,
) -> Results:
    spark_conf = {"spark.sql.warehouse.dir": str(run_dir / "spark-warehouse")}
    if args.driver_memory:
        spark_conf["spark.driver.memory"] = args.driver_memory
    spark_conf.update(kv.split("=", 1) for kv in args.spark_conf)
    config = Config(
        state_dir=str(run_dir / "state"),
        spark=SparkConfig(master=args.spark_master, conf=spark_conf),
        catalog={CATALOG: table.catalog_properties},
        table=(TableConfig(name="lineitem", catalog=CATALOG, identifier=tpch.IDENTIFIER),),
    )
    table_config = config.table[0]

    loads = {"start": load_average()}
    progress(f"starting Spark ({args.spark_master}); load average {loads['start']:.2f}")
    with memory.phase("spark start"):
        settings = SparkSettings(master=config.spark.master, conf=config.spark.conf)
        spark, spark_start = timed(lambda: get_spark(settings))
    memory.jvm_pid = baseline.jvm_pid(spark)
    sketcher = SparkSketcher(config)  # same settings: reuses the session above
    sketch_settings = config.sketch.settings()

    files = table.live_files()
    opened = open_configured(table_config, config)
    schema = opened.table.schema()
    rows_before = sum(t.file.record_count for t in table.table().scan().plan_files())
    bytes_before = sum(Path(f).stat().st_size for f in files)
    progress(f"table: {rows_before:,} rows in {len(files)} files, {bytes_before / 2**20:,.0f} MiB")

    # -- 2. full build ---------------------------------------------------------------------
    min_scan, sketch_build = Timing(), Timing()
    with memory.phase("min() scans (Spark)"):
        progress("warm-up: plain Spark min() scan of every column (cold, not compared)")
        cold_min_scan = baseline.min_scan(spark, files)
        for i in range(args.repeat):
            min_scan.seconds.append(baseline.min_scan(spark, files))
            progress(f"  min() scan {i + 1}/{args.repeat}: {min_scan.seconds[-1]:.2f} s")
    with memory.phase("full build (lakestats)"):
        for i in range(args.repeat):
            _, seconds = timed(lambda: sketch_files(spark, files, schema, sketch_settings))
            sketch_build.seconds.append(seconds)
            progress(f"  sketch_files {i + 1}/{args.repeat}: {seconds:.2f} s")
        progress(f"lakestats initial analyze over {dataset.commits} commits")
        result, initial_seconds = timed(
            lambda: analyze_table(opened, config=config, sketcher=sketcher)
        )
        initial_phases = _sum_phases(result.commits)
        progress(f"  {initial_seconds:.2f} s ({len(result.commits)} commits)")
    loads["after full build"] = load_average()

    column_costs: list[ColumnCost] = []
    if args.profile or sketch_build.median > report.FULL_BUILD_TARGET * min_scan.median:
        progress("profile: min() scan vs sketch_files, one column at a time")
        column_costs = _column_costs(spark, files, schema, sketch_settings)

    # -- 1. per-commit update after a 1 % append -------------------------------------------
    progress("appending 1 % more rows (one more generated part) with pyiceberg")
    append_rows = tpch.read_part(dataset.append_part).num_rows
    _, append_seconds = timed(lambda: table.append(dataset.append_part))
    live = table.live_files()
    new_files = sorted(set(live) - set(files))

    with memory.phase("incremental (lakestats)"):
        incremental = _incremental(
            args,
            config=config,
            table_config=table_config,
            spark=spark,
            new_files=new_files,
            schema=schema,
        )

    with memory.phase("ANALYZE TABLE (Spark)"):
        progress(f"Spark ANALYZE TABLE … FOR ALL COLUMNS over the same {len(live)} files")
        session = baseline.create_table(spark, live, run_dir / "spark-table")
        spark_result = baseline.analyze(
            session, [c.name for c in schema.columns], args.repeat, progress
        )
    loads["after ANALYZE"] = load_average()

    # -- 3. accuracy -----------------------------------------------------------------------
    with memory.phase("exact values (DuckDB)"):
        progress("exact NDV and quantile ranks with DuckDB")
        doc = read_stats(open_configured(table_config, config))
        exact_rows, columns = accuracy.compare(
            live, doc, spark_result.distinct_count, threads=cpus()
        )

    return Results(
        args=args,
        command=command,
        date=time.strftime("%Y-%m-%d %H:%M %Z"),
        dataset=dataset,
        versions=_versions(spark),
        machine=machine(),
        spark_start_seconds=spark_start,
        files_before=len(files),
        bytes_before=bytes_before,
        rows_before=rows_before,
        cold_min_scan=cold_min_scan,
        min_scan=min_scan,
        sketch_build=sketch_build,
        initial_seconds=initial_seconds,
        initial_phases=initial_phases,
        append_seconds=append_seconds,
        append_rows=append_rows,
        incremental=incremental,
        spark=spark_result,
        exact_rows=exact_rows,
        lakestats_rows=int(doc["record_count"]),
        columns=columns,
        memory=memory,
        load_averages=loads,
        column_costs=column_costs,
        ndv_rse=theta_relative_standard_error(sketch_settings.theta_lg_k),
        kll_rank_error=kll_normalized_rank_error(sketch_settings.kll_k),
        theta_lg_k=sketch_settings.theta_lg_k,
        kll_k=sketch_settings.kll_k,
    )


def _incremental(
    args: argparse.Namespace,
    *,
    config: Config,
    table_config: TableConfig,
    spark: Any,
    new_files: list[str],
    schema: Any,
) -> Incremental:
    """Each run starts from a copy of the state the initial analyze left, so every run
    does the same work: open the table, plan the one new commit, sketch its file, store,
    merge and publish. One more (profiled) run shows where the time goes."""
    state = Path(config.state_dir)
    copies = [state.with_name(f"state-{i}") for i in range(1, args.repeat + 1)]
    for copy in copies:
        shutil.copytree(state, copy)
    configs = [config] + [config.model_copy(update={"state_dir": str(c)}) for c in copies]
    out = Incremental()
    for i, run_config in enumerate(configs[: args.repeat]):
        opened, open_seconds = timed(partial(open_configured, table_config, run_config))
        result, seconds = timed(
            partial(analyze_table, opened, config=run_config, sketcher=SparkSketcher(run_config))
        )
        if len(result.commits) != 1:
            raise RuntimeError(
                f"expected one new commit, lakestats processed {len(result.commits)}"
            )
        out.open_seconds.seconds.append(open_seconds)
        out.analyze_seconds.seconds.append(seconds)
        out.total_seconds.seconds.append(open_seconds + seconds)
        if i == 0:
            out.phases = dict(result.commits[0].timings)
            out.phases["open + plan + other"] = open_seconds + seconds - sum(out.phases.values())
        progress(
            f"incremental update, run {i + 1}/{args.repeat}: open {open_seconds:.2f} s + "
            f"analyze {seconds:.2f} s"
        )
        _, sketch_seconds = timed(
            partial(sketch_files, spark, new_files, schema, run_config.sketch.settings())
        )
        out.sketch_only.seconds.append(sketch_seconds)

    profiler = cProfile.Profile()
    last = configs[args.repeat]
    profiler.enable()
    analyze_table(open_configured(table_config, last), config=last, sketcher=SparkSketcher(last))
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
    out.profile = text.getvalue()
    return out


def _column_costs(
    spark: Any, files: Sequence[str], schema: TableSchema, settings: SketchSettings
) -> list[ColumnCost]:
    """Each column alone: what a plain scan of it costs and what sketching it costs."""
    costs = []
    for column in schema.columns:
        alone = TableSchema(schema_id=schema.schema_id, columns=(column,))
        scan = baseline.min_scan(spark, files, [column.name])
        _, sketch = timed(partial(sketch_files, spark, files, alone, settings))
        costs.append(ColumnCost(column.name, column.type, scan, sketch))
        progress(f"  {column.name}: min() {scan:.2f} s, sketch_files {sketch:.2f} s")
    return costs


def _sum_phases(reports: Sequence[CommitReport]) -> dict[str, float]:
    total: dict[str, float] = {}
    for commit in reports:
        for name, seconds in commit.timings.items():
            total[name] = total.get(name, 0.0) + seconds
    return total


def _versions(spark: Any) -> dict[str, str]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    java = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    return {
        "lakestats": f"{version('lakestats')} ({_git_revision()})",
        "spark": str(spark.version),
        "java": str(java),
        "pyiceberg": version("pyiceberg"),
        "datasketches": version("datasketches"),
        "duckdb": version("duckdb"),
        "pyarrow": version("pyarrow"),
        "tpchgen-cli": tpch.tpchgen_version().removeprefix("tpchgen-cli").strip(),
    }


def _git_revision() -> str:
    """The commit the run measured, ``+dirty`` with uncommitted changes (read-only git)."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "core", "daemon"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "no git revision"
    return f"git {rev}{'+dirty' if dirty else ''}"


if __name__ == "__main__":
    sys.exit(main())
