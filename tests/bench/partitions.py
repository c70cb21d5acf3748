"""Per-commit work against a table's partition count (DESIGN §11: per-commit update and
commit-to-fresh-stats latency for a small commit).

For each partition count P (``--partitions``, default 1, 365 and 3650): a pyiceberg table
(SQLite catalog) partitioned by day, one append writing ``--rows`` rows into each of its P
days, a first ``analyze`` (the baseline), then ``--commits`` small appends of ``--append-rows``
rows into one day each (a different day each time), each followed by ``analyze``. Value
samples and frequent items on (the defaults), Spark ``local[2]``, warm.

Two ways a commit reaches lakestats are timed per small commit:

* ``daemon``: one ``OpenedTable`` for all commits, as ``lakestatsd`` keeps it: its merged
  view stays in memory from commit to commit;
* ``hook``: a new ``OpenedTable`` per commit, as ``lakestats analyze`` run by an on-commit
  hook is: the merged view is read from the store's files.

It prints the median per-commit time and its merge and commit phases (``CommitReport``)
per P, and each P's ratio to P = 1 (work that grows with the partitions shows there).
Then ``--removals`` deletes of one whole day each (its files removed: a removal, which
re-merges the table) timed in the daemon — the first apart (it merges every partition
group the view then keeps), the median of the others — and what the merged view holds:
its sketch bytes in memory, per partition, for the table and in its groups (none before
groups existed), and its files' bytes in the store.
The same script runs against older code (``PYTHONPATH=<checkout>/core``) for a before/after.

    .venv/bin/python tests/bench/partitions.py [--partitions 1,365,3650] [--commits 12]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo

from lakestats.analyze import CommitReport, analyze_table
from lakestats.config import load_config
from lakestats.tables import open_table

REPO = Path(__file__).resolve().parents[2]
START = dt.date(2000, 1, 1)


def _batch(rng: np.random.Generator, days: list[int], rows: int) -> pa.Table:
    day = np.repeat(np.array([START + dt.timedelta(days=d) for d in days]), rows)
    n = len(day)
    return pa.table(
        {
            "id": pa.array(rng.integers(0, 10**12, n)),
            "price": pa.array(np.round(rng.random(n) * 1000, 2)),
            "qty": pa.array(rng.integers(1, 50, n).astype("int32")),
            "name": pa.array([f"name-{i % 5000}" for i in range(n)]),
            "day": pa.array(day, pa.date32()),
        }
    )


def _phases(reports: list[CommitReport]) -> dict[str, float]:
    (report,) = reports
    return {k: float(v) for k, v in report.timings.items()}


def _view_bytes(opened: Any, config: Any) -> dict[str, int]:
    """What the merged view holds: sketch bytes in memory (partitions, table) and the
    bytes of its files in the store."""
    store = opened.store
    state = store.current()
    view = store.merged_view(state, config.sketch.settings())

    def sketches(part: Any) -> int:
        return sum(
            len(blob)
            for column in part.columns.values()
            for blob in (column.theta, column.kll, column.value_sample, column.frequent_items)
            if blob is not None
        )

    files = [state.merged_path, getattr(state, "merged_table_path", None)]
    files += [d.path for d in getattr(state, "merged_deltas", ())]
    return {
        "partition_sketch_bytes": sum(sketches(p) for p in view.partitions),
        "table_sketch_bytes": sketches(view.table),
        "group_sketch_bytes": sum(sketches(g) for g in getattr(view, "groups", None) or ()),
        "view_file_bytes": sum(store.path(rel).stat().st_size for rel in files if rel),
    }


def run(partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    root = args.work_dir / f"p{partitions}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
    catalog.create_namespace("b")
    rng = np.random.default_rng(partitions)
    first = _batch(rng, list(range(partitions)), args.rows)
    table = catalog.create_table("b.t", schema=first.schema)
    with table.update_spec() as spec:
        spec.add_identity("day")
    table.append(first)
    location = table.metadata_location.rsplit("/metadata/", 1)[0]
    config_path = root / "lakestats.toml"
    config_path.write_text(f'state_dir = "{root}/stats"\n[spark]\nmaster = "local[2]"\n')
    config = load_config(config_path)
    started = time.perf_counter()
    analyze_table(location, config=config)
    baseline_s = time.perf_counter() - started

    daemon_table = open_table(location, config)
    analyze_table(daemon_table, config=config)  # nothing pending: loads its merged view
    timings: dict[str, list[float]] = {"daemon": [], "hook": []}
    phases: dict[str, list[dict[str, float]]] = {"daemon": [], "hook": []}
    for i in range(args.commits):
        for mode in ("daemon", "hook"):
            day = (2 * i + (mode == "hook")) % partitions
            table.append(_batch(rng, [day], args.append_rows))
            reports: list[CommitReport] = []
            opened = daemon_table if mode == "daemon" else open_table(location, config)
            started = time.perf_counter()
            analyze_table(opened, config=config, on_commit=reports.append)
            timings[mode].append(time.perf_counter() - started)
            phases[mode].append(_phases(reports))
    removals: list[float] = []
    for i in range(args.removals if partitions > 1 else 0):
        day = START + dt.timedelta(days=(partitions - 1 - i) % partitions)
        table.delete(EqualTo("day", day))  # drops that day's files: a removal commit
        started = time.perf_counter()
        analyze_table(daemon_table, config=config)
        removals.append(time.perf_counter() - started)
    result: dict[str, Any] = {"partitions": partitions, "baseline_s": baseline_s}
    result["first_removal"] = removals[0] if removals else None
    result["removal"] = statistics.median(removals[1:]) if len(removals) > 1 else None
    result |= _view_bytes(daemon_table, config)
    for mode in ("daemon", "hook"):
        result[mode] = statistics.median(timings[mode])
        for phase in ("merge", "commit"):
            result[f"{mode}_{phase}"] = statistics.median(p.get(phase, 0.0) for p in phases[mode])
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,365,3650", help="comma-separated counts")
    parser.add_argument("--rows", type=int, default=200, help="rows per partition at first")
    parser.add_argument("--commits", type=int, default=12, help="small appends per mode")
    parser.add_argument("--append-rows", type=int, default=100, help="rows per small append")
    parser.add_argument("--work-dir", type=Path, default=REPO / ".bench" / "partitions")
    parser.add_argument("--removals", type=int, default=3, help="one-day deletes (P > 1)")
    parser.add_argument("--keep", action="store_true", help="keep the tables and stores")
    args = parser.parse_args()
    args.work_dir = args.work_dir.resolve()  # table locations are file:// URIs
    counts = [int(p) for p in args.partitions.split(",")]
    results = []
    for count in counts:
        print(f"P = {count} …", flush=True)
        results.append(run(count, args))
    first = results[0]
    print(
        f"\n{args.commits} small appends per mode, median seconds per commit "
        f"(merge / commit phases); ratio to P = {first['partitions']}\n"
    )
    print("| partitions | first analyze | daemon | ratio | hook (new process state) | ratio |")
    print("|---|---|---|---|---|---|")
    for r in results:
        cells = [f"{r['partitions']:,}", f"{r['baseline_s']:.2f} s"]
        for mode in ("daemon", "hook"):
            cells.append(f"{r[mode]:.3f} s ({r[f'{mode}_merge']:.3f} / {r[f'{mode}_commit']:.3f})")
            cells.append(f"{r[mode] / first[mode]:.2f}×")
        print("| " + " | ".join(cells) + " |")
    print(
        f"\nAfter the appends, then {args.removals} removals of one day's files (P > 1; the "
        "daemon's seconds: the first, the median of the others): the merged view's sketch "
        "bytes in memory and its files\n"
    )
    print(
        "| partitions | first removal | later removals | partition sketches | table sketches "
        "| group sketches | view files |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        times = [
            "–" if r[key] is None else f"{r[key]:.3f} s" for key in ("first_removal", "removal")
        ]
        kinds = ("partition_sketch_bytes", "table_sketch_bytes", "group_sketch_bytes")
        mib = [f"{r[k] / 2**20:.2f} MiB" for k in kinds]
        files = r["view_file_bytes"] / 2**20
        print(
            f"| {r['partitions']:,} | {' | '.join(times)} | {' | '.join(mib)} | {files:.2f} MiB |"
        )


if __name__ == "__main__":
    main()
