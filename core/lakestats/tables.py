"""Turning what a user typed (a configured name or a path) into an opened table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lakestats.config import Config, TableConfig
from lakestats.exceptions import TableNotFoundError
from lakestats.formats.base import TableFormat
from lakestats.formats.registry import open_table
from lakestats.store import StatsStore


@dataclass(frozen=True)
class OpenedTable:
    """A table ready to analyze: its config entry, its format adapter and its store."""

    config: TableConfig
    table: TableFormat
    store: StatsStore

    @property
    def name(self) -> str:
        return self.config.name


def resolve_table(arg: str, config: Config) -> TableConfig:
    """A configured table name wins; otherwise ``arg`` must be a table location path."""
    configured = config.find_table(arg)
    if configured is not None:
        return configured
    looks_like_path = "/" in arg or "://" in arg or arg.startswith(".") or Path(arg).exists()
    if not looks_like_path:
        known = ", ".join(t.name for t in config.table) or "none configured"
        raise TableNotFoundError(
            f"{arg!r} is neither a configured table name ({known}) nor a table path"
        )
    location = arg if "://" in arg else str(Path(arg).resolve())
    name = Path(location.rstrip("/")).name or "table"
    return TableConfig(name=_safe(name), location=location)


def _safe(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return cleaned if cleaned[:1].isalnum() else f"t{cleaned}"


def open_configured(table: TableConfig, config: Config) -> OpenedTable:
    """Open the table's metadata and its stats store (keyed by the table's stable id)."""
    if table.location is not None:
        fmt = open_table(table.location)
    else:
        assert table.catalog is not None and table.identifier is not None  # validated config
        fmt = open_table(
            catalog=table.catalog,
            catalog_properties=config.catalog[table.catalog],
            identifier=table.identifier,
        )
    return OpenedTable(config=table, table=fmt, store=StatsStore(config.state_dir, fmt.table_id))
