"""``StatsStore``: one table's segments, aggregates, stats documents and state log."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

import structlog

from lakestats.cache import CacheView, MemoryCache, process_cache
from lakestats.exceptions import ConcurrentUpdateError, StoreError, VersionGapError
from lakestats.expiry import StoreFile, VersionInfo
from lakestats.locations import location_key, same_location
from lakestats.merge import (
    counts_only,
    group_of,
    merge_partitions,
    overlay_partitions,
    partition_sort_key,
    view_of,
    whole_table,
)
from lakestats.model import (
    AggregateDelta,
    ColumnSketch,
    DataFile,
    HeldFile,
    MergedView,
    PartitionAggregate,
    PartitionKey,
    SegmentEntry,
    SketchSettings,
    StateVersion,
)
from lakestats.store import aggregates, atomic, segments, statelog

SEGMENTS_DIR = "segments"
AGGREGATES_DIR = "aggregates"
STATS_DIR = "stats"
# A merged view's chain: at most this many deltas, holding at most half as many partition
# entries as the view, before a commit writes the whole view again (``write_merged_view``)
MAX_MERGED_DELTAS = 32
# A segment's aggregate chain (``SegmentEntry.aggregate_deltas``): a removal writes only the
# partitions it changed while the chain has fewer deltas than this and at most a quarter as
# many entries as the segment has files (a small segment is rewritten whole: cheaper than
# a chain to read); else the whole aggregate again (``chain_extends``)
MAX_SEGMENT_DELTAS = 32
# A removal's re-merge of table groups merges this many partition entries at a time into
# what it has so far: memory bounded by a batch, not the table's partitions × columns
_TABLE_MERGE_BATCH = 256

_log = structlog.get_logger(__name__)


def aggregate_bytes(parts: Sequence[PartitionAggregate]) -> int:
    """About what an aggregate file's partitions take in memory: their sketches' bytes and
    a few hundred bytes per entry (its weight in the cache)."""
    total = 0
    for part in parts:
        total += 512
        for column in part.columns.values():
            total += 256
            for blob in (column.theta, column.kll, column.value_sample, column.frequent_items):
                if blob is not None:
                    total += len(blob)
    return total


def _view_bytes(view: MergedView) -> int:
    groups = aggregate_bytes(view.groups) if view.groups is not None else 0
    return aggregate_bytes(view.partitions) + aggregate_bytes((view.table,)) + groups


def _merge_pending(
    merged: dict[int, PartitionAggregate],
    pending: dict[int, list[PartitionAggregate]],
    settings: SketchSettings,
) -> None:
    """Each group's pending entries merged into it, and the lists emptied."""
    for index, parts in pending.items():
        if parts:
            merged[index] = whole_table([merged[index], *parts], settings)
            parts.clear()


def _paths_bytes(paths: frozenset[str]) -> int:
    return sum(len(p) + 120 for p in paths)  # a str and its set slot


def merge_key(state: StateVersion) -> str:
    """Names the set of live segment aggregates a merged aggregate was made from.

    Aggregate files are immutable and every re-merge writes a new one, so their paths
    identify the merged result whatever the version number.
    """
    digest = hashlib.sha256(state.table_id.encode())
    for segment in state.segments:
        # a segment without a chain names itself as before chains existed: stored views
        # keep their keys
        for rel in segment.aggregate_files:
            digest.update(b"\0" + rel.encode())
    return digest.hexdigest()


def _chain_key(files: Sequence[str]) -> str:
    """A segment's aggregate in the cache: its files (immutable) name it; one file alone
    is the key ``read_aggregate`` caches it under."""
    return "\0".join(files)


def chain_extends(segment: SegmentEntry, changed: int) -> bool:
    """Whether a removal's ``changed`` partition entries go into ``segment``'s aggregate
    as one more delta (within the chain's bounds: ``MAX_SEGMENT_DELTAS``), rather than a
    whole aggregate written again."""
    entries = sum(d.partitions for d in segment.aggregate_deltas) + changed
    return len(segment.aggregate_deltas) < MAX_SEGMENT_DELTAS and entries <= segment.file_count // 4


def referenced_files(state: StateVersion | None) -> set[str]:
    """Paths (relative to the table dir) that ``state`` points to: segments, aggregates,
    stats documents. Log files are not included: the log is never garbage."""
    if state is None:
        return set()
    refs = {seg.path for seg in state.segments}
    refs.update(retired.path for retired in state.retired)
    refs.update(rel for seg in state.segments for rel in seg.aggregate_files)
    refs.update(state.stats.values())
    if state.merged_path is not None:
        refs.add(state.merged_path)
    if state.merged_table_path is not None:
        refs.add(state.merged_table_path)
    refs.update(delta.path for delta in state.merged_deltas)
    return refs


def list_files(table_dir: atomic.PathLike) -> list[str]:
    """Every file under ``table_dir`` that cleanup may consider, as sorted relative paths.

    That is everything except state versions (``log/<20 digits>.json``), including the
    hidden temporary files a crash can leave in any folder (``atomic.is_temp_name``).
    ``list_files(d) - referenced_files(s)`` is what ``s`` does not need; whether older
    versions still need it is the cleanup policy's call.
    """
    versions = {statelog.version_file_name(v) for v in statelog.list_versions(table_dir)}
    return [
        rel
        for rel in atomic.list_tree(table_dir)
        if not (rel.startswith(f"{statelog.LOG_DIR}/") and rel.split("/", 1)[1] in versions)
    ]


def _check_table_id(table_id: str) -> None:
    if not atomic.is_plain_name(table_id):
        raise ValueError(f"table id {table_id!r} cannot be used as a folder name")


# (state dir, table id) → the location that chose ``<table_id>/`` in this process
_CHOSEN: dict[tuple[str, str], str] = {}
_CHOSEN_LOCK = threading.Lock()
# (state dir, folder) of copies whose taking ``store_folder_taken`` has said
_TOLD: set[tuple[str, str]] = set()


def store_folder(state_dir: str | Path, table_id: str, location: str) -> str:
    """The folder under ``state_dir`` that holds the stats of table ``table_id`` at
    ``location``.

    A table's id names its folder, but a copy of a table keeps its id (a Delta log, a
    Paimon schema or Iceberg metadata copied elsewhere, test fixtures sharing ``testId``):
    the first of them to be analyzed keeps ``<table_id>/``, every other gets
    ``<table_id>@<12 hex digits of its location's hash>/``. Sharing one folder, each would
    see the other's commits as a rollback and start over on every run, and serve the
    other's stats as its own. A table seen at a new location is analyzed again into a
    folder of its own for the same reason: its stored files are named by their old paths.
    """
    return _choose_folder(state_dir, table_id, location)[0]


def _choose_folder(
    state_dir: str | Path, table_id: str, location: str
) -> tuple[str, tuple[StateVersion, int] | None]:
    """``store_folder``, and the newest state version of ``<table_id>/`` (with its file's
    size) when that is the folder: read to choose, it need not be read again."""
    _check_table_id(table_id)
    root = atomic.root(state_dir)
    digest = hashlib.sha256(location_key(location).encode()).hexdigest()[:12]
    own = f"{table_id}@{digest}"
    if statelog.list_versions(atomic.join(root, own)):
        return own, None  # a copy's folder stays its own once made
    found = statelog.latest_version_sized(atomic.join(root, table_id))
    with _CHOSEN_LOCK:
        # a table opened in this process before either committed (a daemon opens all its
        # tables at start): it holds the folder as surely as a state would
        key = (str(root), table_id)
        holder = found[0].location if found is not None else _CHOSEN.get(key)
        if holder is None or same_location(holder, location):
            _CHOSEN.setdefault(key, location)
            return table_id, found
        # said once per copy and process: a daemon opens a table more than once (its
        # worker's handle, its reader's) before the copy's own folder has a state
        told = (str(root), own) in _TOLD
        _TOLD.add((str(root), own))
    if not told:
        _log.warning(
            "store_folder_taken", table_id=table_id, location=location, holder=holder, folder=own
        )
    return own, None


class StatsStore:
    """The stats store of one table under ``state_dir/<folder>/``: the folder is the
    table's id, or ``store_folder``'s choice when another table holds that (``for_table``).

    Writers (``write_*``) return only once their file is durable, so a ``StateVersion``
    built from their results can be committed safely. Reads raise ``StoreError`` naming the
    file when it is missing or not ours. Safe to share between threads; several processes
    may write concurrently, ``commit`` lets exactly one win each version.

    What it reads (aggregates, segments' paths, merged views) it keeps in the process's
    ``cache.MemoryCache``, under this store's own keys, within the budget every table of
    the process shares; ``cache_bytes`` gives it a cache of its own instead (0: none).
    """

    def __init__(
        self,
        state_dir: str | Path,
        table_id: str,
        *,
        folder: str | None = None,
        location: str | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        self._folder = table_id if folder is None else folder
        _check_table_id(self._folder)
        self._table_id = table_id
        # the table's location, when known: a state naming another is not this table's
        self._location = location
        self._table_dir = atomic.join(atomic.root(state_dir), self._folder)
        cache = process_cache() if cache_bytes is None else MemoryCache(cache_bytes)
        # this store's entries: another store of the table reads the files itself
        self._aggregates: CacheView[tuple[PartitionAggregate, ...]] = CacheView(
            cache, "store_aggregates", aggregate_bytes
        )
        self._segment_paths: CacheView[frozenset[str]] = CacheView(
            cache, "store_segment_paths", _paths_bytes
        )
        self._merged: CacheView[MergedView] = CacheView(cache, "store_merged_views", _view_bytes)
        self._merged_key: str | None = None  # the one merged view of this store cached
        # the newest state version read or written, and its file's size (``current``)
        self._newest: tuple[StateVersion, int] | None = None

    @property
    def table_dir(self) -> atomic.StorePath:
        """The table's folder: a ``Path``, or a URI for a store on S3."""
        return self._table_dir

    @classmethod
    def for_table(
        cls, state_dir: str | Path, table_id: str, location: str, *, cache_bytes: int | None = None
    ) -> StatsStore:
        """The store of the table ``table_id`` at ``location`` (``store_folder``)."""
        folder, newest = _choose_folder(state_dir, table_id, location)
        store = cls(state_dir, table_id, folder=folder, location=location, cache_bytes=cache_bytes)
        if newest is not None:
            store._check_owner(newest[0])
            store._newest = newest  # ``current`` asks only whether it is still the newest
        return store

    @property
    def table_id(self) -> str:
        return self._table_id

    @property
    def folder(self) -> str:
        """The store's folder name under the state dir."""
        return self._folder

    def path(self, rel: str) -> atomic.StorePath:
        """The absolute path of a store file named relative to the table dir."""
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
            raise StoreError(f"{self._table_dir}: store path {rel!r} escapes the table folder")
        return atomic.join(self._table_dir, *parts)

    # -- state log ------------------------------------------------------------------------

    def current(self) -> StateVersion | None:
        """The newest state version, ``None`` if the table was never processed.

        A version file is created whole and never rewritten, and the newest is never
        deleted (``delete_version``): the newest version this store read or wrote is still
        the newest while its file is there, as long as it was, and the next version's is
        not. Asking that costs two stats (on S3 two HEADs, whatever the log's length and
        the state's size) where listing the log and reading the newest costs a LIST and a
        GET of the whole state — on every poll of every table.
        """
        known = self._newest
        if known is not None and self._still_newest(*known):
            return known[0]
        found = statelog.latest_version_sized(self._table_dir)
        if found is None:
            self._newest = None
            return None
        self._check_owner(found[0])
        self._newest = found
        return found[0]

    def _still_newest(self, state: StateVersion, size: int) -> bool:
        version = state.version
        return (
            statelog.version_size(self._table_dir, version) == size
            and statelog.version_size(self._table_dir, version + 1) is None
        )

    def read_version(self, version: int) -> StateVersion:
        state = statelog.read_version(self._table_dir, version)
        self._check_owner(state)
        return state

    def versions(self) -> list[int]:
        return statelog.list_versions(self._table_dir)

    def _check_owner(self, state: StateVersion | None) -> None:
        if state is None:
            return
        if state.table_id != self._table_id:
            raise StoreError(
                f"{statelog.version_path(self._table_dir, state.version)}: belongs to table "
                f"{state.table_id!r}, not {self._table_id!r}"
            )
        if self._location is not None and not same_location(state.location, self._location):
            # another table with this id took the folder after it was chosen: reopening
            # the table chooses again (``store_folder``)
            raise StoreError(
                f"{statelog.version_path(self._table_dir, state.version)}: holds the stats "
                f"of the table at {state.location}, not of the one at {self._location} "
                f"(both have table id {self._table_id!r})"
            )

    def commit(self, state: StateVersion) -> StateVersion:
        """Publish ``state`` as the next version and return it as written.

        ``state.version`` must be the current version + 1 (1 for an empty log). Raises
        ``ConcurrentUpdateError`` when another writer got that version first (re-read
        ``current()`` and redo the work on top of it), ``StoreError`` if a file the state
        newly references does not exist. A ``created_at_ms`` of 0 is set to now.
        """
        if state.table_id != self._table_id:
            raise ValueError(f"state is for table {state.table_id!r}, store is {self._table_id!r}")
        current = self.current()
        expected = 1 if current is None else current.version + 1
        if state.version < expected:
            raise ConcurrentUpdateError(
                f"{statelog.version_path(self._table_dir, state.version)}: version "
                f"{state.version} was already committed (current is {expected - 1})"
            )
        if state.version > expected:
            raise VersionGapError(
                f"{statelog.version_path(self._table_dir, state.version)}: cannot commit "
                f"version {state.version}: the next is {expected} (the log was deleted "
                "meanwhile, by a `lakestats forget` of a config sharing the state dir?)"
            )
        for rel in sorted(referenced_files(state) - referenced_files(current)):
            if not atomic.exists(self.path(rel)):
                raise StoreError(f"{self.path(rel)}: referenced by the new state but missing")
        if state.created_at_ms == 0:
            state = replace(state, created_at_ms=time.time_ns() // 1_000_000)
        size = statelog.create_version(self._table_dir, state)
        if size is None:
            raise ConcurrentUpdateError(
                f"{statelog.version_path(self._table_dir, state.version)}: another writer "
                f"committed version {state.version} first"
            )
        self._newest = (state, size)
        return state

    # -- segments -------------------------------------------------------------------------

    def _new_name(self, folder: str, snapshot_id: int, suffix: str) -> str:
        # A fresh uuid per write: re-processing a commit never overwrites a file that a
        # committed version may reference; the loser is an unreferenced orphan.
        return f"{folder}/{snapshot_id}-{uuid.uuid4()}{suffix}"

    def write_segment(
        self, snapshot_id: int, files: Sequence[DataFile], types: Mapping[int, str]
    ) -> str:
        """Write a segment durably; returns its path relative to the table dir."""
        rel = self._new_name(SEGMENTS_DIR, snapshot_id, ".parquet")
        segments.write_segment(self.path(rel), files, types)
        self._segment_paths.put(rel, frozenset(f.path for f in files))
        return rel

    def read_segment(
        self,
        rel: str,
        *,
        partitions_of: Collection[str] | None = None,
        field_ids: Collection[int] | None = None,
        value_samples: bool = True,
    ) -> tuple[DataFile, ...]:
        """The segment's files (``partitions_of``: only those in the partitions of these
        data files; ``field_ids``: every file, with only these fields' stats;
        ``value_samples=False``: sketches without their value samples, not read)."""
        return segments.read_segment(
            self.path(rel),
            partitions_of=partitions_of,
            field_ids=field_ids,
            value_samples=value_samples,
        )

    def segment_types(self, rel: str) -> dict[int, str]:
        """field id → type string the segment's bounds are encoded with."""
        return segments.read_segment_types(self.path(rel))

    def segment_paths(self, rel: str) -> frozenset[str]:
        """The data file paths a segment holds (cached; reads only the path column)."""
        cached = self._segment_paths.get(rel)
        if cached is None:
            cached = frozenset(segments.read_segment_paths(self.path(rel)))
            self._segment_paths.put(rel, cached)
        return cached

    def held_files(self, state: StateVersion) -> dict[str, HeldFile]:
        """Every live file of ``state`` → what the store holds of it (``HeldFile``). Reads
        each segment's path and count columns, not its stats
        (``segments.read_segment_contents``)."""
        out: dict[str, HeldFile] = {}
        for segment in state.segments:
            held = segments.read_segment_contents(self.path(segment.path))
            for path, found in held.items():
                if path not in segment.dead_files:
                    out[path] = replace(found, segment=segment.path)
        return out

    def held_before(
        self, state: StateVersion, wanted: Collection[str], *, versions: int
    ) -> dict[str, HeldFile]:
        """The files of ``wanted`` whose stats the store still holds, live or not: in the
        segments of ``state`` (tombstoned files too), in its retired segments, and, for
        those not found there, in the segments of up to ``versions`` earlier state
        versions, newest first (what left the state stays until cleanup). A file in
        several segments keeps an entry whose stats describe every row, if one does.
        Segments or versions deleted meanwhile are skipped."""
        missing = set(wanted)
        out: dict[str, HeldFile] = {}
        seen: set[str] = set()
        numbers = (n for n in sorted(self.versions(), reverse=True) if n < state.version)
        version: StateVersion | None = state
        for _ in range(versions + 1):
            if version is not None:
                held: list[tuple[str, frozenset[str] | None]]
                held = [(s.path, s.dead_files) for s in version.segments]
                held += [(r.path, None) for r in version.retired]  # every file dead
                for rel, dead in held:
                    if rel not in seen:
                        seen.add(rel)
                        self._hold(rel, dead, missing, out)
            if not missing or (number := next(numbers, None)) is None:
                break
            try:
                version = self.read_version(number)
            except (StoreError, OSError, ValueError):
                version = None  # deleted by cleanup meanwhile, or unreadable
        return out

    def _hold(
        self,
        rel: str,
        dead: frozenset[str] | None,
        missing: set[str],
        out: dict[str, HeldFile],
    ) -> None:
        """``missing`` files the segment ``rel`` holds into ``out`` (``dead``: its
        tombstones; ``None``: all its files are)."""
        try:
            held = segments.read_segment_contents(self.path(rel))
        except (StoreError, OSError):
            return  # swept: its files are read again
        for path, found in held.items():
            if path in missing or (path in out and not out[path].whole):
                tombstoned = dead is None or path in dead
                out[path] = replace(found, segment=rel, dead=tombstoned)
                if found.whole:
                    missing.discard(path)

    def stored_sketches(self, held: Mapping[str, str]) -> dict[str, Mapping[int, ColumnSketch]]:
        """The block sketches the store holds of files (path → the segment holding them),
        reading only the row groups that hold them. Files stored without any, or whose
        segment is gone or unreadable now (swept meanwhile), are left out: they are read
        again."""
        by_segment: dict[str, list[str]] = {}
        for path, rel in held.items():
            by_segment.setdefault(rel, []).append(path)
        out: dict[str, Mapping[int, ColumnSketch]] = {}
        for rel, paths in by_segment.items():
            try:
                found = segments.read_segment(self.path(rel), only=paths)
            except (StoreError, OSError) as exc:
                _log.warning("stored_sketches_unreadable", segment=rel, error=str(exc))
                continue
            for stored in found:
                every_row = not stored.live_rows_unknown and stored.live_rows == stored.record_count
                if stored.sketches and every_row and stored.path not in out:
                    out[stored.path] = stored.sketches
        return out

    def locate(self, paths: Iterable[str], state: StateVersion) -> dict[str, SegmentEntry]:
        """Map data file paths to the live segment of ``state`` that added them.

        Paths that no live segment holds (unknown, or already tombstoned) are left out.
        Newer segments are searched first, so a path added twice maps to the newest.
        """
        wanted = set(paths)
        found: dict[str, SegmentEntry] = {}
        for seg in reversed(state.segments):
            if not wanted:
                break
            if seg.live_file_count <= 0:
                continue
            hits = (wanted & self.segment_paths(seg.path)) - seg.dead_files
            for data_path in hits:
                found[data_path] = seg
            wanted -= hits
        return found

    # -- aggregates -----------------------------------------------------------------------

    def write_aggregate(self, snapshot_id: int, parts: Sequence[PartitionAggregate]) -> str:
        """Write a segment aggregate durably; returns its path relative to the table dir."""
        rel = self._new_name(AGGREGATES_DIR, snapshot_id, ".parquet")
        aggregates.write_aggregate(self.path(rel), parts)
        return rel

    def read_aggregate(self, rel: str) -> tuple[PartitionAggregate, ...]:
        """The aggregate's partitions (cached: treat the result as read-only)."""
        cached = self._aggregates.get(rel)
        if cached is None:
            cached = aggregates.read_aggregate(self.path(rel))
            self._aggregates.put(rel, cached)
        return cached

    def check_aggregate(self, rel: str) -> None:
        """``StoreError`` naming the file unless the aggregate at ``rel`` is held in memory
        or its footer is an aggregate's (its rows are not read)."""
        if self._aggregates.get(rel) is None:
            aggregates.check_aggregate(self.path(rel))

    def segment_aggregate(self, segment: SegmentEntry) -> tuple[PartitionAggregate, ...]:
        """The segment's aggregate: its base file with each delta's entries in place of
        theirs, in order (an emptied partition removed). Cached: treat as read-only."""
        files = segment.aggregate_files
        if len(files) == 1:
            return self.read_aggregate(files[0])
        cached = self._aggregates.get(_chain_key(files))
        if cached is not None:
            return cached
        # The chain one removal shorter is what this process held before that removal
        # (its merge read it): only the newer deltas go on it, the base is not decoded
        # again. The shorter chain's entry is dropped: its state is superseded.
        known, start = None, 1
        for n in range(len(files) - 1, 1, -1):
            known = self._aggregates.pop(_chain_key(files[:n]))
            if known is not None:
                start = n
                break
        if known is None:
            known = self._aggregates.pop(files[0]) or self._read_uncached(files[0])
        changed = [p for rel in files[start:] for p in self._read_uncached(rel)]
        cached = overlay_partitions(known, changed)
        self._aggregates.put(_chain_key(files), cached)
        return cached

    def merged_view(self, state: StateVersion, settings: SketchSettings) -> MergedView:
        """The merge of all live segments' aggregates of ``state``: THE merged-view cache.

        Three levels, cheapest first: this process's memory (a long-running daemon keeps
        it from commit to commit), the files the state points to (written by the commit
        that made it: ``write_merged_view``), else a re-merge of every live segment's
        aggregate. Files that are missing or unreadable are logged and re-merged: they
        only ever save work.
        """
        key = merge_key(state)
        view = self._merged.get(key)
        if view is None and state.merged_path and state.merged_key == key:
            try:
                view = self._read_merged_view(state, state.merged_path, settings)
            except StoreError as exc:
                _log.warning("merged_view_unreadable", table=self._table_id, error=str(exc))
        if view is None:
            parts: list[PartitionAggregate] = []
            for segment in state.segments:
                parts.extend(self.segment_aggregate(segment))
            view = view_of(merge_partitions(parts, settings), settings)
        self._keep_merged(key, view)
        return view

    def _keep_merged(self, key: str, view: MergedView) -> None:
        """Cache ``view`` as this store's one merged view: the view of a state a newer one
        replaced is never read again here (a commit reads the newest), and holding them
        pushed a daemon's manifests out of the cache (64 MB of stale views in a soak)."""
        previous, self._merged_key = self._merged_key, key
        if previous is not None and previous != key:
            self._merged.pop(previous)
        self._merged.put(key, view)

    def _read_merged_view(
        self, state: StateVersion, base: str, settings: SketchSettings
    ) -> MergedView:
        # A view written with every partition's sketches (before ``merged_counts_only``) is
        # read once and not cached: its files are as large as the sketches it no longer keeps
        read = self.read_aggregate if state.merged_counts_only else self._read_uncached
        partitions = read(base)
        if state.merged_deltas:
            changed = [p for d in state.merged_deltas for p in read(d.path)]
            partitions = overlay_partitions(partitions, changed)
        if state.merged_table_path is None:  # one partition, or written before tables were kept
            if state.merged_counts_only and len(partitions) > 1:
                raise StoreError(f"{self.path(base)}: merged view of partitions has no table")
            return view_of(partitions, settings)
        table = read(state.merged_table_path)
        if len(table) != 1:
            raise StoreError(f"{self.path(state.merged_table_path)}: not one table aggregate")
        return MergedView(tuple(counts_only(p) for p in partitions), table[0])

    def _read_uncached(self, rel: str) -> tuple[PartitionAggregate, ...]:
        cached = self._aggregates.get(rel)
        return cached if cached is not None else aggregates.read_aggregate(self.path(rel))

    def write_merged_view(
        self,
        state: StateVersion,
        view: MergedView,
        *,
        snapshot_id: int,
        previous: StateVersion,
        changed: frozenset[PartitionKey] | None,
    ) -> StateVersion:
        """Write ``view`` (the merged view of ``state``'s segments) durably; ``state``
        pointing at it. ``changed``: the partitions that differ from ``previous``'s view
        (``None``: unknown), which alone are written when ``previous``'s files can carry
        them as one more delta; else the whole view is, and the chain starts again."""
        base: str | None = None
        deltas: tuple[AggregateDelta, ...] = ()
        if changed is not None and self._extendable(previous, len(changed), len(view.partitions)):
            by_key = {p.partition: p for p in view.partitions}
            entries = [
                by_key.get(key) or PartitionAggregate(partition=key)
                for key in sorted(changed, key=partition_sort_key)
            ]
            delta = AggregateDelta(self.write_aggregate(snapshot_id, entries), len(entries))
            base, deltas = previous.merged_path, (*previous.merged_deltas, delta)
        table_path: str | None = None
        if base is None and len(view.partitions) <= 1:
            # one partition is the table: stored once, with its sketches (the reader's
            # ``view_of`` then merges nothing), and no table file of its own
            whole = [replace(view.table, partition=p.partition) for p in view.partitions]
            base = self.write_aggregate(snapshot_id, whole)
        else:
            if base is None:
                base = self.write_aggregate(snapshot_id, view.partitions)
            table_path = self.write_aggregate(snapshot_id, (view.table,))
        done = replace(
            state,
            merged_path=base,
            merged_table_path=table_path,
            merged_deltas=deltas,
            merged_counts_only=True,
        )
        return replace(done, merged_key=merge_key(done))

    def _extendable(self, previous: StateVersion, changed: int, partitions: int) -> bool:
        """Whether ``previous``'s merged-view files are its current, readable view and
        one more delta of ``changed`` entries keeps the chain within its bounds."""
        if (
            previous.merged_path is None
            or not previous.merged_counts_only  # older views' entries carry sketches
            or previous.merged_table_path is None
            or previous.merged_key != merge_key(previous)
            or len(previous.merged_deltas) >= MAX_MERGED_DELTAS
            or sum(d.partitions for d in previous.merged_deltas) + changed > partitions // 2
        ):
            return False
        files = [previous.merged_path, *(d.path for d in previous.merged_deltas)]
        try:
            for rel in files:
                self.read_aggregate(rel)  # cached: read when the view was
        except StoreError:
            return False
        return True

    def remerge_partitions(
        self,
        segments: Sequence[SegmentEntry],
        keys: frozenset[PartitionKey],
        settings: SketchSettings,
        *,
        groups: Collection[int] = (),
    ) -> tuple[tuple[PartitionAggregate, ...], dict[int, PartitionAggregate]]:
        """The partitions ``keys`` merged from the aggregates of ``segments`` (after a
        removal: only the partitions it touched), sorted by key, and the table groups
        ``groups`` (``merge.group_of``: index → the merge of its partitions; merging is
        associative, so the table is the merge of all groups). One pass over the
        aggregates, the groups merged as it goes (a removal holds a batch of entries at a
        time, not all)."""
        matching: list[PartitionAggregate] = []
        wanted = frozenset(groups)
        merged = {index: whole_table((), settings) for index in wanted}  # empty: merges as nothing
        pending: dict[int, list[PartitionAggregate]] = {index: [] for index in wanted}
        held = 0
        for segment in segments:
            parts = self.segment_aggregate(segment)
            matching.extend(part for part in parts if part.partition in keys)
            if not wanted:
                continue
            for part in parts:
                index = group_of(part.partition)
                if index in wanted:
                    pending[index].append(part)
                    held += 1
            if held >= _TABLE_MERGE_BATCH:
                _merge_pending(merged, pending, settings)
                held = 0
        _merge_pending(merged, pending, settings)
        return merge_partitions(matching, settings), merged

    def remember_aggregate(self, rel: str, parts: Sequence[PartitionAggregate]) -> None:
        """Record the partitions of an aggregate this process wrote to ``rel`` (what a read
        returns: keys compare by their rendering), which its commit reads next."""
        self._aggregates.put(rel, tuple(parts))

    def remember_merged(self, state: StateVersion, view: MergedView) -> None:
        """Record the merged view of ``state`` (computed by the commit that wrote it)."""
        self._keep_merged(merge_key(state), view)

    # -- stats documents ------------------------------------------------------------------

    def write_stats(self, snapshot_id: int, doc: Mapping[str, Any]) -> str:
        """Write a table-level stats document durably; returns its relative path.

        ``ValueError`` if ``doc`` holds a non-finite float (it must already be JSON-safe).
        """
        data = json.dumps(doc, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        rel = self._new_name(STATS_DIR, snapshot_id, ".json")
        atomic.atomic_write(self.path(rel), data.encode())
        return rel

    def read_stats(self, rel: str) -> dict[str, Any]:
        path = self.path(rel)
        try:
            raw = atomic.read_bytes(path)
        except FileNotFoundError as exc:
            raise StoreError(f"{path}: stats file is missing") from exc
        except OSError as exc:
            raise StoreError(f"{path}: unreadable stats file: {exc}") from exc
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreError(f"{path}: stats file is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise StoreError(f"{path}: stats file is not a JSON object")
        return doc

    # -- maintenance (lakestats.maintenance decides what; these only do it) ----------------

    def files(self) -> list[StoreFile]:
        """Every file cleanup may consider (``list_files``), with its age and size."""
        versions = {statelog.version_file_name(v) for v in self.versions()}
        return [
            StoreFile(rel, mtime_ms, size)
            for rel, mtime_ms, size in atomic.stat_tree(self._table_dir)
            if not (rel.startswith(f"{statelog.LOG_DIR}/") and rel.split("/", 1)[1] in versions)
        ]

    def usage(self) -> tuple[int, int]:
        """(files, bytes) under the table's folder, state versions included."""
        stats = atomic.stat_tree(self._table_dir)
        return len(stats), sum(size for _, _, size in stats)

    def version_infos(self) -> list[VersionInfo]:
        """Every state version with its creation time (the version file's mtime: a stat,
        not a read, so retention costs the same however long the log is)."""
        infos: list[VersionInfo] = []
        for version in self.versions():
            try:
                mtime_ms = atomic.mtime_ms(statelog.version_path(self._table_dir, version))
            except FileNotFoundError:  # deleted by a concurrent cleanup meanwhile
                continue
            infos.append(VersionInfo(version, mtime_ms))
        return infos

    def delete_file(self, rel: str) -> bool:
        """Delete an unreferenced store file; ``False`` if already gone. The caller
        (cleanup) is responsible for it being unreferenced by every retained version."""
        if statelog.is_version_path(rel):
            raise ValueError(f"{rel} is a state version: use delete_version")
        return atomic.remove(self.path(rel))

    def delete_version(self, version: int) -> bool:
        """Delete an old state version; never the newest one."""
        versions = self.versions()
        if versions and version >= versions[-1]:
            raise ValueError(f"refusing to delete state version {version}: it is the newest")
        return atomic.remove(statelog.version_path(self._table_dir, version))

    def sync(self) -> None:
        """Make deletions durable (fsync the store's folders)."""
        for folder in (statelog.LOG_DIR, SEGMENTS_DIR, AGGREGATES_DIR, STATS_DIR):
            atomic.sync_dir(atomic.join(self._table_dir, folder))
