"""Would a vectorised per-Arrow-batch sketch pass reach scan speed? (issue 14 item 5)

    .venv/bin/python tests/bench/arrow_probe.py               # the cached SF 1 files
    .venv/bin/python tests/bench/arrow_probe.py --files 30 --repeat 3

The full build's Spark job updates its sketches row by row inside Spark's object-hash
aggregates (docs/benchmarks.md, "Full build at scan speed"). The alternative the issue
names is a vectorised pass: MurmurHash3 of the Iceberg single-value bytes in numpy, the
theta sketch built from those hashes, KLL sketches updated from whole arrays. This probe
measures what such a pass costs on this machine, against the plain ``min()`` scan of
``tests/bench/run.py`` and ``sketch_files`` itself, over the cached TPC-H lineitem files:

* ``arrow transfer``: ``mapInArrow`` over Spark's own scan, counting rows: the floor of any
  Python pass fed by Spark's reader (the JVM converts every row to Arrow for the worker);
* ``direct read``: Spark tasks that read each file themselves with ``pyarrow.parquet``,
  counting rows: the floor of a pass that bypasses Spark's reader;
* ``direct read + sketches``: the same tasks computing what ``sketch_files`` computes for
  these columns (non-null counts, min/max, theta sketches, KLL sketches at the default k,
  string lengths) with numpy and the datasketches bindings, sketches returned to the driver.

Before timing, the prototype's statistics of the first files are checked against
``sketch_files``: the theta sketches byte for byte (so the numpy hash is the spec hash and
the sketch built from sorted hashes is Spark's), KLL sketches by count, nulls, bounds and
lengths exactly. CPU seconds are those of the Spark JVM and every process under it (the
Python workers). The hashing is the Arrow engine's (``lakestats.arrow_sketch``, which grew
from this probe); ``sketch_files`` is timed with both engines. Timings only;
docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from columns import _schema, tree_cpu  # the bench's own helpers

from lakestats import pipeline
from lakestats.arrow_sketch.spec_hashes import distinct, spec_hashes, theta_sketch
from lakestats.model import SketchSettings
from lakestats.sketches.merge import kll_count
from lakestats.sketches.spark import SparkSettings, get_spark

_DEFAULT_FILES = ".bench/sf1-c100/warehouse/bench/lineitem/data/*.parquet"


# -- the spec hashing: the Arrow engine's own (lakestats.arrow_sketch) ----------------------


def _iceberg_type(t: pa.DataType) -> str:
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision}, {t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    raise SystemExit(f"the probe does not implement {t}")


def theta_of(column: pa.ChunkedArray, lg_k: int) -> bytes:
    """The compact theta sketch Spark's one-partition aggregate gives: the 2**lg_k smallest
    hashes, theta the next one (all of them, theta max, when there are fewer)."""
    values = column.combine_chunks()
    type_str = _iceberg_type(values.type)
    return theta_sketch(spec_hashes(distinct(values, type_str), type_str), lg_k)


# -- the prototype pass --------------------------------------------------------------------


def sketch_table(table: pa.Table, settings: SketchSettings) -> dict[str, dict[str, Any]]:
    from datasketches import kll_doubles_sketch

    out: dict[str, dict[str, Any]] = {}
    for name in table.column_names:
        column = table.column(name)
        t = column.type
        stats: dict[str, Any] = {"nulls": column.null_count}
        bounds = pc.min_max(column)
        stats["min"], stats["max"] = bounds["min"].as_py(), bounds["max"].as_py()
        stats["theta"] = theta_of(column, settings.theta_lg_k)
        if pa.types.is_string(t):
            lengths = pc.utf8_length(column)
            stats["len_sum"] = pc.sum(lengths).as_py() or 0
            stats["len_max"] = pc.max(lengths).as_py()
        else:
            values = pc.cast(column, pa.int32()) if pa.types.is_date32(t) else column
            doubles = pc.cast(values, pa.float64()).drop_null()
            kll = kll_doubles_sketch(settings.kll_k)
            kll.update(np.array(doubles.to_numpy(), dtype=np.float64))
            stats["kll"] = kll.serialize()
        out[name] = stats
    return out


def _read_and_sketch(paths: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    settings = SketchSettings()
    for path in paths:
        yield path, sketch_table(pq.read_table(path, use_threads=False), settings)


def _read_only(paths: Iterator[str]) -> Iterator[int]:
    for path in paths:
        yield pq.read_table(path, use_threads=False).num_rows


def _count_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    rows = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


# -- checking and timing -------------------------------------------------------------------


def _check(spark: Any, files: Sequence[str]) -> None:
    """The prototype computes what ``sketch_files`` does: fail loudly if it does not."""
    schema = _schema(files[0])
    settings = SketchSettings()
    reference = pipeline.sketch_files(spark, files, schema, settings, engine="sql")
    for path in files:
        mine = sketch_table(pq.read_table(path), settings)
        for column in schema.columns:
            want, got = reference[path][column.field_id], mine[column.name]
            problems = [
                what
                for what, same in (
                    ("theta bytes", want.theta == got["theta"]),
                    ("nulls", want.null_count == got["nulls"]),
                    ("min", want.min == got["min"]),
                    ("max", want.max == got["max"]),
                    ("kll count", want.kll is None or kll_count(want.kll) == kll_count(got["kll"])),
                    ("lengths", want.len_sum is None or want.len_sum == got["len_sum"]),
                )
                if not same
            ]
            if problems:
                raise SystemExit(f"{Path(path).name} {column.name}: the probe differs: {problems}")
    print(f"checked against sketch_files on {len(files)} files: same theta bytes, counts, bounds")


def _best(jvm: int, fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()  # warm-up
    wall = cpu = float("inf")
    for _ in range(repeat):
        c, t = tree_cpu(jvm), time.perf_counter()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, tree_cpu(jvm) - c)
    return wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100, help="how many of the cached files")
    parser.add_argument("--glob", default=_DEFAULT_FILES, help="glob of the Parquet files")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--check", type=int, default=3, help="files checked first")
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args(argv)
    files = sorted(glob.glob(args.glob, recursive=True))[: args.files]  # noqa: PTH207
    if not files:
        parser.error(f"no files match {args.glob} (run tests/bench/run.py --keep first)")
    # the workers must import numpy, pyarrow, datasketches and lakestats: this interpreter
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_spark(SparkSettings(master=args.spark_master))
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    _check(spark, files[: args.check])

    schema = _schema(files[0])
    names = [c.name for c in schema.columns]
    mins = ", ".join(f"min(`{n}`)" for n in names)
    packed = spark.newSession()
    packed.read.parquet(*files).createOrReplaceTempView("probe_min")
    per_file = pipeline._job_session(spark)
    sc = spark.sparkContext
    variants: dict[str, Callable[[], object]] = {
        "min() scan (run.py's reference: Spark's packing)": lambda: packed.sql(
            f"SELECT {mins} FROM probe_min"  # noqa: S608 - our own SQL
        ).collect(),
        "sketch_files, engine sql (the SQL aggregate)": lambda: pipeline.sketch_files(
            spark, files, schema, SketchSettings(), engine="sql"
        ),
        "sketch_files, engine auto (the Arrow engine)": lambda: pipeline.sketch_files(
            spark, files, schema, SketchSettings(), engine="auto"
        ),
        "arrow transfer (mapInArrow over Spark's scan, rows only)": lambda: (
            per_file.read.parquet(*files).mapInArrow(_count_batches, "rows long").collect()
        ),
        "direct read (pyarrow in Spark tasks, rows only)": lambda: (
            sc.parallelize(files, len(files)).mapPartitions(_read_only).collect()
        ),
        "direct read + numpy sketches": lambda: (
            sc.parallelize(files, len(files)).mapPartitions(_read_and_sketch).collect()
        ),
    }
    print(f"{len(files)} files, best of {args.repeat}; load average {os.getloadavg()[0]:.2f}")
    print("| variant | wall s | CPU s (JVM + Python workers) | ÷ min() scan (wall / CPU) |")
    print("|---|---|---|---|")
    base: tuple[float, float] | None = None
    for label, fn in variants.items():
        wall, cpu = _best(jvm, fn, args.repeat)
        base = base or (wall, cpu)
        ratio = f"{wall / base[0]:.2f}× / {cpu / base[1]:.2f}×"
        print(f"| {label} | {wall:.2f} | {cpu:.2f} | {ratio} |")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
