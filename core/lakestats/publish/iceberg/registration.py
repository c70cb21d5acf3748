"""What one catalog commit registers and removes, and the bookkeeping that follows it.

Pure functions over pyiceberg's ``TableMetadata``: the publisher loads the metadata, asks
these what to send and what its files now are, and does the I/O itself. The bookkeeping
is this publisher's section of ``StateVersion.published``::

    {"iceberg": {"snapshots": {"<snapshot id>": {"statistics": path,
                                                 "partition_statistics": path}}}}
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.statistics import PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import (
    RemovePartitionStatisticsUpdate,
    RemoveStatisticsUpdate,
    SetPartitionStatisticsUpdate,
    SetStatisticsUpdate,
    TableUpdate,
)

PUBLISHED_KEY = "iceberg"  # key of this publisher's bookkeeping in StateVersion.published
FILE_PREFIX = "lakestats-"  # every file this publisher writes into a table's metadata folder

Records = dict[str, dict[str, str]]  # snapshot id (str) → kind → path


def owner_tag(store_dir: str) -> str:
    """The tag that marks files one stats store wrote (its state dir's table folder): lets a
    store adopt its own registrations that a crash left unrecorded, and tell them from
    another state dir's (``owned_by``)."""
    return hashlib.sha256(store_dir.encode()).hexdigest()[:12]


def file_tag(snapshot_id: int, owner: str | None) -> str:
    """The start of a new file's name: ``lakestats-<snapshot>-o<owner>-<uuid>``."""
    middle = f"o{owner}-" if owner else ""
    return f"{FILE_PREFIX}{snapshot_id}-{middle}{uuid.uuid4()}"


def owned_by(path: str, owner: str | None) -> bool:
    """Whether ``path`` is a file the store tagged ``owner`` wrote. Without an owner (a
    publisher used on its own) every lakestats file counts, as before tags existed."""
    if owner is None:
        return is_ours(path)
    return f"-o{owner}-" in PurePosixPath(path.rstrip("/")).name and is_ours(path)


def is_ours(path: str) -> bool:
    """Whether a statistics path names a file this publisher wrote (and may delete)."""
    return PurePosixPath(path.rstrip("/")).name.startswith(FILE_PREFIX)


@dataclass(frozen=True)
class Staged:
    """A snapshot's written files, waiting for the catalog commit that registers them."""

    snapshot_id: int
    statistics: StatisticsFile | None
    partition_statistics: PartitionStatisticsFile | None


def records(published: Mapping[str, Any]) -> Records:
    """This publisher's bookkeeping out of ``published`` (empty when there is none)."""
    section = published.get(PUBLISHED_KEY)
    if not isinstance(section, dict):
        return {}
    snapshots = section.get("snapshots")
    return dict(snapshots) if isinstance(snapshots, dict) else {}


def staged_paths(staged: Iterable[Staged]) -> set[str]:
    out: set[str] = set()
    for s in staged:
        if s.statistics is not None:
            out.add(s.statistics.statistics_path)
        if s.partition_statistics is not None:
            out.add(s.partition_statistics.statistics_path)
    return out


def live_snapshots(metadata: TableMetadata) -> set[int]:
    return {s.snapshot_id for s in metadata.snapshots}


def updates(metadata: TableMetadata, pending: Sequence[Staged]) -> list[TableUpdate]:
    """The catalog commit: register ``pending`` and drop entries of expired snapshots."""
    out: list[TableUpdate] = []
    for s in pending:
        if s.statistics is not None:
            out.append(SetStatisticsUpdate.model_validate({"statistics": s.statistics}))
        if s.partition_statistics is not None:
            out.append(
                SetPartitionStatisticsUpdate.model_validate(
                    {"partition-statistics": s.partition_statistics}
                )
            )
    out += dangling(metadata)
    return out


def without_foreign(
    metadata: TableMetadata, pending: Sequence[Staged], recorded: Records, owner: str | None
) -> tuple[list[Staged], list[tuple[int, str, str]]]:
    """``pending`` minus the files that would replace an entry someone else registered.

    An entry for the snapshot that our bookkeeping does not name was written by another
    publisher (a second state dir analysing the same catalog table, another tool): it
    describes the same snapshot, so it is kept rather than silently replaced. Returns the
    staged entries to register and ``(snapshot, kept path, our unregistered path)`` for
    each file left out (the caller deletes ours and says so).
    """
    ours = {int(k): set(v.values()) for k, v in recorded.items()}
    stats = {s.snapshot_id: s.statistics_path for s in metadata.statistics}
    partition = {p.snapshot_id: p.statistics_path for p in metadata.partition_statistics}
    kept: list[Staged] = []
    skipped: list[tuple[int, str, str]] = []
    for s in pending:
        known = ours.get(s.snapshot_id, set())
        mine = {p for p in (stats.get(s.snapshot_id), partition.get(s.snapshot_id)) if p}
        known = known | {p for p in mine if owned_by(p, owner)}
        statistics, partition_statistics = s.statistics, s.partition_statistics
        theirs = stats.get(s.snapshot_id)
        if statistics is not None and theirs is not None and theirs not in known:
            skipped.append((s.snapshot_id, theirs, statistics.statistics_path))
            statistics = None
        theirs = partition.get(s.snapshot_id)
        if partition_statistics is not None and theirs is not None and theirs not in known:
            skipped.append((s.snapshot_id, theirs, partition_statistics.statistics_path))
            partition_statistics = None
        kept.append(Staged(s.snapshot_id, statistics, partition_statistics))
    return kept, skipped


def dangling(metadata: TableMetadata) -> list[TableUpdate]:
    """Removals of entries naming snapshots that no longer exist (pyiceberg's expiry
    leaves partition statistics behind; a concurrent expiry may orphan ours)."""
    live = live_snapshots(metadata)
    out: list[TableUpdate] = [
        RemoveStatisticsUpdate.model_validate({"snapshot-id": s.snapshot_id})
        for s in metadata.statistics
        if s.snapshot_id not in live
    ]
    out += [
        RemovePartitionStatisticsUpdate.model_validate({"snapshot-id": p.snapshot_id})
        for p in metadata.partition_statistics
        if p.snapshot_id not in live
    ]
    return out


def superseded(before: TableMetadata, registered: Sequence[Staged]) -> set[str]:
    """Paths of entries our registrations replaced (the same snapshot's older files)."""
    snapshots = {s.snapshot_id for s in registered}
    old = {s.statistics_path for s in before.statistics if s.snapshot_id in snapshots}
    old |= {p.statistics_path for p in before.partition_statistics if p.snapshot_id in snapshots}
    return old - staged_paths(registered)


def registered_snapshots(metadata: TableMetadata) -> set[int]:
    """Snapshots that have an entry of ours (statistics or partition statistics)."""
    out = {s.snapshot_id for s in metadata.statistics if is_ours(s.statistics_path)}
    return out | {
        p.snapshot_id for p in metadata.partition_statistics if is_ours(p.statistics_path)
    }


def referenced(metadata: TableMetadata) -> set[str]:
    """Every statistics path the table metadata names."""
    out = {s.statistics_path for s in metadata.statistics}
    return out | {p.statistics_path for p in metadata.partition_statistics}


def reconcile(
    previous: Mapping[str, dict[str, str]],
    metadata: TableMetadata,
    registered: Sequence[Staged],
    owner: str | None = None,
) -> Records:
    """Bookkeeping = our entries in the table metadata now, for live snapshots.

    Entries registered by a run that crashed before recording them are adopted; snapshots
    with nothing to register (no sketch, unpartitioned) are remembered as done. An entry
    the bookkeeping already names stays ours without the owner tag: a store upgraded from
    a release before tags registered untagged files.
    """
    live = live_snapshots(metadata)
    out: Records = {k: {} for k in previous if int(k) in live}
    for s in registered:
        out.setdefault(str(s.snapshot_id), {})

    def ours(snapshot_id: int, kind: str, path: str) -> bool:
        known = previous.get(str(snapshot_id), {}).get(kind) == path
        return snapshot_id in live and (known or owned_by(path, owner))

    for st in metadata.statistics:
        if ours(st.snapshot_id, "statistics", st.statistics_path):
            out.setdefault(str(st.snapshot_id), {})["statistics"] = st.statistics_path
    for ps in metadata.partition_statistics:
        if ours(ps.snapshot_id, "partition_statistics", ps.statistics_path):
            out.setdefault(str(ps.snapshot_id), {})["partition_statistics"] = ps.statistics_path
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def expired_record_paths(published: Mapping[str, Any], metadata: TableMetadata) -> set[str]:
    """Files the bookkeeping names for snapshots that no longer exist."""
    live = live_snapshots(metadata)
    out: set[str] = set()
    for snapshot, entry in records(published).items():
        if int(snapshot) not in live:
            out.update(p for p in entry.values() if isinstance(p, str))
    return out
