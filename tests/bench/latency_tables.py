"""The table ``tests/bench/latency.py`` commits to, one class per format, each written by
that format's own writer the way an application writes: pyiceberg (SQLite catalog, named
in the config by catalog + identifier), delta-rs (``write_deltalake``, by location) and
pypaimon (a filesystem catalog, by location).

``write`` is only the writer's call, so the bench takes t0 the moment it returns;
``newest`` then names the commit that call made: the id the stats document's
``snapshot_id`` will show (Iceberg's snapshot id, Delta's version, Paimon's snapshot id).
Delta and Paimon number commits one by one and this bench is the only writer, so their id
is counted, not read back (reading it back costs a log read the latency would otherwise
include); ``check_newest`` compares the count with the table afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from lakestats.config import TableConfig
from lakestats.testing import IcebergWarehouse

FORMATS = ("iceberg", "delta", "paimon")


def toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class LatencyTable(Protocol):
    """One table of one format, written by that format's writer."""

    format_name: str

    def write(self, data: pa.Table) -> None:
        """Commit ``data`` as one append (the writer's call and nothing else)."""

    def newest(self) -> int:
        """The id of the newest commit, as the stats document's ``snapshot_id`` shows it."""

    def check_newest(self) -> None:
        """Raise if ``newest`` differs from what the table itself says."""

    def config_sections(self, name: str) -> str:
        """The TOML naming this table (and its catalog) as ``name``."""

    def table_config(self, name: str) -> TableConfig: ...

    def catalogs(self) -> dict[str, dict[str, str]]: ...


class IcebergLatencyTable:
    format_name = "iceberg"
    catalog = "bench"

    def __init__(self, root: Path, name: str, schema: pa.Schema) -> None:
        self.wh = IcebergWarehouse(root, catalog_name=self.catalog)
        self.wh.create_table(name, schema)
        self.name = name
        self._newest = 0

    def write(self, data: pa.Table) -> None:
        self._newest = self.wh.append(self.name, data)

    def newest(self) -> int:
        return self._newest

    def check_newest(self) -> None:
        actual = self.wh.lineage(self.name)[-1]
        if actual != self._newest:
            raise RuntimeError(f"Iceberg table's newest snapshot is {actual}, not {self._newest}")

    def config_sections(self, name: str) -> str:
        props = "\n".join(f"{k} = {toml_str(v)}" for k, v in self.wh.catalog_properties.items())
        return (
            f"[catalog.{self.catalog}]\n{props}\n\n[[table]]\nname = {toml_str(name)}\n"
            f"catalog = {toml_str(self.catalog)}\n"
            f"identifier = {toml_str(self.wh.identifier(self.name))}\n"
        )

    def table_config(self, name: str) -> TableConfig:
        return TableConfig(
            name=name, catalog=self.catalog, identifier=self.wh.identifier(self.name)
        )

    def catalogs(self) -> dict[str, dict[str, str]]:
        return {self.catalog: dict(self.wh.catalog_properties)}


class _LocatedTable:
    """A table the config names by its location (Delta, Paimon)."""

    location: Path

    def config_sections(self, name: str) -> str:
        return f"[[table]]\nname = {toml_str(name)}\nlocation = {toml_str(str(self.location))}\n"

    def table_config(self, name: str) -> TableConfig:
        return TableConfig(name=name, location=str(self.location))

    def catalogs(self) -> dict[str, dict[str, str]]:
        return {}


class DeltaLatencyTable(_LocatedTable):
    format_name = "delta"

    def __init__(self, root: Path, name: str, schema: pa.Schema) -> None:
        from deltalake import write_deltalake

        self._write = write_deltalake
        self.location = root / name
        write_deltalake(str(self.location), schema.empty_table(), mode="error")
        self._newest = 0  # version 0 creates the table

    def write(self, data: pa.Table) -> None:
        self._write(str(self.location), data, mode="append")
        self._newest += 1

    def newest(self) -> int:
        return self._newest

    def check_newest(self) -> None:
        from deltalake import DeltaTable

        actual = DeltaTable(str(self.location)).version()
        if actual != self._newest:
            raise RuntimeError(f"Delta table's newest version is {actual}, not {self._newest}")


class PaimonLatencyTable(_LocatedTable):
    format_name = "paimon"

    def __init__(self, root: Path, name: str, schema: pa.Schema) -> None:
        from pypaimon import CatalogFactory, Schema

        catalog = CatalogFactory.create({"warehouse": str(root)})
        catalog.create_database("bench", True)
        catalog.create_table(
            f"bench.{name}",
            Schema.from_pyarrow_schema(schema, options={"metadata.stats-mode": "full"}),
            False,
        )
        self._table: Any = catalog.get_table(f"bench.{name}")
        self.location = root / "bench.db" / name
        self._newest = 0  # no snapshot until the first commit

    def write(self, data: pa.Table) -> None:
        from lakestats.formats.paimon.testing import write_arrow

        write_arrow(self._table, data)
        self._newest += 1

    def newest(self) -> int:
        return self._newest

    def check_newest(self) -> None:
        snapshot = self._table.snapshot_manager().get_latest_snapshot()
        actual = None if snapshot is None else int(snapshot.id)
        if actual != self._newest:
            raise RuntimeError(f"Paimon table's newest snapshot is {actual}, not {self._newest}")


def latency_table(format_name: str, root: Path, name: str, schema: pa.Schema) -> LatencyTable:
    """A new, empty table of ``format_name`` under ``root``."""
    kinds: dict[str, type[IcebergLatencyTable | DeltaLatencyTable | PaimonLatencyTable]] = {
        "iceberg": IcebergLatencyTable,
        "delta": DeltaLatencyTable,
        "paimon": PaimonLatencyTable,
    }
    return kinds[format_name](root, name, schema)
