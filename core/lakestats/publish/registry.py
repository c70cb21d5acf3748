"""TEMPORARY shim (replaced by the publishers branch): the new Publisher API over the old
Iceberg publisher, so the commit path can be written against ``publish/base.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakestats.model import SketchSettings
from lakestats.publish import iceberg as _iceberg
from lakestats.publish.base import Publisher, SnapshotStats
from lakestats.tables import OpenedTable


class _Adapter:
    key = _iceberg.PUBLISHED_KEY

    def __init__(self, opened: OpenedTable, inner: _iceberg.IcebergPublisher | None) -> None:
        self._opened = opened
        self._inner = inner

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return _iceberg.publish_errors()

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        return self._inner is None or self._inner.is_published(snapshot_id, published)

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        if self._inner is not None:
            self._inner.stage(stats.snapshot_id, stats.partitions, stats.commit, published)

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        if self._inner is None:
            return dict(published)
        return self._inner.flush(published)

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        return _iceberg.published_lines(self._opened, published, snapshot_id)


def publisher_for(opened: OpenedTable, settings: SketchSettings) -> Publisher:
    return _Adapter(opened, _iceberg.make_publisher(opened, settings))


def describe_published(
    opened: OpenedTable, published: Mapping[str, Any], snapshot_id: int
) -> list[str]:
    return _iceberg.published_lines(opened, published, snapshot_id)
