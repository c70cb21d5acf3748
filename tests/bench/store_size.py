"""How big a table's stats folder gets: bytes per live data file and column, per snapshot,
and what waits for cleanup (docs/operations.md, "Sizing the state volume").

A pyiceberg table (SQLite catalog) gets ``--commits`` appends of ``--rows`` rows each (one
data file per commit), analyzed one commit at a time as the daemon does, with the default
sketch settings (Spark ``local[2]``). Values are random and mostly distinct (a file's
sketches at their largest: past 4,096 distinct values theta and the value sample are
full). Then:

* the store's bytes right after the runs, by folder: segments (one row per file and
  column), aggregates (each segment's merge, plus the merged view), stats documents (one
  per snapshot) — what the grace period keeps besides;
* the same after ``compact`` with no grace period: what the current state references;
* per column type, the bytes one live file costs in its segment and one snapshot costs in
  its stats document; and the estimate the sizing rule in docs/operations.md gives for this
  table beside the measured size.

    .venv/bin/python tests/bench/store_size.py [--commits 12 --rows 100000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

try:
    from lakestats.analyze import SparkSketcher, analyze_table
    from lakestats.config import Config, SparkConfig, load_config
    from lakestats.maintenance import compact
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import OpenedTable, open_table
    from lakestats.testing import IcebergWarehouse
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats ({exc}): run `make bench`") from exc

TYPES = {
    "long": pa.int64(),
    "double": pa.float64(),
    "decimal": pa.decimal128(12, 2),
    "date": pa.date32(),
    "string": pa.string(),
}
SKETCH_COLUMNS = ("theta", "kll", "value_sample_v1", "frequent_items_v1", "frequent_strings_v1")
FOLDERS = ("segments", "aggregates", "stats", "log")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests/bench/store_size.py", description=__doc__)
    parser.add_argument("--commits", type=int, default=12, help="appends, one file each")
    parser.add_argument("--rows", type=int, default=100_000, help="rows per append")
    parser.add_argument(
        "--columns",
        default="long:4,double:4,decimal:2,date:2,string:4",
        help="type:count,… of " + ", ".join(TYPES),
    )
    parser.add_argument("--spark-master", default="local[2]")
    return parser.parse_args(argv)


def schema_of(spec: str) -> pa.Schema:
    fields = []
    for part in spec.split(","):
        name, _, count = part.partition(":")
        if name not in TYPES:
            raise SystemExit(f"--columns: unknown type {name!r} (one of {', '.join(TYPES)})")
        fields += [pa.field(f"{name}_{i}", TYPES[name]) for i in range(int(count or 1))]
    return pa.schema(fields)


def batch(rng: np.random.Generator, schema: pa.Schema, rows: int) -> pa.Table:
    columns = []
    for field in schema:
        draws = rng.integers(0, 10**9, rows)
        if pa.types.is_floating(field.type):
            columns.append(pa.array(rng.random(rows) * 1e6))
        elif pa.types.is_decimal(field.type):
            cents = [decimal.Decimal(int(v)).scaleb(-2) for v in draws]
            columns.append(pa.array(cents, field.type))
        elif pa.types.is_date(field.type):
            # dates hold few distinct values: 30 years of days
            days = dt.date(2000, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
            columns.append(pa.array(days + draws % 10_957, pa.int32()).cast(pa.date32()))
        elif pa.types.is_string(field.type):
            columns.append(pa.array([f"customer-{v}" for v in draws]))
        else:
            columns.append(pa.array(draws))
    return pa.Table.from_arrays(columns, schema=schema)


def no_retention(config: Config) -> Config:
    now = {"grace_period_s": 0.0, "log_retention_s": 0.0, "min_log_versions": 1}
    return config.model_copy(update={"maintenance": config.maintenance.model_copy(update=now)})


def folder_bytes(root: Path) -> dict[str, int]:
    return {name: sum(p.stat().st_size for p in (root / name).glob("*")) for name in FOLDERS}


def per_type_segment_bytes(root: Path, types: dict[int, str]) -> dict[str, Counter[str]]:
    """Mean bytes one live file costs per column of each type (its segment row), by sketch."""
    total: defaultdict[str, Counter[str]] = defaultdict(Counter)
    rows: Counter[str] = Counter()
    for path in (root / "segments").glob("*.parquet"):
        table = pq.read_table(path, columns=["field_id", *SKETCH_COLUMNS])
        for row in table.to_pylist():
            kind = types[row["field_id"]]
            total[kind].update({c: len(row[c] or b"") for c in SKETCH_COLUMNS})
            rows[kind] += 1
    return {kind: Counter({c: n / rows[kind] for c, n in total[kind].items()}) for kind in rows}


def per_type_doc_bytes(root: Path, types: dict[int, str]) -> dict[str, float]:
    """Mean bytes one snapshot's stats document spends per column of each type."""
    sizes: defaultdict[str, list[int]] = defaultdict(list)
    for path in (root / "stats").glob("*.json"):
        for column in json.loads(path.read_bytes())["columns"].values():
            text = json.dumps(column, ensure_ascii=False, separators=(",", ":"))
            sizes[types[column["field_id"]]].append(len(text.encode()))
    return {kind: sum(v) / len(v) for kind, v in sizes.items()}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    schema = schema_of(args.columns)
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory(prefix="lakestats-store-size-") as tmp:
        root = Path(tmp)
        wh = IcebergWarehouse(root / "wh")
        wh.create_table("t", schema)
        types = {
            field.field_id: field.name.split("_")[0] for field in wh.table("t").schema().fields
        }
        config = load_config(None).model_copy(
            update={
                "state_dir": root / "state",
                "spark": SparkConfig(master=args.spark_master, conf={"spark.ui.enabled": "false"}),
            }
        )
        get_spark(SparkSettings(master=config.spark.master, conf=config.spark.conf))
        opened: OpenedTable = open_table(wh.location("t"), config)
        sketcher = SparkSketcher(config)
        for i in range(args.commits):
            wh.append("t", batch(rng, schema, args.rows))
            analyze_table(opened, config=config, sketcher=sketcher)
            print(f"commit {i + 1}/{args.commits} analyzed", flush=True)
        folder = Path(opened.store.path("log")).parent
        before = folder_bytes(folder)
        compact(opened, no_retention(config))
        after = folder_bytes(folder)
        state = opened.store.current()
        segments = len(state.segments) if state is not None else 0
        per_file = per_type_segment_bytes(folder, types)
        per_doc = per_type_doc_bytes(folder, types)
        stop_spark()

    counts = Counter(types.values())
    mib = 2**20
    print(f"\n{args.commits} commits x {args.rows:,} rows, columns {args.columns}\n")
    print("| folder | after the runs, MiB | after compact (no grace), MiB |")
    print("|---|---|---|")
    for name in FOLDERS:
        print(f"| {name} | {before[name] / mib:.2f} | {after[name] / mib:.2f} |")
    print(f"| all | {sum(before.values()) / mib:.2f} | {sum(after.values()) / mib:.2f} |")
    print(
        "\n| column type | columns | KiB per live file (segment) | of which "
        + " / ".join(SKETCH_COLUMNS)
        + " | KiB per snapshot (stats) |"
    )
    print("|---|---|---|---|---|")
    for kind in TYPES:
        if kind in counts:
            parts = " / ".join(f"{per_file[kind][c] / 1024:.1f}" for c in SKETCH_COLUMNS)
            print(
                f"| {kind} | {counts[kind]} | {per_file[kind].total() / 1024:.1f} | {parts} | "
                f"{per_doc[kind] / 1024:.1f} |"
            )
    file_bytes = sum(per_file[k].total() * n for k, n in counts.items())
    doc_bytes = sum(per_doc[k] * n for k, n in counts.items())
    # the rule of docs/operations.md: a file's sketches per live file (segments), per
    # segment and partition (their aggregates) and once more (the merged view), and a
    # stats document per snapshot; this table has one partition
    estimate = (args.commits + segments + 1) * file_bytes + args.commits * doc_bytes
    print(
        f"\nsizing rule: ({args.commits} files + {segments} segments + 1) x "
        f"{file_bytes / 1024:.0f} KiB + {args.commits} snapshots x {doc_bytes / 1024:.0f} KiB"
        f" = {estimate / mib:.2f} MiB; measured after compact {sum(after.values()) / mib:.2f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
