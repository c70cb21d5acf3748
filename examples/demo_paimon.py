"""``make demo FORMAT=paimon``: lakestatsd keeping a live Paimon table's stats fresh, and
publishing them as Paimon's own statistics file.

An example script, not part of the library: it writes the table with pypaimon (a
filesystem catalog under ``<repository>/demo-warehouse-paimon``, replaced on every run),
starts ``lakestatsd --config <repository>/config/local-paimon.toml`` in the background,
then writes commits (appends, a partition overwrite; each one pypaimon batch commit through
``lakestats.formats.paimon.testing.write_arrow``) and after each shows the stats the
daemon serves and the statistics file it published (an ``ANALYZE`` snapshot naming
``statistics/stat-<uuid>-0``, as Spark's ``ANALYZE TABLE`` would commit); finally stops
the daemon with SIGTERM.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from demo_daemon import base_url, run_beside_daemon
from pypaimon import CatalogFactory, Schema

from lakestats.config import load_config
from lakestats.formats.paimon.testing import write_arrow

CONFIG_PATH = Path(__file__).resolve().parents[1] / "config" / "local-paimon.toml"
SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("region", pa.string()),
        ("customer", pa.string()),
        ("amount", pa.float64()),
        ("order_date", pa.date32()),
    ]
)
REGIONS = ["emea", "amer", "apac"]


def _batch(rng: random.Random, start: int, rows: int, region: str | None = None) -> pa.Table:
    day0 = dt.date(2026, 1, 1)
    return pa.table(
        {
            "order_id": range(start, start + rows),
            "region": [region or rng.choice(REGIONS) for _ in range(rows)],
            "customer": [
                None if rng.random() < 0.05 else f"customer-{rng.randint(1, 400):04d}"
                for _ in range(rows)
            ],
            "amount": [round(rng.lognormvariate(3, 1), 2) for _ in range(rows)],
            "order_date": [day0 + dt.timedelta(days=rng.randint(0, 89)) for _ in range(rows)],
        },
        schema=SCHEMA,
    )


def build_warehouse(root: Path) -> Any:
    """A fresh Paimon table ``shop.orders`` partitioned by region, with a first commit."""
    if root.exists():
        shutil.rmtree(root)
    catalog = CatalogFactory.create({"warehouse": str(root / "warehouse")})
    catalog.create_database("shop", True)
    options = {"metadata.stats-mode": "full"}
    schema = Schema.from_pyarrow_schema(SCHEMA, partition_keys=["region"], options=options)
    catalog.create_table("shop.orders", schema, False)
    table = catalog.get_table("shop.orders")
    write_arrow(table, _batch(random.Random(0), 0, 5000))  # noqa: S311 - demo data
    return table


def _wait(predicate: Callable[[], bool], timeout_s: float, daemon: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise SystemExit("demo: lakestatsd exited early; see its log")
        try:
            if predicate():
                return
        except (urllib.error.URLError, OSError, KeyError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"demo: gave up after {timeout_s:.0f} s; see the lakestatsd log")


def main() -> int:
    config = load_config(CONFIG_PATH)
    (table_config,) = config.table
    assert table_config.location is not None
    location = Path(table_config.location).resolve()
    root = location.parents[2]  # <root>/warehouse/shop.db/orders
    state = Path(config.state_dir)
    print(f"demo: fresh Paimon warehouse in {root}", flush=True)
    table = build_warehouse(root)
    if state.exists():
        shutil.rmtree(state)
    base = base_url(config)

    def writes(daemon: subprocess.Popen[bytes]) -> None:
        rng = random.Random(7)  # noqa: S311 - demo data
        steps: list[tuple[str, Callable[[], None]]] = [
            ("first commit", lambda: None),
            ("append 5000 rows", lambda: write_arrow(table, _batch(rng, 5000, 5000))),
            ("append 5000 rows", lambda: write_arrow(table, _batch(rng, 10000, 5000))),
            (
                "overwrite region=apac",
                lambda: write_arrow(
                    table, _batch(rng, 20000, 100, "apac"), overwrite={"region": "apac"}
                ),
            ),
        ]
        for label, step in steps:
            step()
            _show_step(label, location, base, daemon)

    return run_beside_daemon(CONFIG_PATH, config, root / "lakestatsd.log", writes)


def _show_step(label: str, location: Path, base: str, daemon: subprocess.Popen[bytes]) -> None:
    data_ids = [
        int(p.name.split("-")[1])
        for p in (location / "snapshot").glob("snapshot-*")
        if json.loads(p.read_text())["commitKind"] != "ANALYZE"
    ]
    wanted = max(data_ids)
    started = time.monotonic()

    def published() -> bool:
        latest = int((location / "snapshot" / "LATEST").read_text())
        snapshot = json.loads((location / "snapshot" / f"snapshot-{latest}").read_text())
        name = snapshot.get("statistics")
        if snapshot["commitKind"] != "ANALYZE" or not name:
            return False
        return bool(
            json.loads((location / "statistics" / name).read_text())["snapshotId"] == wanted
        )

    _wait(published, 120, daemon)
    latest = int((location / "snapshot" / "LATEST").read_text())
    snapshot = json.loads((location / "snapshot" / f"snapshot-{latest}").read_text())
    stats = json.loads((location / "statistics" / snapshot["statistics"]).read_text())
    customer = stats["colStats"]["customer"]
    print(
        f"demo: {label:<22} data snapshot {wanted:>2} -> ANALYZE snapshot {latest:>2}: "
        f"mergedRecordCount {stats['mergedRecordCount']:>6}, customer distinctCount "
        f"{customer.get('distinctCount')}, published after {time.monotonic() - started:.1f}s",
        flush=True,
    )
    del base


if __name__ == "__main__":
    sys.exit(main())
