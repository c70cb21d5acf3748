"""The Iceberg publisher: stats files written next to the table metadata, one catalog commit.

For every processed snapshot S of a table opened through its catalog:

* a Puffin *table statistics* file with one ``apache-datasketches-theta-v1`` blob per
  column whose NDV sketch covers every file (``theta.py``), registered for S with a
  ``set-statistics`` update;
* a *partition statistics* file (``partition_stats.py``), computed incrementally from the
  parent snapshot's file plus the commit's added and removed files, registered with
  ``set-partition-statistics``.

Files are written next to the table's metadata (``lakestats-<snapshot>-o<owner>-<uuid>.stats`` /
``.parquet``) so engines and Iceberg's own orphan-file cleanup treat them as table
metadata. Registrations of a batch of commits go into one catalog commit that requires
only the table's uuid: the catalog applies them to its newest metadata, so a writer's
concurrent commit is never lost (a conflict is retried with backoff). A snapshot that no
longer exists gets nothing, and an entry that a concurrent expiry left dangling is removed
in a follow-up commit (``registration.py``). Files of ours that the table metadata does
not reference (a run killed between writing and registering them) are deleted by ``sweep``
once older than the grace period. See docs/publishing.md.
"""

from __future__ import annotations

import posixpath
import random
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import structlog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, RESTError
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import StaticTable, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.statistics import BlobMetadata, PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import AssertTableUUID

from lakestats.exceptions import LakestatsError, PublishError, first_line
from lakestats.formats.iceberg import IcebergTable
from lakestats.model import Commit
from lakestats.publish.base import Publisher, SnapshotStats, Unpublishable
from lakestats.publish.iceberg import registration as reg
from lakestats.publish.iceberg.partition_stats import (
    Rows,
    UnifiedPartitionType,
    full_rows,
    incremental_rows,
    rows_from_parquet,
    rows_to_parquet,
    unified_partition_type,
)
from lakestats.publish.iceberg.puffin import SPEC_BLOB_TYPES, PuffinBytes, write_puffin
from lakestats.publish.iceberg.registration import FILE_PREFIX, PUBLISHED_KEY, Staged, is_ours
from lakestats.publish.iceberg.theta import theta_blobs
from lakestats.tables import OpenedTable

_T = TypeVar("_T")
_log = structlog.get_logger(__name__)

STATS_SUFFIX = ".stats"
PARTITION_STATS_SUFFIX = "-partition-stats.parquet"
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_BACKOFF_S = 0.05
MAX_BACKOFF_S = 5.0


class IcebergPublisher:
    """Writes and registers the stats of processed snapshots of one catalog table.

    ``stage`` writes a snapshot's files (no catalog call); ``flush`` registers everything
    staged in one catalog commit, removes entries of expired snapshots, deletes the files
    nothing references any more, and returns the new bookkeeping for
    ``StateVersion.published``.
    """

    key = PUBLISHED_KEY

    def __init__(
        self,
        table: IcebergTable,
        *,
        owner: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_s: float = DEFAULT_BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = table
        self._owner = owner  # tags the files this store writes (registration.owner_tag)
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._sleep = sleep
        self._pending: list[Staged] = []
        self._last_rows: tuple[int, Rows] | None = None  # the newest staged partition stats
        self._registered: tuple[TableMetadata, set[int]] | None = None  # per metadata object

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        # a dropped table or a failing REST catalog is a broken target like an I/O error
        return (
            LakestatsError,
            OSError,
            CommitFailedException,
            NoSuchTableError,
            RESTError,
            pa.ArrowException,
        )

    @property
    def _pyiceberg(self) -> Table:
        return self._table.pyiceberg_table

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        if any(s.snapshot_id == snapshot_id for s in self._pending):
            return True
        if str(snapshot_id) in reg.records(published):
            return True
        # registered by a run killed before it recorded that: the next flush adopts it
        metadata = self._pyiceberg.metadata
        if self._registered is None or self._registered[0] is not metadata:
            self._registered = (metadata, reg.registered_snapshots(metadata))
        return snapshot_id in self._registered[1]

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        entry = reg.records(published).get(str(snapshot_id))
        if entry is None:
            return ["not in table metadata yet (registered by the next analyze)"]
        lines = []
        if "statistics" in entry:
            lines.append(f"iceberg statistics (Puffin, theta NDV): {entry['statistics']}")
        if "partition_statistics" in entry:
            lines.append(f"iceberg partition-statistics: {entry['partition_statistics']}")
        return lines or ["nothing to register in table metadata (no sketches, unpartitioned)"]

    # -- writing files ---------------------------------------------------------------------

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        """Write the stats files of ``stats.snapshot_id``; re-staging a snapshot replaces
        (and deletes) the files staged for it before."""
        table = self._pyiceberg
        metadata = table.metadata
        snapshot_id = stats.snapshot_id
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return  # expired meanwhile: stats of a snapshot that is gone describe nothing
        tag = reg.file_tag(snapshot_id, self._owner)
        statistics = self._stage_statistics(stats, snapshot.sequence_number or 0, tag)
        partition_statistics = self._stage_partition_statistics(stats, metadata, published, tag)
        replaced = [s for s in self._pending if s.snapshot_id == snapshot_id]
        self._pending = [s for s in self._pending if s.snapshot_id != snapshot_id]
        self._pending.append(Staged(snapshot_id, statistics, partition_statistics))
        self._delete(p for p in reg.staged_paths(replaced) if is_ours(p))

    def _write(self, name: str, data: bytes) -> str:
        table = self._pyiceberg
        path = table.location_provider().new_metadata_location(name)
        with table.io.new_output(path).create(overwrite=False) as out:
            out.write(data)
        return path

    def _stage_statistics(
        self, stats: SnapshotStats, sequence_number: int, tag: str
    ) -> StatisticsFile | None:
        field_ids = [c.field_id for c in stats.schema.columns]
        blobs = theta_blobs(stats.table, field_ids, stats.snapshot_id, sequence_number)
        if not blobs:
            return None
        puffin = write_puffin(blobs)
        path = self._write(f"{tag}{STATS_SUFFIX}", puffin.data)
        return _statistics_file(stats.snapshot_id, path, puffin)

    def _stage_partition_statistics(
        self,
        stats: SnapshotStats,
        metadata: TableMetadata,
        published: Mapping[str, Any],
        tag: str,
    ) -> PartitionStatisticsFile | None:
        unified = unified_partition_type(metadata)
        if not unified.is_partitioned:
            return None  # as in Iceberg itself: no partition statistics file
        rows = self._partition_rows(stats.snapshot_id, stats.commit, published, unified)
        data = rows_to_parquet(rows.values(), unified, metadata.format_version)
        path = self._write(f"{tag}{PARTITION_STATS_SUFFIX}", data)
        self._last_rows = (stats.snapshot_id, rows)
        return PartitionStatisticsFile.model_validate(
            {
                "snapshot-id": stats.snapshot_id,
                "statistics-path": path,
                "file-size-in-bytes": len(data),
            }
        )

    def _partition_rows(
        self,
        snapshot_id: int,
        commit: Commit | None,
        published: Mapping[str, Any],
        unified: UnifiedPartitionType,
    ) -> Rows:
        """Incrementally from the parent's rows when the commit is known and they add up,
        else from the snapshot's live files."""
        if commit is not None and not commit.is_baseline:
            previous = self._previous_rows(commit.parent_id, published, unified)
            if previous is not None or commit.parent_id is None:
                rows = incremental_rows(previous or {}, unified, commit)
                if rows is not None:
                    return rows
        return full_rows(unified, self._table.live_files(snapshot_id), commit)

    def _previous_rows(
        self, parent_id: int | None, published: Mapping[str, Any], unified: UnifiedPartitionType
    ) -> Rows | None:
        if parent_id is None:
            return None
        if self._last_rows is not None and self._last_rows[0] == parent_id:
            return self._last_rows[1]
        path = reg.records(published).get(str(parent_id), {}).get("partition_statistics")
        if not path:
            return None
        try:
            with self._pyiceberg.io.new_input(path).open() as stream:
                return rows_from_parquet(stream.read(), unified)
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            _log.warning("partition_stats_unreadable", path=path, error=str(exc))
            return None

    # -- registering -----------------------------------------------------------------------

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        """Register what was staged, drop entries of expired snapshots, delete files nothing
        references any more. Returns the new ``published`` mapping."""
        pending, self._pending = self._pending, []
        catalog_table = self._pyiceberg
        name = catalog_table.name()
        registered: list[Staged] = []
        obsolete: set[str] = set()  # our files that no entry will reference
        metadata: TableMetadata | None = None
        last_conflict = ""
        for attempt in range(self._max_attempts):
            fresh = self._catalog_call("load", lambda: catalog_table.catalog.load_table(name))
            metadata = fresh.metadata
            live = reg.live_snapshots(metadata)
            obsolete.update(reg.staged_paths(s for s in pending if s.snapshot_id not in live))
            pending = [s for s in pending if s.snapshot_id in live]
            pending, foreign = reg.without_foreign(
                metadata, pending, reg.records(published), self._owner
            )
            for snapshot_id, kept, ours in foreign:
                _log.warning(
                    "publish_skipped_foreign_entry",
                    snapshot_id=snapshot_id,
                    kept=kept,
                    reason="the table metadata already names a statistics file for this "
                    "snapshot that this state dir did not register (another state dir?)",
                )
                obsolete.add(ours)
            updates = reg.updates(metadata, pending)
            if not updates:
                registered += pending  # nothing to register for them (no sketch, unpartitioned)
                pending = []
                break
            requirements = (AssertTableUUID(uuid=metadata.table_uuid),)
            try:
                response = self._catalog_call(
                    "commit",
                    partial(fresh.catalog.commit_table, fresh, requirements, tuple(updates)),
                    retried=(CommitFailedException, ValueError),
                )
            except (CommitFailedException, ValueError) as exc:
                # a conflict; or pyiceberg refusing an update whose target another process
                # changed first (a second lakestats run removed the same expired snapshot's
                # entry: "… does not exist"): once more on the table as it now is
                last_conflict = first_line(exc)
                delay = min(self._backoff_s * 2**attempt, MAX_BACKOFF_S)
                _log.info("publish_conflict", attempt=attempt + 1, error=str(exc))
                self._sleep(delay * (1 + random.random() / 10))  # noqa: S311 (jitter, not crypto)
                continue
            obsolete.update(reg.superseded(metadata, pending))
            registered += pending
            pending = []
            metadata = response.metadata
            # An expiry that landed between our load and the catalog's may have orphaned
            # an entry we just added: the next round removes it (and the file goes below).
            if not reg.dangling(metadata):
                break
        else:
            self._delete(p for p in reg.staged_paths(pending) if is_ours(p))
            raise PublishError(
                f"could not register statistics of table {name} after "
                f"{self._max_attempts} attempts: the table kept changing ({last_conflict})"
            )
        assert metadata is not None
        records = reg.reconcile(reg.records(published), metadata, registered, self._owner)
        obsolete.update(reg.expired_record_paths(published, metadata))
        obsolete.update(reg.staged_paths(registered))  # only those an entry no longer names go
        referenced = reg.referenced(metadata)
        self._delete(p for p in obsolete if is_ours(p) and p not in referenced)
        return {**published, PUBLISHED_KEY: {"snapshots": records}}

    def sweep(self, older_than_s: float) -> int:
        """Delete our files in the table's metadata folder that the table metadata does not
        reference and that are older than ``older_than_s`` (a concurrent run may be between
        writing and registering its files). Returns how many were deleted.

        Such strays are left by a run killed after staging and before its catalog commit.
        Only ``lakestats-*`` files are considered, never another writer's.
        """
        table = self._pyiceberg
        io = table.io
        if not isinstance(io, PyArrowFileIO):
            return 0  # listing needs pyarrow's file systems; the next such run cleans up
        folder = posixpath.dirname(table.location_provider().new_metadata_location("x"))
        scheme, netloc, path = PyArrowFileIO.parse_location(folder, io.properties)
        fs = io.fs_by_scheme(scheme, netloc)
        fresh = self._catalog_call("load", lambda: table.catalog.load_table(table.name())).metadata
        keep = {posixpath.basename(p) for p in reg.referenced(fresh)}
        keep |= {posixpath.basename(p) for p in reg.staged_paths(self._pending)}
        cutoff_ns = time.time_ns() - int(older_than_s * 1e9)
        deleted = 0
        for info in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
            name = info.base_name
            if info.type != pafs.FileType.File or not name.startswith(FILE_PREFIX):
                continue
            if name in keep or info.mtime_ns is None or info.mtime_ns > cutoff_ns:
                continue
            try:
                fs.delete_file(info.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                _log.warning("stats_file_not_deleted", path=info.path, error=str(exc))
                continue
            deleted += 1
        if deleted:
            _log.info("stray_stats_files_deleted", table=table.name(), files=deleted)
        return deleted

    def _catalog_call(
        self, what: str, call: Callable[[], _T], retried: tuple[type[Exception], ...] = ()
    ) -> _T:
        """A request to the table's catalog. Each backend (SQL, REST, Glue, Hive …) fails
        with its own client errors (a locked SQLite database, a throttled AWS call); they
        are a ``PublishError`` naming the table, logged as ``publish_failed`` like any
        broken target. ``retried``: what the caller handles itself."""
        try:
            return call()
        except (*retried, *self.errors):
            raise
        except Exception as exc:
            raise PublishError(
                f"table {self._pyiceberg.name()}: the catalog failed at the {what} "
                f"({type(exc).__name__}: {first_line(exc)})"
            ) from exc

    def _delete(self, paths: Iterable[str]) -> None:
        for path in sorted(paths):
            try:
                self._pyiceberg.io.delete(path)
            except FileNotFoundError:
                continue
            except OSError as exc:  # a leftover is harmless; orphan cleanup takes it later
                _log.warning("stats_file_not_deleted", path=path, error=str(exc))


def _statistics_file(snapshot_id: int, path: str, puffin: PuffinBytes) -> StatisticsFile:
    """The ``statistics`` entry of a written Puffin file.

    Only spec blob types are listed: pyiceberg's metadata model rejects others, so one
    would make the table unreadable for every pyiceberg user.
    """
    return StatisticsFile.model_validate(
        {
            "snapshot-id": snapshot_id,
            "statistics-path": path,
            "file-size-in-bytes": puffin.file_size,
            "file-footer-size-in-bytes": puffin.footer_size,
            "blob-metadata": [
                BlobMetadata.model_validate(
                    {
                        "type": b.type,
                        "snapshot-id": b.snapshot_id,
                        "sequence-number": b.sequence_number,
                        "fields": list(b.fields),
                        "properties": dict(b.properties),
                    }
                )
                for b in puffin.blobs
                if b.type in SPEC_BLOB_TYPES
            ],
        }
    )


def open_publisher(opened: OpenedTable) -> Publisher | Unpublishable:
    """The registry's factory (``publish/registry.py``): a publisher for a catalog table.

    A table opened by its location has no safe commit path (a metadata file written
    beside the one a catalog points to would fork the table).
    """
    table = opened.table
    if not isinstance(table, IcebergTable):  # the concrete adapter holds the pyiceberg table
        return Unpublishable(f"no metadata publisher for {table.format_name} tables")
    if isinstance(table.pyiceberg_table, StaticTable) or opened.config.catalog is None:
        return Unpublishable(
            "the table was opened by location, which has no safe commit path; configure "
            "it with catalog + identifier to publish Iceberg statistics"
        )
    store_dir = opened.store.table_dir
    identity = str(store_dir.resolve()) if isinstance(store_dir, Path) else store_dir
    return IcebergPublisher(table, owner=reg.owner_tag(identity))
