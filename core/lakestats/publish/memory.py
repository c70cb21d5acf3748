"""An in-memory publisher and the target it publishes into, for tests of anything that
publishes (the publisher contract suite, pure tests of the commit path).

``MemoryTarget`` plays a table's metadata: the snapshots that exist, the stats objects
stored in it and the entries that register them, and a commit counter. ``MemoryPublisher``
follows the same rules as a real publisher: nothing is visible before ``flush``, one
commit registers a batch, a snapshot that no longer exists gets nothing, re-staging a
snapshot replaces its objects, and a broken target raises ``PublishError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakestats.exceptions import PublishError
from lakestats.publish.base import SnapshotStats

MEMORY_KEY = "memory"


@dataclass
class MemoryTarget:
    """What a table's metadata would hold: snapshots, stored objects, registrations."""

    snapshots: set[int]
    objects: dict[str, int] = field(default_factory=dict)  # name → record count it carries
    entries: dict[int, str] = field(default_factory=dict)  # snapshot id → registered object
    commits: int = 0
    broken: str | None = None  # why every call fails, when set
    _names: int = 0

    def check(self) -> None:
        if self.broken is not None:
            raise PublishError(f"memory target unavailable: {self.broken}")

    def store(self, snapshot_id: int, record_count: int) -> str:
        self.check()
        self._names += 1
        name = f"memory://{snapshot_id}/{self._names}"
        self.objects[name] = record_count
        return name

    def expire(self, snapshot_id: int) -> None:
        """The snapshot goes; its entry dangles until the next publish drops it."""
        self.snapshots.discard(snapshot_id)


class MemoryPublisher:
    """Publishes a snapshot's record count into a ``MemoryTarget``."""

    key = MEMORY_KEY

    def __init__(self, target: MemoryTarget) -> None:
        self._target = target
        self._pending: dict[int, str] = {}

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (PublishError,)

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        return snapshot_id in self._pending or str(snapshot_id) in _records(published)

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        target = self._target
        target.check()
        if stats.snapshot_id not in target.snapshots:
            return
        replaced = self._pending.get(stats.snapshot_id)
        self._pending[stats.snapshot_id] = target.store(stats.snapshot_id, stats.table.record_count)
        if replaced is not None:
            del target.objects[replaced]

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        target = self._target
        target.check()
        pending, self._pending = self._pending, {}
        live = target.snapshots
        gone = {s for s in (*pending, *target.entries) if s not in live}
        if any(s in live for s in pending) or any(s in target.entries for s in gone):
            target.commits += 1  # one commit registers the batch and drops dangling entries
        for snapshot_id, name in pending.items():
            if snapshot_id in live:
                old = target.entries.get(snapshot_id)
                target.entries[snapshot_id] = name
                target.objects.pop(old or "", None)
            else:
                del target.objects[name]
        for snapshot_id in gone:
            old = target.entries.pop(snapshot_id, None)
            target.objects.pop(old or "", None)
        records = {str(s): name for s, name in sorted(target.entries.items())}
        return {**published, MEMORY_KEY: {"snapshots": records}}

    def sweep(self, older_than_s: float) -> int:
        return 0  # nothing is written before flush registers it

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        name = _records(published).get(str(snapshot_id))
        if name is None:
            return ["not in the memory target yet"]
        return [f"memory target: {name}"]


def _records(published: Mapping[str, Any]) -> dict[str, str]:
    section = published.get(MEMORY_KEY)
    if not isinstance(section, dict):
        return {}
    snapshots = section.get("snapshots")
    return dict(snapshots) if isinstance(snapshots, dict) else {}
