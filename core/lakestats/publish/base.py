"""The interface of publishers: outputs that put a snapshot's stats where readers look.

The commit path merges a snapshot's stats once (``SnapshotStats``) and hands the same value
to every publisher of the table: the native stats document (``publish/native.py``, kept in
the stats store and served by ``show`` and the HTTP API) is built from it, and so are the
format's own statistics files (Iceberg Puffin and partition statistics, ``publish/iceberg/``).

Publishing into a table is a side effect keyed by snapshot: ``stage`` writes files (no
commit to the table), ``flush`` registers everything staged in one commit of the table's
own protocol and returns the publisher's new bookkeeping for ``StateVersion.published``.
A failure is logged by the caller and retried by the next run; the store stays valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lakestats.model import Commit, PartitionAggregate, SketchSettings, TableSchema


@dataclass(frozen=True)
class SnapshotStats:
    """One processed snapshot's merged stats: computed once, read by every publisher."""

    snapshot_id: int
    schema: TableSchema  # the schema the snapshot was written with
    partitions: tuple[PartitionAggregate, ...]  # merged per partition, sorted by key
    table: PartitionAggregate  # ``merge.whole_table(partitions)``
    settings: SketchSettings
    # the commit that produced the snapshot; None when the stats are published again later
    # (a snapshot whose registration failed and is retried by the next run)
    commit: Commit | None = None


@runtime_checkable
class Publisher(Protocol):
    """Publishes one table's stats into the place its engines read (see module doc)."""

    @property
    def key(self) -> str:
        """Its section of ``StateVersion.published`` (e.g. ``"iceberg"``)."""
        ...

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """What a failed ``stage``/``flush`` may raise: logged, retried by the next run."""
        ...

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        """Whether the snapshot's stats are staged or registered already."""
        ...

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        """Write the snapshot's files; nothing is visible to readers before ``flush``."""
        ...

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        """Register what was staged; returns the whole new ``published`` mapping."""
        ...

    def sweep(self, older_than_s: float) -> int:
        """Delete files this publisher wrote into the table that nothing references and
        that are older than ``older_than_s`` (left by a run killed between writing and
        registering them); returns how many. Called once per run."""
        ...

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        """Where this snapshot's stats went, one line each, for ``show``."""
        ...


@dataclass(frozen=True)
class Unpublishable:
    """A publisher factory's answer for a table whose stats cannot go into its metadata.

    ``reason`` completes "not in table metadata: …" (``lakestats show``); ``warn`` says
    whether it is worth a warning (not when the user switched publishing off).
    """

    reason: str
    warn: bool = True
