"""``make demo``: lakestatsd keeping a live Iceberg table's and a Delta table's stats fresh.

An example script, not part of the library: it writes the tables with pyiceberg and
deltalake (delta-rs) directly, as writers would. Builds a demo warehouse with pyiceberg's
SQLite catalog and a Delta table under ``<repository>/demo-warehouse`` (replaced on every
run), starts ``lakestatsd --config <repository>/config/local.toml`` in the background,
then writes commits (appends, a delete, a compaction; Delta appends, a delete, an update)
and after each one shows the stats the daemon serves over HTTP and how fresh they are,
then a few filters' rows as the daemon estimates them beside a scan's count; finally stops
the daemon with SIGTERM. Needs this package (with its test extra, which
brings deltalake) and Java, and runs from any working directory.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
from demo_daemon import base_url, get_json, run_beside_daemon
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
)

from lakestats.config import Config, load_config
from lakestats.notify import notify

# the repository's example config, wherever the script is started from
CONFIG_PATH = Path(__file__).resolve().parents[1] / "config" / "local.toml"

SCHEMA = Schema(
    NestedField(1, "order_id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "customer", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    NestedField(5, "order_date", DateType(), required=False),
    NestedField(6, "priority", BooleanType(), required=False),
)
REGIONS = ["emea", "amer", "apac"]


def _batch(rng: random.Random, start: int, rows: int) -> pa.Table:
    day0 = dt.date(2026, 1, 1)
    return pa.table(
        {
            "order_id": pa.array(range(start, start + rows), pa.int64()),
            "region": pa.array([rng.choice(REGIONS) for _ in range(rows)]),
            "customer": pa.array(
                [
                    None if rng.random() < 0.05 else f"customer-{rng.randint(1, 400):04d}"
                    for _ in range(rows)
                ]
            ),
            "amount": pa.array([round(rng.lognormvariate(3, 1), 2) for _ in range(rows)]),
            "order_date": pa.array(
                [day0 + dt.timedelta(days=rng.randint(0, 89)) for _ in range(rows)], pa.date32()
            ),
            "priority": pa.array([rng.random() < 0.2 for _ in range(rows)]),
        }
    )


def build_warehouse(root: Path) -> Table:
    """A fresh demo table ``shop.orders`` (SQLite catalog) with one first commit."""
    if root.exists():
        shutil.rmtree(root)
    warehouse = root / "warehouse"
    warehouse.mkdir(parents=True)
    catalog = SqlCatalog(
        "demo", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=warehouse.as_uri()
    )
    catalog.create_namespace("shop")
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table("shop.orders", schema=SCHEMA, partition_spec=spec)
    table.append(_batch(random.Random(0), 0, 5000))  # noqa: S311 - demo data
    return table


DELTA_TABLE = "events"


def build_delta_table(location: Path) -> None:
    """A fresh Delta table (delta-rs), partitioned by region, with one first commit."""
    from deltalake import write_deltalake  # noqa: PLC0415 - the Delta part of the demo only

    if location.exists():
        shutil.rmtree(location)
    location.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(location), _batch(random.Random(1), 0, 3000), partition_by=["region"])  # noqa: S311


def _lag(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:  # noqa: S310
        for line in response.read().decode().splitlines():
            if line.startswith('lakestats_freshness_lag_seconds{table="orders"}'):
                return f"{float(line.split()[-1]):.1f}s"
    return "n/a"


def main() -> int:
    config_path = CONFIG_PATH
    config = load_config(config_path)
    locations = {t.name: t.location for t in config.table}
    iceberg_location, delta_location = locations["orders"], locations[DELTA_TABLE]
    assert iceberg_location is not None and delta_location is not None
    root = Path(iceberg_location).resolve().parents[2]  # <root>/warehouse/shop/orders
    state = Path(config.state_dir)
    print(f"demo: fresh warehouse in {root}", flush=True)
    table = build_warehouse(root)
    build_delta_table(Path(delta_location).resolve())
    if state.exists():
        shutil.rmtree(state)
    base = base_url(config)

    def writes(_: object) -> None:
        _write_and_watch(table, config, base)
        _write_and_watch_delta(str(Path(delta_location).resolve()), config, base)

    return run_beside_daemon(config_path, config, root / "lakestatsd.log", writes)


def _write_and_watch(table: Table, config: Config, base: str) -> None:
    rng = random.Random(7)  # noqa: S311 - demo data, not secrets
    steps: list[tuple[str, Callable[[], None]]] = [
        ("append 5000 rows", lambda: table.append(_batch(rng, 5000, 5000))),
        ("append 5000 rows", lambda: table.append(_batch(rng, 10000, 5000))),
        ("delete order_id < 2000", lambda: table.delete("order_id < 2000")),
        ("compact into one file", lambda: table.overwrite(table.scan().to_arrow())),
    ]
    print(
        f"demo: {'commit':<24} {'snapshot':>20} {'rows':>6} {'ndv(customer)':>13} "
        f"{'p50(amount)':>11} {'fresh after':>11} {'lag now':>7}"
    )
    for label, write in steps:
        write()
        table = table.refresh()
        committed = time.monotonic()
        notify(config, "orders", wait=True, timeout_s=config.http.wait_timeout_s)
        fresh_after = time.monotonic() - committed
        doc = get_json(f"{base}/v1/tables/orders/stats")
        columns = doc["columns"]
        p50 = (columns["amount"].get("quantiles") or {}).get("0.5")
        print(
            f"demo: {label:<24} {doc['snapshot_id']:>20} {doc['record_count']:>6} "
            f"{columns['customer'].get('ndv')!s:>13} {p50!s:>11} {fresh_after:>10.2f}s "
            f"{_lag(base):>7}",
            flush=True,
        )
    _estimates(table, base)


# (lakestats predicate, the same filter for pyiceberg's scan, which counts the rows)
FILTERS = (
    ("amount < 20", "amount < 20"),
    (
        "order_date BETWEEN '2026-02-01' AND '2026-02-28'",
        "order_date >= '2026-02-01' and order_date <= '2026-02-28'",
    ),
    ("order_id >= 12000", "order_id >= 12000"),
    ("region = 'emea' AND amount < 20", "region = 'emea' and amount < 20"),
)


def _estimates(table: Table, base: str) -> None:
    print(
        "\ndemo: rows a filter matches, estimated by lakestatsd from the stats alone "
        "(GET /v1/tables/orders/estimate), and counted by a scan"
    )
    for predicate, scan_filter in FILTERS:
        answer = get_json(f"{base}/v1/tables/orders/estimate?predicate={quote(predicate)}")
        counted = table.scan(row_filter=scan_filter).to_arrow().num_rows
        print(
            f"demo: {predicate:<50} estimated {answer['rows']:>8.0f}  counted {counted:>6}",
            flush=True,
        )


def _write_and_watch_delta(location: str, config: Config, base: str) -> None:
    from deltalake import DeltaTable, write_deltalake  # noqa: PLC0415

    rng = random.Random(11)  # noqa: S311 - demo data, not secrets
    steps: list[tuple[str, Callable[[], None]]] = [
        (
            "append 3000 rows",
            lambda: write_deltalake(location, _batch(rng, 3000, 3000), mode="append"),
        ),
        ("delete order_id < 1000", lambda: DeltaTable(location).delete("order_id < 1000")),
        (
            "update emea amounts",
            lambda: DeltaTable(location).update(
                updates={"amount": "amount * 2"}, predicate="region = 'emea'"
            ),
        ),
    ]
    print(f"\ndemo: Delta table {DELTA_TABLE!r} ({location})")
    print(
        f"demo: {'commit':<24} {'version':>8} {'rows':>6} {'ndv(customer)':>13} "
        f"{'max(amount)':>11} {'fresh after':>11}"
    )
    for label, write in steps:
        write()
        committed = time.monotonic()
        notify(config, DELTA_TABLE, wait=True, timeout_s=config.http.wait_timeout_s)
        fresh_after = time.monotonic() - committed
        doc = get_json(f"{base}/v1/tables/{DELTA_TABLE}/stats")
        columns = doc["columns"]
        print(
            f"demo: {label:<24} {doc['snapshot_id']:>8} {doc['record_count']:>6} "
            f"{columns['customer'].get('ndv')!s:>13} {columns['amount'].get('max')!s:>11} "
            f"{fresh_after:>10.2f}s",
            flush=True,
        )
    print(f"demo: Delta stats documents also in {location}/_delta_log/_lakestats/", flush=True)


if __name__ == "__main__":
    sys.exit(main())
