"""``DeltaLakeTable``: a Delta table behind the ``TableFormat`` protocol.

A snapshot id is a Delta version. The log is read directly (``log``): deltalake has no
per-version API, its ``get_add_actions`` ignores checkpoint ``stats_parsed`` and carries
no deletion vectors (checked with deltalake 1.6). A version is *available* when its
commit file and every commit back to a complete checkpoint (or to version 0) are present;
the others are expired (log cleanup). Version 0 of a table created empty (no file added)
is the table's creation, not a snapshot, as Iceberg's ``CREATE TABLE`` has none.

Bootstrapping (``commits_since(None)``) starts with a baseline at the newest complete
checkpoint from which the log reaches the current version, then follows the JSON commits;
without a checkpoint, from version 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.parquet as pq
from pyarrow import fs as pafs

from lakestats.cache import CacheView, process_cache
from lakestats.exceptions import (
    ExpiryError,
    LineageError,
    MetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
    first_line,
)
from lakestats.formats.base import read_commit
from lakestats.formats.delta.dv import DvDescriptor, read_deletion_vector
from lakestats.formats.delta.files import FileStats, data_file
from lakestats.formats.delta.log import (
    LOG_DIR,
    LogListing,
    commit_name,
    list_log,
    probe_log,
    read_checkpoint,
    read_commit_fingerprinted,
)
from lakestats.formats.delta.replay import (
    CommitLog,
    FileKey,
    ReplayState,
    check_protocol,
    file_key,
)
from lakestats.formats.delta.schema import DeltaSchema, parse_schema
from lakestats.formats.delta.vacuumed import files_to_read, readable_from
from lakestats.formats.probing import PROBE_ABOVE_ENTRIES, probe_or_list
from lakestats.locations import TableLocation, filesystem_from_uri
from lakestats.model import (
    BASELINE_OPERATION,
    Commit,
    DataFile,
    SnapshotInfo,
    TableSchema,
)

FORMAT_NAME = "delta"


def _checkpoint_bytes(actions: list[dict[str, Any]]) -> int:
    """A checkpoint's actions in memory: measured ~2.1 KB an ``add`` with 277 bytes of
    stats (8 columns), the stats string on top of a fixed ~1.85 KB."""
    return sum(1850 + len(str((a.get("add") or {}).get("stats") or "")) for a in actions)


def _commit_bytes(read: tuple[CommitLog, int]) -> int:
    """A parsed commit (and its JSON file's size) in memory: measured 2.7× its JSON."""
    return 3 * read[1]


class DeltaLakeTable:
    """A Delta table opened by location. ``refresh()`` lists ``_delta_log/`` again — or,
    once a listing returned more than ``probe_above_entries`` files (one object-store list
    request holds 1,000), asks for the commits after the newest by name
    (``log.probe_log``) and lists again only when that cannot tell, or every
    ``probing.RELIST_EVERY_S``."""

    def __init__(
        self, location: TableLocation, *, probe_above_entries: int = PROBE_ABOVE_ENTRIES
    ) -> None:
        self._location = location
        self._probe_above_entries = probe_above_entries
        self._uri = _base_uri(location)
        self._lock = threading.Lock()
        # keyed by (version, mtime, size): a log cut back and written again is a new file
        self._commits: CacheView[tuple[CommitLog, int]] = CacheView(
            process_cache(), "delta_commits", _commit_bytes
        )
        self._checkpoints: CacheView[list[dict[str, Any]]] = CacheView(
            process_cache(), "delta_checkpoints", _checkpoint_bytes
        )
        self._schemas: dict[int, DeltaSchema] = {}
        self._views: dict[int, tuple[LogListing, _LogView]] = {}
        self._file_versions: dict[tuple[int, int, int], bool] = {}  # commit → adds files
        self._listing = list_log(location)
        self._listed_at = time.monotonic()
        _check_last_checkpoint(self._listing)
        if self._listing.current_version is None:
            raise TableNotFoundError(f"{location.uri} is not a Delta table: {LOG_DIR}/ is empty")
        self._table_id = self._metadata_at(self._listing, self._current(self._listing))["id"]

    # --- identity -------------------------------------------------------------------------

    @property
    def format_name(self) -> str:
        return FORMAT_NAME

    @property
    def table_id(self) -> str:
        return str(self._table_id)

    @property
    def location(self) -> str:
        # a local table's plain path, as Iceberg's and Paimon's: its ``file:`` URI (``_uri``,
        # which names data files) is not percent-encoded, and a reader of a location (the
        # sidecar publisher, the store) would decode a ``%20`` in a folder's name
        return self._location.uri

    def __repr__(self) -> str:
        return f"DeltaLakeTable({self._location.uri!r})"

    def refresh(self) -> None:
        with self._lock:
            previous, listed_at = self._listing, self._listed_at
        # what a probe misses (checkpoints written since, old files the log cleanup
        # deleted) changes no commit after the known ones: the next listing sees it
        listing, listed_at = probe_or_list(
            previous,
            listed_at,
            self._probe_above_entries,
            lambda known: probe_log(self._location, known),
            self._list,
        )
        with self._lock:
            self._listing, self._listed_at = listing, listed_at

    def _list(self) -> LogListing:
        listing = list_log(self._location)
        _check_last_checkpoint(listing)
        return listing

    # --- versions ---------------------------------------------------------------------------

    def current_snapshot_id(self) -> int | None:
        return self._view(self._snapshot()).current

    def snapshot_ids(self) -> frozenset[int]:
        return self._view(self._snapshot()).snapshots

    def data_version_of(self, version: int) -> int | None:
        """``HasDatalessVersions``: the newest data version before ``version``, where
        ``version``'s commit is in the log and changed no file. The log is cleaned oldest
        first, so the versions between the two are all listed."""
        listing = self._snapshot()
        view = self._view(listing)
        if version in view.snapshots or version not in listing.commits:
            return None
        return max((v for v in view.snapshots if v < version), default=None)

    def snapshot_infos(self) -> tuple[SnapshotInfo, ...]:
        """Every available snapshot (for expiry planning), timestamps from the listing."""
        listing = self._snapshot()
        infos = []
        for version in sorted(self._view(listing).snapshots):
            entry = listing.commits.get(version)
            checkpoint = listing.checkpoints.get(version)
            stamp = entry.mtime_ms if entry else (checkpoint.mtime_ms if checkpoint else 0)
            infos.append(SnapshotInfo(version, stamp, in_main_lineage=True))
        return tuple(infos)

    def expire_snapshots(self, snapshot_ids: Sequence[int]) -> None:
        """Delta tables expire their own log: lakestats does not delete log files."""
        raise ExpiryError(
            f"table {self._location.uri} is read-only for lakestats: Delta expires versions "
            "with its own log retention (delta.logRetentionDuration, checkpoints and "
            "metadata cleanup by the writer); lakestats follows that expiry"
        )

    def schema(self, schema_id: int | None = None) -> TableSchema:
        listing = self._snapshot()
        if schema_id is None:
            metadata = self._metadata_at(listing, self._current(listing))
            return self._delta_schema(metadata).table_schema
        known = self._schemas.get(schema_id)
        if known is None:
            self._scan_schemas(listing)
            known = self._schemas.get(schema_id)
        if known is None:
            raise MetadataError(f"table {self._location.uri} has no schema with id {schema_id}")
        return known.table_schema

    # --- commits ------------------------------------------------------------------------------

    def commits_since(self, after_snapshot_id: int | None) -> Sequence[Commit]:
        listing = self._snapshot()
        view = self._view(listing)
        last = self._current(listing)
        if after_snapshot_id is not None:
            if after_snapshot_id not in view.snapshots:
                reason = (
                    "its log was cut back"
                    if after_snapshot_id > last
                    else "its commit is gone (log cleanup)"
                )
                raise LineageError(
                    f"version {after_snapshot_id} is no longer a version of table "
                    f"{self._location.uri} ({reason}); starting over from a checkpoint"
                )
            missing = [
                v for v in range(after_snapshot_id + 1, last + 1) if v not in listing.commits
            ]
            if missing:
                raise LineageError(
                    f"table {self._location.uri}: {LOG_DIR}/{commit_name(missing[-1])} after "
                    f"version {after_snapshot_id} is missing; starting over from a checkpoint"
                )
            start = self._vacuumed_start(listing, {}, after_snapshot_id, last)
            if start is not None:
                raise LineageError(
                    f"table {self._location.uri}: files added after version "
                    f"{after_snapshot_id} were removed and vacuumed before lakestats read "
                    f"them; starting over from version {start}"
                )
            state = self._replay(listing, after_snapshot_id, with_files=True)
            return self._follow(listing, state, after_snapshot_id, last)
        if view.baseline is not None:
            state = self._replay(listing, view.baseline, with_files=True)
        else:
            missing = [v for v in range(last + 1) if v not in listing.commits]
            if missing:
                raise MetadataError(
                    f"table {self._location.uri} cannot be read: "
                    f"{LOG_DIR}/{commit_name(missing[-1])} is missing and no checkpoint covers it"
                )
            state = ReplayState()
        start = self._vacuumed_start(listing, state.files, state.version, last)
        if start is not None:  # older versions' files are gone: a baseline where they end
            state = self._replay(listing, start, with_files=True)
        elif view.baseline is None:
            return self._follow(listing, state, None, last)
        return [self._baseline(listing, state), *self._follow(listing, state, state.version, last)]

    def commit_fingerprint(self, snapshot_id: int) -> str | None:
        """``SupportsCommitFingerprint``: the digest of the version's commit file as the
        current listing has it (cached per file name, modification time and size, so a
        log cut back and written again is read anew)."""
        listing = self._snapshot()
        if snapshot_id not in self._view(listing).snapshots or snapshot_id not in listing.commits:
            return None
        return self._commit(listing, snapshot_id).fingerprint

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        listing = self._snapshot()
        if snapshot_id not in self._view(listing).snapshots:
            raise SnapshotNotFoundError(
                f"version {snapshot_id} is not available in the log of table {self._location.uri}"
            )
        state = self._replay(listing, snapshot_id, with_files=True)
        return self._state_files(state, f"version {snapshot_id}")

    def _state_files(self, state: ReplayState, where: str) -> list[DataFile]:
        """The live files of ``state``, each read with the schema it was written under
        where the log says (``ReplayState.written_under``): a column added since is known
        absent from the file, not of unknown stats (a column dropped since is left to the
        core, which keeps only the fields of the commit's schemas). Their partitions are
        named as ``state``'s schema names them."""
        listed_under = self._delta_schema(self._require_metadata(state))
        names = _partition_names(listed_under)
        return [
            self._data_file(add, self._delta_schema(metadata), where, partition_names=names)
            for metadata, adds in state.files_by_metadata()
            for add in adds
        ]

    # --- building commits -------------------------------------------------------------------

    def _follow(
        self, listing: LogListing, state: ReplayState, parent: int | None, last: int
    ) -> list[Commit]:
        """The data commits after ``state`` up to ``last``; the others only move metadata.
        The first data commit under a schema that changed a column's type (type widening)
        or renamed a partition column lists every live file again (``_relisted``)."""
        commits: list[Commit] = []
        metadata = state.metadata
        schema = self._delta_schema(metadata) if metadata is not None else None
        for version in range(state.version + 1, last + 1):
            with read_commit(f"version {version}", commits):
                commit = self._follow_one(listing, state, parent, version)
                if commit is None:
                    continue
                if schema is None or commit.schema_id != schema.schema_id:
                    # _follow_one has just read (and kept) the commit's schema
                    now = self._schemas[commit.schema_id]
                    if schema is not None and _relists(schema, now):
                        commit = self._relisted(commit, state, version)
                    schema = now
            commits.append(commit)
            parent = version
        return commits

    def _relisted(self, commit: Commit, state: ReplayState, version: int) -> Commit:
        """``commit``, the first after a column's type was widened, with every other live
        file removed as it was and added as it is: the files written before hold sketches
        of values of the old type (an int hashed as 4 bytes, a long as 8; a decimal at its
        old scale), which would count a value written before and after twice. Paimon and
        Iceberg do the same. After a partition column's rename, so that the files written
        before are of the partitions the new name names (partitions are keyed by name)."""
        added = {f.path for f in commit.added_files}
        others = tuple(
            f
            for f in self._state_files(state, f"{LOG_DIR}/{commit_name(version)}")
            if f.path not in added
        )
        return replace(
            commit,
            added_files=(*commit.added_files, *others),
            removed_files=(*commit.removed_files, *others),
        )

    def _follow_one(
        self, listing: LogListing, state: ReplayState, parent: int | None, version: int
    ) -> Commit | None:
        """``version`` applied to ``state``: its data commit, ``None`` when it moves only
        metadata."""
        log = self._commit(listing, version)
        # a remove of a file that is not live removes nothing (nothing was recorded); each
        # removed file with the add that made it live, which carries its stats
        removed = {
            key[0]: (remove, state.files[key])
            for remove in log.removes
            if (key := file_key(remove)) in state.files
        }
        state.apply(log, with_files=True)
        where = f"{LOG_DIR}/{commit_name(version)}"
        check_protocol(state.protocol, where=where)
        if not log.adds and not log.removes:
            return None  # schema, properties, VACUUM, OPTIMIZE of nothing: no new stats
        schema = self._delta_schema(self._require_metadata(state))
        added, _ = log.net_changes()
        return Commit(
            snapshot_id=version,
            parent_id=parent,
            sequence_number=version,
            timestamp_ms=log.timestamp_ms,
            operation=log.operation,
            schema_id=schema.schema_id,
            added_files=tuple(self._data_file(add, schema, where) for add in added.values()),
            removed_files=tuple(
                self._data_file(add, schema, where, removed=remove)
                for remove, add in removed.values()
            ),
            fingerprint=log.fingerprint,
        )

    def _vacuumed_start(
        self,
        listing: LogListing,
        start_files: Mapping[FileKey, Mapping[str, Any]],
        version: int,
        last: int,
    ) -> int | None:
        """Where following the log from ``version`` (reading ``start_files`` there) must
        start instead because VACUUM deleted files it would read; ``None``: nothing gone."""
        commits = [self._commit(listing, v) for v in range(version + 1, last + 1)]
        removed_at = files_to_read(start_files, commits)
        if not removed_at:
            return None
        return readable_from(removed_at, self._missing_files(removed_at))

    def _missing_files(self, paths: Iterable[str]) -> set[str]:
        """The log paths among ``paths`` whose files do not exist (one file-info call per
        file system)."""
        groups: dict[int, tuple[pafs.FileSystem, list[tuple[str, str]]]] = {}
        missing: set[str] = set()
        try:
            for path in paths:
                filesystem, where = self._open(self._file_uri(path))
                groups.setdefault(id(filesystem), (filesystem, []))[1].append((path, where))
            for filesystem, entries in groups.values():
                infos = filesystem.get_file_info([where for _, where in entries])
                missing.update(
                    path
                    for (path, _), info in zip(entries, infos, strict=True)
                    if info.type == pafs.FileType.NotFound
                )
        except (OSError, ValueError) as exc:
            raise MetadataError(
                f"table {self._location.uri}: cannot check whether VACUUM deleted its "
                f"removed files: {first_line(exc)}"
            ) from exc
        return missing

    def _baseline(self, listing: LogListing, state: ReplayState) -> Commit:
        version = state.version
        where = f"checkpoint {version}"
        check_protocol(state.protocol, where=where)
        schema = self._delta_schema(self._require_metadata(state))
        entry = listing.commits.get(version)
        checkpoint = listing.checkpoints.get(version)
        stamp = entry.mtime_ms if entry else (checkpoint.mtime_ms if checkpoint else 0)
        fingerprint = None  # a checkpoint whose commit file is gone: nothing to tell it by
        if entry is not None:
            log = self._commit(listing, version)
            stamp, fingerprint = log.timestamp_ms, log.fingerprint
        return Commit(
            snapshot_id=version,
            parent_id=None,
            sequence_number=version,
            timestamp_ms=stamp,
            operation=BASELINE_OPERATION,
            schema_id=schema.schema_id,
            added_files=tuple(self._state_files(state, where)),
            fingerprint=fingerprint,
        )

    def _data_file(
        self,
        add: Mapping[str, Any],
        schema: DeltaSchema,
        where: str,
        *,
        removed: Mapping[str, Any] | None = None,
        partition_names: Mapping[int, str] | None = None,
    ) -> DataFile:
        """The file an ``add`` action describes. ``removed``: the ``remove`` of that live
        file, which carries no stats or partition (delta-rs's not even a size): the add
        describes it for the commit's document (the stats re-merge what the store recorded
        for it, by path) without reading its deletion vector, and a stats-less file already
        vacuumed counts 0 rows."""
        path = self._file_uri(str(add.get("path")))
        raw_stats = add.get("stats")
        if raw_stats is None or raw_stats == "":
            raw_stats = add.get("stats_parsed")
        what = "file" if removed is None else "removed file"
        stats = FileStats.parse(raw_stats, where=f"{where}, {what} {path}")
        records = stats.num_records if stats is not None else None
        if records is None:
            try:
                records = self._footer_rows(path)  # writers may keep no stats (delta-rs options)
            except MetadataError:
                if removed is None:
                    raise
                records = 0
        dv_raw = add.get("deletionVector") if removed is None else None
        vector = (
            read_deletion_vector(
                DvDescriptor.parse(dv_raw), self._read_dv_file, where=f"{where}, file {path}"
            )
            if dv_raw
            else None
        )
        return data_file(
            path=path,
            size=int(add.get("size") or (removed or {}).get("size") or 0),
            schema=schema,
            stats=stats,
            record_count=records,
            partition_values=add.get("partitionValues") or {},
            deletion_vector=vector,
            where=where,
            partition_names=partition_names,
        )

    # --- replay and caches ---------------------------------------------------------------------

    def _replay(self, listing: LogListing, version: int, *, with_files: bool) -> ReplayState:
        """The state as of ``version`` from the newest checkpoint the log reaches it from."""
        state = ReplayState()
        if version < 0:
            return state
        base = _rebuild_base(listing, version)
        if base is None:
            raise MetadataError(
                f"version {version} of table {self._location.uri} cannot be rebuilt: its "
                "commits and checkpoints are gone"
            )
        if base >= 0:
            state.load_checkpoint(base, self._checkpoint_actions(listing, base))
        for v in range(base + 1, version + 1):
            state.apply(self._commit(listing, v), with_files=with_files)
        return state

    def _commit(self, listing: LogListing, version: int) -> CommitLog:
        entry = listing.commits.get(version)
        if entry is None:
            raise MetadataError(
                f"{LOG_DIR}/{commit_name(version)} of table {self._location.uri} is missing"
            )
        key = (version, entry.mtime_ms, entry.size)
        cached = self._commits.get(key)
        if cached is not None:
            return cached[0]
        actions, fingerprint = read_commit_fingerprinted(self._location, version)
        log = CommitLog.of(version, actions, entry.mtime_ms, fingerprint)
        self._commits.put(key, (log, entry.size))
        return log

    def _checkpoint_actions(self, listing: LogListing, version: int) -> list[dict[str, Any]]:
        checkpoint = listing.checkpoints[version]
        key = (version, checkpoint.mtime_ms)
        cached = self._checkpoints.get(key)
        if cached is None:
            cached = read_checkpoint(self._location, checkpoint)
            self._checkpoints.put(key, cached)  # past the budget alone: read when needed
        return cached

    def _metadata_at(self, listing: LogListing, version: int) -> Mapping[str, Any]:
        return self._require_metadata(self._replay(listing, version, with_files=False))

    def _require_metadata(self, state: ReplayState) -> Mapping[str, Any]:
        if state.metadata is None:
            raise MetadataError(
                f"table {self._location.uri} has no metaData action up to version {state.version}"
            )
        return state.metadata

    def _delta_schema(self, metadata: Mapping[str, Any]) -> DeltaSchema:
        schema = parse_schema(
            str(metadata.get("schemaString") or ""),
            list(metadata.get("partitionColumns") or ()),
            dict(metadata.get("configuration") or {}),
            where=f"table {self._location.uri}",
        )
        self._schemas.setdefault(schema.schema_id, schema)
        return schema

    def _scan_schemas(self, listing: LogListing) -> None:
        """Every schema the available log holds (for ``schema(id)`` of an older commit)."""
        for version in sorted(_available_versions(listing)):
            if version in listing.commits:
                metadata = self._commit(listing, version).metadata
                if metadata is not None:
                    self._delta_schema(metadata)
            elif version in listing.checkpoints:
                self._metadata_at(listing, version)
                self._delta_schema(self._metadata_at(listing, version))

    def _view(self, listing: LogListing) -> _LogView:
        """Which versions are snapshots (computed once per listing)."""
        cached = self._views.get(id(listing))
        if cached is not None and cached[0] is listing:
            return cached[1]
        available = _available_versions(listing)
        data = sorted(v for v in available if v in listing.commits and self._has_files(listing, v))
        base = (
            _bootstrap_checkpoint(listing, listing.current_version)
            if listing.current_version is not None
            else None
        )
        baseline = None
        if base is not None:
            # the newest data version the checkpoint's state is (it may be a later,
            # metadata-only version); the checkpoint itself when that data commit is gone
            baseline = max((v for v in data if v <= base), default=base)
        snapshots = frozenset(data) | ({baseline} if baseline is not None else frozenset())
        view = _LogView(snapshots, max(snapshots) if snapshots else None, baseline)
        self._views = {id(listing): (listing, view)}
        return view

    def _has_files(self, listing: LogListing, version: int) -> bool:
        entry = listing.commits[version]
        key = (version, entry.mtime_ms, entry.size)
        known = self._file_versions.get(key)
        if known is None:
            log = self._commit(listing, version)
            known = bool(log.adds or log.removes)
            self._file_versions[key] = known
        return known

    def _snapshot(self) -> LogListing:
        with self._lock:
            return self._listing

    def _current(self, listing: LogListing) -> int:
        current = listing.current_version
        if current is None:
            raise TableNotFoundError(f"{self._location.uri}: {LOG_DIR}/ is empty")
        return current

    # --- files ------------------------------------------------------------------------------

    def _file_uri(self, path: str) -> str:
        decoded = unquote(path)
        if urlsplit(decoded).scheme and not decoded.startswith("/"):
            return decoded  # absolute (shallow clones, other buckets)
        return f"{self._uri}/{decoded.lstrip('/')}"

    def _open(self, uri: str) -> tuple[pafs.FileSystem, str]:
        if uri.startswith(self._uri + "/"):
            return self._location.filesystem, self._location.fs_path(uri[len(self._uri) + 1 :])
        return filesystem_from_uri(uri)

    def _footer_rows(self, uri: str) -> int:
        try:
            filesystem, where = self._open(uri)
            return int(pq.ParquetFile(where, filesystem=filesystem).metadata.num_rows)
        except (OSError, ValueError) as exc:
            raise MetadataError(
                f"data file {uri} has no row count in the log and its Parquet footer cannot "
                f"be read: {first_line(exc)}"
            ) from exc

    def _read_dv_file(self, path: str, absolute: bool) -> bytes:
        uri = path if absolute else f"{self._uri}/{path}"
        try:
            filesystem, where = self._open(uri)
            with filesystem.open_input_file(where) as handle:
                data: bytes = handle.read()
                return data
        except (OSError, ValueError) as exc:
            raise MetadataError(
                f"cannot read deletion vector file {uri}: {first_line(exc)}"
            ) from exc


@dataclass(frozen=True)
class _LogView:
    snapshots: frozenset[int]  # available versions that changed files, and the baseline
    current: int | None  # the newest snapshot
    baseline: int | None  # where a run without history starts (newest checkpoint's data)


def _partition_names(schema: DeltaSchema) -> dict[int, str]:
    return {c.column.field_id: c.column.name for c in schema.partition_columns}


def _relists(before: DeltaSchema, now: DeltaSchema) -> bool:
    """Whether the first data commit under ``now`` lists every live file again: a column's
    type changed (``TableSchema.retypes``) or a partition column was renamed."""
    if now.table_schema.retypes(before.table_schema):
        return True
    then = _partition_names(before)
    return any(then.get(i, name) != name for i, name in _partition_names(now).items())


def _base_uri(location: TableLocation) -> str:
    if isinstance(location.filesystem, pafs.LocalFileSystem):
        return "file://" + location.root  # not percent-encoded: file paths never are here
    return location.uri.rstrip("/")


def _check_last_checkpoint(listing: LogListing) -> None:
    """The checkpoint ``_last_checkpoint`` names must be whole (parts are written before
    the hint, so a partial one there is damage, not a writer at work)."""
    hinted = listing.last_checkpoint
    checkpoint = listing.checkpoints.get(hinted) if hinted is not None else None
    if checkpoint is not None and not checkpoint.complete:
        raise MetadataError(
            f"checkpoint {hinted} in {LOG_DIR}/ is incomplete: {checkpoint.missing} is "
            "missing (and _last_checkpoint names it)"
        )


def _rebuild_base(listing: LogListing, version: int) -> int | None:
    """The newest complete checkpoint ≤ ``version`` whose commits reach it (-1: from the
    start of the log), or ``None`` when the version cannot be rebuilt."""
    if version in listing.checkpoints and listing.checkpoints[version].complete:
        return version
    v = version
    while v >= 0:
        if v in listing.checkpoints and listing.checkpoints[v].complete:
            return v
        if v not in listing.commits:
            return None
        v -= 1
    return -1


def _available_versions(listing: LogListing) -> set[int]:
    current = listing.current_version
    if current is None:
        return set()
    return {v for v in listing.versions if _rebuild_base(listing, v) is not None}


def _bootstrap_checkpoint(listing: LogListing, current: int) -> int | None:
    """The newest complete checkpoint from which the commits reach ``current``."""
    for version in sorted(listing.complete_checkpoints(), reverse=True):
        if version <= current and all(
            v in listing.commits for v in range(version + 1, current + 1)
        ):
            return version
    return None
