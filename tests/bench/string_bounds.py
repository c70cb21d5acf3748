"""What scanning every string column's min/max costs the sketch job (session 45).

    .venv/bin/python tests/bench/string_bounds.py --files '/tmp/tpch/lineitem/*.parquet' --count 20

String and binary bounds are scanned whenever sketching (``plan.bounds_needed``): a file's
bounds are cut by the metrics mode it was written under, which the table may no longer
state. Before, only bounds the manifest lacked or flagged were scanned: under Iceberg's
default ``truncate(16)`` the string columns with values of 16 characters or more. This
times ``sketch_files`` (the default engine) over the same TPC-H lineitem files with both
sets of ``bounds_for``, interleaved, best of ``--repeat`` after a warm-up, in wall
seconds and CPU seconds of the Spark driver JVM and the processes under it. Generate the
files with ``tpchgen-cli parquet -s 1 --tables=lineitem --parts=100 --output-dir=/tmp/tpch``
(``pip install -e '.[bench]'``). Timings only; docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import glob
import sys
from collections.abc import Sequence

import pyarrow.compute as pc
import pyarrow.parquet as pq
from columns import _ARROW_TO_ICEBERG, _Clock
from measure import load_average

from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.sketches.spark import SparkSettings, get_spark

_TRUNCATE = 16  # Iceberg's default metrics mode, truncate(16)


def _schema(path: str) -> TableSchema:
    columns = []
    for number, field in enumerate(pq.read_schema(path), start=1):
        type_str = str(field.type)
        type_str = _ARROW_TO_ICEBERG.get(type_str, type_str).replace("decimal128", "decimal")
        columns.append(Column(number, field.name, type_str))
    return TableSchema(0, tuple(columns))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", required=True, help="glob of lineitem Parquet files")
    parser.add_argument("--count", type=int, default=20, help="how many of them")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    files = sorted(glob.glob(args.files))[: args.count]  # noqa: PTH207
    if not files:
        raise SystemExit(f"no files match {args.files}")
    schema = _schema(files[0])  # tpchgen-cli writes no field ids: read by name
    first = pq.read_table(files[0])
    strings = [c for c in schema.columns if c.type == "string"]
    cut = [
        c
        for c in strings
        if (pc.max(pc.utf8_length(first.column(c.name))).as_py() or 0) >= _TRUNCATE
    ]
    before = frozenset(c.field_id for c in cut)
    after = frozenset(c.field_id for c in strings)
    spark = get_spark(SparkSettings(master="local[2]"))
    clock = _Clock(spark)
    settings = SketchSettings()

    def run(bounds: frozenset[int]) -> None:
        sketch_files(spark, files, schema, settings, match_by="name", bounds_for=bounds)

    print(f"{len(files)} files; load average {load_average():.2f}")
    print(f"before: bounds of {sorted(c.name for c in cut)}")
    print(f"after:  bounds of {sorted(c.name for c in strings)}")
    run(before)  # warm-up: file listing, the JIT of both plans
    run(after)
    results = {"before": (float("inf"),) * 2, "after": (float("inf"),) * 2}
    for _ in range(args.repeat):  # interleaved, so both sides share what loads the machine
        for label, bounds in (("before", before), ("after", after)):
            wall, cpu = clock.best(lambda b=bounds: run(b), 1)
            results[label] = (min(results[label][0], wall), min(results[label][1], cpu))
    (bw, bc), (aw, ac) = results["before"], results["after"]
    print("| bounds scanned | wall s | JVM + workers CPU s |")
    print("|---|---|---|")
    print(f"| before (cut-prone strings) | {bw:.2f} | {bc:.2f} |")
    print(
        f"| after (every string) | {aw:.2f} ({aw / bw - 1:+.1%}) | {ac:.2f} ({ac / bc - 1:+.1%}) |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
