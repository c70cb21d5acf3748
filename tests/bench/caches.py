"""The process's memory against its tables and their files (``lakestats.cache``).

A daemon keeps every table it watches open: a worker's handle, which builds and updates the
stats, and a reader's, which serves them. Each handle caches what it reads — the format's
manifests (Iceberg), the stats store's aggregates, segment listings and merged views — so
the process's memory followed its tables' count and their files' count. This script builds
``--tables`` Iceberg tables (pyiceberg, SQLite catalog) of ``--files`` data files each (one
append per ``--partitions`` files, a file per partition), then, in a fresh process per
setting, does what the daemon does for each table in turn: opens two handles, builds the
table's stats from scratch with the worker's (metadata-only stats: no Spark, whose memory
is measured in ``memory.py``), reads them with the reader's, and keeps both. After each
table it prints the process's RSS and what the cache holds. Settings: the default budget
(512 MiB), ``--cache-size``, and with ``--before DIR`` the code of that earlier checkout
(``git worktree add DIR <commit>``), whose caches were bounded per handle in entries.
Last, the same for a real ``lakestatsd`` (metadata-only stats, every table configured by
location): its RSS once every table's stats are served, per setting.

    .venv/bin/python tests/bench/caches.py [--tables 20] [--files 5000] [--before DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
import gc, json, sys, time
import lakestats
locations, state, budget = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cache = None  # an earlier checkout (budget -1): caches per handle, no budget
if budget >= 0:
    from lakestats import cache
    if budget:
        cache.configure(budget)
def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
config = lakestats.Config(state_dir=state)
kept = []
started = time.perf_counter()
print(json.dumps({"tables": 0, "rss": rss_mib(), "held": 0, "s": 0}), flush=True)
for n, location in enumerate(locations, 1):
    worker, reader = lakestats.open_table(location, config), lakestats.open_table(location, config)
    lakestats.analyze_table(worker, config=config, sketcher=None)
    doc = lakestats.read_stats(reader, config=config)
    assert doc["file_count"] > 0
    kept.append((worker, reader))
    gc.collect()
    held = cache.process_cache().held_bytes if cache is not None else None
    seconds = time.perf_counter() - started
    print(json.dumps({"tables": n, "rss": rss_mib(), "held": held, "s": seconds}), flush=True)
"""


def build(root: Path, tables: int, files: int, partitions: int) -> list[str]:
    """The tables' locations, built once (reused while their file counts match)."""
    from pyiceberg.transforms import IdentityTransform

    from lakestats.testing import IcebergWarehouse

    shape = f"{tables}-{files}-{partitions}"
    marker = root / f"built-{shape}.json"
    if marker.exists():
        return list(json.loads(marker.read_text()))
    warehouse = IcebergWarehouse(root / f"wh-{shape}")
    rng = np.random.default_rng(5)
    locations = []
    started = time.monotonic()
    for t in range(tables):
        name = f"t{t}_{files}"
        schema = pa.schema(
            [
                ("part", pa.int32()),
                ("id", pa.int64()),
                ("price", pa.float64()),
                ("name", pa.string()),
                ("day", pa.date32()),
                ("qty", pa.int32()),
                ("flag", pa.bool_()),
                ("note", pa.string()),
            ]
        )
        warehouse.create_table(name, schema, partition_by=[("part", IdentityTransform())])
        for _ in range(-(-files // partitions)):
            rows = partitions * 2
            ids = rng.integers(0, 10**9, rows)
            days = np.datetime64("2024-01-01") + rng.integers(0, 365, rows)
            warehouse.append(
                name,
                pa.table(
                    {
                        "part": pa.array(np.arange(rows) % partitions, pa.int32()),
                        "id": pa.array(ids),
                        "price": pa.array(rng.random(rows) * 100),
                        "name": pa.array([f"customer-{i % 5000}" for i in ids.tolist()]),
                        "day": pa.array(days.astype("datetime64[D]"), pa.date32()),
                        "qty": pa.array(rng.integers(0, 50, rows).astype(np.int32)),
                        "flag": pa.array(rng.random(rows) < 0.5),
                        "note": pa.array([f"n{i}" for i in ids.tolist()]),
                    },
                    schema=schema,
                ),
            )
        locations.append(warehouse.location(name))
        print(f"  built {t + 1}/{tables} tables ({time.monotonic() - started:.0f} s)", flush=True)
    marker.write_text(json.dumps(locations))
    return locations


def measure(
    locations: Sequence[str], state: Path, budget: int, code: Path | None
) -> list[tuple[float, int | None, float]]:
    """``(RSS MiB, cache bytes held, seconds so far)`` after 0, 1, … tables, in a fresh
    process; ``code``: an earlier checkout's (no process cache)."""
    import shutil

    shutil.rmtree(state, ignore_errors=True)
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code / "core")
        budget = -1
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(list(locations)), str(state), str(budget)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if done.returncode:
        raise SystemExit(f"the measuring process failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [(float(r["rss"]), r["held"], float(r["s"])) for r in rows]


def daemon_rss(
    locations: Sequence[str], work: Path, cache_size: str | None, code: Path | None
) -> tuple[float, float | None]:
    """A real ``lakestatsd`` over every table (``code``: an earlier checkout's): its RSS
    (MiB) and cache gauges' sum (MiB; None before the cache) once every table's stats are
    served (built by its worker handle, read through its reader handle)."""
    import shutil
    import urllib.error
    import urllib.request

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tables = "".join(
        f'[[table]]\nname = "t{n}"\nlocation = "{loc}"\n' for n, loc in enumerate(locations)
    )
    budget = "" if cache_size is None else f'cache_size = "{cache_size}"\n'
    config = work / "lakestats.toml"
    config.write_text(
        f'state_dir = "{work / "state"}"\n{budget}[http]\nlisten = "127.0.0.1:0"\n'
        "[sketch]\nenabled = false\n[maintenance]\nenabled = false\n" + tables
    )
    root = code or REPO
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKESTATS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "core"), str(root / "daemon")])
    log = work / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lakestatsd", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        port = 0
        deadline = time.monotonic() + 1800
        pending = [f"t{n}" for n in range(len(locations))]
        while pending:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"lakestatsd failed or timed out; see {log}")
            time.sleep(0.5)
            if not port:
                for line in log.read_text(errors="replace").splitlines():
                    if '"http_listening"' in line:
                        port = int(json.loads(line)["port"])
                continue
            for name in list(pending):
                url = f"http://127.0.0.1:{port}/v1/tables/{name}/stats"
                try:
                    with urllib.request.urlopen(url, timeout=30) as resp:
                        if resp.status == 200:
                            pending.remove(name)
                except urllib.error.HTTPError:
                    pass  # not built yet
        time.sleep(2)  # settle
        rss = 0.0
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        held = None
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        gauges = [line for line in text.splitlines() if line.startswith("lakestats_cache_bytes{")]
        if gauges:
            held = sum(float(line.rsplit(" ", 1)[1]) for line in gauges) / 2**20
        return rss, held
    finally:
        proc.terminate()
        proc.wait(60)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--files", type=int, default=5000, help="data files per table")
    parser.add_argument("--partitions", type=int, default=1000, help="files per append")
    parser.add_argument("--cache-size", default="64MiB", help="a budget below the default")
    parser.add_argument("--before", type=Path, help="an earlier checkout to measure beside")
    parser.add_argument("--work-dir", type=Path, default=REPO / ".bench" / "caches")
    args = parser.parse_args(argv)
    if min(args.tables, args.files, args.partitions) < 1:
        parser.error("--tables, --files and --partitions must be at least 1")
    from lakestats.config import parse_size

    small = parse_size(args.cache_size)
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"caches.py {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {args.tables} tables of "
          f"{args.files:,} data files")  # fmt: skip
    locations = build(work, args.tables, args.files, args.partitions)
    settings: list[tuple[str, int, Path | None]] = [
        ("the default budget (512 MiB)", 0, None),
        (f"cache_size = {args.cache_size}", small, None),
    ]
    if args.before is not None:
        settings.insert(0, (f"before ({args.before})", 0, args.before.resolve()))
    results = {}
    for label, budget, code in settings:
        results[label] = measure(locations, work / "state", budget, code)
        print(f"  measured: {label}", flush=True)
    print("\nProcess RSS (MiB) after building and reading each table's stats, both handles kept:")
    print("| tables | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for n in range(args.tables + 1):
        cells = []
        for rows in results.values():
            rss, held, _ = rows[n]
            cells.append(f"{rss:.0f}" + ("" if held is None else f" (cache {held / 2**20:.0f})"))
        print(f"| {n} | " + " | ".join(cells) + " |")
    for label, rows in results.items():
        growth = (rows[-1][0] - rows[1][0]) / max(1, args.tables - 1)
        print(f"{label}: {growth:.1f} MiB per table after the first, {rows[-1][2]:.1f} s in all")
    print(f"\nA real lakestatsd over the {args.tables} tables, every table's stats served:")
    print("| setting | daemon RSS | cache gauges |")
    print("|---|---|---|")
    daemons: list[tuple[str, str | None, Path | None]] = [
        ("the default budget (512 MiB)", None, None),
        (f"cache_size = {args.cache_size}", args.cache_size, None),
    ]
    if args.before is not None:
        daemons.insert(0, (f"before ({args.before})", None, args.before.resolve()))
    for label, size, code in daemons:
        rss, held = daemon_rss(locations, work / "daemon", size, code)
        gauge = "—" if held is None else f"{held:.0f} MiB"
        print(f"| {label} | {rss:.0f} MiB | {gauge} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
