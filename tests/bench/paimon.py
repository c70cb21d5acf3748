"""``make bench`` (Paimon part): the same TPC-H lineitem shape as a Paimon table.

1. generate lineitem (tpchgen-cli, ``commits + 1`` parts; shared with ``run.py``'s cache
   layout) and load parts 1..commits as a Paimon table, one pypaimon commit each
   (``metadata.stats-mode=full``; pypaimon writes Parquet without field ids, so the
   sketch job reads columns by name);
2. full build: lakestats' initial ``analyze_table`` over every commit;
3. append the last part (1/commits more rows) and time the incremental update, with the
   Paimon statistics file published (an ``ANALYZE`` snapshot) in the same run;
4. NDV accuracy against exact distinct counts (pyarrow over all parts).

Prints a summary and writes it into docs/benchmarks.md between the ``bench:paimon``
markers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import tpch
from measure import machine

try:
    from pypaimon import CatalogFactory, Schema

    from lakestats.analyze import SparkSketcher, analyze_table, read_stats
    from lakestats.config import Config, SparkConfig, TableConfig
    from lakestats.sketches.merge import theta_relative_standard_error
    from lakestats.tables import open_configured
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats/pypaimon ({exc}): run `make bench`") from exc

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- bench:paimon begin -->", "<!-- bench:paimon end -->"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests/bench/paimon.py", description=__doc__)
    parser.add_argument("--scale-factor", type=float, default=1.0, help="TPC-H SF (default 1)")
    parser.add_argument("--commits", type=int, default=100, help="commits to load (100)")
    parser.add_argument("--work-dir", type=Path, default=REPO / ".bench")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--no-report", action="store_true", help="print only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = args.work_dir / f"paimon-sf{args.scale_factor:g}-c{args.commits}"
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
        _append(table, tpch.read_part(parts / "lineitem" / f"lineitem.{i}.parquet"))
    loaded = time.perf_counter() - started
    location = root / "warehouse" / "tpch.db" / "lineitem"
    config = Config(
        state_dir=str(root / "state"),
        table=(TableConfig(name="lineitem", location=str(location), publish=True),),
        spark=SparkConfig(master=args.spark_master),
    )
    sketcher = SparkSketcher(config)
    sketcher.warm()
    full = _analyze(config, sketcher)
    _append(table, tpch.read_part(parts / "lineitem" / f"lineitem.{args.commits + 1}.parquet"))
    incremental = _analyze(config, sketcher)
    doc = read_stats("lineitem", config=config)
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
        incremental=incremental,
        doc=doc,
        errors=errors,
        latest_snapshot=published,
    )
    print(summary)
    if not args.no_report:
        _write_report(REPO / "docs" / "benchmarks.md", summary)
    return 0


def _append(table: Any, data: pa.Table) -> None:
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(data)
    commit = builder.new_commit()
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _analyze(config: Config, sketcher: SparkSketcher) -> float:
    opened = open_configured(config.table[0], config)
    started = time.perf_counter()
    analyze_table(opened, config=config, sketcher=sketcher)
    return time.perf_counter() - started


def _summary(
    args: argparse.Namespace,
    *,
    generated: float,
    loaded: float,
    full: float,
    incremental: float,
    doc: dict[str, Any],
    errors: dict[str, float],
    latest_snapshot: int,
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
            f"| incremental update after a {100 / args.commits:g} % append, "
            f"statistics file published | {incremental:.2f} |",
            "",
            f"NDV relative error, worst column: {worst[0]} {worst[1]:.2%} "
            f"(theta lg_k 12 standard error {bound:.2%}); mergedRecordCount "
            f"{doc['paimon']['merged_record_count']:,} "
            f"({doc['paimon']['merged_record_count_is']}); latest snapshot "
            f"{latest_snapshot} (the ANALYZE commit)",
        ]
    )


def _write_report(path: Path, summary: str) -> None:
    text = path.read_text()
    block = f"{BEGIN}\n{summary}\n{END}"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        heading = "## Paimon tables (`tests/bench/paimon.py`)"
        text = f"{text.rstrip()}\n\n{heading}\n\n{block}\n"
    path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
