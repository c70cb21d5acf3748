"""What each kind of aggregate costs in the full sketch build (issue 14 item 5).

    .venv/bin/python tests/bench/fullbuild.py                       # the cached SF 1 files
    .venv/bin/python tests/bench/fullbuild.py --files 30 --repeat 3 # the first 30 of them
    .venv/bin/python tests/bench/fullbuild.py --variants scan full theta:decimal

Over the cached TPC-H lineitem files of ``tests/bench/run.py --keep`` (100 Parquet files,
16 columns), in one warm SparkSession, it times a plain ``min()`` scan of every column and
variants of the sketch job that keep ONE kind of aggregate at a time, built from the very
SQL ``lakestats.pipeline`` plans (``_plan_sql``) and run in the pipeline's own job session
(its Spark settings, one partition per file, grouped by partition):

* ``scan1``: the same ``min()`` scan read one task per file, as the sketch job reads;
* ``group``: the job's skeleton alone (``count(1)`` and the file path per file);
* ``count``, ``theta``, ``kll``, ``bounds``, ``lengths``: the skeleton plus that kind for
  every column that has it (``count`` is the non-null count every column carries);
* ``<kind>:<type>`` (``theta:decimal``, ``kll:long``…): that kind for columns of one type;
* ``full``: ``sketch_files`` itself, every statistic of every column.

``--compare REF`` instead times, per column and for all 16 in one job, interleaved in the
same process: the ``min()`` scan, ``sketch_files`` as the git revision ``REF`` plans it (its
``pipeline.py`` and ``sketches/hashing.py``; every other module is this checkout's) and as
this checkout plans it, after checking both give the same statistics (the KLL sketches by
their counts: KLL compaction is randomised). That is the before/after table of
docs/benchmarks.md; interleaving makes the two sides share whatever else loads the machine.

Each figure is the best of ``--repeat`` runs (after one warm-up run of each variant), in
wall seconds and in CPU seconds of the Spark driver JVM (``local`` mode runs the executors
in it) and the processes under it (the Arrow engine's Python workers; CPU time does not
grow when other work shares the machine, wall time does). The
1-minute load average is printed with the table: read wall times on a busy machine with
care. Timings only; nothing is asserted (docs/benchmarks.md records the results).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from columns import _Clock, _schema  # the bench's own helpers (Iceberg schema of a lineitem file)

from lakestats import pipeline
from lakestats.model import SketchSettings, TableSchema
from lakestats.sketches.merge import kll_count
from lakestats.sketches.spark import SparkSettings, get_spark
from lakestats.sketches.spec import type_spec

_DEFAULT_FILES = ".bench/sf1-c100/warehouse/bench/lineitem/data/*.parquet"
# aggregate name prefixes (pipeline._plan_sql) per kind
_KINDS = {
    "count": ("nn",),
    "theta": ("theta",),
    "kll": ("kll",),
    "bounds": ("min", "max", "negz", "posz"),
    "lengths": ("lsum", "lmax"),
}
_DEFAULT_VARIANTS = ("scan", "scan1", "group", "count", "theta", "kll", "bounds", "lengths", "full")


class _WarmClock(_Clock):
    def best(self, fn: Callable[[], object], repeat: int) -> tuple[float, float]:
        fn()  # warm-up: planning caches, JIT of this variant's generated code
        return super().best(fn, repeat)


def _type_group(type_str: str) -> str:
    return "decimal" if type_str.startswith("decimal") else type_str


def _variant_sql(
    schema: TableSchema, settings: SketchSettings, kind: str, only_type: str | None
) -> tuple[list[str], list[str]]:
    """(projections, aggregates) of the pipeline's plan, keeping one kind of aggregate."""
    planned = [
        pipeline._Planned(i, c, s, bounds=True)
        for i, c in enumerate(schema.columns)
        if (s := type_spec(c.type)) is not None
        and (only_type is None or _type_group(s.type) == only_type)
    ]
    projections, aggregates = pipeline._plan_sql(planned, settings)
    prefixes = _KINDS.get(kind, ())
    kept = [(n, sql) for n, sql in aggregates if n.rstrip("0123456789") in prefixes]
    used = [(n, sql) for n, sql in projections if any(n in sql for _, sql in kept)]
    return [f"{sql} AS {n}" for n, sql in used], [f"{sql} AS {n}" for n, sql in kept]


def _run_variant(session: Any, files: Sequence[str], schema: TableSchema, sql: Any) -> None:
    projections, aggregates = sql
    planned = [
        pipeline._Planned(i, c, s)
        for i, c in enumerate(schema.columns)
        if (s := type_spec(c.type)) is not None
    ]
    session.conf.set("spark.sql.shuffle.partitions", "2")
    df = session.read.schema(pipeline._read_schema(planned, True)).parquet(*files)
    df.selectExpr(*pipeline._FILE_ROWS, "*").createOrReplaceTempView("fullbuild_scan")
    projected = ", ".join(["__part", "__path", *projections])
    aggregated = ", ".join(["max(__path) AS __path", "count(1) AS __rows", *aggregates])
    query = f"SELECT {aggregated} FROM (SELECT {projected} FROM fullbuild_scan) GROUP BY __part"  # noqa: S608 - our own SQL
    rows = session.sql(query).collect()
    if len(rows) != len(files):
        raise SystemExit(f"expected one row per file, got {len(rows)}")


def _min_scan(session: Any, files: Sequence[str], names: Sequence[str]) -> None:
    columns = ", ".join(f"min(`{n}`)" for n in names)
    session.read.parquet(*files).createOrReplaceTempView("fullbuild_min")
    session.sql(f"SELECT {columns} FROM fullbuild_min").collect()  # noqa: S608 - our own SQL


def _load_revision(ref: str, into: Path) -> Any:
    """``pipeline.py`` and ``sketches/hashing.py`` as revision ``ref`` has them, as modules."""
    modules = {}
    for name, path in (
        ("fullbuild_ref_hashing", "core/lakestats/sketches/hashing.py"),
        ("fullbuild_ref_pipeline", "core/lakestats/pipeline.py"),
    ):
        source = subprocess.run(
            ["git", "show", f"{ref}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        file = into / f"{name}.py"
        file.write_text(source)
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        modules[name] = module
    ref_pipeline = modules["fullbuild_ref_pipeline"]
    ref_pipeline.theta_input_sql = modules["fullbuild_ref_hashing"].theta_input_sql
    return ref_pipeline


def _same_statistics(a: dict[str, Any], b: dict[str, Any]) -> None:
    if a.keys() != b.keys():
        raise SystemExit("the two revisions sketched different files")
    for path, columns in a.items():
        for field_id, x in columns.items():
            y = b[path][field_id]
            same_kll = (x.kll is None) == (y.kll is None) and (
                x.kll is None or kll_count(x.kll) == kll_count(y.kll)
            )
            if replace(x, kll=None) != replace(y, kll=None) or not same_kll:
                raise SystemExit(f"different statistics for field {field_id} of {path}")


def _compare(spark: Any, ref: str, files: Sequence[str], schema: TableSchema, repeat: int) -> None:
    settings = SketchSettings()
    clock = _WarmClock(spark)
    scan_session = spark.newSession()
    with tempfile.TemporaryDirectory() as tmp:
        before = _load_revision(ref, Path(tmp))
        _same_statistics(
            before.sketch_files(spark, files, schema, settings),
            pipeline.sketch_files(spark, files, schema, settings),
        )
        print(f"same statistics from {ref} and this checkout; best of {repeat}; CPU s of the")
        print("JVM and the Python workers under it (the Arrow engine runs there)")
        print(f"| column | type | min() | {ref}: sketch_files (÷ min) | "
              "now: sketch_files (÷ min) | saved |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        targets = [(f"all {len(schema.columns)} in one job", schema)]
        targets += [(c.name, TableSchema(0, (c,))) for c in schema.columns]
        for name, target in targets:
            names = [c.name for c in target.columns]
            scan = clock.best(lambda n=names: _min_scan(scan_session, files, n), repeat)[1]
            old = new = float("inf")
            for _ in range(repeat):  # interleaved: both sides see the same machine
                run_old = lambda t=target: before.sketch_files(spark, files, t, settings)  # noqa: E731
                run_new = lambda t=target: pipeline.sketch_files(spark, files, t, settings)  # noqa: E731
                old = min(old, clock.best(run_old, 1)[1])
                new = min(new, clock.best(run_new, 1)[1])
            kind = target.columns[0].type if len(target.columns) == 1 else ""
            print(f"| {name} | {kind} | {scan:.2f} | {old:.2f} ({old / scan:.2f}×) | "
                  f"{new:.2f} ({new / scan:.2f}×) | {100 * (old - new) / old:+.0f} % |",
                  flush=True)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="100", help="how many of the cached files")
    parser.add_argument("--glob", default=_DEFAULT_FILES, help="glob of the Parquet files")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--variants", nargs="*", default=list(_DEFAULT_VARIANTS))
    parser.add_argument("--compare", metavar="REF", help="before/after per column vs a git ref")
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args(argv)
    files = sorted(glob.glob(args.glob, recursive=True))[: int(args.files)]  # noqa: PTH207
    if not files:
        parser.error(f"no files match {args.glob} (run tests/bench/run.py --keep first)")
    schema = _schema(files[0])
    settings = SketchSettings()
    spark = get_spark(SparkSettings(master=args.spark_master))
    session = pipeline._job_session(spark)
    scan_session = spark.newSession()
    clock = _WarmClock(spark)
    names = [c.name for c in schema.columns]
    if args.compare:
        print(f"{len(files)} files; load average {os.getloadavg()[0]:.2f} at start")
        _compare(spark, args.compare, files, schema, args.repeat)
        print(f"load average {os.getloadavg()[0]:.2f} at end")
        return 0
    print(f"{len(files)} files, KLL k {settings.kll_k}, best of {args.repeat}; "
          f"load average {os.getloadavg()[0]:.2f} at start")  # fmt: skip
    print("| variant | wall s | CPU s (JVM + Python workers) | CPU / scan CPU |")
    print("|---|---|---|---|")
    scan_cpu = None
    for variant in args.variants:
        if variant == "scan":  # as run.py's: Spark's default packing of files into tasks
            fn: Callable[[], object] = lambda: _min_scan(scan_session, files, names)  # noqa: E731
        elif variant == "scan1":  # one task per file, as the sketch job reads
            fn = lambda: _min_scan(session, files, names)  # noqa: E731
        elif variant == "full":
            fn = lambda: pipeline.sketch_files(spark, files, schema, settings)  # noqa: E731
        else:
            kind, _, only = variant.partition(":")
            sql = _variant_sql(schema, settings, kind, only or None)
            fn = lambda sql=sql: _run_variant(session, files, schema, sql)  # noqa: E731
        wall, cpu = clock.best(fn, args.repeat)
        scan_cpu = cpu if variant == "scan" else scan_cpu
        ratio = f"{cpu / scan_cpu:.2f}×" if scan_cpu else "—"
        print(f"| {variant} | {wall:.2f} | {cpu:.2f} | {ratio} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
