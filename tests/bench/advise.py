"""Cost of ``lakestats advise`` on a synthetic 10,000-file store (issue 15, item 3).

Builds a stats store the way ``analyze`` would leave it — segments written with
``StatsStore.write_segment`` and a committed state version — with real datasketches theta
and KLL sketches and frequent-items sketches (256 items, ``analyze``'s default) per file
and column, built in Python from ``--values`` sample values per file (the advisor's cost
depends on files × columns and on sketch sizes, not on how many rows a sketch summarises,
so each file claims ``--rows`` rows). Then it times ``advise_store`` (store read +
analysis) and, separately, the pure analysis, and measures the peak Python heap of each
with tracemalloc.

Columns: ``id`` long, sorted across files (no overlap); ``key`` long, random (every file
spans the domain); ``category`` string, 50 values; ``amount`` double, loosely clustered.

    .venv/bin/python tests/bench/advise.py [--files 10000] [--segments 100] [--values 200]
        [--partitions 1]   # > 1: files spread over that many partitions (per-partition view)
        [--wide 1]         # the four columns this many times; [--column-only]: time only
                           # `advise --column id`, which reads that column's stats alone
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from datasketches import kll_doubles_sketch, update_theta_sketch

from lakestats.advise import AdviceReport, advise
from lakestats.advise_io import advise_store, column_inputs, live_data_files
from lakestats.model import (
    UNPARTITIONED,
    Column,
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    PartitionKey,
    SegmentEntry,
    StateVersion,
    TableSchema,
)
from lakestats.sketches.frequent import DOUBLES, STRINGS, frequent_items_of_counts
from lakestats.sketches.hashing import THETA_SEED
from lakestats.store import StatsStore

BASE = (("id", "long"), ("key", "long"), ("category", "string"), ("amount", "double"))


def wide_schema(copies: int) -> TableSchema:
    """The four columns, ``copies`` times (``id``, …, ``id_1``, …): a wide table."""
    return TableSchema(
        schema_id=0,
        columns=tuple(
            Column(4 * c + j + 1, name if c == 0 else f"{name}_{c}", type_str)
            for c in range(copies)
            for j, (name, type_str) in enumerate(BASE)
        ),
    )


def _sketches(values: list[Any], kll: bool) -> ColumnSketch:
    theta = update_theta_sketch(12, seed=THETA_SEED)
    sketch = kll_doubles_sketch(200) if kll else None
    for v in values:
        theta.update(v)
        if sketch is not None:
            sketch.update(float(v))
    keys, counts = np.unique(np.asarray(values, float if kll else object), return_counts=True)
    return ColumnSketch(
        theta=bytes(theta.compact().serialize(False)),
        kll=bytes(sketch.serialize()) if sketch is not None else None,
        null_count=0,
        nan_count=0 if kll else None,
        frequent_items=frequent_items_of_counts(
            keys, counts.astype(np.int64), 256, kind=DOUBLES if kll else STRINGS
        ),
    )


def synthetic_file(
    i: int,
    files: int,
    rows: int,
    values: int,
    rng: random.Random,
    *,
    partitions: int = 1,
    copies: int = 1,
) -> DataFile:
    ids = [i * rows + j * (rows // values) for j in range(values)]
    keys = [rng.randrange(files * rows) for _ in range(values)]
    cats = [f"c{rng.randrange(50):02d}" for _ in range(values)]
    center = i * 10.0
    amounts = [center + rng.gauss(0, 200.0) for _ in range(values)]
    base: list[list[Any]] = [ids, keys, cats, amounts]
    sketched = [_sketches(vals, j != 2) for j, vals in enumerate(base)]
    # a copy of the four columns holds the same values: their sketches are built once
    columns = {4 * c + j + 1: base[j] for c in range(copies) for j in range(4)}
    return DataFile(
        path=f"file:///wh/db/synthetic/data/{i:06d}.parquet",
        content=FileContent.DATA,
        file_format="PARQUET",
        record_count=rows,
        file_size_bytes=rows * 24,
        partition=UNPARTITIONED
        if partitions <= 1
        else PartitionKey(spec_id=0, values=(("bucket", i % partitions),)),
        columns={
            fid: ColumnMetrics(
                column_size=rows * 6,
                value_count=rows,
                null_count=0,
                lower=min(vals),
                upper=max(vals),
            )
            for fid, vals in columns.items()
        },
        field_ids=frozenset(columns),
        sketches={fid: sketched[(fid - 1) % 4] for fid in columns},
    )


def build_store(
    root: Path,
    files: int,
    segments: int,
    rows: int,
    values: int,
    *,
    partitions: int = 1,
    copies: int = 1,
) -> StatsStore:
    store = StatsStore(root, "synthetic")
    types = {c.field_id: c.type for c in wide_schema(copies).columns}
    rng = random.Random(15)
    per_segment = -(-files // segments)
    entries = []
    for s in range(segments):
        batch = [
            synthetic_file(i, files, rows, values, rng, partitions=partitions, copies=copies)
            for i in range(s * per_segment, min(files, (s + 1) * per_segment))
        ]
        if not batch:
            break
        path = store.write_segment(s + 1, batch, types)
        # the advisor never reads segment aggregates: point at the segment itself
        entries.append(SegmentEntry(s + 1, path, path, len(batch)))
    store.commit(
        StateVersion(
            version=1,
            table_id="synthetic",
            format="iceberg",
            location="file:///wh/db/synthetic",
            last_snapshot_id=len(entries),
            segments=tuple(entries),
        )
    )
    return store


def measure(fn: Callable[[], AdviceReport]) -> tuple[AdviceReport, float, float, int]:
    """(result, wall seconds, CPU seconds, peak traced bytes), from two runs: one timed,
    one under tracemalloc (which slows every allocation, several times over when there
    are many small objects, so it must not run during the timed one). CPU time is
    reported because the benchmark machine is shared: wall time includes waiting for a
    core."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, seconds, cpu_seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--rows", type=int, default=100_000, help="rows each file claims")
    parser.add_argument("--values", type=int, default=200, help="values sketched per file")
    parser.add_argument(
        "--partitions", type=int, default=1, help="file i goes to partition i mod this"
    )
    parser.add_argument(
        "--wide", type=int, default=1, help="the four columns this many times (a wide table)"
    )
    parser.add_argument("--column-only", action="store_true", help="time only `advise --column id`")
    args = parser.parse_args()
    schema = wide_schema(args.wide)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        build_store(
            Path(tmp),
            args.files,
            args.segments,
            args.rows,
            args.values,
            partitions=args.partitions,
            copies=args.wide,
        )
        print(
            f"built {args.files:,} files × {len(schema.columns)} columns in {args.segments} "
            f"segments, {args.partitions:,} partition(s) in {time.perf_counter() - start:.1f} s"
        )
        # a fresh store object each run: nothing cached, the store read included
        _, seconds, cpu, peak = measure(
            lambda: advise_store(
                StatsStore(Path(tmp), "synthetic"), schema, table="synthetic", columns=["id"]
            )
        )
        print(
            f"advise_store --column id (read + analyse): {seconds:.2f} s wall, {cpu:.2f} s CPU, "
            f"peak heap {peak / 2**20:.1f} MiB"
        )
        if args.column_only:
            return
        report, seconds, cpu, peak = measure(
            lambda: advise_store(StatsStore(Path(tmp), "synthetic"), schema, table="synthetic")
        )
        print(
            f"advise_store (read + analyse), {len(schema.columns)} columns, "
            f"{len(report.partitions):,} partitions analysed apart: "
            f"{seconds:.2f} s wall, {cpu:.2f} s CPU, peak heap {peak / 2**20:.1f} MiB"
        )
        snapshot, files = live_data_files(StatsStore(Path(tmp), "synthetic"))
        inputs = column_inputs(files, list(schema.columns))
        del files
        _, seconds, cpu, peak = measure(lambda: advise("synthetic", snapshot, inputs))
        print(
            f"analysis only: {seconds:.2f} s wall, {cpu:.2f} s CPU, peak heap "
            f"{peak / 2**20:.1f} MiB ({cpu / (args.files * len(schema.columns)) * 1e6:.1f} µs "
            f"CPU per file × column)"
        )
        for c in report.columns[: len(BASE)]:  # the copies get the same advice
            point = c.point
            assert point is not None
            sigma = "-" if c.point_selectivity is None else f"{c.point_selectivity:.4g}"
            print(
                f"  {c.name:<9} lookup ≈ {point.files_expected:,.1f} files "
                f"(max {point.files_max:,}), point selectivity {sigma} → "
                f"{c.recommendation.kind.value}"
            )
    # tracemalloc sees Python objects only; the sketches live in C++ (datasketches)
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process max RSS (includes building the store): {max_rss:.0f} MiB")


if __name__ == "__main__":
    main()
