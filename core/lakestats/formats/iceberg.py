"""The Iceberg table format, read through pyiceberg: snapshots, manifests, file metrics.

Only metadata is read (metadata.json, manifest lists, manifests), never data files. Errors
from pyiceberg, pydantic, Avro decoding and the filesystem are turned into
``MetadataError``/``TableNotFoundError`` with one line naming the file here, at the edge.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from pydantic import ValidationError
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.manifest import DataFileContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table import StaticTable, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from lakestats.exceptions import (
    ConfigError,
    ExpiryError,
    LineageError,
    MetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
    first_line,
)
from lakestats.formats.iceberg_files import FileConverter, table_schema
from lakestats.formats.iceberg_location import current_metadata_file, list_metadata_files
from lakestats.formats.iceberg_manifests import ManifestReader
from lakestats.locations import resolve_location
from lakestats.model import BASELINE_OPERATION, Commit, DataFile, SnapshotInfo, TableSchema

FORMAT_NAME = "iceberg"
# A snapshot summary is optional in format v1; "overwrite" promises least about the change.
_UNKNOWN_OPERATION = "overwrite"


class IcebergTable:
    """An Iceberg table opened by location or through a catalog (``TableFormat``).

    Not a snapshot of the table: ``refresh()`` moves it to the newest metadata. Manifests
    read are cached for the life of the object (see ``ManifestReader``).
    """

    def __init__(
        self, load: Callable[[Table | None], Table], description: str, cache_size: int = 256
    ) -> None:
        self._load = load
        self._description = description
        self._lock = threading.Lock()
        self._table = load(None)
        self._reader = ManifestReader(self._table.io, cache_size)
        self._converter = FileConverter(self._table.metadata)

    # --- identity -------------------------------------------------------------------------

    @property
    def format_name(self) -> str:
        return FORMAT_NAME

    @property
    def table_id(self) -> str:
        return str(self._metadata.table_uuid)

    @property
    def location(self) -> str:
        return self._metadata.location

    @property
    def metadata_location(self) -> str:
        """The metadata file the table was last loaded from."""
        return self._table.metadata_location

    @property
    def pyiceberg_table(self) -> Table:
        """The underlying pyiceberg table, for callers that need more than the Protocol."""
        return self._table

    @property
    def _metadata(self) -> TableMetadata:
        return self._table.metadata

    def __repr__(self) -> str:
        return f"IcebergTable({self._description!r})"

    def refresh(self) -> None:
        table = self._load(self._table)
        with self._lock:
            if table is not self._table:
                self._table = table
                self._reader.file_io = table.io
                self._converter = FileConverter(table.metadata)

    # --- snapshots and schemas ------------------------------------------------------------

    def current_snapshot_id(self) -> int | None:
        snapshot = self._metadata.current_snapshot()
        return snapshot.snapshot_id if snapshot is not None else None

    def snapshot_ids(self) -> frozenset[int]:
        return frozenset(s.snapshot_id for s in self._metadata.snapshots)

    def snapshot_infos(self) -> tuple[SnapshotInfo, ...]:
        """Every snapshot in the metadata, for expiry planning (``lakestats.expiry``)."""
        metadata = self._metadata
        heads = {ref.snapshot_id for ref in metadata.refs.values()}
        lineage: set[int] = set()
        snapshot = metadata.current_snapshot()
        while snapshot is not None and snapshot.snapshot_id not in lineage:
            lineage.add(snapshot.snapshot_id)
            parent = snapshot.parent_snapshot_id
            snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        return tuple(
            SnapshotInfo(
                snapshot_id=s.snapshot_id,
                timestamp_ms=s.timestamp_ms,
                in_main_lineage=s.snapshot_id in lineage,
                is_ref_head=s.snapshot_id in heads,
            )
            for s in metadata.snapshots
        )

    def expire_snapshots(self, snapshot_ids: Sequence[int]) -> None:
        """Expire snapshots with pyiceberg's own expiry (one metadata commit), then refresh.

        Called with no id, only checks that the table can commit (a misconfigured policy is
        reported at once, not when there first is something to expire).

        Only the metadata changes: files the expired snapshots alone referenced are left
        for the table's orphan-file cleanup, as pyiceberg does. A table opened by location
        is read-only (a ``StaticTable``): ``ExpiryError`` says to configure it by catalog.
        """
        table = self._table
        if isinstance(table, StaticTable):
            raise ExpiryError(
                f"table {self._description} was opened by location, which is read-only: "
                "managed snapshot expiry commits through the table's catalog, so configure "
                "the table with catalog + identifier (or expire with your engine; lakestats "
                "follows any expiry)"
            )
        if not snapshot_ids:
            return
        present = {s.snapshot_id for s in table.metadata.snapshots}
        wanted = [s for s in snapshot_ids if s in present]
        if wanted:
            try:
                table.maintenance.expire_snapshots().by_ids(wanted).commit()
            except (CommitFailedException, ValueError) as exc:
                raise ExpiryError(
                    f"table {self._description}: snapshot expiry failed: {first_line(exc)}"
                ) from exc
        self.refresh()

    def schema(self, schema_id: int | None = None) -> TableSchema:
        metadata = self._metadata
        wanted = metadata.current_schema_id if schema_id is None else schema_id
        schema = metadata.schema_by_id(wanted)
        if schema is None:
            raise MetadataError(f"table {self._description} has no schema with id {wanted}")
        return table_schema(schema)

    # --- commits and files ----------------------------------------------------------------

    def commits_since(self, after_snapshot_id: int | None) -> Sequence[Commit]:
        with self._lock:  # one consistent metadata version even if refresh() runs meanwhile
            metadata, reader, converter = self._metadata, self._reader, self._converter
        chain, reached, history_cut = _lineage(metadata, after_snapshot_id)
        if after_snapshot_id is not None and not reached:
            current = metadata.current_snapshot()
            raise LineageError(
                f"snapshot {after_snapshot_id} is not an ancestor of the current snapshot "
                f"{current.snapshot_id if current else None} of table {self._description} "
                "(rolled back, replaced, or expired)"
            )
        if chain and not reached and not history_cut:
            history_cut = _inherits_files(chain[0], reader)
        commits: list[Commit] = []
        for index, snapshot in enumerate(chain):
            if index == 0 and history_cut:
                commits.append(_baseline(snapshot, metadata, reader, converter))
            else:
                commits.append(_commit(snapshot, metadata, reader, converter))
        return commits

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        """Every live data and delete file; ``SnapshotNotFoundError`` if not in metadata."""
        with self._lock:
            metadata, reader, converter = self._metadata, self._reader, self._converter
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} is not in the metadata of table {self._description}"
            )
        data, deletes = _live(snapshot, metadata, reader, converter)
        return (*data, *deletes)


def _lineage(metadata: TableMetadata, after: int | None) -> tuple[list[Snapshot], bool, bool]:
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


def _inherits_files(root: Snapshot, reader: ManifestReader) -> bool:
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


def _commit(
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


def _baseline(
    snapshot: Snapshot, metadata: TableMetadata, reader: ManifestReader, conv: FileConverter
) -> Commit:
    data, deletes = _live(snapshot, metadata, reader, conv)
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


def _live(
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


# --- opening ------------------------------------------------------------------------------


def is_iceberg_location(path: str) -> bool:
    """Whether ``path`` holds ``metadata/*.metadata.json`` (never raises)."""
    try:
        return bool(list_metadata_files(resolve_location(path)))
    except (TableNotFoundError, OSError, ValueError):
        return False


def open_iceberg_location(path: str, *, cache_size: int = 256) -> IcebergTable:
    """Open a table from its location (local path, ``file://`` or filesystem URI).

    The current metadata file is the newest ``metadata/*.metadata.json`` (or the one
    ``version-hint.text`` names); ``refresh()`` looks again.
    """
    location = resolve_location(path)

    def load(previous: Table | None) -> Table:
        metadata_file = current_metadata_file(location)
        if previous is not None and previous.metadata_location == metadata_file:
            return previous
        return _load_static(metadata_file)

    return IcebergTable(load, location.uri, cache_size)


def open_iceberg_catalog(
    catalog_name: str,
    catalog_properties: Mapping[str, str],
    identifier: str,
    *,
    cache_size: int = 256,
) -> IcebergTable:
    """Open a table through a pyiceberg catalog; ``refresh()`` asks the catalog again."""
    try:
        catalog = load_catalog(catalog_name, **catalog_properties)
    except Exception as exc:
        # Each catalog backend (SQL, REST, Glue, Hive …) fails with its own client errors;
        # all of them mean the catalog settings do not lead to a working catalog.
        raise ConfigError(f"catalog {catalog_name!r} cannot be used: {first_line(exc)}") from exc
    description = f"{identifier} (catalog {catalog_name})"

    def load(previous: Table | None) -> Table:
        try:
            table = catalog.load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError) as exc:
            raise TableNotFoundError(f"table {description} does not exist") from exc
        except (ValidationError, IcebergValidationError) as exc:
            raise MetadataError(
                f"table {description}: current metadata file {_describe_invalid(exc)}"
            ) from exc
        except FileNotFoundError as exc:
            raise MetadataError(
                f"table {description}: metadata file {first_line(exc)} does not exist"
            ) from exc
        except Exception as exc:  # backend client errors, as above
            raise MetadataError(
                f"table {description} cannot be loaded ({type(exc).__name__}: {first_line(exc)})"
            ) from exc
        if previous is not None and previous.metadata_location == table.metadata_location:
            return previous
        return table

    return IcebergTable(load, description, cache_size)


def _load_static(metadata_file: str) -> Table:
    what = f"metadata file {metadata_file}"
    try:
        return StaticTable.from_metadata(metadata_file)
    except FileNotFoundError as exc:
        raise MetadataError(f"{what} does not exist (removed while reading?)") from exc
    except (ValidationError, IcebergValidationError) as exc:
        raise MetadataError(f"{what} {_describe_invalid(exc)}") from exc
    except UnicodeDecodeError as exc:
        raise MetadataError(f"{what} is not UTF-8 text (corrupt?)") from exc
    except (OSError, ValueError, EOFError) as exc:
        raise MetadataError(f"{what} is unreadable ({first_line(exc)})") from exc


def _describe_invalid(exc: ValidationError | IcebergValidationError) -> str:
    # pyiceberg wraps pydantic's error in its own, keeping the original as the cause
    cause = exc if isinstance(exc, ValidationError) else exc.__cause__
    if not isinstance(cause, ValidationError) or not cause.errors():
        return f"is not valid Iceberg table metadata ({first_line(exc)})"
    errors = cause.errors()
    if any(e["type"] == "json_invalid" for e in errors):
        return "is not valid JSON (truncated?)"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"is not valid Iceberg table metadata ({where}: {first['msg']})"
