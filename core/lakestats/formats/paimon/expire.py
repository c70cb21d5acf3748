"""Paimon snapshot expiry, for tables lakestats expires itself (pypaimon has none).

Paimon expires a prefix of its history: snapshots ``[earliest, end)``. A file goes with the
expired snapshots when no retained snapshot and no tag references it any more: data files,
manifests, manifest lists, index manifests and index files (deletion vectors), and the
statistics files snapshots name in ``statistics`` (``FileDeletionBase``: a stats file
survives iff a retained snapshot or a tag names it), and the changelog files, manifests and
manifest list of ``changelog-producer`` tables (their changelog lives as long as their
snapshots unless ``changelog.*`` retention keeps it longer: Java then moves it under
``changelog/``, which lakestats does not do — such tables are refused). Then ``EARLIEST``
= ``end``.

Unlike Java Paimon (which deletes data files first), the snapshot files are deleted first:
a crash in between leaves unreferenced files (harmless, found by orphan cleanup) rather
than a snapshot naming deleted files. Which snapshots to expire is planned by
``lakestats.expiry`` (or ``retention`` below, Paimon's own ``snapshot.num-retained.*`` /
``snapshot.time-retained`` rules).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path

from lakestats.exceptions import ExpiryError, MetadataError
from lakestats.formats.paimon.metafiles import (
    INDEX_DIR,
    MANIFEST_DIR,
    SNAPSHOT_DIR,
    SNAPSHOT_PREFIX,
    STATISTICS_DIR,
)
from lakestats.formats.paimon.snapshots import PaimonSnapshot
from lakestats.formats.paimon.table import PaimonTable

_DURATION_UNITS = {"ms": 0.001, "s": 1, "min": 60, "m": 60, "h": 3600, "d": 86400}
# options that give the changelog a lifecycle of its own (``changelogLifecycleDecoupled``)
_CHANGELOG_RETENTION = frozenset(
    {"changelog.num-retained.min", "changelog.num-retained.max", "changelog.time-retained"}
)


def referenced_files(table: PaimonTable, snapshot: PaimonSnapshot) -> set[Path]:
    """Every file (relative to the table) a snapshot needs."""
    files = table.files
    names: set[Path] = set()
    for manifest_list in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        names.add(Path(MANIFEST_DIR, manifest_list))
        for record in files.manifest_records(manifest_list):
            names.add(Path(MANIFEST_DIR, str(record["_FILE_NAME"])))
    for entry in table.live_entries(snapshot).values():
        if not entry.external_path:
            names.add(_relative(table, table.data_file(entry).path))
    if snapshot.index_manifest:
        names.add(Path(MANIFEST_DIR, snapshot.index_manifest))
        for record in files.manifest_records(snapshot.index_manifest):
            if int(record.get("_KIND") or 0) == 0:
                names.add(Path(INDEX_DIR, str(record["_FILE_NAME"])))
    if snapshot.statistics:
        names.add(Path(STATISTICS_DIR, snapshot.statistics))
    if snapshot.changelog_manifest_list:
        names.add(Path(MANIFEST_DIR, snapshot.changelog_manifest_list))
        for record in files.manifest_records(snapshot.changelog_manifest_list):
            names.add(Path(MANIFEST_DIR, str(record["_FILE_NAME"])))
        for entry in table.manifest_entries(snapshot.changelog_manifest_list):
            if entry.kind == 0 and not entry.external_path:
                names.add(_relative(table, table.data_file(entry).path))
    return names


def _relative(table: PaimonTable, path: str) -> Path:
    root = table.table_location.root.rstrip("/") + "/"
    return Path(path.removeprefix(root))


def _check_changelog_coupled(table: PaimonTable) -> None:
    decoupled = sorted(k for k in table.paimon_schema().options if k in _CHANGELOG_RETENTION)
    if decoupled:
        raise ExpiryError(
            f"{table.location}: the table keeps its changelog apart from its snapshots "
            f"({', '.join(decoupled)}); lakestats does not expire such tables — use "
            "Paimon's own expire_snapshots"
        )


def expire(table: PaimonTable, snapshot_ids: Iterable[int]) -> list[int]:
    """Expire the oldest snapshots among ``snapshot_ids`` (a prefix of history); which."""
    root = table.table_location.local_root
    if root is None:
        raise ExpiryError(f"{table.location}: snapshot expiry runs on local tables only")
    wanted = set(snapshot_ids)
    for attempt in range(2):
        table.refresh()
        try:
            plan = _plan(table, wanted)
            break
        except MetadataError:
            # another expiry (a second lakestats, the writer's own) deleted files of
            # snapshots this plan read: once more on the table as it is now, without what
            # is gone already; a file missing again is damage, said as it is
            if attempt:
                raise
    if plan is None:
        return []
    doomed, keep, deletable = plan
    for snapshot_id in doomed:  # snapshot files first: never a snapshot naming lost files
        with suppress(FileNotFoundError):
            (root / SNAPSHOT_DIR / f"{SNAPSHOT_PREFIX}{snapshot_id}").unlink()
    _advance_earliest(root / SNAPSHOT_DIR, keep[0])
    for relative in deletable:
        with suppress(FileNotFoundError):
            (root / relative).unlink()
    return doomed


def _plan(table: PaimonTable, wanted: set[int]) -> tuple[list[int], list[int], list[Path]] | None:
    """The snapshots to expire (the oldest of ``wanted``, a prefix of the history), those
    kept, and the files only the expired ones reference; None when there is none."""
    ids = sorted(table.snapshot_ids())
    if not ids or not wanted:
        return None
    _check_changelog_coupled(table)
    current = ids[-1]
    if current in wanted:
        raise ExpiryError(f"{table.location}: the current snapshot {current} cannot be expired")
    doomed: list[int] = []
    for snapshot_id in ids:
        if snapshot_id not in wanted:
            break
        doomed.append(snapshot_id)
    if not doomed:
        return None
    keep = [i for i in ids if i not in doomed]
    tagged = table.tagged_ids()
    needed: set[Path] = set()
    for snapshot_id in keep:
        needed |= referenced_files(table, table.snapshot(snapshot_id))
    for snapshot_id in tagged & set(doomed):
        needed |= referenced_files(table, table.snapshot(snapshot_id))
    candidates: set[Path] = set()
    for snapshot_id in doomed:
        candidates |= referenced_files(table, table.snapshot(snapshot_id))
    return doomed, keep, sorted(candidates - needed)


def _advance_earliest(snapshot_dir: Path, earliest: int) -> None:
    """Point the ``EARLIEST`` hint at ``earliest`` unless it points further already
    (another expiry went further meanwhile: a hint behind the oldest snapshot costs
    readers a scan, Paimon's own expiry never moves it back)."""
    hint = snapshot_dir / "EARLIEST"
    with suppress(FileNotFoundError, ValueError, UnicodeDecodeError):
        if int(hint.read_text().strip()) >= earliest:
            return
    temp = hint.with_name(f".EARLIEST.{os.getpid()}.tmp")
    temp.write_text(str(earliest))
    temp.replace(hint)


def duration_seconds(text: str) -> float:
    """A Paimon duration option (``1 h``, ``30 min``, ``10s``, ``500 ms``) in seconds."""
    cleaned = text.strip().lower().replace(" ", "")
    for unit in sorted(_DURATION_UNITS, key=len, reverse=True):
        if cleaned.endswith(unit) and cleaned[: -len(unit)].replace(".", "", 1).isdigit():
            return float(cleaned[: -len(unit)]) * _DURATION_UNITS[unit]
    return float(cleaned) / 1000  # a bare number is milliseconds


def retention(
    snapshots: Sequence[tuple[int, int]], options: Mapping[str, str], now_ms: int
) -> list[int]:
    """Snapshot ids Paimon's own rules expire: ``(id, timeMillis)`` oldest first.

    ``ExpireSnapshotsImpl``: keep at least ``snapshot.num-retained.min`` (10) and at most
    ``snapshot.num-retained.max``; between those, expire up to the first snapshot younger
    than ``snapshot.time-retained`` (1 h); at most ``snapshot.expire.limit`` (50) at once.
    """
    if not snapshots:
        return []
    retain_min = int(options.get("snapshot.num-retained.min", "10"))
    retain_max = int(options.get("snapshot.num-retained.max", str(2**31 - 1)))
    time_retained_ms = duration_seconds(options.get("snapshot.time-retained", "1 h")) * 1000
    limit = int(options.get("snapshot.expire.limit", "50"))
    ids = [s for s, _ in snapshots]
    times = dict(snapshots)
    earliest, latest = ids[0], ids[-1]
    low = max(latest - retain_max + 1, earliest)
    high = min(latest - retain_min + 1, earliest + limit)
    expired = [i for i in ids if i < low]
    for snapshot_id in range(low, high):
        stamp = times.get(snapshot_id)
        if stamp is not None and stamp >= now_ms - time_retained_ms:
            break
        expired.append(snapshot_id)
    return [i for i in expired if i in times][:limit]
