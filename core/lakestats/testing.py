"""Helpers for tests of lakestats and of code that uses it (writers' hooks, tools).

``IcebergWarehouse`` builds real Iceberg tables in a temporary directory and
``exact_stats`` computes what their statistics must be by reading all the data; both live
with the format they write (``lakestats.formats.iceberg.testing``) and are re-exported
here. ``MemoryTable`` is a pure-Python table format for tests that need no files at all.
"""

from lakestats.formats.iceberg.testing import (
    CatalogArgs,
    ColumnExact,
    ExactStats,
    IcebergWarehouse,
    exact_stats,
)
from lakestats.formats.memory import MemoryTable

__all__ = [
    "CatalogArgs",
    "ColumnExact",
    "ExactStats",
    "IcebergWarehouse",
    "MemoryTable",
    "exact_stats",
]
