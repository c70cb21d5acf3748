"""A table format held in memory, for tests: ``MemoryTable`` (pure Python, no I/O).

It implements ``TableFormat`` and ``SupportsSnapshotExpiry`` with the same lineage rules
as the Iceberg adapter, and adds a small writer API: commit files (``DataFile`` s with
their metrics and typed bounds), remove them, evolve the schema, expire snapshots, roll
back, and make the metadata unreadable. Reads see every write at once: there is no other
writer to wait for, so ``refresh()`` only checks that the metadata is readable.

Not registered in ``formats/registry.py``: no location on disk holds a memory table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakestats.exceptions import (
    ExpiryError,
    LineageError,
    MetadataError,
    SnapshotNotFoundError,
)
from lakestats.formats.base import TableIdentity, read_commit
from lakestats.model import (
    BASELINE_OPERATION,
    UNPARTITIONED,
    Column,
    ColumnMetrics,
    Commit,
    DataFile,
    FileContent,
    PartitionKey,
    SnapshotInfo,
    TableSchema,
)

FORMAT_NAME = "memory"
_FIRST_TIMESTAMP_MS = 1_700_000_000_000
_COMMIT_INTERVAL_MS = 1_000


@dataclass(frozen=True)
class _Snapshot:
    commit: Commit  # what this snapshot changed
    live: tuple[DataFile, ...]  # every live data and delete file after it


class MemoryTable(TableIdentity):
    """A ``TableFormat`` whose metadata is a few Python objects.

    ``columns`` are ``(name, Iceberg type string)`` pairs of the first schema; field ids
    are given from 1 in order, and new columns get the next id never used, as in Iceberg.
    """

    FORMAT_NAME = FORMAT_NAME

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        *,
        name: str = "table",
        table_id: str | None = None,
    ) -> None:
        first = TableSchema(
            schema_id=0,
            columns=tuple(Column(i, n, t) for i, (n, t) in enumerate(columns, start=1)),
        )
        self._name = name
        self._table_id = table_id or f"memory-{name}"
        self._location_uri = f"memory://{name}"
        self._schemas: dict[int, TableSchema] = {0: first}
        self._current_schema_id = 0
        self._last_field_id = len(columns)
        self._snapshots: dict[int, _Snapshot] = {}
        self._current: int | None = None
        self._last_snapshot_id = 0
        self._last_sequence_number = 0
        self._commits_made = 0  # never reused: what a commit's fingerprint counts
        self._metadata_version = 1
        self._unreadable: str | None = None
        self._unreadable_commits: dict[int, str] = {}

    # --- identity -------------------------------------------------------------------------

    @property
    def metadata_location(self) -> str:
        """A name for the current metadata version, as error messages name files."""
        return f"{self.location}/metadata/v{self._metadata_version}.metadata.json"

    def __repr__(self) -> str:
        return f"MemoryTable({self._name!r})"

    # --- TableFormat ----------------------------------------------------------------------

    def refresh(self) -> None:
        self._check_readable()

    def current_snapshot_id(self) -> int | None:
        self._check_readable()
        return self._current

    def keeps_listed_files(self) -> bool:
        """``KeepsListedFiles``: its snapshots hold their files."""
        return True

    def snapshot_ids(self) -> frozenset[int]:
        self._check_readable()
        return frozenset(self._snapshots)

    def schema(self, schema_id: int | None = None) -> TableSchema:
        self._check_readable()
        wanted = self._current_schema_id if schema_id is None else schema_id
        schema = self._schemas.get(wanted)
        if schema is None:
            raise MetadataError(f"table {self._name} has no schema with id {wanted}")
        return schema

    def commits_since(self, after_snapshot_id: int | None) -> Sequence[Commit]:
        self._check_readable()
        chain, reached = self._lineage(after_snapshot_id)
        if after_snapshot_id is not None and not reached:
            raise LineageError(
                f"snapshot {after_snapshot_id} is not an ancestor of the current snapshot "
                f"{self._current} of table {self._name} (rolled back, replaced, or expired)"
            )
        commits: list[Commit] = []
        for snapshot in chain:
            snapshot_id = snapshot.commit.snapshot_id
            with read_commit(f"snapshot {snapshot_id}", commits):
                self._check_commit_readable(snapshot_id)
            commits.append(snapshot.commit)
        if commits and not reached and commits[0].parent_id is not None:
            # the parent was expired: its history is gone, so list the whole snapshot
            oldest = chain[0]
            commits[0] = dataclasses.replace(
                oldest.commit,
                operation=BASELINE_OPERATION,
                added_files=_of_content(oldest.live, data=True),
                removed_files=(),
                added_delete_files=_of_content(oldest.live, data=False),
                removed_delete_files=(),
            )
        return commits

    def commit_fingerprint(self, snapshot_id: int) -> str | None:
        """``SupportsCommitFingerprint`` (ids come back after ``cut_back``)."""
        self._check_readable()
        snapshot = self._snapshots.get(snapshot_id)
        return snapshot.commit.fingerprint if snapshot is not None else None

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        self._check_readable()
        snapshot = self._snapshots.get(snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} is not in the metadata of table {self._name}"
            )
        return (*_of_content(snapshot.live, data=True), *_of_content(snapshot.live, data=False))

    # --- SupportsSnapshotExpiry -----------------------------------------------------------

    def snapshot_infos(self) -> tuple[SnapshotInfo, ...]:
        self._check_readable()
        lineage = {s.commit.snapshot_id for s in self._lineage(None)[0]}
        return tuple(
            SnapshotInfo(
                snapshot_id=snapshot_id,
                timestamp_ms=snapshot.commit.timestamp_ms,
                in_main_lineage=snapshot_id in lineage,
                is_ref_head=snapshot_id == self._current,
            )
            for snapshot_id, snapshot in self._snapshots.items()
        )

    def expire_snapshots(self, snapshot_ids: Sequence[int]) -> None:
        """Drop snapshots from the metadata; the current one cannot be expired."""
        self._check_readable()
        if self._current is not None and self._current in snapshot_ids:
            raise ExpiryError(
                f"table {self._name}: snapshot expiry failed: "
                f"cannot expire the current snapshot {self._current}"
            )
        present = [s for s in snapshot_ids if s in self._snapshots]
        for snapshot_id in present:
            del self._snapshots[snapshot_id]
        if present:
            self._metadata_version += 1

    # --- writing --------------------------------------------------------------------------

    def data_file(
        self,
        path: str,
        record_count: int,
        *,
        bounds: Mapping[str, tuple[Any, Any]] | None = None,
        null_counts: Mapping[str, int] | None = None,
        partition: PartitionKey = UNPARTITIONED,
        content: FileContent = FileContent.DATA,
        file_size_bytes: int | None = None,
    ) -> DataFile:
        """A file written with the current schema; metrics by column name.

        Every column of the schema gets a value count of ``record_count``; ``bounds`` and
        ``null_counts`` add what they name (values in the column's Python type).
        """
        schema = self.schema()
        by_name = {column.name: column.field_id for column in schema.columns}
        unknown = {*(bounds or {}), *(null_counts or {})} - set(by_name)
        if unknown:
            raise ValueError(f"no column {sorted(unknown)} in schema {schema.schema_id}")
        columns = {}
        for name, field_id in by_name.items():
            lower, upper = (bounds or {}).get(name, (None, None))
            columns[field_id] = ColumnMetrics(
                value_count=record_count,
                null_count=(null_counts or {}).get(name, 0),
                lower=lower,
                upper=upper,
            )
        return DataFile(
            path=path,
            content=content,
            file_format="PARQUET",
            record_count=record_count,
            file_size_bytes=file_size_bytes if file_size_bytes is not None else 100 * record_count,
            partition=partition,
            columns=columns,
            field_ids=frozenset(by_name.values()),
        )

    def append(self, *files: DataFile) -> int:
        """Commit ``files`` as an ``append``; the new snapshot id."""
        return self.commit(added=files, operation="append")

    def remove(self, *paths: str) -> int:
        """Commit the removal of live files by path, as a ``delete``; the new snapshot id."""
        return self.commit(removed=paths, operation="delete")

    def commit(
        self,
        *,
        added: Iterable[DataFile] = (),
        removed: Iterable[str] = (),
        operation: str | None = None,
        timestamp_ms: int | None = None,
    ) -> int:
        """One snapshot on top of the current one: files added, live files removed by path.

        Added files without ``field_ids`` get the current schema's. Without ``operation``,
        ``append`` when only adding, ``delete`` when only removing, else ``overwrite``.
        """
        self._check_readable()
        schema = self.schema()
        new = tuple(
            f if f.field_ids else dataclasses.replace(f, field_ids=_field_ids(schema))
            for f in added
        )
        live = (
            {f.path: f for f in self._snapshots[self._current].live}
            if self._current is not None
            else {}
        )
        removed_paths = list(removed)
        missing = [p for p in removed_paths if p not in live]
        if missing:
            raise ValueError(f"not live in the current snapshot: {missing}")
        gone = tuple(live.pop(p) for p in removed_paths)
        clashes = [f.path for f in new if f.path in live]
        if clashes:
            raise ValueError(f"already live in the current snapshot: {clashes}")
        live.update((f.path, f) for f in new)
        self._last_snapshot_id += 1
        self._last_sequence_number += 1
        self._commits_made += 1
        commit = Commit(
            snapshot_id=self._last_snapshot_id,
            parent_id=self._current,
            sequence_number=self._last_sequence_number,
            timestamp_ms=timestamp_ms
            if timestamp_ms is not None
            else _FIRST_TIMESTAMP_MS + self._last_sequence_number * _COMMIT_INTERVAL_MS,
            operation=operation or _operation(bool(new), bool(gone)),
            schema_id=schema.schema_id,
            added_files=_of_content(new, data=True),
            removed_files=_of_content(gone, data=True),
            added_delete_files=_of_content(new, data=False),
            removed_delete_files=_of_content(gone, data=False),
            fingerprint=f"{self._table_id}/commit-{self._commits_made}",
        )
        self._snapshots[commit.snapshot_id] = _Snapshot(commit, tuple(live.values()))
        self._current = commit.snapshot_id
        self._metadata_version += 1
        return commit.snapshot_id

    def add_column(self, name: str, type_str: str) -> TableSchema:
        """A new schema with the column appended under a never-used field id."""
        self._last_field_id += 1
        column = Column(self._last_field_id, name, type_str)
        return self._evolve((*self.schema().columns, column))

    def rename_column(self, old: str, new: str) -> TableSchema:
        renamed = self._column(old)
        return self._evolve(
            tuple(
                dataclasses.replace(c, name=new) if c is renamed else c
                for c in self.schema().columns
            )
        )

    def drop_column(self, name: str) -> TableSchema:
        self._column(name)
        return self._evolve(tuple(c for c in self.schema().columns if c.name != name))

    def rollback(self, snapshot_id: int) -> None:
        """Make an ancestor of the current snapshot current again."""
        self._check_readable()
        ancestors = {s.commit.snapshot_id for s in self._lineage(None)[0]}
        if snapshot_id not in ancestors:
            raise ValueError(f"snapshot {snapshot_id} is not an ancestor of the current one")
        self._current = snapshot_id
        self._metadata_version += 1

    def cut_back(self, snapshot_id: int) -> None:
        """Roll back as Delta and Paimon do: the snapshots after ``snapshot_id`` are
        deleted and the next commits get their ids again (Iceberg's ``rollback`` keeps
        them, and its ids are never reused)."""
        self.rollback(snapshot_id)
        for later in [s for s in self._snapshots if s > snapshot_id]:
            del self._snapshots[later]
        self._last_snapshot_id = snapshot_id
        self._last_sequence_number = self._snapshots[snapshot_id].commit.sequence_number

    def make_unreadable(self, reason: str = "truncated") -> None:
        """From now on every read raises ``MetadataError`` naming the metadata file."""
        self._unreadable = reason

    def make_readable(self) -> None:
        self._unreadable = None
        self._unreadable_commits.clear()

    def make_commit_unreadable(self, snapshot_id: int, reason: str = "truncated") -> None:
        """From now on listing that commit raises ``MetadataError`` naming its manifest
        (the table's metadata stays readable)."""
        self._unreadable_commits[snapshot_id] = reason

    def commit_manifest(self, snapshot_id: int) -> str:
        """A name for a commit's own metadata, as error messages name files."""
        return f"{self.location}/metadata/snap-{snapshot_id}.avro"

    # --- internals ------------------------------------------------------------------------

    def _check_commit_readable(self, snapshot_id: int) -> None:
        reason = self._unreadable_commits.get(snapshot_id)
        if reason is not None:
            raise MetadataError(
                f"manifest list {self.commit_manifest(snapshot_id)} is unreadable ({reason})"
            )

    def _check_readable(self) -> None:
        if self._unreadable is not None:
            raise MetadataError(
                f"metadata file {self.metadata_location} is unreadable ({self._unreadable})"
            )

    def _column(self, name: str) -> Column:
        for column in self.schema().columns:
            if column.name == name:
                return column
        raise ValueError(f"no column {name!r} in the current schema of table {self._name}")

    def _evolve(self, columns: tuple[Column, ...]) -> TableSchema:
        schema = TableSchema(schema_id=max(self._schemas) + 1, columns=columns)
        self._schemas[schema.schema_id] = schema
        self._current_schema_id = schema.schema_id
        self._metadata_version += 1
        return schema

    def _lineage(self, after: int | None) -> tuple[list[_Snapshot], bool]:
        """Main-branch snapshots after ``after``, oldest first, and whether it was reached
        (as the snapshot itself or as the parent id of the oldest one still present)."""
        chain: list[_Snapshot] = []
        snapshot_id = self._current
        while snapshot_id is not None and snapshot_id != after:
            snapshot = self._snapshots.get(snapshot_id)
            if snapshot is None:  # expired: history stops here
                chain.reverse()
                return chain, False
            chain.append(snapshot)
            snapshot_id = snapshot.commit.parent_id
        chain.reverse()
        return chain, snapshot_id is not None


def _field_ids(schema: TableSchema) -> frozenset[int]:
    return frozenset(column.field_id for column in schema.columns)


def _of_content(files: Iterable[DataFile], *, data: bool) -> tuple[DataFile, ...]:
    return tuple(f for f in files if (f.content is FileContent.DATA) == data)


def _operation(adds: bool, removes: bool) -> str:
    if adds and not removes:
        return "append"
    if removes and not adds:
        return "delete"
    return "overwrite"
