"""Where the full build's time goes: per column and per KLL k, in JVM CPU seconds.

    .venv/bin/python tests/bench/columns.py --files '.bench/sf1-c100/warehouse/**/data/*.parquet'
    .venv/bin/python tests/bench/columns.py --files '…' --kll-k 200 800 1481 3000

For the given Parquet files (the benchmark's cached TPC-H table by default): a plain Spark
``min()`` scan of every column and one ``sketch_files`` job over all of them, then each
column alone (``--per-column``), then ``sketch_files`` at each ``--kll-k`` with the bytes of
the KLL sketches it returns (what the store keeps per file). Each figure is the best of
``--repeat`` runs, in wall seconds and in CPU seconds of the Spark driver JVM (which runs
the executors in ``local`` mode) and every process under it (the Python workers of the
Arrow engine): CPU time does not grow when other work shares the machine, wall time does.
"""

from __future__ import annotations

import argparse
import glob
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lakestats.config import SketchConfig
from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.sketches.spark import SparkSettings, get_spark

_ARROW_TO_ICEBERG = {"int64": "long", "int32": "int", "string": "string", "date32[day]": "date"}
_DEFAULT_FILES = ".bench/sf1-c100/warehouse/bench/lineitem/data/*.parquet"


def _schema(path: str) -> TableSchema:
    columns = []
    for field in pq.read_schema(path):
        type_str = str(field.type)
        type_str = _ARROW_TO_ICEBERG.get(type_str, type_str).replace("decimal128", "decimal")
        field_id = int((field.metadata or {})[b"PARQUET:field_id"])
        columns.append(Column(field_id, field.name, type_str))
    return TableSchema(0, tuple(columns))


def tree_cpu(pid: int) -> float:
    """utime + stime (and those of reaped children) of ``pid`` and every process under it."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        times[child] = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        todo.extend(c for c, p in parents.items() if p == current)
    return total


class _Clock:
    def __init__(self, spark: Any) -> None:
        self._pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())

    def cpu(self) -> float:
        return tree_cpu(self._pid)

    def best(self, fn: Callable[[], object], repeat: int) -> tuple[float, float]:
        wall = cpu = float("inf")
        for _ in range(repeat):
            c, t = self.cpu(), time.perf_counter()
            fn()
            wall, cpu = min(wall, time.perf_counter() - t), min(cpu, self.cpu() - c)
        return wall, cpu


def _min_scan(spark: Any, files: Sequence[str], names: Sequence[str]) -> None:
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

    df = spark.newSession().read.parquet(*files)
    df.agg(*[F.min(n).alias(n) for n in names]).collect()


def _print_sizes(result: dict[str, Any], files: int) -> None:
    """Bytes of each sketch kind over all files (0 for kinds the code does not keep)."""
    for kind in ("theta", "kll", "value_sample", "frequent_items"):
        size = sum(
            len(getattr(c, kind, None) or b"") for per in result.values() for c in per.values()
        )
        print(f"| {kind} | {size / 2**20:.2f} MiB | {size / files / 1024:.1f} KiB per file |")
    by_column: dict[int, int] = {}
    for per in result.values():
        for field_id, c in per.items():
            by_column[field_id] = by_column.get(field_id, 0) + len(c.frequent_items or b"")
    print("frequent items per file, by field id (KiB):", {
        f: round(b / files / 1024, 2) for f, b in sorted(by_column.items())
    })  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default=_DEFAULT_FILES, help="glob of Parquet files")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--per-column", action="store_true")
    parser.add_argument("--only", nargs="*", help="with --per-column: only these columns")
    parser.add_argument("--kll-k", type=int, nargs="*", default=[])
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument(
        "--sizes", action="store_true", help="bytes per sketch kind the store keeps per file"
    )
    args = parser.parse_args(argv)
    files = sorted(glob.glob(args.files, recursive=True))  # noqa: PTH207 - a user's glob
    if not files:
        parser.error(f"no files match {args.files}")
    schema = _schema(files[0])
    spark = get_spark(SparkSettings(master=args.spark_master))
    clock = _Clock(spark)
    settings = SketchConfig().settings()  # what a configuration gets by default
    names = [c.name for c in schema.columns]
    _min_scan(spark, files, names)  # cold run: file listing, JIT
    sketch_files(spark, files, schema, settings)
    print(f"{len(files)} files; wall s / JVM CPU s, best of {args.repeat}")
    scan = clock.best(lambda: _min_scan(spark, files, names), args.repeat)
    build = clock.best(lambda: sketch_files(spark, files, schema, settings), args.repeat)
    print(f"| all columns | min() {scan[0]:.2f} / {scan[1]:.2f} | sketch_files "
          f"{build[0]:.2f} / {build[1]:.2f} | ratio {build[0] / scan[0]:.2f}× wall, "
          f"{build[1] / scan[1]:.2f}× CPU |")  # fmt: skip
    if args.sizes:
        _print_sizes(sketch_files(spark, files, schema, settings), len(files))
    if args.per_column:
        print("| column | type | min() wall / CPU | sketch_files wall / CPU | ratio (CPU) |")
        for column in schema.columns:
            if args.only and column.name not in args.only:
                continue
            alone = TableSchema(0, (column,))
            a = clock.best(lambda c=column: _min_scan(spark, files, [c.name]), args.repeat)
            b = clock.best(lambda s=alone: sketch_files(spark, files, s, settings), args.repeat)
            print(f"| {column.name} | {column.type} | {a[0]:.2f} / {a[1]:.2f} | "
                  f"{b[0]:.2f} / {b[1]:.2f} | {b[1] / a[1]:.2f}× |", flush=True)  # fmt: skip
    for k in args.kll_k:
        at_k = replace(settings, kll_k=k, kll_error_rate=None)
        result: dict[str, Any] = {}

        def run(s: SketchSettings = at_k, out: dict[str, Any] = result) -> None:
            out.update(sketch_files(spark, files, schema, s))

        timing = clock.best(run, args.repeat)
        kll_bytes = sum(len(c.kll or b"") for per in result.values() for c in per.values())
        print(f"| k {k} | sketch_files {timing[0]:.2f} / {timing[1]:.2f} | KLL bytes "
              f"{kll_bytes / 2**20:.2f} MiB ({kll_bytes / len(files) / 1024:.1f} KiB per file) |",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
