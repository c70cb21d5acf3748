"""The state dir as a whole: its table folders, what each holds, and deleting one.

A folder outlives its table's configuration: a table moved or copied elsewhere is
analyzed into a folder of its own (``store.store_folder``) and one taken out of the
config keeps its stats. These are what ``lakestats status`` lists as unclaimed and
``lakestats forget`` deletes; which folders a configuration claims is ``lakestats.unclaimed``'s
business, not the store's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from lakestats.exceptions import LakestatsError
from lakestats.store import atomic, statelog
from lakestats.store.store import AGGREGATES_DIR, SEGMENTS_DIR, STATS_DIR, list_files


@dataclass(frozen=True)
class StoreFolder:
    """One folder under the state dir, as its newest state version describes it."""

    name: str
    files: int
    bytes: int
    newest_file_ms: int | None  # the newest modification time of any file in it
    # from the newest state version; all None when it has none (or it cannot be read)
    table_id: str | None = None
    location: str | None = None
    format: str | None = None
    last_snapshot_id: int | None = None
    # the configured name its newest stats document was written under
    table: str | None = None
    # why the newest state version could not be read (None: read, or there is none)
    unreadable: str | None = None
    # files outside the store's layout (``STORE_DIRS``): not lakestats' to delete
    foreign_files: int = 0
    foreign_example: str | None = None  # the first of them, to name in messages


# the folders a table's stats folder holds (docs/store-format.md, "Layout")
STORE_DIRS = frozenset({statelog.LOG_DIR, SEGMENTS_DIR, AGGREGATES_DIR, STATS_DIR})


def _is_foreign(rel: str) -> bool:
    head, sep, _ = rel.partition("/")
    return not (sep and head in STORE_DIRS)


def folder_names(state_dir: str | Path) -> list[str]:
    """The table folders under ``state_dir`` (sorted): every folder but hidden ones."""
    return [name for name in atomic.list_subdirs(state_dir) if not name.startswith(".")]


def check_folder_name(name: str) -> None:
    """A bare folder name under the state dir: no separators, not hidden, not ``..``."""
    if not atomic.is_plain_name(name):
        raise ValueError(
            f"{name!r} is not a stats folder name (a name that `lakestats status` lists, "
            "without a path)"
        )


def describe_folder(state_dir: str | Path, name: str) -> StoreFolder:
    """What ``state_dir/<name>/`` holds: its files and bytes, and its newest state's table."""
    check_folder_name(name)
    table_dir = atomic.join(atomic.root(state_dir), name)
    stats = atomic.stat_tree(table_dir)
    foreign = [rel for rel, _, _ in stats if _is_foreign(rel)]
    folder = StoreFolder(
        name=name,
        files=len(stats),
        bytes=sum(size for _, _, size in stats),
        newest_file_ms=max((mtime for _, mtime, _ in stats), default=None),
        foreign_files=len(foreign),
        foreign_example=min(foreign, default=None),
    )
    try:
        state = statelog.latest_version(table_dir)
        if state is None:
            return folder
        last = state.last_snapshot_id
        table = _stats_table_name(table_dir, None if last is None else state.stats.get(last))
    except (LakestatsError, OSError, ValueError) as exc:
        return replace(folder, unreadable=str(exc))
    return replace(
        folder,
        table_id=state.table_id,
        location=state.location,
        format=state.format,
        last_snapshot_id=state.last_snapshot_id,
        table=table,
    )


def _stats_table_name(table_dir: atomic.StorePath, rel: str | None) -> str | None:
    if rel is None:
        return None
    try:
        doc = json.loads(atomic.read_bytes(atomic.join(table_dir, *rel.split("/"))))
    except (OSError, ValueError):
        return None
    name = doc.get("table") if isinstance(doc, dict) else None
    return name if isinstance(name, str) else None


def folder_files(state_dir: str | Path, name: str) -> list[str]:
    """Every file of ``state_dir/<name>/`` in the order ``delete_folder`` deletes them:
    state versions oldest first (the log stays a log while it shrinks, as cleanup keeps
    it), then the rest — so a deletion stopped half-way leaves a newest version whose
    files are all there, or no version at all."""
    check_folder_name(name)
    table_dir = atomic.join(atomic.root(state_dir), name)
    versions = [
        f"{statelog.LOG_DIR}/{statelog.version_file_name(v)}"
        for v in statelog.list_versions(table_dir)
    ]
    return versions + list_files(table_dir)


def delete_folder(state_dir: str | Path, name: str, files: list[str]) -> int:
    """Delete ``files`` (``folder_files``' list) from ``state_dir/<name>/``, then the
    folder itself once empty. Returns how many were there."""
    check_folder_name(name)
    table_dir = atomic.join(atomic.root(state_dir), name)
    deleted = sum(atomic.remove(atomic.join(table_dir, *rel.split("/"))) for rel in files)
    atomic.remove_empty_dirs(table_dir)
    return deleted
