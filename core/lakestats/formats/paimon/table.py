"""``PaimonTable``: a Paimon table directory opened behind the ``TableFormat`` Protocol.

Reads metadata only (snapshots, schemas, manifests, deletion-vector index files), never
data files. Paimon's history is linear: snapshot N's parent is N - 1, and ids are listed
from ``snapshot/`` (``LATEST``/``EARLIEST`` are only hints), or found by name once the
directory is big (``MetaFiles.probe_snapshots``). A rollback deletes the later snapshot
files, so an id above the current one is no ancestor.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog
from pyarrow import fs as pafs

from lakestats.cache import CacheView, process_cache
from lakestats.exceptions import (
    ExpiryError,
    LineageError,
    MetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from lakestats.formats.base import TableIdentity, read_commit
from lakestats.formats.paimon.changes import (
    FileKey,
    delta_changes,
    is_visible,
    merge_entries,
)
from lakestats.formats.paimon.deletion_vectors import VectorRange, read_vector, vector_ranges
from lakestats.formats.paimon.entries import EntryConverter, ManifestEntry, parse_entry
from lakestats.formats.paimon.evolution import (
    GroupKey,
    RowGroup,
    by_group,
    changed_groups,
    group_key,
    partial,
    row_group,
)
from lakestats.formats.paimon.key_merge import (
    bucket_merge,
    by_bucket,
    merge_rules,
    needs_merge,
    schema_written_as,
)
from lakestats.formats.paimon.metafiles import (
    INDEX_DIR,
    MANIFEST_DIR,
    SCHEMA_DIR,
    SCHEMA_PREFIX,
    SNAPSHOT_DIR,
    SNAPSHOT_PREFIX,
    MetaFiles,
    SnapshotListing,
)
from lakestats.formats.paimon.snapshots import PaimonSnapshot, operation, parse_snapshot
from lakestats.formats.paimon.types import PaimonSchema, parse_schema
from lakestats.formats.probing import PROBE_ABOVE_ENTRIES, FileStamp, probe_or_list
from lakestats.locations import TableLocation
from lakestats.model import (
    BASELINE_OPERATION,
    ColumnFile,
    Commit,
    DataFile,
    DeletionVector,
    KeyMerge,
    PartitionAggregate,
    SketchSettings,
    SnapshotInfo,
    TableSchema,
)
from lakestats.written_types import WrittenAs

FORMAT_NAME = "paimon"
_log = structlog.get_logger(__name__)


def _entries_bytes(entries: tuple[ManifestEntry, ...]) -> int:
    """What a manifest's parsed entries take in memory: measured ~840 bytes an entry with
    8 columns' stats, most of it the entry's fields; the stats' bytes on top."""
    total = 0
    for entry in entries:
        stats = entry.value_stats
        total += 768 + len(stats.min_values or b"") + len(stats.max_values or b"")
        total += 16 * len(stats.null_counts) + 64 * len(entry.value_stats_cols or ())
    return total


def not_a_table(description: str) -> TableNotFoundError:
    return TableNotFoundError(f"{description} is not a Paimon table: it has no schema/ folder")


class PaimonTable(TableIdentity):
    """A Paimon table opened by location (``TableFormat``, ``SupportsSnapshotExpiry``,
    ``SupportsCommitFingerprint``)."""

    FORMAT_NAME = FORMAT_NAME

    def __init__(
        self,
        location: TableLocation,
        description: str | None = None,
        *,
        probe_above_entries: int = PROBE_ABOVE_ENTRIES,
    ) -> None:
        self._location = location
        self._location_uri = location.uri
        self._description = description or location.uri
        self.files = MetaFiles(location)
        self._lock = threading.Lock()
        self._schemas: dict[int, PaimonSchema] = {}
        self._current_schema_id: int | None = None
        # (written schema id, current schema id) → how files of the first differ (pure
        # of immutable schema files: kept across refreshes)
        self._written_as: dict[tuple[int, int], WrittenAs] = {}
        # each read under the stamp its file had: a snapshot rolled back and committed
        # again is another file under the same name
        self._snapshots: dict[int, tuple[FileStamp, PaimonSnapshot]] = {}
        self._manifests: CacheView[tuple[ManifestEntry, ...]] = CacheView(
            process_cache(), "paimon_manifests", _entries_bytes
        )
        self._index_files: CacheView[bytes] = CacheView(process_cache(), "paimon_index_files", len)
        self._merge_rules: dict[int, KeyMerge | str] = {}
        self._merge_keys = True
        self._dirs: dict[str, bool] = {}
        self._found: dict[str, str] | None = None
        self._probe_above_entries = probe_above_entries
        self._listing = SnapshotListing()
        self._listed_at = 0.0
        self.refresh()
        self._table_id = self._identity()
        options = self._options()  # {} when the schema is unreadable: reported when read
        self._converter = EntryConverter(
            self.paimon_schema, self._locate, options, current=self.paimon_schema
        )

    # --- identity -------------------------------------------------------------------------

    @property
    def table_location(self) -> TableLocation:
        return self._location

    def __repr__(self) -> str:
        return f"PaimonTable({self._description!r})"

    def _identity(self) -> str:
        """Paimon keeps no table uuid: the first schema file's bytes name the table.

        They never change for the table's life, and a table dropped and created again at
        the same place gets a new first schema (its ``timeMillis`` at least).
        """
        schema_ids = self.files.numbered(SCHEMA_DIR, SCHEMA_PREFIX)
        if not schema_ids:
            raise MetadataError(f"table {self._description} has no schema/schema-N file")
        digest = hashlib.sha256(self.files.read_bytes(SCHEMA_DIR, f"schema-{schema_ids[0]}"))
        return f"paimon-{digest.hexdigest()[:32]}"

    # --- snapshots and schemas ------------------------------------------------------------

    def refresh(self) -> None:
        """List ``snapshot/`` again — or, once a listing returned more than
        ``probe_above_entries`` files, ask for the oldest, the newest and the next snapshot
        by name (``MetaFiles.probe_snapshots``), listing only when that cannot tell or
        every ``probing.RELIST_EVERY_S``."""
        with self._lock:
            previous, listed_at = self._listing, self._listed_at
        listing, listed_at = probe_or_list(
            previous,
            listed_at,
            self._probe_above_entries,
            self.files.probe_snapshots,
            self.files.snapshot_listing,
        )
        with self._lock:
            self._current_schema_id = None
            self._listing, self._listed_at = listing, listed_at
            # rolled back (files deleted) or committed again under the same ids: forget
            self._snapshots = {
                i: read for i, read in self._snapshots.items() if listing.stamps.get(i) == read[0]
            }
        if not listing.ids and not self._location.is_dir(SCHEMA_DIR):
            # no snapshot/ listed because the table itself is gone (deleted, or its
            # location unmounted): not an empty table, whose schema/ is there
            raise not_a_table(self._description)
        newest = self._snapshots.get(listing.ids[-1]) if listing.ids else None
        if newest is not None and not self._unchanged(newest[1]):
            # rolled back and committed again as many times within the second an object
            # store's mtime keeps, at the same size: the same stamps, other commits (every
            # such rewrite rewrites the newest snapshot, so reading it again tells)
            with self._lock:
                self._snapshots = {}

    def _unchanged(self, cached: PaimonSnapshot) -> bool:
        try:
            return self._read_snapshot(cached.snapshot_id) == cached
        except MetadataError:  # gone or half-written meanwhile: read it again when asked
            return False

    @property
    def _ids(self) -> tuple[int, ...]:
        return self._listing.ids

    def current_snapshot_id(self) -> int | None:
        return self._ids[-1] if self._ids else None

    def keeps_listed_files(self) -> bool:
        """``KeepsListedFiles``: expiry deletes a file with the last snapshot listing it."""
        return True

    def snapshot_ids(self) -> frozenset[int]:
        return frozenset(self._ids)

    def snapshot(self, snapshot_id: int) -> PaimonSnapshot:
        stamp = self._listing.stamps.get(snapshot_id)
        if stamp is None:
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} is not in table {self._description}"
            )
        cached = self._snapshots.get(snapshot_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        parsed = self._read_snapshot(snapshot_id)
        self._snapshots[snapshot_id] = (stamp, parsed)
        return parsed

    def _read_snapshot(self, snapshot_id: int) -> PaimonSnapshot:
        where = self.files.path(SNAPSHOT_DIR, f"{SNAPSHOT_PREFIX}{snapshot_id}")
        return parse_snapshot(self.files.snapshot(snapshot_id), where)

    def commit_fingerprint(self, snapshot_id: int) -> str | None:
        """``SupportsCommitFingerprint``: the snapshot as of the last refresh, which drops
        every snapshot read before whose file changed (its stamp, or the newest read
        again)."""
        if snapshot_id not in self._listing.stamps:
            return None
        try:
            return self.snapshot(snapshot_id).fingerprint
        except MetadataError:
            if self.files.exists(SNAPSHOT_DIR, f"{SNAPSHOT_PREFIX}{snapshot_id}"):
                raise
            return None  # deleted since the listing: commits_since says what happened

    def paimon_schema(self, schema_id: int | None = None) -> PaimonSchema:
        if schema_id is None and self._current_schema_id is not None:
            schema_id = self._current_schema_id
        if schema_id is None:
            schema_ids = self.files.numbered(SCHEMA_DIR, SCHEMA_PREFIX)
            current = self.current_snapshot_id()
            schema_id = (
                self.snapshot(current).schema_id
                if current is not None
                else (schema_ids[-1] if schema_ids else 0)
            )
            # a schema change with no commit after it is still the current schema
            schema_id = max([schema_id, *schema_ids])
            self._current_schema_id = schema_id  # until the next refresh (one listing)
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        if not self.files.exists(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}"):
            raise MetadataError(f"table {self._description} has no schema with id {schema_id}")
        where = self.files.path(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}")
        try:
            parsed = parse_schema(self.files.schema(schema_id))
        except (KeyError, TypeError, ValueError) as exc:
            raise MetadataError(f"{where}: not a Paimon schema ({exc!r})") from exc
        self._schemas[schema_id] = parsed
        return parsed

    def schema(self, schema_id: int | None = None) -> TableSchema:
        """A schema's columns, typed as the current schema types them: files written
        before a type change are read with their own types and cast
        (``DataFile.written_as``), so their stats are values of the current type."""
        written = self.paimon_schema(schema_id).table_schema
        if schema_id is None:
            return written
        now = {c.field_id: c.type for c in self.paimon_schema().table_schema.columns}
        columns = tuple(replace(c, type=now.get(c.field_id, c.type)) for c in written.columns)
        return written if columns == written.columns else replace(written, columns=columns)

    def _options(self) -> dict[str, str]:
        try:
            return dict(self.paimon_schema().options)
        except MetadataError:
            return {}

    @property
    def deletion_vectors(self) -> bool:
        schema = self.paimon_schema()
        return _vectors_enabled(schema.options) and bool(schema.primary_keys)

    @property
    def primary_keys(self) -> tuple[str, ...]:
        return self.paimon_schema().primary_keys

    def snapshot_infos(self) -> tuple[SnapshotInfo, ...]:
        return tuple(
            SnapshotInfo(
                snapshot_id=i,
                timestamp_ms=self.snapshot(i).time_millis,
                in_main_lineage=True,
                # tags keep their own copy of the snapshot (``tag/``): like Paimon, expiry
                # may remove a tagged snapshot's file; the files a tag needs stay
                is_ref_head=i == self.current_snapshot_id(),
            )
            for i in self._ids
        )

    def tagged_ids(self) -> frozenset[int]:
        """Snapshots that tags (``tag/tag-<name>``, snapshot JSON) keep."""
        selector = pafs.FileSelector(self.files.path("tag"), allow_not_found=True)
        tagged = set()
        try:
            infos = self._location.filesystem.get_file_info(selector)
        except OSError:
            return frozenset()
        for info in infos:
            if info.type == pafs.FileType.File and info.base_name.startswith("tag-"):
                document = self.files.read_json("tag", info.base_name)
                if "id" in document:
                    tagged.add(int(document["id"]))
        return frozenset(tagged)

    def expire_snapshots(self, snapshot_ids: Sequence[int]) -> None:
        """Expire snapshots as Paimon does (``lakestats.formats.paimon.expire``)."""
        from lakestats.formats.paimon.expire import expire  # noqa: PLC0415 - a rare path

        if self._location.local_root is None:
            raise ExpiryError(
                f"table {self._description} is read-only for lakestats: it expires snapshots "
                "of tables on the local file system only (use Paimon's own expire_snapshots)"
            )
        expire(self, snapshot_ids)
        self.refresh()

    # --- manifests ------------------------------------------------------------------------

    def manifest_entries(self, manifest_list: str) -> list[ManifestEntry]:
        entries: list[ManifestEntry] = []
        for record in self.files.manifest_records(manifest_list):
            name = str(record.get("_FILE_NAME"))
            entries.extend(self._manifest(name))
        return entries

    def _manifest(self, name: str) -> tuple[ManifestEntry, ...]:
        cached = self._manifests.get(name)  # a manifest's name (a UUID) names its content
        if cached is not None:
            return cached
        where = self.files.path(MANIFEST_DIR, name)
        entries = tuple(parse_entry(r, where) for r in self.files.manifest_records(name))
        self._manifests.put(name, entries)
        return entries

    def live_entries(self, snapshot: PaimonSnapshot) -> dict[FileKey, ManifestEntry]:
        base = self.manifest_entries(snapshot.base_manifest_list)
        delta = self.manifest_entries(snapshot.delta_manifest_list)
        return merge_entries([*base, *delta])

    def vectors(self, snapshot: PaimonSnapshot) -> dict[FileKey, VectorRange]:
        if not snapshot.index_manifest:
            return {}
        name = snapshot.index_manifest
        return vector_ranges(self.files.manifest_records(name), self.files.path(MANIFEST_DIR, name))

    def _index_file(self, name: str) -> bytes:
        cached = self._index_files.get(name)
        if cached is None:
            cached = self.files.read_bytes(INDEX_DIR, name)
            self._index_files.put(name, cached)
        return cached

    def deletion_vector(self, vector: VectorRange) -> DeletionVector:
        return read_vector(self._index_file, vector)

    def data_file(self, entry: ManifestEntry, vector: VectorRange | None = None) -> DataFile:
        converted = self._converter.data_file(entry)
        written = self._written_as_of([entry.schema_id])[entry.schema_id]
        if written:
            converted = replace(converted, written_as=written)
        if vector is None:
            return converted
        return replace(converted, deletes=(self.deletion_vector(vector),))

    def _retypes(self, snapshot: PaimonSnapshot) -> bool:
        """Whether the snapshot is the first under a schema that changed a column's type:
        then every live file is listed again (removed as it was, added as it is), so the
        stats of files written before are made again as values of the new type."""
        parent_id = snapshot.snapshot_id - 1
        if parent_id not in self._ids:
            return False
        parent_schema = self.snapshot(parent_id).schema_id
        if parent_schema == snapshot.schema_id:
            return False
        now = self.paimon_schema(snapshot.schema_id).table_schema
        return now.retypes(self.paimon_schema(parent_schema).table_schema)

    def _locate(self, relative: str, file_name: str) -> str:
        directory = relative.rsplit("/", 1)[0]
        known = self._dirs.get(directory)
        if known is None:
            known = self._location.is_dir(*directory.split("/"))
            self._dirs[directory] = known
        if known:
            return self._location.join(relative)
        # Partition directory names depend on writer options (legacy names, escaping):
        # where ours differs, find the file by its unique name.
        found = self._found_files().get(file_name)
        return self._location.join(found) if found else self._location.join(relative)

    def _found_files(self) -> dict[str, str]:
        if self._found is None:
            selector = pafs.FileSelector(self._location.root, recursive=True)
            prefix = self._location.root.rstrip("/") + "/"
            self._found = {
                info.base_name: info.path.removeprefix(prefix)
                for info in self._location.filesystem.get_file_info(selector)
                if info.type == pafs.FileType.File and "/bucket-" in info.path
            }
        return self._found

    # --- commits and files ----------------------------------------------------------------

    def commits_since(self, after_snapshot_id: int | None) -> Sequence[Commit]:
        ids = self._ids
        if not ids:
            if after_snapshot_id is not None:
                raise self._not_an_ancestor(after_snapshot_id)
            return []
        if after_snapshot_id is not None:
            if after_snapshot_id not in ids:
                raise self._not_an_ancestor(after_snapshot_id)
            chain = [i for i in ids if i > after_snapshot_id]
            history_cut = False
        else:
            chain = list(ids)
            history_cut = ids[0] != 1
        # a hole in the ids (a lost snapshot file): history before it is unknowable
        for position in range(len(chain) - 1, 0, -1):
            if chain[position] != chain[position - 1] + 1:
                if after_snapshot_id is not None:
                    raise LineageError(
                        f"table {self._description}: snapshot {chain[position] - 1} is missing; "
                        f"starting over from a baseline at snapshot {chain[position]}"
                    )
                chain, history_cut = chain[position:], True
                break
        if after_snapshot_id is not None and chain and chain[0] != after_snapshot_id + 1:
            raise self._not_an_ancestor(after_snapshot_id)
        commits: list[Commit] = []
        for position, snapshot_id in enumerate(chain):
            with read_commit(f"snapshot {snapshot_id}", commits):
                if position == 0 and history_cut:
                    commits.append(self._baseline(self.snapshot(snapshot_id)))
                else:
                    commits.append(self._commit(self.snapshot(snapshot_id)))
        return commits

    def _not_an_ancestor(self, snapshot_id: int) -> LineageError:
        return LineageError(
            f"snapshot {snapshot_id} is not an ancestor of the current snapshot "
            f"{self.current_snapshot_id()} of table {self._description} "
            "(rolled back or expired)"
        )

    def _baseline(self, snapshot: PaimonSnapshot) -> Commit:
        return Commit(
            snapshot_id=snapshot.snapshot_id,
            parent_id=snapshot.snapshot_id - 1 if snapshot.snapshot_id > 1 else None,
            sequence_number=snapshot.snapshot_id,
            timestamp_ms=snapshot.time_millis,
            operation=BASELINE_OPERATION,
            schema_id=snapshot.schema_id,
            added_files=tuple(self._live_data_files(snapshot)),
            fingerprint=snapshot.fingerprint,
        )

    def _commit(self, snapshot: PaimonSnapshot) -> Commit:
        if self.key_merge_rules is not None:
            return self._merged_commit(snapshot)
        dv = self.deletion_vectors
        delta = self.manifest_entries(snapshot.delta_manifest_list)
        changes = delta_changes(delta, deletion_vectors=dv)
        vectors = self.vectors(snapshot)
        parent_id = snapshot.snapshot_id - 1
        before: dict[FileKey, VectorRange] = {}
        if parent_id in self._ids and (vectors or self.snapshot(parent_id).index_manifest):
            before = self.vectors(self.snapshot(parent_id))
        # row groups a column update or a compaction changed: listed as groups below
        existed = self.snapshot(parent_id).next_row_id if parent_id in self._ids else None
        regrouped = changed_groups(delta, self._partial, 0 if parent_id < 1 else existed)
        added = [
            self.data_file(e, vectors.get(e.identifier))
            for e in changes.added
            if group_key(e) not in regrouped
        ]
        removed = [
            self.data_file(e, before.get(e.identifier))
            for e in changes.removed
            if group_key(e) not in regrouped
        ]
        touched = {e.identifier for e in (*changes.added, *changes.removed)}
        retypes = self._retypes(snapshot)
        live = self.live_entries(snapshot) if regrouped or retypes else None
        if regrouped:
            assert live is not None
            now = self._listed(_in_groups(live, regrouped), vectors)
            was: dict[FileKey, DataFile] = {}
            if parent_id in self._ids:
                parent = self.live_entries(self.snapshot(parent_id))
                was = self._listed(_in_groups(parent, regrouped), before)
            for key in sorted(set(was) | set(now)):
                if was.get(key) != now.get(key):
                    removed.extend([was[key]] if key in was else [])
                    added.extend([now[key]] if key in now else [])
            touched |= set(was) | set(now)
        if live is not None and retypes:
            changed = {k for k in live if k not in touched}
        else:  # a vector compared by content reads index files: only when it counts
            changed = {
                key
                for key in set(vectors) | set(before)
                if key not in touched and self._vector_changed(before.get(key), vectors.get(key))
            }
        if changed:
            live = self.live_entries(snapshot) if live is None else live
            then = self._listed(live, before, only=changed)
            for key, listed in sorted(self._listed(live, vectors, only=changed).items()):
                removed.append(then[key])
                added.append(listed)
        return _change(snapshot, added, removed)

    def _listed(
        self,
        live: Mapping[FileKey, ManifestEntry],
        vectors: Mapping[FileKey, VectorRange],
        only: Collection[FileKey] | None = None,
    ) -> dict[FileKey, DataFile]:
        """The visible data files of ``live`` with their vectors, by identifier: a row
        group (data evolution: ``evolution.py``) as one file, under its anchor's;
        ``only``: those of these identifiers."""
        dv = self.deletion_vectors
        groups: dict[FileKey, RowGroup] = {}
        members: set[FileKey] = set()
        for files in by_group(live.values()).values():
            if len(files) == 1 and not self._partial(files[0]):
                continue
            group = row_group(files, self._field_ids_of)
            groups[group.anchor.identifier] = group
            members.update(f.identifier for f in files)
        listed: dict[FileKey, DataFile] = {}
        for key, entry in live.items():
            if (only is not None and key not in only) or not is_visible(entry, deletion_vectors=dv):
                continue
            if key in groups:
                listed[key] = self._group_file(groups[key], vectors.get(key))
            elif key not in members:
                listed[key] = self.data_file(entry, vectors.get(key))
        return listed

    def _group_file(self, group: RowGroup, vector: VectorRange | None) -> DataFile:
        """A row group as one data file: the anchor's path, rows and vector; each column's
        metrics from the file that holds it, and those files to sketch them from."""
        anchor = self.data_file(group.anchor, vector)
        files = {group.anchor.file_name: anchor}
        column_files = []
        for name, (entry, field_ids) in group.others.items():
            other = self.data_file(entry)
            files[name] = other
            kept = tuple(w for w in other.written_as if w[0] in field_ids)
            column_files.append(ColumnFile(other.path, field_ids, kept))
        columns = {
            field_id: metrics
            for field_id, entry in group.owners.items()
            if (metrics := files[entry.file_name].columns.get(field_id)) is not None
        }
        own = {f for f, e in group.owners.items() if e.file_name == group.anchor.file_name}
        return replace(
            anchor,
            file_size_bytes=sum(f.file_size_bytes for f in files.values()),
            columns=columns,
            field_ids=frozenset(group.owners),
            written_as=tuple(w for w in anchor.written_as if w[0] in own),
            column_files=tuple(column_files),
        )

    def _field_ids_of(self, entry: ManifestEntry) -> list[int]:
        """The columns a data file writes (``_WRITE_COLS``, by the names of its schema)."""
        schema = self.paimon_schema(entry.schema_id)
        if entry.write_cols is None:
            return [f.field_id for f in schema.fields]
        by_name = schema.by_name()
        return [by_name[n].field_id for n in entry.write_cols if n in by_name]

    def _partial(self, entry: ManifestEntry) -> bool:
        if entry.write_cols is None:
            return False
        return partial(entry, [f.name for f in self.paimon_schema(entry.schema_id).fields])

    def _vector_changed(self, was: VectorRange | None, now: VectorRange | None) -> bool:
        """Whether a data file's deleted rows changed. A writer may rewrite an index file
        whole (pypaimon keeps one per table): a vector that only moved is no change, and
        re-sketching its file would be wasted work."""
        if was == now:
            return False
        if was is None or now is None:
            return True
        if None not in (was.cardinality, now.cardinality) and was.cardinality != now.cardinality:
            return True
        try:
            return self.deletion_vector(was) != self.deletion_vector(now)
        except MetadataError:  # the old index file is gone (expired): sketch the file again
            return True

    def _live_data_files(self, snapshot: PaimonSnapshot) -> list[DataFile]:
        if self.key_merge_rules is not None:
            return self._merged_files(self.live_entries(snapshot).values())
        return list(self._listed(self.live_entries(snapshot), self.vectors(snapshot)).values())

    # --- primary-key merge (no deletion vectors) ----------------------------------------

    @property
    def key_merge_rules(self) -> KeyMerge | None:
        """The merge rules of a primary-key table read by merging (no deletion vectors);
        ``None`` otherwise, and when the rules are refused (logged once, with why)."""
        schema = self.paimon_schema()
        if not self._merge_keys or not schema.primary_keys or self.deletion_vectors:
            return None
        cached = self._merge_rules.get(schema.schema_id)
        if cached is None:
            cached = merge_rules(schema)
            self._merge_rules[schema.schema_id] = cached
            if isinstance(cached, str):
                _log.warning(
                    "paimon_key_merge_refused",
                    table=self._description,
                    reason=f"{cached}: per-column stats describe every stored version of a key",
                )
        return None if isinstance(cached, str) else cached

    def set_key_merge(self, enabled: bool) -> None:
        """The table's ``key_merge`` setting: ``False`` lists files as stored (no merge)."""
        self._merge_keys = enabled

    def _written_as_of(self, schema_ids: Iterable[int]) -> dict[int, WrittenAs]:
        """Per schema id, how its files differ from the current schema (once per pair:
        every data file asks)."""
        current = self.paimon_schema()
        out = {}
        for i in set(schema_ids):
            known = self._written_as.get((i, current.schema_id))
            if known is None:
                known = schema_written_as(self.paimon_schema(i), current)
                self._written_as[(i, current.schema_id)] = known
            out[i] = known
        return out

    def _merged_files(self, entries: Iterable[ManifestEntry]) -> list[DataFile]:
        """The live files of whole buckets, each with the bucket's key merge if needed."""
        rules = self.key_merge_rules
        assert rules is not None
        files: list[DataFile] = []
        current = self.paimon_schema().table_schema
        buckets = by_bucket(entries)
        schema_ids = {e.schema_id for bucket in buckets.values() for e in bucket}
        retyped = {i for i in schema_ids if current.retypes(self.paimon_schema(i).table_schema)}
        for bucket in buckets.values():
            written_as_of = self._written_as_of(e.schema_id for e in bucket)
            listed = [self.data_file(e) for e in bucket]
            if not needs_merge(bucket, retyped):
                files.extend(listed)
                continue
            paths = {e.file_name: f.path for e, f in zip(bucket, listed, strict=True)}
            merge = bucket_merge(rules, bucket, paths, written_as_of)
            files.extend(replace(f, deletes=(merge,)) for f in listed)
        return files

    def _merged_commit(self, snapshot: PaimonSnapshot) -> Commit:
        """Every live file of each bucket the commit touched, listed as removed (as it was)
        and added (with its new merge): a new file changes which rows of the others win.
        After a type change (``_retypes``), every live file."""
        delta = self.manifest_entries(snapshot.delta_manifest_list)
        touched = {(e.partition, e.bucket) for e in delta}
        parent_id = snapshot.snapshot_id - 1
        retypes = self._retypes(snapshot)  # then every bucket

        def in_touched(entry: ManifestEntry) -> bool:
            return retypes or (entry.partition, entry.bucket) in touched

        after = [e for e in self.live_entries(snapshot).values() if in_touched(e)]
        before: list[ManifestEntry] = []
        if parent_id in self._ids:
            before = [
                e for e in self.live_entries(self.snapshot(parent_id)).values() if in_touched(e)
            ]
        old = {(f.path, f.deletes): f for f in self._merged_files(before)}
        new = {(f.path, f.deletes): f for f in self._merged_files(after)}
        added = [f for k, f in new.items() if k not in old]  # a level move changes nothing
        removed = [f for k, f in old.items() if k not in new]
        if retypes:  # every file, read again with the new types
            added, removed = list(new.values()), list(old.values())
        return _change(snapshot, added, removed)

    def format_terms(
        self, snapshot_id: int, table: PartitionAggregate, settings: SketchSettings
    ) -> dict[str, Any]:
        """``mergedRecordCount`` and the statistics file's colStats (``statistics``)."""
        from lakestats.formats.paimon.statistics import paimon_terms  # noqa: PLC0415 - cycle

        return paimon_terms(self, snapshot_id, table, settings)

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        if snapshot_id not in self._ids:
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} is not in table {self._description}"
            )
        return self._live_data_files(self.snapshot(snapshot_id))


def _in_groups(
    live: Mapping[FileKey, ManifestEntry], keys: Collection[GroupKey]
) -> dict[FileKey, ManifestEntry]:
    return {k: e for k, e in live.items() if group_key(e) in keys}


def _change(snapshot: PaimonSnapshot, added: list[DataFile], removed: list[DataFile]) -> Commit:
    """The commit of ``snapshot`` (its parent is the id before it) with these file changes."""
    parent_id = snapshot.snapshot_id - 1
    return Commit(
        snapshot_id=snapshot.snapshot_id,
        parent_id=parent_id if parent_id >= 1 else None,
        sequence_number=snapshot.snapshot_id,
        timestamp_ms=snapshot.time_millis,
        operation=operation(snapshot.commit_kind, len(added), len(removed)),
        schema_id=snapshot.schema_id,
        added_files=tuple(added),
        removed_files=tuple(removed),
        fingerprint=snapshot.fingerprint,
    )


def _vectors_enabled(options: Mapping[str, str]) -> bool:
    """The table option; lakestats reads the vectors of primary-key tables only."""
    return options.get("deletion-vectors.enabled", "false").lower() == "true"
