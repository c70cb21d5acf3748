"""Reading manifest lists and manifests: validated, cached, errors named by file.

pyiceberg's Avro reader stops quietly at an unexpected end of file, so a truncated manifest
would read as one with fewer (or no) entries and statistics would be silently wrong. Every
file is therefore read whole once and checked to end where an Avro container file ends (on
its header's sync marker) and, where the manifest list counts a manifest's entries, to
hold that many entries (a file cut at a block boundary still ends with a sync marker).
The ``manifest_length`` a manifest list records is not checked,
as Java Iceberg does not check it: tools that rewrite manifests in place (path relocation,
re-compression) leave it stale while the file is complete; the sync marker detects the
truncation that length check was meant to catch.
"""

from __future__ import annotations

import io as _io
import json
import zlib
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, cast

import pyiceberg.avro.file as _avro_file
from pyiceberg.avro.decoder import BinaryDecoder, StreamingBinaryDecoder
from pyiceberg.avro.file import AvroFile
from pyiceberg.exceptions import ResolveError
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
from pyiceberg.manifest import (
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
    read_manifest_list,
)
from pyiceberg.table.snapshots import Snapshot

from lakestats.cache import CacheView, MemoryCache, process_cache
from lakestats.exceptions import MetadataError, first_line

_AVRO_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16
# Errors pyiceberg's Avro decoding raises on damaged input (it has no error type of its own);
# its Cython decoder turns absurd lengths into SystemError/MemoryError.
_DECODE_ERRORS = (
    SystemError,
    MemoryError,
    ValueError,
    EOFError,
    KeyError,
    IndexError,
    TypeError,
    OverflowError,
    zlib.error,
    ResolveError,
    IcebergValidationError,
)


# pyiceberg 0.12's Cython Avro decoder reads a double of a manifest's partition tuple
# through float32 (0.1 → 0.10000000149011612, -1e300 → -inf, 1.00000001 → 1.0: two
# partitions become one); its pure-Python decoder reads it whole. A manifest whose partition
# tuple holds a double is read with the latter (``_read_entries``). A context variable
# chooses, so reads in other threads keep the fast decoder.
_PURE_PYTHON_AVRO: ContextVar[bool] = ContextVar("lakestats_pure_python_avro", default=False)
_fast_decoder = getattr(_avro_file, "new_decoder")  # noqa: B009 - not in its __all__
_fast_decoder = getattr(_fast_decoder, "__wrapped__", _fast_decoder)


def _new_decoder(b: bytes) -> BinaryDecoder:
    return StreamingBinaryDecoder(b) if _PURE_PYTHON_AVRO.get() else _fast_decoder(b)


_new_decoder.__wrapped__ = _fast_decoder  # type: ignore[attr-defined]
setattr(_avro_file, "new_decoder", _new_decoder)  # noqa: B010 - the name AvroFile calls


# What a manifest's entries take in memory per byte of its Avro file: pyiceberg's objects
# (a data file's bounds, counts and sizes as dicts of boxed values) took ~3,500 bytes an
# entry of ~500 Avro bytes (8 columns), 7× (a one-entry manifest, mostly its header, less)
ENTRY_BYTES_PER_AVRO_BYTE = 8
# A manifest list's entries are small in Avro (~44 bytes) and not decoded (~870): weighed by
# what they hold, measured with tracemalloc on lists of 175 entries (pyiceberg 0.12): a
# ``ManifestFile`` ~450 bytes besides its path, a partition field summary ~250 besides its
# bounds, and a list ~1 KiB besides its entries (the tuple, the cache's and the reader's
# maps). Weighed by Avro size, a daemon's lists held 2.3× their weight (the memory hunt).
MANIFEST_FILE_BYTES = 500
PARTITION_SUMMARY_BYTES = 260
MANIFEST_LIST_BYTES = 1024


class ManifestReader:
    """Reads the manifests of one table through its FileIO; caches by path.

    Manifest lists and manifests are immutable once committed, so a path names the same
    content forever and caching by path is safe across refreshes. They are kept in the
    process's ``cache.MemoryCache`` (or ``cache``), weighed by what they hold decoded
    (``list_weight``; a manifest by its Avro size times ``ENTRY_BYTES_PER_AVRO_BYTE``), so
    memory does not grow with history, files or tables.

    The lists of consecutive snapshots name mostly the same manifests, with the same
    entries: a list shares the entries it has in common with the one read before it, so a
    table of many small appends holds about one object per manifest, not one per manifest
    and list. Each list is still weighed whole: the cache errs on the side of less memory.
    """

    def __init__(self, file_io: FileIO, cache: MemoryCache | None = None) -> None:
        self.file_io = file_io
        # said after a file that is missing or unreadable when the table's metadata places
        # it elsewhere than where it was opened (``IcebergTable``)
        self.misplaced: str | None = None
        shared = process_cache() if cache is None else cache
        self._lists: CacheView[tuple[tuple[ManifestFile, ...], int]] = CacheView(
            shared, "iceberg_manifest_lists", lambda read: list_weight(read[0])
        )
        # the entries of the list read last, by manifest path (``_shared``)
        self._last_list: dict[str, ManifestFile] = {}
        # (entries, Avro size, the schema id the manifest was written with)
        self._entries: CacheView[tuple[tuple[ManifestEntry, ...], int, int | None]] = CacheView(
            shared, "iceberg_manifests", _weight
        )

    def manifests(self, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
        path = snapshot.manifest_list
        cached = self._lists.get(path)
        if cached is not None:
            return cached[0]
        what = f"manifest list {path} of snapshot {snapshot.snapshot_id}"
        data = self._read(path, what)
        try:
            manifests = self._shared(tuple(read_manifest_list(_MemoryInput(path, data))))
        except _DECODE_ERRORS as exc:
            raise MetadataError(f"{what} is not a valid Avro file ({first_line(exc)})") from exc
        self._lists.put(path, (manifests, len(data)))
        return manifests

    def _shared(self, manifests: tuple[ManifestFile, ...]) -> tuple[ManifestFile, ...]:
        """``manifests`` with each entry equal to one of the list read before replaced by
        that one's object (the new copy is dropped)."""
        before = self._last_list
        shared = []
        for manifest in manifests:
            known = before.get(manifest.manifest_path)
            shared.append(known if known is not None and known == manifest else manifest)
        self._last_list = {m.manifest_path: m for m in shared}
        return tuple(shared)

    def entries(self, manifest: ManifestFile) -> tuple[ManifestEntry, ...]:
        """Every entry of a manifest, deleted ones included, snapshot ids inherited."""
        return self._read_manifest(manifest)[0]

    def written_schema_id(self, manifest: ManifestFile) -> int | None:
        """The id of the table schema the manifest was written with (``_written_schema_id``),
        ``None`` when it records none. No file it lists was written with a later schema."""
        return self._read_manifest(manifest)[2]

    def _read_manifest(
        self, manifest: ManifestFile
    ) -> tuple[tuple[ManifestEntry, ...], int, int | None]:
        path = manifest.manifest_path
        cached = self._entries.get(path)
        if cached is not None:
            return cached
        what = f"manifest {path}"
        data = self._read(path, what)
        try:
            entries, written = _read_entries(manifest, _OneFileIO(path, data))
        except _DECODE_ERRORS as exc:
            raise MetadataError(f"{what} is not a valid Avro file ({first_line(exc)})") from exc
        expected = _listed_entry_count(manifest)
        if expected is not None and expected != len(entries):
            # a file cut at a block boundary still ends with a sync marker
            raise MetadataError(
                f"{what} has {len(entries)} entries but the manifest list counts {expected} "
                "(truncated or replaced?)"
            )
        read = (entries, len(data), written)
        self._entries.put(path, read)
        return read

    def live_entries(self, snapshot: Snapshot, content: ManifestContent) -> list[ManifestEntry]:
        """The entries of ``content`` manifests that are live in ``snapshot`` (not DELETED)."""
        return [
            entry
            for manifest in self.manifests(snapshot)
            if manifest.content == content
            for entry in self.entries(manifest)
            if entry.status != ManifestEntryStatus.DELETED
        ]

    def _read(self, path: str, what: str) -> bytes:
        try:
            with self.file_io.new_input(path).open() as stream:
                data = stream.read()
        except FileNotFoundError as exc:
            raise MetadataError(f"{what} does not exist{self._misplaced()}") from exc
        except (OSError, ValueError) as exc:
            raise MetadataError(
                f"{what} is unreadable ({first_line(exc)}){self._misplaced()}"
            ) from exc
        problem = avro_container_problem(data)
        if problem is not None:
            raise MetadataError(f"{what} {problem}")
        return data

    def _misplaced(self) -> str:
        return f"; {self.misplaced}" if self.misplaced else ""


def list_weight(manifests: Sequence[ManifestFile]) -> int:
    """What a decoded manifest list takes in memory (``MANIFEST_FILE_BYTES``)."""
    return MANIFEST_LIST_BYTES + sum(
        MANIFEST_FILE_BYTES
        + len(m.manifest_path)
        + sum(
            PARTITION_SUMMARY_BYTES + len(p.lower_bound or b"") + len(p.upper_bound or b"")
            for p in m.partitions or ()
        )
        for m in manifests
    )


def _weight(read: tuple[Any, ...]) -> int:
    """A cached read (its objects, its file's size, …) weighs its file's size times the
    objects' expansion."""
    return int(read[1]) * ENTRY_BYTES_PER_AVRO_BYTE


def _read_entries(
    manifest: ManifestFile, file_io: FileIO
) -> tuple[tuple[ManifestEntry, ...], int | None]:
    """Every entry, read with the v3 schema (pyiceberg's ``fetch_manifest_entry`` reads
    v2 fields only, losing ``referenced_data_file`` and the deletion vectors' offsets);
    older manifests read the same, their missing optional fields as null."""
    with AvroFile[ManifestEntry](
        file_io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[3],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        meta = reader.header.meta
        # the header is read; each block gets its decoder as it is read
        token = _PURE_PYTHON_AVRO.set(_has_double_partition(meta))
        try:
            entries = tuple(_inherit_from_manifest(entry, manifest) for entry in reader)
        finally:
            _PURE_PYTHON_AVRO.reset(token)
        return entries, _written_schema_id(meta)


def _has_double_partition(meta: Mapping[str, str]) -> bool:
    """Whether the manifest's partition tuple holds a ``double`` (its Avro schema's
    ``data_file.partition`` record): the one partition type the fast decoder reads wrong."""
    try:
        schema = json.loads(meta.get("avro.schema", "{}"))
    except ValueError:
        return False
    partition = _field_type(_field_type(schema, "data_file"), "partition")
    fields = partition.get("fields") if isinstance(partition, dict) else None
    return any(isinstance(f, dict) and _holds_double(f.get("type")) for f in fields or ())


def _field_type(record: Any, name: str) -> Any:
    if not isinstance(record, dict):
        return None
    for field in record.get("fields") or ():
        if isinstance(field, dict) and field.get("name") == name:
            return field.get("type")
    return None


def _holds_double(avro_type: Any) -> bool:
    """``"double"``, or a union with it (an optional partition field)."""
    if isinstance(avro_type, list):
        return any(_holds_double(t) for t in avro_type)
    return bool(avro_type == "double")


def _listed_entry_count(manifest: ManifestFile) -> int | None:
    """How many entries the manifest list says the manifest has (``None``: not recorded)."""
    counts = (
        manifest.added_files_count,
        manifest.existing_files_count,
        manifest.deleted_files_count,
    )
    if any(count is None for count in counts):
        return None
    return sum(c for c in counts if c is not None)


def avro_container_problem(data: bytes) -> str | None:
    """Why ``data`` is not a complete Avro container file, or ``None`` if it looks complete.

    A complete file starts with the magic bytes and ends with the sync marker its header
    declares (written after the header and after every block).
    """
    if not data:
        return "is empty"
    if not data.startswith(_AVRO_MAGIC):
        return "is not an Avro file (bad magic bytes)"
    try:
        sync = _header_sync(data)
    except (IndexError, ValueError):
        return "is truncated (incomplete Avro header)"
    if not data.endswith(sync):
        return "is truncated (does not end with its Avro sync marker)"
    return None


def _header_sync(data: bytes) -> bytes:
    """The 16-byte sync marker after the header's metadata map (Avro spec, object files)."""
    pos = len(_AVRO_MAGIC)
    while True:
        count, pos = _read_long(data, pos)
        if count == 0:
            break
        if count < 0:  # a negative block count is followed by the block's byte size
            count = -count
            _, pos = _read_long(data, pos)
        for _ in range(2 * count):  # key and value, both length-prefixed
            length, pos = _read_long(data, pos)
            if length < 0:
                raise ValueError("negative length")
            pos += length
    sync = data[pos : pos + _SYNC_SIZE]
    if len(sync) != _SYNC_SIZE:
        raise ValueError("short sync marker")
    return sync


def _written_schema_id(meta: Mapping[str, str]) -> int | None:
    """The id of the table schema a manifest was written with, from its Avro header's
    metadata (Iceberg spec "Manifests": ``schema-id``, which pyiceberg leaves out, else the
    ``schema-id`` of the ``schema`` JSON); ``None`` when neither says."""
    raw: object = meta.get("schema-id")
    if raw is None and "schema" in meta:
        try:
            schema = json.loads(meta["schema"])
        except ValueError:  # not JSON: says nothing
            return None
        raw = schema.get("schema-id") if isinstance(schema, dict) else None
    try:
        return int(raw) if isinstance(raw, int | str) else None
    except ValueError:
        return None


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """An Avro zig-zag varint at ``pos``; raises ``IndexError`` past the end."""
    shift = 0
    raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


class _MemoryInput(InputFile):
    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return cast(InputStream, _io.BytesIO(self._data))


class _OneFileIO(FileIO):
    """Serves one file already in memory, so pyiceberg parses what was validated."""

    def __init__(self, location: str, data: bytes) -> None:
        super().__init__()
        self._file = _MemoryInput(location, data)

    def new_input(self, location: str) -> InputFile:
        if location != self._file.location:
            raise FileNotFoundError(location)
        return self._file

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("read-only")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("read-only")
