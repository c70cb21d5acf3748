"""Iceberg snapshots → ``lakestats.model.Commit``: the main-branch lineage and each
snapshot's added and removed files, read from its manifests.

Pure functions of one metadata version (and the manifests it names), so ``IcebergTable``
can hand them a consistent view while ``refresh()`` moves on.
"""

from __future__ import annotations

from pyiceberg.manifest import DataFileContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from lakestats.exceptions import MetadataError
from lakestats.formats.iceberg.files import FileConverter
from lakestats.formats.iceberg.manifests import ManifestReader
from lakestats.model import BASELINE_OPERATION, Commit, DataFile

# A snapshot summary is optional in format v1; "overwrite" promises least about the change.
_UNKNOWN_OPERATION = "overwrite"


def lineage(metadata: TableMetadata, after: int | None) -> tuple[list[Snapshot], bool, bool]:
    """Main-branch snapshots after ``after``, oldest first; whether ``after`` was reached;
    whether the walk stopped at a parent that is no longer in the metadata."""
    chain: list[Snapshot] = []
    seen: set[int] = set()
    snapshot = metadata.current_snapshot()
    while snapshot is not None:
        if snapshot.snapshot_id in seen:
            raise MetadataError(
                f"snapshot {snapshot.snapshot_id} is its own ancestor (corrupt parent ids)"
            )
        seen.add(snapshot.snapshot_id)
        if snapshot.snapshot_id == after:
            chain.reverse()
            return chain, True, False
        chain.append(snapshot)
        parent_id = snapshot.parent_snapshot_id
        if parent_id is None:
            break
        if parent_id == after:  # ``after`` may itself be expired: its id is all we need
            chain.reverse()
            return chain, True, False
        snapshot = metadata.snapshot_by_id(parent_id)
    chain.reverse()
    history_cut = bool(chain) and chain[0].parent_snapshot_id is not None
    return chain, False, history_cut


def inherits_files(root: Snapshot, reader: ManifestReader) -> bool:
    """Whether a snapshot without parent still lists files of earlier snapshots.

    pyiceberg's snapshot expiry clears the parent id of the oldest remaining snapshot
    (Java keeps it), so a missing parent alone does not reveal expired history; files the
    snapshot did not add do.
    """
    for manifest in reader.manifests(root):
        if manifest.added_snapshot_id not in (None, root.snapshot_id):
            return True
        if manifest.existing_files_count:
            return True
        if manifest.existing_files_count is None and any(
            e.status == ManifestEntryStatus.EXISTING for e in reader.entries(manifest)
        ):
            return True
    return False


def _operation(snapshot: Snapshot) -> str:
    if snapshot.summary is None:
        return _UNKNOWN_OPERATION
    return str(snapshot.summary.operation.value)


def _schema_id(snapshot: Snapshot, metadata: TableMetadata) -> int:
    return snapshot.schema_id if snapshot.schema_id is not None else metadata.current_schema_id


def snapshot_commit(
    snapshot: Snapshot, metadata: TableMetadata, reader: ManifestReader, conv: FileConverter
) -> Commit:
    """The files one snapshot added and removed.

    Entries with status ADDED or DELETED carry the id of the snapshot that wrote them, and
    only that snapshot's own manifests can hold them (later snapshots rewrite them as
    EXISTING or drop them), so manifests added by other snapshots are skipped unread.
    """
    snapshot_id = snapshot.snapshot_id
    schema_id = _schema_id(snapshot, metadata)
    added: list[DataFile] = []
    removed: list[DataFile] = []
    added_deletes: list[DataFile] = []
    removed_deletes: list[DataFile] = []
    for manifest in reader.manifests(snapshot):
        if manifest.added_snapshot_id not in (None, snapshot_id):
            continue
        for entry in reader.entries(manifest):
            if entry.snapshot_id != snapshot_id:
                continue
            is_data = entry.data_file.content == DataFileContent.DATA
            if entry.status == ManifestEntryStatus.ADDED:
                converted = conv.convert(entry.data_file, schema_id)
                (added if is_data else added_deletes).append(converted)
            elif entry.status == ManifestEntryStatus.DELETED:
                writer = conv.writer_schema_id(None, entry.file_sequence_number, schema_id)
                converted = conv.convert(entry.data_file, writer)
                (removed if is_data else removed_deletes).append(converted)
    return Commit(
        snapshot_id=snapshot_id,
        parent_id=snapshot.parent_snapshot_id,
        sequence_number=snapshot.sequence_number or 0,
        timestamp_ms=snapshot.timestamp_ms,
        operation=_operation(snapshot),
        schema_id=schema_id,
        added_files=tuple(added),
        removed_files=tuple(removed),
        added_delete_files=tuple(added_deletes),
        removed_delete_files=tuple(removed_deletes),
    )


def baseline_commit(
    snapshot: Snapshot, metadata: TableMetadata, reader: ManifestReader, conv: FileConverter
) -> Commit:
    data, deletes = live_files_of(snapshot, metadata, reader, conv)
    return Commit(
        snapshot_id=snapshot.snapshot_id,
        parent_id=snapshot.parent_snapshot_id,
        sequence_number=snapshot.sequence_number or 0,
        timestamp_ms=snapshot.timestamp_ms,
        operation=BASELINE_OPERATION,
        schema_id=_schema_id(snapshot, metadata),
        added_files=data,
        added_delete_files=deletes,
    )


def live_files_of(
    snapshot: Snapshot, metadata: TableMetadata, reader: ManifestReader, conv: FileConverter
) -> tuple[tuple[DataFile, ...], tuple[DataFile, ...]]:
    schema_id = _schema_id(snapshot, metadata)
    data: list[DataFile] = []
    deletes: list[DataFile] = []
    for manifest in reader.manifests(snapshot):
        for entry in reader.entries(manifest):
            if entry.status == ManifestEntryStatus.DELETED:
                continue
            converted = conv.convert(entry.data_file, _writer_schema(entry, conv, schema_id))
            is_data = entry.data_file.content == DataFileContent.DATA
            (data if is_data else deletes).append(converted)
    return tuple(data), tuple(deletes)


def _writer_schema(entry: ManifestEntry, conv: FileConverter, default: int) -> int:
    return conv.writer_schema_id(entry.snapshot_id, entry.file_sequence_number, default)
