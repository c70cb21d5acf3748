"""The interface every table format implements (Iceberg now; Delta and Paimon later)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from lakestats.model import Commit, DataFile, TableSchema


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
        snapshot, ``MetadataError`` when metadata cannot be read.
        """
        ...

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        """Every live data and delete file of a snapshot (for recomputes and checks)."""
        ...
