"""Reading a Paimon table's metadata files: snapshots, schemas, manifest lists, manifests.

The layout (filesystem catalog) under the table directory:

* ``snapshot/snapshot-<id>`` — JSON, one per snapshot; ``LATEST``/``EARLIEST`` are hints
  only (Java writes them after the snapshot, pypaimon writes no ``EARLIEST``), so the
  directory listing is the truth — or, for a big directory, the files found by name
  (``probe_snapshots``);
* ``schema/schema-<id>`` — JSON;
* ``manifest/manifest-list-*``, ``manifest/manifest-*``, ``manifest/index-manifest-*`` —
  Avro by default, ORC or Parquet with ``manifest.format``: the format is recognised from
  the file's magic bytes, and every format yields the same records (same field names and
  nesting), so one code path reads them.

Records are plain dicts looked up by name with ``.get``: manifests of older Paimon versions
lack fields (``_VALUE_STATS_COLS`` before 1.0), newer ones add fields. Every failure is a
``MetadataError`` of one line naming the file.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import fastavro
from pyarrow import fs as pafs

from lakestats.exceptions import MetadataError, first_line
from lakestats.formats.probing import FileStamp, probe_after
from lakestats.locations import TableLocation

SNAPSHOT_DIR = "snapshot"
SCHEMA_DIR = "schema"
MANIFEST_DIR = "manifest"
INDEX_DIR = "index"
STATISTICS_DIR = "statistics"
SNAPSHOT_PREFIX = "snapshot-"
SCHEMA_PREFIX = "schema-"
_NUMBERED = re.compile(r"^(?P<prefix>snapshot-|schema-)(?P<id>\d+)$")
_AVRO_MAGIC = b"Obj\x01"
_ORC_MAGIC = b"ORC"
_PARQUET_MAGIC = b"PAR1"


def snapshot_name(snapshot_id: int) -> str:
    return f"{SNAPSHOT_PREFIX}{snapshot_id}"


@dataclass(frozen=True)
class SnapshotListing:
    """The snapshot files at one moment: id → stamp (a snapshot rolled back and committed
    again is another file under the same name), and what the listing returned (its cost)."""

    stamps: Mapping[int, FileStamp] = field(default_factory=dict)
    entries: int = 0

    @cached_property
    def ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.stamps))


class MetaFiles:
    """Reads the metadata files of one table location (no caching; see ``ManifestCache``)."""

    def __init__(self, location: TableLocation) -> None:
        self.location = location

    def path(self, *parts: str) -> str:
        return self.location.fs_path(*parts)

    def numbered(self, directory: str, prefix: str) -> list[int]:
        """Ids of ``<directory>/<prefix><id>`` files, ascending (temp files are ignored)."""
        return sorted(_numbered(self._list(directory), prefix))

    def snapshot_listing(self) -> SnapshotListing:
        infos = self._list(SNAPSHOT_DIR)
        found = _numbered(infos, SNAPSHOT_PREFIX)
        return SnapshotListing({i: FileStamp.of(info) for i, info in found.items()}, len(infos))

    def probe_snapshots(self, listing: SnapshotListing) -> SnapshotListing | None:
        """``listing`` brought up to date by asking for files by name (``probing``), or
        None when only a listing can tell. Paimon's history is linear and its expiry
        deletes the oldest snapshot files first, so besides the newest and the next the
        probe asks for the oldest known: gone or another file, snapshots were expired
        (or the table replaced) and the set of ids changed below the newest."""
        ids = listing.ids
        if not ids:
            return None
        oldest, newest = ids[0], ids[-1]
        if oldest != newest:
            try:
                [info] = self.location.files(SNAPSHOT_DIR, [snapshot_name(oldest)])
            except OSError:
                return None
            if info is None or FileStamp.of(info) != listing.stamps[oldest]:
                return None
        found = probe_after(
            self.location, SNAPSHOT_DIR, snapshot_name, newest, listing.stamps[newest]
        )
        if found is None:
            return None
        if not found:
            return listing
        new = {i: FileStamp.of(info) for i, info in found.items()}
        return SnapshotListing({**listing.stamps, **new}, listing.entries + len(new))

    def _list(self, directory: str) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self.path(directory), allow_not_found=True)
        try:
            return list(self.location.filesystem.get_file_info(selector))
        except OSError as exc:
            raise MetadataError(f"{self.path(directory)}: cannot list ({first_line(exc)})") from exc

    def read_bytes(self, *parts: str) -> bytes:
        path = self.path(*parts)
        try:
            with self.location.filesystem.open_input_file(path) as stream:
                return bytes(stream.read())
        except FileNotFoundError as exc:
            raise MetadataError(f"{path} is missing") from exc
        except OSError as exc:
            if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
                raise MetadataError(f"{path} is missing") from exc
            raise MetadataError(f"{path}: cannot read ({first_line(exc)})") from exc

    def exists(self, *parts: str) -> bool:
        return bool(self.location.file_type(*parts) == pafs.FileType.File)

    def read_json(self, *parts: str) -> dict[str, Any]:
        raw = self.read_bytes(*parts)
        try:
            document = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MetadataError(f"{self.path(*parts)} is not valid JSON ({exc})") from exc
        if not isinstance(document, dict):
            raise MetadataError(f"{self.path(*parts)} is not a JSON object")
        return document

    def snapshot(self, snapshot_id: int) -> dict[str, Any]:
        return self.read_json(SNAPSHOT_DIR, snapshot_name(snapshot_id))

    def schema(self, schema_id: int) -> dict[str, Any]:
        return self.read_json(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}")

    def records(self, directory: str, name: str) -> list[dict[str, Any]]:
        """The records of a manifest list, manifest or index manifest, whatever its format."""
        raw = self.read_bytes(directory, name)
        path = self.path(directory, name)
        try:
            return _decode_records(raw)
        except MetadataError as exc:
            raise MetadataError(f"{path}: {exc}") from exc
        except Exception as exc:  # fastavro/pyarrow raise many types for damaged files
            raise MetadataError(f"{path}: cannot decode ({first_line(exc)})") from exc

    def manifest_records(self, name: str) -> list[dict[str, Any]]:
        return self.records(MANIFEST_DIR, name)


def _numbered(infos: list[pafs.FileInfo], prefix: str) -> dict[int, pafs.FileInfo]:
    found = {}
    for info in infos:
        match = _NUMBERED.match(info.base_name)
        if info.type == pafs.FileType.File and match and match["prefix"] == prefix:
            found[int(match["id"])] = info
    return found


def _decode_records(raw: bytes) -> list[dict[str, Any]]:
    if raw.startswith(_AVRO_MAGIC):
        return [dict(r) for r in fastavro.reader(io.BytesIO(raw)) if isinstance(r, Mapping)]
    if raw.startswith(_ORC_MAGIC):
        from pyarrow import orc  # noqa: PLC0415 - only tables with ORC manifests need it

        return list(orc.ORCFile(io.BytesIO(raw)).read().to_pylist())
    if raw.startswith(_PARQUET_MAGIC):
        from pyarrow import parquet  # noqa: PLC0415 - only tables with Parquet manifests

        return list(parquet.ParquetFile(io.BytesIO(raw)).read().to_pylist())
    raise MetadataError("not an Avro, ORC or Parquet file")
