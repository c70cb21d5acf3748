"""``PaimonPublisher``: a snapshot's stats as Paimon's statistics file, committed with an
``ANALYZE`` snapshot (what Spark's ``ANALYZE TABLE … COMPUTE STATISTICS`` commits).

``stage`` writes ``statistics/stat-<uuid>-0`` (create-if-absent, fsynced; nothing names
it yet). ``flush`` commits one ``ANALYZE`` snapshot after the latest one — same data as
its parent, ``statistics`` naming the newest staged file — with Paimon's commit protocol
(``formats/paimon/commit.py``: create-if-absent, retry on conflict, a writer's snapshot
is never overwritten). A Paimon snapshot carries one statistics file, so a flush
publishes the newest staged snapshot's stats; older staged ones are superseded (their
files deleted) and recorded as such. Never published: stats of a snapshot a writer has
committed data after (they would be stale at once: the run that processes the newer
commit publishes), stats older than those the latest snapshot already names, and the
stats of lakestats' own ``ANALYZE`` snapshots (their data is their parent's: publishing
them would loop). So one ``analyze`` run adds at most one snapshot to the table.

Files are deleted only when no snapshot or tag names them (``sweep``; Paimon's expiry —
Java's or ``formats/paimon/expire.py`` — deletes them with the last snapshot naming them).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyarrow import fs as pafs

from lakestats.exceptions import MetadataError, PublishError
from lakestats.formats.paimon.commit import (
    PendingFiles,
    commit_with_retry,
    next_snapshot,
    table_root,
    write_new_file,
)
from lakestats.formats.paimon.metafiles import STATISTICS_DIR
from lakestats.formats.paimon.snapshots import ANALYZE
from lakestats.formats.paimon.statistics import paimon_terms
from lakestats.formats.paimon.table import PaimonTable
from lakestats.publish.base import Publisher, SnapshotStats, Unpublishable
from lakestats.tables import OpenedTable

PUBLISHED_KEY = "paimon"
STATS_PREFIX = "stat-"
_KEEP_RECORDS = 20  # snapshots remembered in the bookkeeping


@dataclass(frozen=True)
class Staged:
    snapshot_id: int
    file_name: str


class PaimonPublisher:
    """Publishes one Paimon table's stats (see module doc)."""

    key = PUBLISHED_KEY

    def __init__(self, table: PaimonTable) -> None:
        self._table = table
        self._staged: dict[int, Staged] = {}

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (PublishError, MetadataError, OSError)

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        return (
            snapshot_id in self._staged
            or str(snapshot_id) in _records(published)
            or snapshot_id <= _settled_through(published)
        )

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        table = self._table
        root = table_root(table)
        table.refresh()
        if stats.snapshot_id not in table.snapshot_ids():
            return
        snapshot = table.snapshot(stats.snapshot_id)
        if snapshot.commit_kind == ANALYZE:
            return  # its data is its parent's, already published
        document = paimon_terms(table, stats.snapshot_id, stats.table, stats.settings)["statistics"]
        name = f"{STATS_PREFIX}{uuid.uuid4()}-0"
        directory = root / STATISTICS_DIR
        directory.mkdir(exist_ok=True)
        write_new_file(directory / name, json.dumps(document).encode(), PendingFiles())
        replaced = self._staged.get(stats.snapshot_id)
        self._staged[stats.snapshot_id] = Staged(stats.snapshot_id, name)
        if replaced is not None:
            _unlink(directory / replaced.file_name)

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        staged, self._staged = self._staged, {}
        table = self._table
        if not staged:
            return _without_expired(table, published)
        root = table_root(table)
        newest = staged[max(staged)]
        for old in staged.values():
            if old is not newest:
                _unlink(root / STATISTICS_DIR / old.file_name)
        records = dict(_records(published))

        def attempt(
            table: PaimonTable, latest: int, pending: PendingFiles
        ) -> dict[str, Any] | None:
            if newest.snapshot_id not in table.snapshot_ids():
                return None  # expired meanwhile: nothing to describe
            if any(
                table.snapshot(i).commit_kind != ANALYZE
                for i in table.snapshot_ids()
                if i > newest.snapshot_id
            ):
                return None  # a writer committed data since: the next run publishes that
            current = table.files.snapshot(latest)
            named = current.get("statistics")
            if named and _analyzed_snapshot(table, str(named)) >= newest.snapshot_id:
                return None  # the table already names stats at least as new
            document = next_snapshot(table, latest, pending, delta=[])
            document.update(commitKind=ANALYZE, statistics=newest.file_name)
            return document

        try:
            committed = commit_with_retry(table, attempt)
        except BaseException:
            _unlink(root / STATISTICS_DIR / newest.file_name)
            raise
        if committed is None:
            _unlink(root / STATISTICS_DIR / newest.file_name)
            records.setdefault(str(newest.snapshot_id), {"skipped": "newer snapshots"})
        else:
            records[str(newest.snapshot_id)] = {
                "file": f"{STATISTICS_DIR}/{newest.file_name}",
                "analyze_snapshot": committed,
            }
        for superseded in staged:
            if superseded != newest.snapshot_id:
                records.setdefault(str(superseded), {"superseded_by": newest.snapshot_id})
        live = table.snapshot_ids()
        kept = sorted(
            ((k, v) for k, v in records.items() if int(k) in live), key=lambda kv: int(kv[0])
        )
        # records beyond the newest _KEEP_RECORDS are forgotten, but not their snapshots:
        # ``settled_through`` keeps them published, or every later run would rebuild (and
        # delete again) a statistics file for each of them (up to 64 a run)
        forgotten = [int(k) for k, _ in kept[:-_KEEP_RECORDS]]
        section: dict[str, Any] = {"snapshots": dict(kept[-_KEEP_RECORDS:])}
        settled = max([_settled_through(published), *forgotten])
        if settled >= 0:
            section["settled_through"] = settled
        return {**published, PUBLISHED_KEY: section}

    def sweep(self, older_than_s: float) -> int:
        """Delete ``statistics/stat-*`` files no snapshot or tag names, older than that."""
        table = self._table
        root = table_root(table)
        directory = root / STATISTICS_DIR
        if not directory.is_dir():
            return 0
        table.refresh()
        named = {table.snapshot(i).statistics for i in table.snapshot_ids()}
        named |= _tag_statistics(table)
        cutoff = time.time() - older_than_s
        removed = 0
        for path in directory.iterdir():
            if (
                path.name.startswith(STATS_PREFIX)
                and path.name not in named
                and path.stat().st_mtime < cutoff
            ):
                _unlink(path)
                removed += 1
        return removed

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        record = _records(published).get(str(snapshot_id))
        if not isinstance(record, Mapping):
            return []
        if "file" in record:
            return [
                f"Paimon statistics file {record['file']} "
                f"(ANALYZE snapshot {record['analyze_snapshot']})"
            ]
        if "skipped" in record:
            return ["not in a Paimon statistics file: the table has newer data or stats"]
        return [f"superseded by the Paimon statistics of snapshot {record['superseded_by']}"]


def _without_expired(table: PaimonTable, published: Mapping[str, Any]) -> dict[str, Any]:
    """``published`` without the records of snapshots the table no longer has."""
    records = _records(published)
    if not records:
        return dict(published)
    table.refresh()
    live = table.snapshot_ids()
    kept = {k: v for k, v in records.items() if int(k) in live}
    if len(kept) == len(records):
        return dict(published)
    return {**published, PUBLISHED_KEY: {**_section(published), "snapshots": kept}}


def _section(published: Mapping[str, Any]) -> Mapping[str, Any]:
    section = published.get(PUBLISHED_KEY)
    return section if isinstance(section, Mapping) else {}


def _records(published: Mapping[str, Any]) -> Mapping[str, Any]:
    snapshots = _section(published).get("snapshots")
    return snapshots if isinstance(snapshots, Mapping) else {}


def _settled_through(published: Mapping[str, Any]) -> int:
    """The newest snapshot whose record the bookkeeping forgot (-1: none): it and every
    older one were staged and settled (published, skipped or superseded) by a flush."""
    value = _section(published).get("settled_through")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _analyzed_snapshot(table: PaimonTable, file_name: str) -> int:
    try:
        document = json.loads(table.files.read_bytes(STATISTICS_DIR, file_name))
        return int(document["snapshotId"])
    except (MetadataError, ValueError, KeyError, TypeError):
        return -1


def _tag_statistics(table: PaimonTable) -> set[str | None]:
    names: set[str | None] = set()
    selector = pafs.FileSelector(table.files.path("tag"), allow_not_found=True)
    for info in table.table_location.filesystem.get_file_info(selector):
        if info.type == pafs.FileType.File and info.base_name.startswith("tag-"):
            with suppress(MetadataError):
                names.add(table.files.read_json("tag", info.base_name).get("statistics"))
    return names


def _unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        path.unlink()


def open_publisher(opened: OpenedTable) -> Publisher | Unpublishable:
    """The registry's factory: Paimon publishing writes snapshots into the table, so it is
    opt-in — ``publish = true`` set for the table in the config."""
    table = opened.table
    if not isinstance(table, PaimonTable):
        return Unpublishable(f"no metadata publisher for {table.format_name} tables")
    if "publish" not in opened.config.model_fields_set:
        return Unpublishable(
            "Paimon statistics are published only when the table sets publish = true "
            "(each publish commits an ANALYZE snapshot)",
            warn=False,
        )
    if table.table_location.local_root is None:
        return Unpublishable("lakestats commits Paimon statistics to local tables only")
    return PaimonPublisher(table)
