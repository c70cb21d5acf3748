"""Iceberg snapshots → ``lakestats.model.Commit``: the main-branch lineage and each
snapshot's added and removed files, read from its manifests.

Pure functions of one metadata version (and the manifests it names), so ``IcebergTable``
can hand them a consistent view while ``refresh()`` moves on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from lakestats.exceptions import MetadataError
from lakestats.formats.iceberg.files import FileConverter, table_schema
from lakestats.formats.iceberg.manifests import ManifestReader
from lakestats.model import BASELINE_OPERATION, Commit, DataFile, FileContent

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
    if _may_dangle(added_deletes, removed, removed_deletes) and (
        removed_deletes or _has_deletes(snapshot, reader)
    ):
        added_deletes, removed_deletes = _without_dangling(
            snapshot,
            metadata,
            reader,
            conv,
            added_deletes=added_deletes,
            removed=removed,
            removed_deletes=removed_deletes,
        )
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


def retypes(snapshot: Snapshot, parent: Snapshot, metadata: TableMetadata) -> bool:
    """Whether ``snapshot`` is the first under a schema that changed a column's type since
    its ``parent`` (a promotion: int → long, float → double, a decimal's precision): the
    files written before hold sketches hashed as values of the old type (an int's 4 bytes,
    a long's 8), which would count a value written both before and after twice."""
    before, after = _schema_id(parent, metadata), _schema_id(snapshot, metadata)
    if before == after:
        return False
    old, new = metadata.schema_by_id(before), metadata.schema_by_id(after)
    if old is None or new is None:
        return False
    return table_schema(new).retypes(table_schema(old))


def relisted_commit(
    snapshot: Snapshot,
    parent: Snapshot,
    metadata: TableMetadata,
    reader: ManifestReader,
    conv: FileConverter,
) -> Commit:
    """The first snapshot under a changed column type (``retypes``) as every live file
    listed again: removed as the parent had it, added as it is now, so the files written
    before are sketched again as values of the new type (Paimon does the same). The deletes
    of the added files are the caller's to attach (``deletes.baseline_with_deletes``)."""
    data, deletes = live_files_of(parent, metadata, reader, conv)
    return replace(
        baseline_commit(snapshot, metadata, reader, conv),
        operation=_operation(snapshot),
        removed_files=data,
        removed_delete_files=deletes,
    )


def live_files_of(
    snapshot: Snapshot, metadata: TableMetadata, reader: ManifestReader, conv: FileConverter
) -> tuple[tuple[DataFile, ...], tuple[DataFile, ...]]:
    schema_id = _schema_id(snapshot, metadata)
    data: list[DataFile] = []
    deletes: list[DataFile] = []
    for manifest in reader.manifests(snapshot):
        # where the adding snapshot is gone (expired), the schema the manifest was written
        # with: its files were written with no later one, so a column added since is absent
        # from them (all null), not of unknown stats
        written = reader.written_schema_id(manifest)
        default = written if written is not None and conv.knows_schema(written) else schema_id
        for entry in reader.entries(manifest):
            if entry.status == ManifestEntryStatus.DELETED:
                continue
            converted = conv.convert(entry.data_file, _writer_schema(entry, conv, default))
            is_data = entry.data_file.content == DataFileContent.DATA
            (data if is_data else deletes).append(converted)
    key = _path_key(reader)
    live = {key(f.path) for f in data}
    return tuple(data), tuple(d for d in deletes if _applies(d, live, key))


# --- position deletes that apply to nothing ------------------------------------------------
#
# A position delete file names the data files it deletes from. When none of them is live
# (Spark's rewrite_data_files rewrites a data file and leaves its delete file behind), the
# delete applies to nothing and every engine counts the rows of the new file in full; the
# stats must not subtract it. Here such a delete file leaves the stats when it stops
# applying: it is not added when it is born dangling, it is removed by the commit that
# removes its data file, and its later physical removal is then not a removal again.
# Only delete files that name one data file (referenced_data_file, equal file_path bounds)
# can be judged from metadata; the others are kept.


def _may_dangle(
    added_deletes: list[DataFile], removed: list[DataFile], removed_deletes: list[DataFile]
) -> bool:
    return any(d.referenced_path is not None for d in (*added_deletes, *removed_deletes)) or bool(
        removed
    )


def _has_deletes(snapshot: Snapshot, reader: ManifestReader) -> bool:
    """Whether the snapshot lists delete files at all (its manifest list says, cheaply):
    tables without row-level deletes never pay for the checks below."""
    return any(m.content == ManifestContent.DELETES for m in reader.manifests(snapshot))


def _path_key(reader: ManifestReader) -> Callable[[str], str]:
    """Paths compared where the files really are (a table may spell one place two ways)."""
    mapping = getattr(reader.file_io, "mapping", None)
    return mapping.apply if mapping else (lambda path: path)


def _applies(delete_file: DataFile, live_data: set[str], key: Callable[[str], str]) -> bool:
    if delete_file.content is not FileContent.POSITION_DELETES:
        return True
    target = delete_file.referenced_path
    return target is None or key(target) in live_data


def _without_dangling(
    snapshot: Snapshot,
    metadata: TableMetadata,
    reader: ManifestReader,
    conv: FileConverter,
    *,
    added_deletes: list[DataFile],
    removed: list[DataFile],
    removed_deletes: list[DataFile],
) -> tuple[list[DataFile], list[DataFile]]:
    key = _path_key(reader)
    live_now = {
        key(e.data_file.file_path) for e in reader.live_entries(snapshot, ManifestContent.DATA)
    }
    parent = (
        metadata.snapshot_by_id(snapshot.parent_snapshot_id)
        if snapshot.parent_snapshot_id is not None
        else None
    )
    live_before: set[str] = set()
    if parent is not None:
        live_before = {
            key(e.data_file.file_path) for e in reader.live_entries(parent, ManifestContent.DATA)
        }
    # born dangling: never enters the stats
    added = [d for d in added_deletes if _applies(d, live_now, key)]
    # already out of the stats (dangling before this commit): not removed a second time
    removed_out = [d for d in removed_deletes if _applies(d, live_before, key)]
    # made dangling by this commit's removal of their data file
    gone = {key(f.path) for f in removed} - live_now
    if gone and parent is not None:
        already = {d.path for d in removed_out}
        schema_id = (
            snapshot.schema_id if snapshot.schema_id is not None else metadata.current_schema_id
        )
        for entry in reader.live_entries(parent, ManifestContent.DELETES):
            converted = conv.convert(entry.data_file, _writer_schema(entry, conv, schema_id))
            target = converted.referenced_path
            if (
                converted.content is FileContent.POSITION_DELETES
                and target is not None
                and key(target) in gone
                and converted.path not in already
            ):
                removed_out.append(converted)
    return added, removed_out


def _writer_schema(entry: ManifestEntry, conv: FileConverter, default: int) -> int:
    return conv.writer_schema_id(entry.snapshot_id, entry.file_sequence_number, default)
