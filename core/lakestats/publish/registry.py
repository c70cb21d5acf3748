"""Which publisher a table gets, keyed by its format name.

Entries are lazy (``"module:factory"``): a format's publisher module, and whatever it
imports, loads only when a table of that format publishes. A factory takes the opened
table and returns a ``Publisher``, or ``Unpublishable`` with the
reason when this table cannot publish (e.g. an Iceberg table opened by location). Adding
a format's publisher is one entry here and one package under ``publish/``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import cast

from lakestats.publish.base import Publisher, Unpublishable
from lakestats.publish.null import NullPublisher
from lakestats.tables import OpenedTable

PublisherFactory = Callable[[OpenedTable], Publisher | Unpublishable]

# format name → "module:factory"
PUBLISHERS: Mapping[str, str] = {
    "iceberg": "lakestats.publish.iceberg:open_publisher",
    "paimon": "lakestats.publish.paimon:open_publisher",
    "delta": "lakestats.publish.delta:open_publisher",
}

PUBLISH_OFF = "publishing is off for this table (publish = false)"


def publisher_for(opened: OpenedTable) -> Publisher:
    """The table's publisher: its format's, or a ``NullPublisher`` saying why there is
    none (see ``publish/null.py``). Cheap (no I/O), so ``show`` calls it just to
    ``describe`` where a snapshot's stats went. Sketch settings are not an argument:
    every staged snapshot carries its own (``SnapshotStats.settings``)."""
    if not opened.config.publish:
        return _null(opened, Unpublishable(PUBLISH_OFF, warn=False))
    format_name = opened.table.format_name
    target = PUBLISHERS.get(format_name)
    if target is None:
        return _null(opened, Unpublishable(f"no metadata publisher for {format_name} tables"))
    made = _factory(target)(opened)
    return _null(opened, made) if isinstance(made, Unpublishable) else made


def _factory(target: str) -> PublisherFactory:
    module, _, name = target.partition(":")
    return cast(PublisherFactory, getattr(importlib.import_module(module), name))


def _null(opened: OpenedTable, why: Unpublishable) -> NullPublisher:
    return NullPublisher(opened.name, opened.table.table_id, why.reason, warn=why.warn)
