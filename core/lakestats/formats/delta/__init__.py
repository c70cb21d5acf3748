"""The Delta Lake table format, read from the transaction log (metadata only).

* ``table`` — ``DeltaLakeTable``, the ``TableFormat`` (versions are snapshot ids);
* ``log`` — listing ``_delta_log/`` and reading commits and checkpoints (classic,
  multi-part, v2 with sidecars);
* ``replay`` — one commit's actions and the table state, Delta's set semantics (pure);
* ``schema`` — ``schemaString`` → ``TableSchema``, column mapping, stable field ids (pure);
* ``files`` — ``add`` actions → ``DataFile`` with the log's per-file stats (pure);
* ``dv`` — deletion vectors (inline, relative, absolute) → ``model.DeletionVector``.

The registry imports this package only when a Delta table is opened; its dependency
(``pyroaring``, for deletion vectors) comes with the ``delta`` extra.
"""

from lakestats.formats.delta.table import FORMAT_NAME, DeltaLakeTable
from lakestats.formats.registry import watch_spec
from lakestats.locations import LocationMap, resolve_location


def open_location(path: str, *, location_map: LocationMap | None = None) -> DeltaLakeTable:
    """Open the Delta table at ``path`` (local path, ``file://`` or filesystem URI)."""
    del location_map  # Delta paths are relative to the table: nothing to map
    return DeltaLakeTable(resolve_location(path))


WATCH = watch_spec(FORMAT_NAME)

__all__ = ["FORMAT_NAME", "WATCH", "DeltaLakeTable", "open_location"]
