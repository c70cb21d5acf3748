"""What the daemon's poll of an unchanged table costs on S3: requests by kind, and time.

Every poll tick runs each table's ``process`` (``lakestatsd.runtime.TableRuntime``): the
table refreshed, its current snapshot compared with the store's newest state (and the
processed commit's fingerprint), the stale-stats check, the store-size metric. Here it runs
in this process on a Delta table of ``--commits`` delta-rs commits and a Paimon table of
``--commits`` pypaimon commits, both on the S3 server on 127.0.0.1 (moto) with the stats
store there too (``state_dir = "s3://…"``), after one run processed them. Requests are
counted at the server from werkzeug's request log (every HTTP request, by method; a GET
with ``list-type`` is a LIST), so what is counted is what S3 would bill.

    .venv/bin/python tests/bench/idle_poll.py            # ~6 min the first time (building)

Another checkout's code for a before/after comparison (same tables, same server):

    PYTHONPATH=<checkout>/core:<checkout>/daemon .venv/bin/python tests/bench/idle_poll.py
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: S3 server, pypaimon

from deltalake import write_deltalake

import lakestats
from object_store import RequestLog, S3Server, export_environment
from paimon_tables import PaimonWarehouse


def build_delta(path: Path, commits: int) -> None:
    if (path / "_delta_log" / f"{commits - 1:020d}.json").exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    started = time.monotonic()
    for i in range(commits):
        data = pa.table({"id": pa.array([i], pa.int64()), "name": pa.array([f"n{i}"])})
        write_deltalake(str(path), data, mode="append")
        if (i + 1) % 300 == 0:
            print(f"  delta {i + 1}/{commits} ({time.monotonic() - started:.0f} s)", flush=True)


def build_paimon(root: Path, commits: int) -> Path:
    warehouse_root = root / "warehouse"
    location = warehouse_root / "db.db" / "t"
    if (location / "snapshot" / f"snapshot-{commits}").exists():
        return location
    shutil.rmtree(warehouse_root, ignore_errors=True)
    warehouse = PaimonWarehouse(warehouse_root)
    warehouse.create("t", [("id", "long"), ("name", "string")])
    started = time.monotonic()
    for i in range(commits):
        warehouse.write("t", {"id": [i], "name": [f"n{i}"]})
        if (i + 1) % 300 == 0:
            print(f"  paimon {i + 1}/{commits} ({time.monotonic() - started:.0f} s)", flush=True)
    assert warehouse.location("t") == location, warehouse.location("t")
    return location


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1200)
    parser.add_argument("--polls", type=int, default=15)
    parser.add_argument("--work-dir", default=".bench/idle-poll")
    parser.add_argument("--show", action="store_true", help="print one idle poll's requests")
    args = parser.parse_args()
    work = Path(args.work_dir).resolve()
    print(f"lakestats from {Path(lakestats.__file__).parent}", flush=True)
    delta = work / f"delta{args.commits}"
    build_delta(delta, args.commits)
    paimon = build_paimon(work / f"paimon{args.commits}", args.commits)

    export_environment()
    server = S3Server()
    bucket = server.new_bucket()
    tables = {"delta": (delta, f"{bucket}/delta"), "paimon": (paimon, f"{bucket}/paimon")}
    for local, uri in tables.values():
        server.sync(local, uri)
    state_dir = f"{bucket}/state"
    config_path = work / "lakestatsd.toml"
    sections = "".join(
        f'\n[[table]]\nname = "{name}"\nlocation = "{uri}"\n' for name, (_, uri) in tables.items()
    )
    config_path.write_text(
        f'state_dir = "{state_dir}"\n[sketch]\nenabled = false\n[watch]\nenabled = false\n'
        + sections
    )

    from lakestatsd.config import load_service_config
    from lakestatsd.wiring import Service, core_fns

    config = load_service_config(config_path)
    service = Service(config, core_fns(config))
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with server.request_log() as requests:
        poll_tables(service, tables, requests, args)
    server.stop()
    return 0


def poll_tables(
    service: Any, tables: dict[str, tuple[Path, str]], requests: RequestLog, args: Any
) -> None:
    """Each table's first run, then ``--polls`` polls of it unchanged: one table row."""
    print("\n| table | log files | first run | idle poll (median) | requests per idle poll |")
    print("|---|---|---|---|---|")
    for name, (local, _) in tables.items():
        log_dir = local / ("_delta_log" if name == "delta" else "snapshot")
        started = time.perf_counter()
        assert service.runtime.process(name, lambda: False)
        first_run = time.perf_counter() - started
        service.runtime.process(name, lambda: False)  # what the first run left settles
        requests.take()
        times = []
        per_poll: list[Counter[str]] = []
        shown_lines: list[str] = []
        for _ in range(args.polls):
            started = time.perf_counter()
            assert service.runtime.process(name, lambda: False)
            times.append(time.perf_counter() - started)
            counted, shown_lines = requests.take()
            per_poll.append(counted)
        if args.show:
            print("\n".join(f"    {line}" for line in shown_lines), file=sys.stderr)
        kinds = Counter[str]()
        for counted in per_poll:
            kinds.update(counted)
        shown = ", ".join(f"{kinds[k] / len(per_poll):g} {k}" for k in sorted(kinds))
        print(
            f"| {name} | {len(list(log_dir.iterdir())):,} | {first_run:.2f} s | "
            f"{statistics.median(times) * 1000:.1f} ms | {shown} |",
            flush=True,
        )


if __name__ == "__main__":
    raise SystemExit(main())
