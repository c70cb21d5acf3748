"""Naming a table: what a user typed (a configured name, a location, a config entry) → an
opened table with its stats store.

The vocabulary, used the same way everywhere: a *table name* is the configured name (or the
last path segment of a location); a ``TableConfig`` is a configured entry; a
``TableFormat`` is the format adapter reading the table's metadata; an ``OpenedTable`` is
the three together with the table's ``StatsStore``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lakestats.config import Config, TableConfig, load_config
from lakestats.exceptions import TableNotFoundError
from lakestats.formats.base import TableFormat
from lakestats.formats.registry import open_table as open_format
from lakestats.locations import LocationMap, looks_like_location
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


TableLike = str | TableConfig | OpenedTable
"""How library callers name a table: a configured name or a location (``str``), a config
entry (``TableConfig``, e.g. ``catalog`` + ``identifier``), or an already opened table."""

ConfigLike = Config | str | os.PathLike[str] | None
"""A ``Config``, the path of a TOML config file, or ``None`` (defaults plus environment)."""


def as_config(config: ConfigLike) -> Config:
    if isinstance(config, Config):
        return config
    return load_config(None if config is None else Path(config))


def open_table(table: TableLike, config: ConfigLike = None) -> OpenedTable:
    """Open a table however it is named (see ``TableLike``)."""
    if isinstance(table, OpenedTable):
        return table
    resolved = as_config(config)
    if isinstance(table, str):
        table = resolve_table(table, resolved)
    return open_configured(table, resolved)


def resolve_table(arg: str, config: Config) -> TableConfig:
    """A configured table name wins; otherwise ``arg`` must be a table location path."""
    configured = config.find_table(arg)
    if configured is not None:
        return configured
    if not looks_like_location(arg):
        known = ", ".join(t.name for t in config.table) or "none configured"
        raise TableNotFoundError(
            f"{arg!r} is neither a configured table name ({known}) nor a table path"
        )
    location = arg if "://" in arg else str(Path(arg).resolve())
    name = Path(location.rstrip("/")).name or "table"
    return TableConfig(name=_safe(name), location=location)


def _safe(name: str) -> str:
    """A folder's name as a table name (``config``'s rule: ASCII letters, digits, ``_.-``,
    at most 128 characters): anything else becomes ``_``."""
    cleaned = "".join(c if (c.isascii() and c.isalnum()) or c in "_.-" else "_" for c in name)
    named = cleaned if cleaned[:1].isascii() and cleaned[:1].isalnum() else f"t{cleaned}"
    return named[:128]


def open_configured(table: TableConfig, config: Config) -> OpenedTable:
    """Open the table's metadata and its stats store (keyed by the table's stable id and,
    for copies of a table, its location: ``store.store_folder``)."""
    location_map = LocationMap.of(table.location_map)
    if table.location is not None:
        fmt = open_format(table.location, format=table.format, location_map=location_map)
    else:
        assert table.catalog is not None and table.identifier is not None  # validated config
        fmt = open_format(
            catalog=table.catalog,
            catalog_properties=config.catalog[table.catalog],
            identifier=table.identifier,
            format=table.format,
            location_map=location_map,
        )
    merge_keys = getattr(fmt, "set_key_merge", None)  # Paimon primary-key tables
    if merge_keys is not None:
        merge_keys(table.key_merge == "apply")
    store = StatsStore.for_table(config.state_dir, fmt.table_id, fmt.location)
    return OpenedTable(config=table, table=fmt, store=store)
