"""The Paimon tables written by Java Paimon (``../shared/fixtures/paimon``), and oracles.

pypaimon 2.1 reads most of them (``read_rows``); it cannot read ``append_10`` (ORC
manifests) nor ``pk_table_partial_update`` (partial-update with ignore-delete), whose
live rows come from their README's operations.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

_DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "paimon"
ROOT = Path(os.environ.get("LAKESTATS_PAIMON_FIXTURES", _DEFAULT)) / "paimon-cpp"

needs_paimon_fixtures = pytest.mark.skipif(
    not ROOT.is_dir(), reason=f"Paimon fixtures not found at {ROOT}"
)

APPEND_TABLES = (
    "append_10",
    "append_table_with_alter_table",
    "append_with_multiple_ts_precision_and_timezone",
)
PK_TABLES = ("pk_table_partial_update", "pk_table_scan_and_read_dv", "pk_table_with_mor")
ALL_TABLES = APPEND_TABLES + PK_TABLES
READABLE_BY_PYPAIMON = (
    "append_table_with_alter_table",
    "append_with_multiple_ts_precision_and_timezone",
    "pk_table_scan_and_read_dv",
    "pk_table_with_mor",
)


def fixture(name: str) -> Path:
    return ROOT / f"{name}.db" / name


def copy_fixture(name: str, into: Path) -> Path:
    """A writable copy (the shared fixtures are read-only)."""
    target = into / f"{name}.db" / name
    shutil.copytree(fixture(name), target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def read_rows(name: str, warehouse: Path = ROOT) -> pa.Table:
    """The rows engines return for the current snapshot, read by pypaimon."""
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    table = catalog.get_table(f"{name}.{name}")
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())
