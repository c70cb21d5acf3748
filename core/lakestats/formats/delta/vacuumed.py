"""Data files that VACUUM deleted while the log still lists the versions that added them.

Delta keeps commits (``delta.logRetentionDuration``, 30 days by default) longer than
removed data files (``delta.deletedFileRetentionDuration``, 7 days): VACUUM deletes a
removed file while the commits that added it are still in the log. Those versions cannot
be read any more (Delta's own time travel to them fails too), so their files cannot be
sketched. Following the log from an older version would read them: ``files_to_read``
finds the files a replay would read although the newest version no longer lists them,
the table checks which of those still exist, and ``readable_from`` says where a replay
must start instead. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from lakestats.formats.delta.dv import DvDescriptor, relative_dv_path
from lakestats.formats.delta.replay import CommitLog, FileKey


def files_to_read(
    start: Mapping[FileKey, Mapping[str, Any]], commits: Iterable[CommitLog]
) -> dict[str, int]:
    """Files a replay from a state holding ``start`` (files it reads, e.g. a baseline's)
    through ``commits`` reads although the last commit no longer lists them — data files
    and deletion vector files — by their path as the log writes it (table-relative or a
    URI) → the newest version that removed them."""
    live: dict[FileKey, tuple[str, ...]] = {key: _files_of(add) for key, add in start.items()}
    removed_at: dict[str, int] = {}
    for log in commits:
        added, removed = log.net_changes()
        for key in removed:
            for path in live.pop(key, ()):
                removed_at[path] = log.version
        live.update({key: _files_of(add) for key, add in added.items()})
    # a file re-added with another deletion vector is still listed under its path
    still_listed = {unquote(path) for files in live.values() for path in files}
    return {path: v for path, v in removed_at.items() if unquote(path) not in still_listed}


def _files_of(add: Mapping[str, Any]) -> tuple[str, ...]:
    """The data file of an ``add`` and its deletion vector's file, if it has one."""
    raw = add.get("deletionVector")
    if not raw:
        return (str(add.get("path")),)
    descriptor = DvDescriptor.parse(raw)
    try:
        if descriptor.storage_type == "u":
            return (str(add.get("path")), relative_dv_path(descriptor.path_or_inline))
    except ValueError:
        pass  # a malformed descriptor: reading the vector says so, in one line
    if descriptor.storage_type == "p":
        return (str(add.get("path")), descriptor.path_or_inline)
    return (str(add.get("path")),)  # inline: in the log itself


def readable_from(removed_at: Mapping[str, int], missing: Collection[str]) -> int | None:
    """The first version whose replay reads none of the ``missing`` files (the newest
    version that removed one of them), or ``None`` when nothing is missing."""
    return max((removed_at[path] for path in missing), default=None)
