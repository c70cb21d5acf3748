"""``make bench`` (Paimon part): the same TPC-H lineitem shape as a Paimon table.

1. generate lineitem (tpchgen-cli, ``commits + 1`` parts; shared with ``run.py``'s cache
   layout) and load parts 1..commits as a Paimon table, one pypaimon commit each
   (``metadata.stats-mode=full``; pypaimon writes Parquet without field ids, so the
   sketch job reads columns by name);
2. full build: lakestats' initial ``analyze_table`` over every commit, then
   ``sketch_files`` over every live file against a Spark ``min()`` of every column over the
   same files (``--repeat`` runs each, DESIGN §11: ≤ 1.5×);
3. append the last part (1/commits more rows) and time the incremental update, with the
   Paimon statistics file published (an ``ANALYZE`` snapshot) in the same run;
4. Spark ``ANALYZE TABLE … COMPUTE STATISTICS FOR ALL COLUMNS`` (histograms on) over the
   same live data files (``--repeat`` runs), the peer the update is compared with;
5. NDV accuracy against exact distinct counts (pyarrow over all parts).

Prints a summary and writes it into docs/benchmarks.md (its own section, keyed by scale
factor and commits, after the ``bench:paimon`` anchor).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import baseline
import pyarrow as pa
import pyarrow.compute as pc
import sections
import tpch
from measure import load_average, machine

try:
    from pypaimon import CatalogFactory, Schema

    from lakestats.analyze import CommitReport, SparkSketcher, analyze_table, read_stats
    from lakestats.config import Config, SparkConfig, TableConfig
    from lakestats.formats.paimon.testing import write_arrow
    from lakestats.pipeline import sketch_files
    from lakestats.sketches.merge import theta_relative_standard_error
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import open_configured
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats/pypaimon ({exc}): run `make bench`") from exc

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests/bench/paimon.py", description=__doc__)
    parser.add_argument("--scale-factor", type=float, default=1.0, help="TPC-H SF (default 1)")
    parser.add_argument("--commits", type=int, default=100, help="commits to load (100)")
    parser.add_argument("--work-dir", type=Path, default=REPO / ".bench")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of Spark ANALYZE and of the full build; the best counts (default 3)",
    )
    parser.add_argument("--no-report", action="store_true", help="print only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return _run(args)
    finally:
        stop_spark()


def _run(args: argparse.Namespace) -> int:
    root = args.work_dir.resolve() / f"paimon-sf{args.scale_factor:g}-c{args.commits}"
    if root.exists():
        shutil.rmtree(root)
    parts = root / "parts"
    started = time.perf_counter()
    tpch.generate(parts, args.scale_factor, args.commits + 1)
    generated = time.perf_counter() - started
    catalog = CatalogFactory.create({"warehouse": str(root / "warehouse")})
    catalog.create_database("tpch", True)
    first = tpch.read_part(parts / "lineitem" / "lineitem.1.parquet")
    catalog.create_table(
        "tpch.lineitem",
        Schema.from_pyarrow_schema(first.schema, options={"metadata.stats-mode": "full"}),
        False,
    )
    table = catalog.get_table("tpch.lineitem")
    started = time.perf_counter()
    for i in range(1, args.commits + 1):
        write_arrow(table, tpch.read_part(parts / "lineitem" / f"lineitem.{i}.parquet"))
    loaded = time.perf_counter() - started
    location = root / "warehouse" / "tpch.db" / "lineitem"
    loads = {"start": load_average()}
    config = Config(
        state_dir=str(root / "state"),
        table=(TableConfig(name="lineitem", location=str(location), publish=True),),
        spark=SparkConfig(
            master=args.spark_master,
            conf={"spark.sql.warehouse.dir": str(root / "spark-warehouse")},
        ),
    )
    sketcher = SparkSketcher(config)
    sketcher.warm()
    full, _ = _analyze(config, sketcher)
    build, built = _full_build(args, config, sketcher)
    write_arrow(table, tpch.read_part(parts / "lineitem" / f"lineitem.{args.commits + 1}.parquet"))
    incremental, reports = _analyze(config, sketcher)
    loads["after the update"] = load_average()
    doc = read_stats("lineitem", config=config)
    analyze_best, files = _spark_analyze(args, config, root)
    loads["after ANALYZE"] = load_average()
    exact = pa.concat_tables(
        [tpch.read_part(p) for p in sorted((parts / "lineitem").glob("*.parquet"))]
    )
    errors = {
        name: abs(col["ndv"] - pc.count_distinct(exact.column(name)).as_py())
        / max(1, pc.count_distinct(exact.column(name)).as_py())
        for name, col in doc["columns"].items()
        if col.get("ndv") is not None
    }
    published = json.loads((location / "snapshot" / "LATEST").read_text())
    summary = _summary(
        args,
        generated=generated,
        loaded=loaded,
        full=full,
        build=build,
        built=built,
        incremental=incremental,
        phases=reports[-1].timings if reports else {},
        doc=doc,
        errors=errors,
        latest_snapshot=published,
        analyze_best=analyze_best,
        analyze_files=files,
        loads=loads,
    )
    print(summary)
    if not args.no_report:
        sections.write_section(
            REPO / "docs" / "benchmarks.md",
            f"paimon-sf{args.scale_factor:g}-c{args.commits}",
            summary.splitlines(),
            anchor="<!-- bench:paimon -->",
            heading="## Paimon tables (`tests/bench/paimon.py`)",
        )
    return 0


def _spark_analyze(args: argparse.Namespace, config: Config, root: Path) -> tuple[float, int]:
    """Best of ``--repeat`` Spark ANALYZE runs over the current snapshot's live data files
    (the ANALYZE snapshot lakestats committed has the same files as the append before it)."""
    opened = open_configured(config.table[0], config)
    current = opened.table.current_snapshot_id()
    assert current is not None
    live = [tpch.local_path(f.path) for f in opened.table.live_files(current)]
    spark = get_spark(SparkSettings(master=config.spark.master, conf=config.spark.conf))
    print(f"Spark ANALYZE TABLE … FOR ALL COLUMNS over the same {len(live)} files", flush=True)
    session = baseline.create_table(spark, live, root / "spark-table")
    columns = [c.name for c in opened.table.schema().columns]
    result = baseline.analyze(session, columns, args.repeat, lambda m: print(m, flush=True))
    return result.seconds.best, len(live)


def _full_build(
    args: argparse.Namespace, config: Config, sketcher: SparkSketcher
) -> tuple[baseline.FullBuild, int]:
    """The full sketch job over the current snapshot's live files against a plain scan."""
    table = open_configured(config.table[0], config).table
    current = table.current_snapshot_id()
    assert current is not None
    files = [tpch.local_path(f.path) for f in table.live_files(current)]
    spark = get_spark(sketcher.settings())
    schema, settings = table.schema(), config.sketch.settings()
    build = baseline.full_build(
        spark,
        files,
        lambda: sketch_files(spark, files, schema, settings),
        args.repeat,
        lambda m: print(m, flush=True),
    )
    return build, len(files)


def _analyze(config: Config, sketcher: SparkSketcher) -> tuple[float, list[CommitReport]]:
    """Seconds for open + analyze of every new commit, and their commit reports."""
    reports: list[CommitReport] = []
    started = time.perf_counter()
    opened = open_configured(config.table[0], config)
    analyze_table(opened, config=config, sketcher=sketcher, on_commit=reports.append)
    return time.perf_counter() - started, reports


def _summary(
    args: argparse.Namespace,
    *,
    generated: float,
    loaded: float,
    full: float,
    build: baseline.FullBuild,
    built: int,
    incremental: float,
    phases: Mapping[str, float],
    doc: dict[str, Any],
    errors: dict[str, float],
    latest_snapshot: int,
    analyze_best: float,
    analyze_files: int,
    loads: dict[str, float],
) -> str:
    worst = max(errors.items(), key=lambda kv: kv[1]) if errors else ("-", 0.0)
    bound = theta_relative_standard_error(12)
    return "\n".join(
        [
            f"Paimon lineitem SF {args.scale_factor:g}, {args.commits} pypaimon commits, "
            f"{doc['record_count']:,} rows after the append; "
            + ", ".join(f"{k} {v}" for k, v in machine().items()),
            "",
            "| step | seconds |",
            "| --- | --- |",
            f"| generate (tpchgen-cli) | {generated:.1f} |",
            f"| load ({args.commits} pypaimon commits) | {loaded:.1f} |",
            f"| full build (analyze all commits, Spark warm-up included) | {full:.1f} |",
            f"| `sketch_files` over the {built} files (best of {args.repeat}; median "
            f"{build.sketch.median:.2f}) | {build.sketch.best:.2f} |",
            f"| Spark `min()` of every column over the same files (best of {args.repeat}; "
            f"median {build.scan.median:.2f}) | {build.scan.best:.2f} |",
            f"| ratio `sketch_files` / scan (target ≤ 1.5×) | {build.ratio:.2f}× |",
            f"| **incremental update** after a {100 / args.commits:g} % append, "
            f"statistics file published (one run; phases: "
            + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
            + f") | **{incremental:.2f}** |",
            f"| **Spark ANALYZE TABLE … FOR ALL COLUMNS** over the same {analyze_files} live "
            f"files (best of {args.repeat}) | **{analyze_best:.2f}** |",
            f"| ratio ANALYZE / update | {analyze_best / incremental:.1f}× |",
            "",
            "1-minute load average: "
            + ", ".join(f"{k} {v:.2f}" for k, v in loads.items())
            + " (this run's Spark adds up to 2; the machine is shared).",
            "",
            f"NDV relative error, worst column: {worst[0]} {worst[1]:.2%} "
            f"(theta lg_k 12 standard error {bound:.2%}); mergedRecordCount "
            f"{doc['paimon']['merged_record_count']:,} "
            f"({doc['paimon']['merged_record_count_is']}); latest snapshot "
            f"{latest_snapshot} (the ANALYZE commit)",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
