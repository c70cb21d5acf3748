"""The Iceberg table format, read through pyiceberg (metadata only, never data files).

* ``opening`` — ``open_location`` (no catalog) and ``open_catalog`` (a pyiceberg catalog);
* ``table`` — ``IcebergTable``, the ``TableFormat`` (and ``SupportsSnapshotExpiry``);
* ``commits`` — the main-branch lineage and each snapshot's files as ``Commit`` s;
* ``files`` — manifest entries → ``DataFile`` (metrics, typed bounds, partition keys);
* ``manifests`` — validated, cached reading of manifest lists and manifests;
* ``metadata_files`` — the current ``*.metadata.json`` of a location without a catalog;
* ``mapped_io`` — a FileIO reading files where a ``LocationMap`` says they really are;
* ``testing`` — real tables in a temporary warehouse, for tests (``lakestats.testing``).

The registry (``formats/registry.py``) imports this package only when an Iceberg table is
opened, so pyiceberg stays out of processes that never open one.
"""

from lakestats.formats.iceberg.opening import (
    is_iceberg_location,
    open_iceberg_catalog,
    open_iceberg_location,
)
from lakestats.formats.iceberg.table import FORMAT_NAME, IcebergTable
from lakestats.formats.registry import watch_spec

# The names every format module exposes to the registry.
open_location = open_iceberg_location
open_catalog = open_iceberg_catalog
# What the daemon watches: kept in the registry entry, which answers without this package.
WATCH = watch_spec(FORMAT_NAME)

__all__ = [
    "FORMAT_NAME",
    "WATCH",
    "IcebergTable",
    "is_iceberg_location",
    "open_catalog",
    "open_iceberg_catalog",
    "open_iceberg_location",
    "open_location",
]
