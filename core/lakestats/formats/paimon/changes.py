"""What one Paimon commit changed, in the model's terms: pure planning over manifest entries.

A data file is *visible* to readers unless the table uses deletion vectors and the file is
still in LSM level 0 (DV mode reads only compacted levels; level-0 files become visible
when compaction rewrites or upgrades them). A commit's delta entries are ADD/DELETE of
(partition, bucket, file name); a compaction that only moves a file between levels writes
DELETE + ADD of the same file, which is no change unless it makes the file visible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakestats.formats.paimon.entries import ADD, DELETE, ManifestEntry

FileKey = tuple[bytes, int, str]


@dataclass(frozen=True)
class FileChanges:
    """Visible data files a commit added and removed (the entries as listed)."""

    added: tuple[ManifestEntry, ...] = ()
    removed: tuple[ManifestEntry, ...] = ()


def is_visible(entry: ManifestEntry, *, deletion_vectors: bool) -> bool:
    return not deletion_vectors or entry.level > 0


def merge_entries(entries: Iterable[ManifestEntry]) -> dict[FileKey, ManifestEntry]:
    """The live files after applying ADD/DELETE entries in order (a snapshot's base+delta)."""
    live: dict[FileKey, ManifestEntry] = {}
    for entry in entries:
        if entry.kind == DELETE:
            live.pop(entry.identifier, None)
        elif entry.kind == ADD:
            live[entry.identifier] = entry
    return live


def delta_changes(entries: Sequence[ManifestEntry], *, deletion_vectors: bool) -> FileChanges:
    """Visible files added and removed by a commit's delta entries."""
    deleted: dict[FileKey, ManifestEntry] = {}
    added: dict[FileKey, ManifestEntry] = {}
    for entry in entries:
        if entry.kind == DELETE:
            if entry.identifier in added:  # added and deleted in one commit: never visible
                del added[entry.identifier]
            else:
                deleted[entry.identifier] = entry
        elif entry.kind == ADD:
            added[entry.identifier] = entry
    gone, new = [], []
    for key, entry in deleted.items():
        replacement = added.get(key)
        was = is_visible(entry, deletion_vectors=deletion_vectors)
        now = replacement is not None and is_visible(replacement, deletion_vectors=deletion_vectors)
        if was and not now:
            gone.append(entry)
        elif now and not was and replacement is not None:
            new.append(replacement)
    new.extend(
        entry
        for key, entry in added.items()
        if key not in deleted and is_visible(entry, deletion_vectors=deletion_vectors)
    )
    return FileChanges(added=tuple(new), removed=tuple(gone))


def visible(
    live: Mapping[FileKey, ManifestEntry], *, deletion_vectors: bool
) -> list[ManifestEntry]:
    return [e for e in live.values() if is_visible(e, deletion_vectors=deletion_vectors)]
