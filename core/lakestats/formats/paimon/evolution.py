"""Paimon data evolution: files that hold some columns of rows another file holds.

On a table with ``data-evolution.enabled`` every data file has a first row id
(``_FIRST_ROW_ID``). An in-place update (pypaimon's ``update_by_arrow_with_row_id``, a
``MERGE INTO`` that sets columns) writes the updated columns (``_WRITE_COLS``) of a row
range as a file of their own, with the range's first row id and row count. Readers take a
partition-bucket's files with one first row id as one *row group*: each column from the
newest file (highest max sequence number) that writes it, the rows in the order every
file of the group holds them; a deletion vector belongs to the group's *anchor*, its
oldest file. Pure planning over manifest entries; ``PaimonTable`` lists a row group as one
data file (``model.ColumnFile`` names the files its other columns come from).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from lakestats.exceptions import MetadataError, UnsupportedTableError
from lakestats.formats.paimon.entries import DELETE, ManifestEntry

GroupKey = tuple[bytes, int, int]  # partition, bucket, first row id


def group_key(entry: ManifestEntry) -> GroupKey | None:
    if entry.first_row_id is None:
        return None
    return (entry.partition, entry.bucket, entry.first_row_id)


def special_file(file_name: str) -> bool:
    """Paimon's BLOB and vector column files: their row ranges are cut otherwise."""
    return file_name.endswith((".blob", ".video")) or ".vector." in file_name


@dataclass(frozen=True)
class RowGroup:
    """The files of one row range: ``anchor`` (the oldest) and which file holds each
    column (field id → file), the newest that writes it."""

    anchor: ManifestEntry
    owners: dict[int, ManifestEntry]

    @property
    def others(self) -> dict[str, tuple[ManifestEntry, tuple[int, ...]]]:
        """File name → (file, the field ids it holds) for each file but the anchor that
        holds any column."""
        held: dict[str, tuple[ManifestEntry, list[int]]] = {}
        for field_id, entry in sorted(self.owners.items()):
            if entry.file_name != self.anchor.file_name:
                held.setdefault(entry.file_name, (entry, []))[1].append(field_id)
        return {name: (entry, tuple(ids)) for name, (entry, ids) in held.items()}


def row_group(
    files: Sequence[ManifestEntry], field_ids_of: Callable[[ManifestEntry], Sequence[int]]
) -> RowGroup:
    """The row group of ``files`` (one group key); ``field_ids_of``: the columns a file
    writes. ``MetadataError`` for what readers would refuse or lakestats cannot read."""
    special = [f.file_name for f in files if special_file(f.file_name)]
    if special:
        raise UnsupportedTableError(
            f"data file {special[0]} is a Paimon BLOB or vector column file: lakestats "
            "cannot describe tables with such columns (docs/paimon.md)"
        )
    rows = {f.row_count for f in files}
    if len(rows) > 1:
        names = ", ".join(sorted(f.file_name for f in files))
        raise MetadataError(
            f"data files {names} share first row id {files[0].first_row_id} with "
            f"different row counts {sorted(rows)}: not one row range"
        )
    anchor = min(files, key=lambda f: (f.max_sequence_number, f.file_name))
    owners: dict[int, ManifestEntry] = {}
    for entry in sorted(files, key=lambda f: (-f.max_sequence_number, f.file_name)):
        for field_id in field_ids_of(entry):
            owners.setdefault(field_id, entry)
    return RowGroup(anchor, owners)


def by_group(entries: Iterable[ManifestEntry]) -> dict[GroupKey, list[ManifestEntry]]:
    """Entries with a first row id, by group key."""
    groups: dict[GroupKey, list[ManifestEntry]] = {}
    for entry in entries:
        key = group_key(entry)
        if key is not None:
            groups.setdefault(key, []).append(entry)
    return groups


def partial(entry: ManifestEntry, field_names: Sequence[str]) -> bool:
    """Whether the file writes only some of its schema's columns."""
    return entry.write_cols is not None and not set(field_names) <= set(entry.write_cols)


def changed_groups(
    delta: Iterable[ManifestEntry],
    partial_of: Callable[[ManifestEntry], bool],
    next_row_id: int | None,
) -> set[GroupKey]:
    """The row groups a commit's delta entries may change: those it removes a file from,
    or adds a file to of rows that existed before it (a first row id below the parent's
    ``next_row_id``, ``None``: unknown, any) or of some columns only. An append of new
    rows as whole files makes groups of its own."""

    def regroups(entry: ManifestEntry) -> bool:
        if entry.kind == DELETE or partial_of(entry):
            return True
        first = entry.first_row_id
        return next_row_id is None or (first is not None and first < next_row_id)

    return {key for entry in delta if (key := group_key(entry)) is not None and regroups(entry)}


def row_count(entries: Iterable[ManifestEntry]) -> int:
    """The rows of these live files, each row group's once (its files hold the same rows)."""
    groups: dict[GroupKey, int] = {}
    rows = 0
    for entry in entries:
        key = group_key(entry)
        if key is None:
            rows += entry.row_count
        else:
            groups[key] = entry.row_count
    return rows + sum(groups.values())
