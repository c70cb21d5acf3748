"""Iceberg row-level deletes attached to data files (``DataFile.deletes``), Iceberg's rules.

For one snapshot, every live delete file is indexed by partition; a live data file gets

* position deletes with ``delete seq >= data seq`` in its partition (same spec and
  partition, or a delete spec without partition fields) that may name it: the delete's
  ``referenced_data_file``, its equal ``file_path`` bounds, or else the distinct
  ``file_path`` values of the delete file itself (read once, two columns, cached — files
  are immutable);
* v3 deletion vectors (Puffin ``deletion-vector-v1`` blobs at ``content_offset`` /
  ``content_size_in_bytes``) that reference it, with ``delete seq >= data seq``, decoded
  into the model's portable roaring bitmap (the blob's CRC is checked);
* equality deletes with ``delete seq > data seq`` in its partition (or global).

``with_deletes`` rewrites a ``Commit`` as the model asks: the new data files carry their
complete deletes, and every older live data file whose deletes this commit changed (it
added or removed a delete file that applies to it) is listed as removed and re-added
with its complete new deletes. Paths are compared where the files really are (the
table's location mapping), so ``hdfs://…`` names inside delete files still match; a name
inside a delete file also matches the manifests' name of the file without its file system
(``hdfs://nn/w/x`` is ``/w/x``: Impala writes both).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.snapshots import Snapshot

from lakestats.cache import CacheView, MemoryCache, process_cache
from lakestats.exceptions import MetadataError
from lakestats.formats.iceberg.files import FileConverter, referenced_data_file, v3_field
from lakestats.formats.iceberg.manifests import ManifestReader
from lakestats.locations import path_spellings
from lakestats.model import (
    Commit,
    DataFile,
    DeleteSource,
    DeletionVector,
    EqualityDeletes,
    PartitionKey,
    PositionDeletes,
)
from lakestats.pipeline import canonical_path

_DV_MAGIC = bytes.fromhex("D1D33964")


class _EveryFile(frozenset[str]):
    """Targets of a delete file that can no longer be read: any file of its scope."""

    def __contains__(self, item: object) -> bool:
        return True


_EVERY_FILE = _EveryFile()
_PUFFIN = "PUFFIN"


class TargetCache:
    """Canonical data file paths named inside position-delete files, by delete path.

    Delete files never change, so one table keeps this across commits and refreshes, in
    the process's cache (``lakestats.cache``: a table's history of delete files would grow
    it without end); an entry dropped is read again when needed."""

    def __init__(self, cache: MemoryCache | None = None) -> None:
        self._targets: CacheView[frozenset[str]] = CacheView(
            process_cache() if cache is None else cache, "iceberg_delete_targets", _paths_bytes
        )
        self.files_read = 0

    def get(self, delete_path: str) -> frozenset[str] | None:
        return self._targets.get(delete_path)

    def put(self, delete_path: str, targets: frozenset[str]) -> None:
        self._targets.put(delete_path, targets)
        self.files_read += 1


def _paths_bytes(paths: frozenset[str]) -> int:
    return 256 + sum(len(p) + 120 for p in paths)  # a str and its set slot


@dataclass(frozen=True)
class _Delete:
    entry: ManifestEntry
    partition: PartitionKey
    global_scope: bool  # its spec has no partition fields: applies to every partition


class DeleteIndex:
    """The live delete files of one snapshot, ready to answer "what applies to this file"."""

    def __init__(
        self,
        entries: Iterable[ManifestEntry],
        conv: FileConverter,
        reader: ManifestReader,
        schema_id: int,
        cache: TargetCache,
    ) -> None:
        self._reader = reader
        self._cache = cache
        self._key = _path_key(reader)
        self._by_partition: dict[PartitionKey, list[_Delete]] = {}
        self._global: list[_Delete] = []
        self._vectors: dict[str, list[ManifestEntry]] = {}
        for entry in entries:
            data_file = entry.data_file
            if _is_vector(entry):
                target = referenced_data_file(data_file)
                if target is not None:
                    self._vectors.setdefault(self._key(target), []).append(entry)
                continue
            spec_fields = conv.partition_key(data_file, schema_id)
            delete = _Delete(entry, spec_fields, not spec_fields.values)
            if delete.global_scope:
                self._global.append(delete)
            else:
                self._by_partition.setdefault(delete.partition, []).append(delete)

    def __bool__(self) -> bool:
        return bool(self._by_partition or self._global or self._vectors)

    def applying(self, data: ManifestEntry, partition: PartitionKey) -> list[ManifestEntry]:
        """Delete entries that apply to the live data file ``data`` (Iceberg's rules)."""
        data_seq = _sequence(data)
        path = self._key(data.data_file.file_path)
        out: list[ManifestEntry] = []
        for delete in (*self._by_partition.get(partition, ()), *self._global):
            delete_seq = _sequence(delete.entry)
            content = delete.entry.data_file.content
            if content == DataFileContent.EQUALITY_DELETES:
                if delete_seq > data_seq:
                    out.append(delete.entry)
            elif delete_seq >= data_seq and path in self._targets(delete.entry):
                out.append(delete.entry)
        out.extend(e for e in self._vectors.get(path, ()) if _sequence(e) >= data_seq)
        return out

    def sources(self, entries: Sequence[ManifestEntry]) -> tuple[DeleteSource, ...]:
        return tuple(self._source(e) for e in entries)

    def _source(self, entry: ManifestEntry) -> DeleteSource:
        data_file = entry.data_file
        fmt = str(data_file.file_format.value).upper()
        if data_file.content == DataFileContent.EQUALITY_DELETES:
            return EqualityDeletes(data_file.file_path, fmt, tuple(data_file.equality_ids or ()))
        if fmt == _PUFFIN:
            return read_vector(self._reader, entry)
        return PositionDeletes(data_file.file_path, fmt, referenced_data_file(data_file))

    def _targets(self, entry: ManifestEntry) -> frozenset[str]:
        """Mapped paths of the data files a position delete file may name."""
        data_file = entry.data_file
        named = referenced_data_file(data_file)
        if named is not None:
            return frozenset({self._key(named)})
        cached = self._cache.get(data_file.file_path)
        if cached is None:
            try:
                cached = self._read_targets(data_file.file_path, str(data_file.file_format.value))
            except MetadataError:
                if entry.status != ManifestEntryStatus.DELETED:
                    raise
                # a removed delete file already gone: assume it touched its whole partition
                return _EVERY_FILE
            self._cache.put(data_file.file_path, cached)
        return cached

    def _read_targets(self, path: str, file_format: str) -> frozenset[str]:
        import pyarrow.compute as pc  # noqa: PLC0415 - only tables with such deletes

        raw = _read_bytes(self._reader, path, f"position-delete file {path}")
        try:
            if file_format.upper() == "ORC":
                from pyarrow import orc  # noqa: PLC0415

                column = orc.ORCFile(io.BytesIO(raw)).read(columns=["file_path"])["file_path"]
            else:
                import pyarrow.parquet as pq  # noqa: PLC0415

                column = pq.ParquetFile(io.BytesIO(raw)).read(columns=["file_path"])["file_path"]
        except Exception as exc:  # pyarrow raises several kinds for a bad file
            raise MetadataError(f"position-delete file {path} is unreadable ({exc})") from exc
        values = pc.unique(column).to_pylist()
        # each as written, and without its file system: the manifests may name it so
        return frozenset(self._key(p) for v in values if v for p in path_spellings(str(v)))


def read_vector(reader: ManifestReader, entry: ManifestEntry) -> DeletionVector:
    """A v3 ``deletion-vector-v1`` blob: u32 BE length, magic, portable 64-bit roaring
    bitmap, u32 BE CRC-32 of magic + bitmap."""
    data_file = entry.data_file
    path = data_file.file_path
    offset = v3_field(data_file, "content_offset")
    size = v3_field(data_file, "content_size_in_bytes")
    if offset is None or size is None:
        raise MetadataError(f"deletion vector in {path} has no content offset/size")
    raw = _read_bytes(reader, path, f"deletion-vector file {path}")
    blob = raw[offset : offset + size]
    if len(blob) < 12:
        raise MetadataError(f"deletion vector at {path}@{offset} is truncated")
    (length,) = struct.unpack(">I", blob[:4])
    body = blob[4 : 4 + length]
    if body[:4] != _DV_MAGIC or len(body) != length or length + 8 > len(blob):
        raise MetadataError(f"deletion vector at {path}@{offset} is not a deletion-vector-v1")
    (crc,) = struct.unpack(">I", blob[4 + length : 8 + length])
    if zlib.crc32(body) != crc:
        raise MetadataError(f"deletion vector at {path}@{offset} fails its CRC check")
    return DeletionVector(bitmap=bytes(body[4:]), cardinality=data_file.record_count)


def with_deletes(
    commit: Commit,
    snapshot: Snapshot,
    reader: ManifestReader,
    conv: FileConverter,
    cache: TargetCache,
) -> Commit:
    """``commit`` with Iceberg's deletes attached (see the module docstring)."""
    delete_entries = reader.live_entries(snapshot, ManifestContent.DELETES)
    changed = [
        e
        for manifest in reader.manifests(snapshot)
        if manifest.content == ManifestContent.DELETES
        and manifest.added_snapshot_id in (None, snapshot.snapshot_id)
        for e in reader.entries(manifest)
        if e.snapshot_id == snapshot.snapshot_id and e.status != ManifestEntryStatus.EXISTING
    ]
    if not delete_entries and not changed:
        return commit
    schema_id = commit.schema_id
    index = DeleteIndex(delete_entries, conv, reader, schema_id, cache)
    changes = DeleteIndex(changed, conv, reader, schema_id, cache)
    added_paths = {f.path for f in commit.added_files}
    removed_paths = {f.path for f in commit.removed_files}
    new_entries = _added_data_entries(snapshot, reader) if index else {}
    added = _attach(commit.added_files, new_entries, index)
    removed = list(commit.removed_files)
    if changes:
        for entry in reader.live_entries(snapshot, ManifestContent.DATA):
            path = entry.data_file.file_path
            if path in added_paths or path in removed_paths:
                continue
            writer = conv.writer_schema_id(entry.snapshot_id, entry.file_sequence_number, schema_id)
            before = conv.convert(entry.data_file, writer)
            if not changes.applying(entry, before.partition):
                continue
            removed.append(before)
            complete = index.applying(entry, before.partition)
            added.append(replace(before, deletes=index.sources(complete)))
    return replace(commit, added_files=tuple(added), removed_files=tuple(removed))


def baseline_with_deletes(
    commit: Commit,
    snapshot: Snapshot,
    reader: ManifestReader,
    conv: FileConverter,
    cache: TargetCache,
) -> Commit:
    """A baseline's data files with their complete deletes."""
    delete_entries = reader.live_entries(snapshot, ManifestContent.DELETES)
    if not delete_entries:
        return commit
    index = DeleteIndex(delete_entries, conv, reader, commit.schema_id, cache)
    entries = {
        e.data_file.file_path: e for e in reader.live_entries(snapshot, ManifestContent.DATA)
    }
    return replace(commit, added_files=tuple(_attach(commit.added_files, entries, index)))


def _attach(
    files: Iterable[DataFile], entries: dict[str, ManifestEntry], index: DeleteIndex
) -> list[DataFile]:
    """Each data file with the deletes that apply to it (files without an entry as they are)."""
    attached = []
    for data_file in files:
        entry = entries.get(data_file.path)
        if entry is None:
            attached.append(data_file)
            continue
        applying = index.applying(entry, data_file.partition)
        attached.append(replace(data_file, deletes=index.sources(applying)))
    return attached


def _added_data_entries(snapshot: Snapshot, reader: ManifestReader) -> dict[str, ManifestEntry]:
    """The data files this snapshot added, by path (only its own manifests hold them)."""
    return {
        entry.data_file.file_path: entry
        for manifest in reader.manifests(snapshot)
        if manifest.content == ManifestContent.DATA
        and manifest.added_snapshot_id in (None, snapshot.snapshot_id)
        for entry in reader.entries(manifest)
        if entry.snapshot_id == snapshot.snapshot_id and entry.status == ManifestEntryStatus.ADDED
    }


def _sequence(entry: ManifestEntry) -> int:
    return entry.sequence_number or 0


def _is_vector(entry: ManifestEntry) -> bool:
    return str(entry.data_file.file_format.value).upper() == _PUFFIN


def _path_key(reader: ManifestReader) -> Callable[[str], str]:
    mapping = getattr(reader.file_io, "mapping", None)
    if mapping:
        return lambda path: canonical_path(mapping.apply(path))
    return canonical_path


def _read_bytes(reader: ManifestReader, path: str, what: str) -> bytes:
    try:
        with reader.file_io.new_input(path).open() as stream:
            return bytes(stream.read())
    except FileNotFoundError as exc:
        raise MetadataError(f"{what} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise MetadataError(f"{what} is unreadable ({exc})") from exc
