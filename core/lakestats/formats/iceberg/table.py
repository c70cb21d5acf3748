"""The Iceberg table format, read through pyiceberg: ``IcebergTable``, one opened table.

Only metadata is read (metadata.json, manifest lists, manifests), never data files. Errors
from pyiceberg, pydantic, Avro decoding and the filesystem are turned into
``MetadataError``/``TableNotFoundError`` with one line naming the file, at the edge
(``opening``, ``manifests``, and here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import structlog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import StaticTable, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from lakestats.exceptions import (
    ExpiryError,
    LineageError,
    MetadataError,
    SnapshotNotFoundError,
    first_line,
)
from lakestats.formats.base import read_commit
from lakestats.formats.iceberg.commits import (
    baseline_commit,
    inherits_files,
    lineage,
    live_files_of,
    relisted_commit,
    retypes,
    snapshot_commit,
)
from lakestats.formats.iceberg.deletes import TargetCache, baseline_with_deletes, with_deletes
from lakestats.formats.iceberg.files import FileConverter, table_schema
from lakestats.formats.iceberg.manifests import ManifestReader
from lakestats.locations import LocationMap, same_location
from lakestats.model import Commit, DataFile, SnapshotInfo, TableSchema

FORMAT_NAME = "iceberg"

_log = structlog.get_logger(__name__)


class IcebergTable:
    """An Iceberg table opened by location or through a catalog (``TableFormat``).

    Not a snapshot of the table: ``refresh()`` moves it to the newest metadata. Manifests
    read are cached for the life of the object (see ``ManifestReader``).
    """

    def __init__(
        self,
        load: Callable[[Table | None], Table],
        description: str,
        *,
        opened_at: str | None = None,
        location_map: LocationMap | None = None,
    ) -> None:
        self._load = load
        self._description = description
        self._opened_at = opened_at  # the location it was opened by (not by a catalog)
        self._location_map = location_map or LocationMap()
        self._lock = threading.Lock()
        self._table = load(None)
        self._reader = ManifestReader(self._table.io)
        self._reader.misplaced = self._misplaced(self._table)
        self._converter = FileConverter(self._table.metadata)
        self._delete_targets = TargetCache()  # delete files are immutable: kept across refreshes

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
                self._reader.misplaced = self._misplaced(table)
                self._converter = FileConverter(table.metadata)

    def _misplaced(self, table: Table) -> str | None:
        """How to read a table whose metadata places it elsewhere than where it was opened
        (copied from another cluster, restored) when no location mapping covers that: a
        file it names cannot be read, and the error says so after this."""
        written = table.metadata.location
        if self._opened_at is None or same_location(
            self._location_map.apply(written), self._opened_at
        ):
            return None
        return (
            f"the table's metadata places it at {written}, not at {self._opened_at} where "
            f"it was opened (a copy?): map the one to the other (--map-location "
            f"{written}={self._opened_at}, or location_map in its [[table]] entry)"
        )

    # --- snapshots and schemas ------------------------------------------------------------

    def current_snapshot_id(self) -> int | None:
        snapshot = self._metadata.current_snapshot()
        return snapshot.snapshot_id if snapshot is not None else None

    def keeps_listed_files(self) -> bool:
        """``KeepsListedFiles``: expiry deletes a file with the last snapshot listing it."""
        return True

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
        for attempt in range(2):
            present = {s.snapshot_id for s in table.metadata.snapshots}
            wanted = [s for s in snapshot_ids if s in present]
            if not wanted:
                break
            try:
                table.maintenance.expire_snapshots().by_ids(wanted).commit()
                break
            except (CommitFailedException, ValueError) as exc:
                if attempt:
                    raise ExpiryError(
                        f"table {self._description}: snapshot expiry failed: {first_line(exc)}"
                    ) from exc
            # another process committed meanwhile — its own expiry of some of these (a
            # `lakestats expire` beside the daemon's schedule), or a writer: once more on
            # the table as it is now, without what is gone already
            self.refresh()
            table = self._table
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
        chain, reached, history_cut = lineage(metadata, after_snapshot_id)
        if after_snapshot_id is not None and not reached:
            current = metadata.current_snapshot()
            raise LineageError(
                f"snapshot {after_snapshot_id} is not an ancestor of the current snapshot "
                f"{current.snapshot_id if current else None} of table {self._description} "
                "(rolled back, replaced, or expired)"
            )
        unreadable = _newest_unreadable_history(chain, reader)
        if unreadable is not None:
            index, error = unreadable
            _log.warning(
                "history_unreadable",
                table=self._description,
                snapshot_id=chain[index].snapshot_id,
                manifest_list=chain[index].manifest_list,
                reason=str(error),
                baseline_snapshot_id=chain[index + 1].snapshot_id,
            )
            if after_snapshot_id is not None:
                # the changes of that snapshot are unknowable: the caller starts over
                raise LineageError(
                    f"table {self._description}: {error}; starting over from a baseline at "
                    f"snapshot {chain[index + 1].snapshot_id}"
                )
            chain, history_cut = chain[index + 1 :], True
        if chain and not reached and not history_cut:
            history_cut = inherits_files(chain[0], reader)
        commits: list[Commit] = []
        # each snapshot's parent: the one before it in the chain (no search of the
        # metadata's snapshot list per commit), the processed one for the first
        first = None if after_snapshot_id is None else metadata.snapshot_by_id(after_snapshot_id)
        parents = [first, *chain[:-1]] if chain else []
        for index, (snapshot, parent) in enumerate(zip(chain, parents, strict=True)):
            targets = self._delete_targets
            with read_commit(f"snapshot {snapshot.snapshot_id}", commits):
                if index == 0 and history_cut:
                    commit = baseline_commit(snapshot, metadata, reader, converter)
                    commit = baseline_with_deletes(commit, snapshot, reader, converter, targets)
                elif parent is not None and retypes(snapshot, parent, metadata):
                    commit = relisted_commit(snapshot, parent, metadata, reader, converter)
                    commit = baseline_with_deletes(commit, snapshot, reader, converter, targets)
                else:
                    commit = snapshot_commit(snapshot, metadata, reader, converter)
                    commit = with_deletes(commit, snapshot, reader, converter, targets)
            commits.append(commit)
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
        data, deletes = live_files_of(snapshot, metadata, reader, converter)
        return (*data, *deletes)


def _newest_unreadable_history(
    chain: Sequence[Snapshot], reader: ManifestReader
) -> tuple[int, MetadataError] | None:
    """The newest snapshot before the current one whose manifest list cannot be read.

    Engines read only the current snapshot, so a historical manifest list that is missing
    or damaged (lost in a copy, removed by hand) does not make the table unreadable: the
    stats start from a baseline of the oldest readable snapshot after it, as with expired
    history. The current snapshot's own list must be readable (its error is raised).
    """
    for index in range(len(chain) - 2, -1, -1):
        try:
            reader.manifests(chain[index])
        except MetadataError as exc:
            return index, exc
    return None
