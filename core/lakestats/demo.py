"""``make demo``: a small Iceberg warehouse, a few commits, then ``analyze`` and ``show``.

The warehouse is made with pyiceberg's SQLite catalog under ``./demo-warehouse`` (replaced
on every run), so the demo needs nothing but this package and Java.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import sys
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import LessThan, Reference
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
)

from lakestats.cli import main as cli_main

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


def build_warehouse(root: Path) -> Path:
    """Create the demo table with four commits; return the config file to use."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    warehouse = root / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog(
        "demo", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=warehouse.as_uri()
    )
    catalog.create_namespace("shop")
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table("shop.orders", schema=SCHEMA, partition_spec=spec)
    rng = random.Random(7)  # noqa: S311 - demo data, not secrets
    print("demo: writing 3 appends and a delete to shop.orders", flush=True)
    for i in range(3):
        table.append(_batch(rng, i * 5000, 5000))
    table.delete(LessThan(Reference("order_id"), 1000))
    config = root / "lakestats.toml"
    config.write_text(
        f'''# written by `make demo`
state_dir = "state"

[[table]]
name = "orders"
catalog = "demo"
identifier = "shop.orders"

[catalog.demo]
type = "sql"
uri = "sqlite:///{root / "catalog.db"}"
warehouse = "{warehouse.as_uri()}"

[spark]
master = "local[2]"
[spark.conf]
"spark.ui.enabled" = "false"
"spark.sql.shuffle.partitions" = "2"
''',
        encoding="utf-8",
    )
    return config


def main() -> int:
    root = Path("demo-warehouse").resolve()
    config = build_warehouse(root)
    print(f"demo: lakestats analyze orders --config {config}", flush=True)
    code = cli_main(["analyze", "orders", "--config", str(config)])
    if code:
        return code
    print(f"\ndemo: lakestats show orders --config {config}\n", flush=True)
    code = cli_main(["show", "orders", "--config", str(config)])
    if code:
        return code
    print(f"\ndemo: lakestats commits orders --config {config}\n", flush=True)
    return cli_main(["commits", "orders", "--config", str(config)])


if __name__ == "__main__":
    sys.exit(main())
