"""The interface every table format implements, and the capabilities a format may add.

A format is a package under ``lakestats.formats`` (``iceberg/``; Delta and Paimon later)
registered in ``formats/registry.py``. It reads metadata only, never data files, and hands
the rest of lakestats the typed model of ``lakestats.model``. Optional abilities are
separate ``Protocol`` s checked with ``isinstance``, so the core never asks a format what
its name is to decide what it can do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from lakestats.exceptions import (
    MetadataError,
    PartialMetadataError,
    UnreadableCommitError,
    UnsupportedTableError,
)
from lakestats.model import (
    Commit,
    DataFile,
    PartitionAggregate,
    SketchSettings,
    SnapshotInfo,
    TableSchema,
)


@runtime_checkable
class TableFormat(Protocol):
    """A table opened for reading its metadata. Implementations never read data files."""

    @property
    def format_name(self) -> str:
        """``"iceberg"``, ``"delta"`` or ``"paimon"``."""
        ...

    @property
    def table_id(self) -> str:
        """A stable id that survives renames (Iceberg: the table-uuid)."""
        ...

    @property
    def location(self) -> str:
        """The table's base location as a URI."""
        ...

    def refresh(self) -> None:
        """Reload the table metadata so the calls below see the newest commit."""
        ...

    def current_snapshot_id(self) -> int | None:
        """The main branch's current snapshot, ``None`` for a table with no commit."""
        ...

    def snapshot_ids(self) -> frozenset[int]:
        """Every snapshot still present in the table metadata (not expired)."""
        ...

    def schema(self, schema_id: int | None = None) -> TableSchema:
        """The schema with that id, or the current schema."""
        ...

    def commits_since(self, after_snapshot_id: int | None) -> Sequence[Commit]:
        """Main-branch commits after ``after_snapshot_id`` up to the current one, oldest first.

        With ``None``, the whole lineage. Where history before the first listed commit is no
        longer available (expired), the first element is a baseline commit (operation
        ``"baseline"``) listing every live file of that snapshot as added. Raises
        ``LineageError`` when ``after_snapshot_id`` is not an ancestor of the current
        snapshot, ``MetadataError`` when metadata cannot be read; when one commit's cannot
        (``read_commit``), ``UnreadableCommitError`` with the commits before it.
        """
        ...

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        """Every live data and delete file of a snapshot (for recomputes and checks)."""
        ...


class TableIdentity:
    """``TableFormat``'s identity properties for a table that knows them once opened: the
    class's ``FORMAT_NAME``, and the ``_table_id`` and ``_location_uri`` its ``__init__``
    sets."""

    FORMAT_NAME: ClassVar[str]
    _table_id: str
    _location_uri: str

    @property
    def format_name(self) -> str:
        return self.FORMAT_NAME

    @property
    def table_id(self) -> str:
        return self._table_id

    @property
    def location(self) -> str:
        return self._location_uri


@runtime_checkable
class SupportsCommitFingerprint(Protocol):
    """A format whose snapshot ids can name a different commit later: Delta versions and
    Paimon snapshot ids are reused after a rollback (the later commits deleted, then as
    many new ones written). Its commits carry ``Commit.fingerprint``; the core records the
    processed commit's and compares it with what the table names now (``lakestats.lineage``).
    Iceberg needs none: its snapshot ids are random 63-bit numbers."""

    def commit_fingerprint(self, snapshot_id: int) -> str | None:
        """The fingerprint of the commit ``snapshot_id`` names now, read from the current
        metadata (never a cache that a rollback could leave stale); ``None`` when the
        snapshot is not there or keeps nothing to tell it by. Equals the
        ``Commit.fingerprint`` that ``commits_since`` gives that commit."""
        ...


@runtime_checkable
class KeepsListedFiles(Protocol):
    """A format that deletes a removed data file only with the last snapshot that lists it
    (Iceberg's and Paimon's snapshot expiry), so a rollback to any snapshot in its metadata
    finds every file that snapshot lists. The store then keeps the sketches of removed
    files while such a snapshot is live (``RetiredSegment``, ``docs/maintenance.md``).
    Delta is not one: VACUUM deletes removed files while the log still lists the versions
    that added them."""

    def keeps_listed_files(self) -> bool:
        """True: every file a snapshot in the metadata lists is still there."""
        ...


@runtime_checkable
class SupportsSnapshotExpiry(Protocol):
    """A format that can run its own snapshot expiry (Iceberg through a catalog)."""

    def snapshot_infos(self) -> tuple[SnapshotInfo, ...]:
        """Every snapshot in the metadata, for expiry planning (``lakestats.expiry``)."""
        ...

    def expire_snapshots(self, snapshot_ids: Sequence[int]) -> None:
        """Expire these snapshots with the format's own expiry, then refresh.

        With no id, only checks that the table can commit (``ExpiryError`` otherwise).
        """
        ...


@runtime_checkable
class HasDatalessVersions(Protocol):
    """A format whose versions include some that change no data file (Delta: a schema
    change, ``SET TBLPROPERTIES``, an UPDATE that matched no row): such a version is no
    snapshot of its own, and its data is the newest data version's before it."""

    def data_version_of(self, version: int) -> int | None:
        """The data version whose stats describe ``version``, where ``version`` is in the
        table's history but changed no data file; ``None`` otherwise."""
        ...


@runtime_checkable
class SupportsFormatTerms(Protocol):
    """A format whose engines name some stats their own way (Paimon: ``mergedRecordCount``,
    ``colStats``): ``show --json`` carries them under the format's name."""

    def format_terms(
        self, snapshot_id: int, table: PartitionAggregate, settings: SketchSettings
    ) -> dict[str, Any]:
        """The snapshot's stats in the format's terms (JSON-ready), from the merged table.

        A ``"summary"`` list of strings, if present, is printed by ``show``."""
        ...


@dataclass(frozen=True)
class WatchSpec:
    """Where a format's commits show on disk, for the daemon's file-system watcher.

    Events are hints only (the metadata is the truth), so this names just what one commit
    writes last: the watcher reacts to files whose name ends with one of ``markers`` in
    one of ``directories`` (relative to the table location), and ignores the rest.
    """

    directories: tuple[str, ...]
    markers: tuple[str, ...]


@contextmanager
def read_commit(where: str, before: Sequence[Commit]) -> Iterator[None]:
    """One commit of a lineage walk is read inside: its ``MetadataError`` stops the walk
    there as an ``UnreadableCommitError`` naming ``where`` and holding the commits listed
    ``before`` it (a metadata file still being written stays what it is: retried soon; so
    does a table that needs a reader lakestats is not: nothing of it is processed)."""
    try:
        yield
    except (PartialMetadataError, UnreadableCommitError, UnsupportedTableError):
        raise
    except MetadataError as exc:
        raise UnreadableCommitError(f"{where}: {exc}", before) from exc
