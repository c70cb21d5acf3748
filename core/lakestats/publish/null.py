"""The publisher of a table whose stats stay in the stats store only.

``publisher_for`` returns it when a table cannot publish into its metadata (publishing
switched off, opened by location, no publisher for its format). It publishes nothing,
says why in ``describe`` (``lakestats show``), and the first time it is asked to publish
logs the reason once per table and process, unless the user switched publishing off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from lakestats.publish.base import SnapshotStats

_log = structlog.get_logger(__name__)
_warned: set[str] = set()  # table ids whose reason was logged (once per process)


class NullPublisher:
    """Publishes nothing, for the reason it was given."""

    key = "none"  # never written: flush returns ``published`` as it is

    def __init__(self, table_name: str, table_id: str, reason: str, *, warn: bool) -> None:
        self._table_name = table_name
        self._table_id = table_id
        self.reason = reason
        self._warn = warn

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return ()

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        return True  # nothing to do for any snapshot: callers need not merge stats for it

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        self._warn_once()

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        self._warn_once()
        return dict(published)

    def sweep(self, older_than_s: float) -> int:
        return 0  # writes nothing

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        return [f"not in table metadata: {self.reason}"]

    def _warn_once(self) -> None:
        if self._warn and self._table_id not in _warned:
            _warned.add(self._table_id)
            _log.warning("stats_not_published", table=self._table_name, reason=self.reason)
