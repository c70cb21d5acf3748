"""Publishing Delta stats as a sidecar of the log: ``_delta_log/_lakestats/``.

Delta's protocol has no place for NDV, quantiles or histograms (PROTOCOL.md; ``.crc`` files
hold no column stats), so each processed version's stats document (the ``show --json``
contract) is written beside the log, where engines and tools can find it:

* ``_delta_log/_lakestats/lakestats-<version:020>-<nonce>.json`` — one document per
  version, a new name each time it is staged (never rewritten in place);
* ``_delta_log/_lakestats/index.json`` — ``{"format": 1, "versions": {"<version>":
  "<file name>"}}``: the registration. Replaced atomically by ``flush``, so a reader sees
  the old index or the new one, and a staged document is invisible until it is listed.

VACUUM (lite and full) and log cleanup (``cleanup_metadata``, Spark's metadata cleanup)
leave ``_delta_log/_lakestats/`` alone: they delete data files the log no longer
references, and commit, checkpoint, checksum and sidecar files of the log respectively
(checked with deltalake in ``tests/core/publish/test_delta_sidecar.py``). Versions
that expire from the log lose their documents at the next flush.

A local table's files are written under a temporary name and renamed; on object storage
(``s3://`` …) each is one upload, which readers see whole or not at all, so the index is
replaced there as atomically. One lakestats store per table should publish (one index).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from lakestats.exceptions import MetadataError, PublishError
from lakestats.formats.base import TableFormat
from lakestats.locations import TableLocation, resolve_location
from lakestats.publish.base import Publisher, SnapshotStats, Unpublishable
from lakestats.publish.native import stats_doc
from lakestats.store.atomic import atomic_write
from lakestats.tables import OpenedTable

PUBLISHED_KEY = "delta"
SIDECAR_DIR = ("_delta_log", "_lakestats")
INDEX_NAME = "index.json"
FILE_PREFIX = "lakestats-"
INDEX_FORMAT = 1


class _SidecarFolder:
    """``_delta_log/_lakestats/`` on the table's file system: whole-file writes, reads,
    deletes and a listing. Local files are replaced by rename (``atomic_write``); an
    object store's upload is atomic by itself."""

    def __init__(self, location: TableLocation) -> None:
        self._fs = location.filesystem
        self._local = location.local_root
        self.path = location.fs_path(*SIDECAR_DIR)
        self.uri = location.join(*SIDECAR_DIR)

    def write(self, name: str, data: bytes) -> None:
        if self._local is not None:
            atomic_write(Path(self.path) / name, data)
            return
        with self._fs.open_output_stream(f"{self.path}/{name}") as out:
            out.write(data)

    def read(self, name: str) -> bytes | None:
        try:
            with self._fs.open_input_stream(f"{self.path}/{name}") as source:
                return bytes(source.read())
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        with suppress(FileNotFoundError):
            self._fs.delete_file(f"{self.path}/{name}")

    def files(self) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self.path, allow_not_found=True)
        return [i for i in self._fs.get_file_info(selector) if i.type == pafs.FileType.File]


class DeltaSidecarPublisher:
    """Stats documents under ``_delta_log/_lakestats/`` of a Delta table."""

    key = PUBLISHED_KEY

    def __init__(self, table: TableFormat, table_name: str) -> None:
        self._table = table
        self._name = table_name
        self._folder = _SidecarFolder(resolve_location(table.location))
        self._pending: dict[int, str] = {}

    @property
    def directory(self) -> str:
        """The sidecar folder: a local path, or a URI on object storage."""
        return self._folder.uri

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (OSError, PublishError, MetadataError)

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        return snapshot_id in self._pending or str(snapshot_id) in _records(published)

    def stage(self, stats: SnapshotStats, published: Mapping[str, Any]) -> None:
        self._table.refresh()
        if stats.snapshot_id not in self._table.snapshot_ids():
            return  # the version expired meanwhile: nothing to publish
        name = f"{FILE_PREFIX}{stats.snapshot_id:020d}-{uuid.uuid4().hex[:12]}.json"
        commit: dict[str, Any] = {"snapshot_id": stats.snapshot_id}
        if stats.commit is not None:
            commit["operation"] = stats.commit.operation
        doc = stats_doc(stats, table_name=self._name, format_name="delta", commit=commit)
        self._folder.write(name, json.dumps(doc, sort_keys=True).encode("utf-8"))
        replaced = self._pending.get(stats.snapshot_id)
        self._pending[stats.snapshot_id] = name
        if replaced is not None:
            self._folder.delete(replaced)

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        pending, self._pending = self._pending, {}
        self._table.refresh()
        live = self._table.snapshot_ids()
        index = self._read_index()
        entries = {v: n for v, n in index.items() if v in live}
        for version, name in pending.items():
            if version in live:
                entries[version] = name
        doomed = {n for v, n in index.items() if entries.get(v) != n}
        doomed |= {n for v, n in pending.items() if entries.get(v) != n}
        if entries != index:
            body = {
                "format": INDEX_FORMAT,
                "versions": {str(v): n for v, n in sorted(entries.items())},
            }
            self._folder.write(INDEX_NAME, json.dumps(body, sort_keys=True).encode("utf-8"))
        for name in doomed:  # only once the index no longer lists them
            self._folder.delete(name)
        records = {str(v): n for v, n in sorted(entries.items())}
        return {**published, PUBLISHED_KEY: {"snapshots": records}}

    def sweep(self, older_than_s: float) -> int:
        """Delete our documents the index does not list, older than ``older_than_s``."""
        files = self._folder.files()
        if not files:
            return 0
        keep = set(self._read_index().values())
        cutoff_ns = time.time_ns() - int(older_than_s * 1e9)
        deleted = 0
        for info in files:
            name = info.base_name
            if not name.startswith(FILE_PREFIX) or name in keep:
                continue
            if info.mtime_ns is None or info.mtime_ns > cutoff_ns:
                continue
            self._folder.delete(name)
            deleted += 1
        return deleted

    def describe(self, snapshot_id: int, published: Mapping[str, Any]) -> list[str]:
        name = _records(published).get(str(snapshot_id))
        if name is None:
            return ["not in the Delta sidecar yet (_delta_log/_lakestats/)"]
        folder = self._folder.uri
        return [f"Delta sidecar: {folder}/{name} (listed in {folder}/{INDEX_NAME})"]

    def _read_index(self) -> dict[int, str]:
        raw = self._folder.read(INDEX_NAME)
        if raw is None:
            return {}
        where = f"{self._folder.uri}/{INDEX_NAME}"
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise PublishError(f"{where} is not valid JSON ({exc})") from None
        versions = body.get("versions") if isinstance(body, dict) else None
        if not isinstance(versions, dict):
            raise PublishError(f"{where} has no versions object")
        return {int(v): str(n) for v, n in versions.items()}


def open_publisher(opened: OpenedTable) -> Publisher | Unpublishable:
    """The registry's factory (``publish/registry.py``)."""
    return DeltaSidecarPublisher(opened.table, opened.name)


def _records(published: Mapping[str, Any]) -> dict[str, str]:
    section = published.get(PUBLISHED_KEY)
    if not isinstance(section, dict):
        return {}
    snapshots = section.get("snapshots")
    return dict(snapshots) if isinstance(snapshots, dict) else {}
