"""The read side: stats documents of processed snapshots, and per-commit aggregates.

Reading is one small file per request whatever the table's size: the document was written
when the snapshot was processed (``publish/native.py``). Nothing here writes.
"""

from __future__ import annotations

from typing import Any

from lakestats.config import Config, TableConfig
from lakestats.exceptions import (
    LakestatsError,
    NotAnalyzedError,
    SnapshotNotFoundError,
    StoreError,
)
from lakestats.formats.base import HasDatalessVersions
from lakestats.maintenance import expired_meanwhile, missing_snapshot_message
from lakestats.publish.registry import publisher_for
from lakestats.store import StatsStore, atomic, statelog
from lakestats.store.folders import folder_names
from lakestats.tables import ConfigLike, TableLike, open_table

# the keys of a stats document (``publish/native.py``) every reader of one relies on
_STATS_DOC_KEYS: dict[str, type] = {
    "format": str,
    "snapshot_id": int,
    "record_count": int,
    "columns": dict,
    "partitions": list,
    "commit": dict,
}


def stats_document(store: StatsStore, rel: str) -> dict[str, Any]:
    """The stats document at ``rel``, ``StoreError`` when it is not one (a file damaged
    or written by something else): one error naming the file, not a ``KeyError`` in
    whichever reader first looks for a key."""
    doc = store.read_stats(rel)
    wrong = [key for key, kind in _STATS_DOC_KEYS.items() if not isinstance(doc.get(key), kind)]
    if wrong:
        raise StoreError(
            f"{store.path(rel)}: not a stats document: {', '.join(wrong)} missing or of "
            "the wrong type"
        )
    return doc


def read_stats(
    table: TableLike, snapshot_id: int | None = None, *, config: ConfigLike = None
) -> dict[str, Any]:
    """The stats document (the ``show --json`` contract) of the current or a given snapshot.

    ``table``/``config`` as for ``analyze_table``. ``SnapshotNotFoundError`` says why a
    snapshot has none (never analyzed, expired, unknown).
    """
    opened = open_table(table, config)
    state = opened.store.current()
    if state is None or state.last_snapshot_id is None:
        if opened.table.current_snapshot_id() is None:
            # analyze would change nothing: say why there is nothing to show
            raise SnapshotNotFoundError(
                f"table {opened.name} has no commits yet: there are no stats to show"
            )
        raise NotAnalyzedError(
            f"no stats for table {opened.name} yet: run `lakestats analyze {opened.name}`"
        )
    wanted = state.last_snapshot_id if snapshot_id is None else snapshot_id
    path = state.stats.get(wanted)
    if path is None and isinstance(opened.table, HasDatalessVersions):
        # a version that changed no data file holds the data of the one before it
        data_version = opened.table.data_version_of(wanted)
        if data_version is not None and data_version in state.stats:
            wanted, path = data_version, state.stats[data_version]
    if path is None or (snapshot_id is not None and expired_meanwhile(opened, state, wanted)):
        raise SnapshotNotFoundError(missing_snapshot_message(opened, state, wanted))
    doc = stats_document(opened.store, path)
    doc["table"] = opened.name
    doc["published"] = publisher_for(opened).describe(wanted, state.published)
    return doc


def list_commit_docs(table: TableLike, *, config: ConfigLike = None) -> list[dict[str, Any]]:
    """The per-commit (manifest-level) aggregates of every processed snapshot still in the
    state, oldest first (by sequence number)."""
    opened = open_table(table, config)
    state = opened.store.current()
    if state is None:
        return []
    docs = [stats_document(opened.store, p)["commit"] for p in state.stats.values()]
    return sorted(docs, key=lambda d: (d["sequence_number"], d["timestamp_ms"]))


def read_last_stats(
    table: TableConfig, config: Config, *, folder: str | None = None
) -> tuple[dict[str, Any], str]:
    """The newest stats document of a table that cannot be opened right now (its metadata
    is unreadable or corrupt): ``(document, store folder)``, read from the store alone.

    The store is named by the table's id (and location), which live in the metadata that
    cannot be read, so it is ``folder`` when the caller knows it, else the folder under
    ``state_dir`` whose newest document names this table. ``SnapshotNotFoundError`` when
    there is none.
    """
    candidates = [folder] if folder else folder_names(config.state_dir)
    best: tuple[int, dict[str, Any], str] | None = None
    for candidate in candidates:
        try:
            state = statelog.latest_version(atomic.join(atomic.root(config.state_dir), candidate))
            if state is None or state.last_snapshot_id is None:
                continue
            store = StatsStore(config.state_dir, state.table_id, folder=candidate)
            doc = stats_document(store, state.stats[state.last_snapshot_id])
        except (LakestatsError, OSError, ValueError, KeyError):
            continue
        if doc.get("table") == table.name and (best is None or state.created_at_ms > best[0]):
            best = (state.created_at_ms, doc, candidate)
    if best is None:
        raise SnapshotNotFoundError(f"no stats stored for table {table.name}")
    return best[1], best[2]
