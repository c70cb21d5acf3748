"""The Arrow engine's equality-delete lookup against ``pc.is_in`` per batch (its peer: what
the engine did before ``KeyLookup``), in the same run, on the same files.

Two shapes of one task of the equality-delete job (``equality.equality_partition``, in this
process rather than in a Spark worker): one data file of ``--rows`` rows (read in batches of
128 Ki rows), and ``--files`` small files of ``--small-rows`` rows each sharing one set of
delete files; the delete set is ``--deletes`` rows drawn from the data (keys ``id`` long
and ``name`` string, 1 % NULL names). The peer builds each row's key bytes
(``key_values``) and calls ``pc.is_in`` per batch, which hashes the whole delete set each
time. Both must find the same dead rows; the script checks. Each is timed three times,
alternating, and the best kept.

    .venv/bin/python tests/bench/equality_lookup.py [--rows 4000000] [--deletes 1000000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.arrow_sketch.equality import EqualityTask, equality_partition
from lakestats.arrow_sketch.file_sketch import (
    ArrowColumn,
    file_batches,
    read_file_columns,
    reading_job,
)
from lakestats.arrow_sketch.key_sketch import key_values
from lakestats.sketches.spec import type_spec

REPO = Path(__file__).resolve().parents[2]


def _column(field_id: int, name: str, type_str: str) -> ArrowColumn:
    spec = type_spec(type_str)
    assert spec is not None
    return ArrowColumn(field_id, (name,), spec, False)


COLUMNS = (_column(1, "id", "long"), _column(2, "name", "string"))
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("name", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
        pa.field("amount", pa.float64(), metadata={b"PARQUET:field_id": b"3"}),
    ]
)


def write_files(work: Path, rows: int, deletes: int, files: int, small_rows: int) -> None:
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(rows)
    ids = rng.integers(0, 10 * rows, rows)
    names = pa.array(
        [None if k % 100 == 0 else f"customer-{k % 100_000:06d}" for k in ids.tolist()]
    )
    table = pa.Table.from_arrays([pa.array(ids), names, pa.array(rng.random(rows))], schema=SCHEMA)
    pq.write_table(table, work / "data.parquet", row_group_size=1 << 20)
    for i in range(files):
        start = (i * small_rows) % max(1, rows - small_rows)
        pq.write_table(table.slice(start, small_rows), work / f"small-{i}.parquet")
    drawn = table.take(pa.array(rng.choice(rows, deletes, replace=False)))
    pq.write_table(drawn.select(["id", "name"]), work / "deletes.parquet")


def with_lookup(paths: Sequence[Path], deletes: Path) -> list[np.ndarray]:
    tasks = [EqualityTask(str(p), ((COLUMNS, (str(deletes),)),)) for p in paths]
    out = []
    for _, status, dead in equality_partition("field_id", iter(tasks)):
        assert status == "ok", dead
        out.append(dead.to_positions())  # type: ignore[union-attr]
    return out


def with_is_in(paths: Sequence[Path], deletes: Path) -> list[np.ndarray]:
    """The peer: the delete set as key bytes, ``pc.is_in`` on every batch of every file."""
    job = reading_job(COLUMNS, "field_id")
    read = read_file_columns(str(deletes), COLUMNS, "field_id")
    assert read is not None
    value_set = key_values([(read[c.field_id], c.spec.type) for c in COLUMNS])
    out = []
    for path in paths:
        dead, start = [], 0
        for n, batch in file_batches(str(path), job):
            keys = key_values([(batch[c.field_id], c.spec.type) for c in COLUMNS])
            hit = pc.is_in(keys, value_set=value_set).to_numpy(zero_copy_only=False)
            dead.append(np.flatnonzero(hit) + start)
            start += n
        out.append(np.concatenate(dead))
    return out


def timed(run: object, *args: object) -> tuple[float, list[np.ndarray]]:
    started = time.perf_counter()
    result = run(*args)  # type: ignore[operator]
    return time.perf_counter() - started, result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--deletes", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--small-rows", type=int, default=100_000)
    parser.add_argument("--work-dir", type=Path, default=REPO / ".bench" / "equality-lookup")
    args = parser.parse_args(argv)
    if min(args.rows, args.deletes, args.files, args.small_rows) < 1 or args.deletes > args.rows:
        parser.error("sizes must be positive, --deletes at most --rows")
    work = args.work_dir / f"{args.rows}-{args.deletes}-{args.files}-{args.small_rows}"
    if not (work / "deletes.parquet").exists():
        write_files(work, args.rows, args.deletes, args.files, args.small_rows)
    print(f"equality_lookup.py {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {args.deletes:,} "
          f"delete rows")  # fmt: skip
    print("| task | `KeyLookup` | `pc.is_in` per batch | ratio | dead rows |")
    print("|---|---|---|---|---|")
    shapes = (
        (f"one file of {args.rows:,} rows", [work / "data.parquet"]),
        (
            f"{args.files} files of {args.small_rows:,} rows",
            [work / f"small-{i}.parquet" for i in range(args.files)],
        ),
    )
    for label, paths in shapes:
        runs: dict[str, list[float]] = {"ours": [], "peer": []}
        for _ in range(3):  # alternating, the best of three: neither pays the warm-up
            seconds, found = timed(with_lookup, paths, work / "deletes.parquet")
            runs["ours"].append(seconds)
            seconds, expected = timed(with_is_in, paths, work / "deletes.parquet")
            runs["peer"].append(seconds)
        ours, peer = min(runs["ours"]), min(runs["peer"])
        if [f.tolist() for f in found] != [e.tolist() for e in expected]:
            print(f"{label}: the lookup found other rows than pc.is_in", file=sys.stderr)
            return 1
        dead = sum(len(f) for f in found)
        print(f"| {label} | {ours:.2f} s | {peer:.2f} s | {peer / ours:.1f}× | {dead:,} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
