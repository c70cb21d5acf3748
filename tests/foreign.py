"""The Iceberg tables written by other engines (``../shared/fixtures/iceberg-foreign``).

They are real tables committed as test data by Apache Impala; their metadata names
``/test-warehouse/...`` and ``hdfs://localhost:20500/test-warehouse/...`` paths, which the
location mapping below sends to the folder here. Set ``LAKESTATS_FOREIGN_FIXTURES`` to
their directory when the repository is checked out elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

_DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "iceberg-foreign"
FIXTURES = Path(os.environ.get("LAKESTATS_FOREIGN_FIXTURES", _DEFAULT)) / "impala"

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"foreign Iceberg fixtures not found at {FIXTURES}"
)


def fixture_path(name: str) -> str:
    return str(FIXTURES / name)


def location_map() -> dict[str, str]:
    """Every prefix the fixtures' metadata and delete files use → the folder here."""
    here = f"{FIXTURES}/"
    return {
        "/test-warehouse/iceberg_test/hadoop_catalog/ice/": here,
        "hdfs://localhost:20500/test-warehouse/iceberg_test/hadoop_catalog/ice/": here,
        "hdfs://localhost:20500/test-warehouse/": here,
    }


def map_args() -> list[str]:
    """``location_map`` as CLI ``--map-location`` options."""
    args: list[str] = []
    for source, target in location_map().items():
        args += ["--map-location", f"{source}={target}"]
    return args


def duckdb_with_iceberg(**config: Any) -> Any:
    """A DuckDB connection with the iceberg and avro extensions loaded from their PyPI
    packages (no network download): the independent reader the tests compare with."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect(config=config)
    for package in (duckdb_extension_avro, duckdb_extension_iceberg):
        (binary,) = Path(package.__file__).parent.rglob("*.duckdb_extension")
        con.execute(f"LOAD '{binary}'")
    return con
