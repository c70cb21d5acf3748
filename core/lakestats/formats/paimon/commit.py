"""Writing Paimon snapshots the way Paimon's own commit protocol does (local tables).

A commit writes its new manifest files and manifest lists first (fresh unique names, never
referenced until the snapshot exists), then creates ``snapshot/snapshot-<N+1>`` only if
absent: the JSON goes to a temp file that is fsynced and ``os.link`` ed to the final name
(atomic create-if-absent; ``FileExistsError`` when a writer got there first — its snapshot
is never overwritten). On conflict the commit deletes its own files and retries on the new
latest snapshot. ``LATEST`` is a hint, replaced after the commit.

Used by the statistics publisher (``ANALYZE`` snapshots) and by the tests' file-level
deletes; manifest lists are written with the Avro writer schema of the table's own lists,
so readers see the same shape the table's writers produce.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro

from lakestats.exceptions import MetadataError, PublishError
from lakestats.formats.paimon.metafiles import MANIFEST_DIR, SNAPSHOT_DIR, SNAPSHOT_PREFIX
from lakestats.formats.paimon.table import PaimonTable

COMMIT_USER = "lakestats"
_AVRO_MAGIC = b"Obj\x01"
_RETRIES = 20


@dataclass
class PendingFiles:
    """Files a commit attempt wrote, deleted again if the attempt loses."""

    paths: list[Path] = field(default_factory=list)

    def discard(self) -> None:
        for path in self.paths:
            with suppress(FileNotFoundError):
                path.unlink()
        self.paths.clear()


def table_root(table: PaimonTable) -> Path:
    root = table.table_location.local_root
    if root is None:
        raise PublishError(f"{table.location}: lakestats commits to local Paimon tables only")
    return root


def avro_records(table: PaimonTable, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The writer schema and records of an Avro manifest file (``PublishError`` if not Avro)."""
    raw = table.files.read_bytes(MANIFEST_DIR, name)
    if not raw.startswith(_AVRO_MAGIC):
        raise PublishError(
            f"{table.files.path(MANIFEST_DIR, name)}: lakestats writes snapshots only to tables "
            "with Avro manifests (manifest.format=avro, the default)"
        )
    reader = fastavro.reader(io.BytesIO(raw))
    schema = reader.writer_schema
    assert isinstance(schema, dict)
    return schema, [dict(r) for r in reader if isinstance(r, Mapping)]


def write_avro(
    root: Path,
    pending: PendingFiles,
    prefix: str,
    schema: Mapping[str, Any],
    records: Sequence[Any],
) -> tuple[str, int]:
    """A new manifest-directory Avro file; its name and size."""
    name = f"{prefix}-{uuid.uuid4()}-0"
    path = root / MANIFEST_DIR / name
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(dict(schema)), list(records), codec="null")
    _write_new(path, buffer.getvalue(), pending)
    return name, len(buffer.getvalue())


def _write_new(path: Path, data: bytes, pending: PendingFiles) -> None:
    pending.paths.append(path)
    with path.open("xb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def write_new_file(path: Path, data: bytes, pending: PendingFiles) -> None:
    """Write a file that must not exist yet (a stats file, a manifest); fsynced."""
    _write_new(path, data, pending)


def snapshot_json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, indent=2, separators=(",", " : ")).encode()


def try_create_snapshot(root: Path, snapshot_id: int, document: Mapping[str, Any]) -> bool:
    """Create ``snapshot-<id>`` if absent; ``False`` when another writer created it first."""
    directory = root / SNAPSHOT_DIR
    target = directory / f"{SNAPSHOT_PREFIX}{snapshot_id}"
    temp = directory / f".{target.name}.{uuid.uuid4()}.tmp"
    data = snapshot_json(document)
    try:
        with temp.open("xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
        _fsync_dir(directory)
    finally:
        with suppress(FileNotFoundError):
            temp.unlink()
    # A writer using check-then-rename could still replace ours in its window: read back.
    return target.read_bytes() == data


def write_latest_hint(root: Path, snapshot_id: int) -> None:
    directory = root / SNAPSHOT_DIR
    temp = directory / f".LATEST.{uuid.uuid4()}.tmp"
    temp.write_text(str(snapshot_id))
    latest = directory / "LATEST"
    with suppress(ValueError, OSError):
        if int(latest.read_text().strip()) > snapshot_id:
            temp.unlink()
            return
    temp.replace(latest)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


Attempt = Callable[[PaimonTable, int, PendingFiles], dict[str, Any] | None]


def commit_with_retry(
    table: PaimonTable, attempt: Attempt, *, retries: int = _RETRIES
) -> int | None:
    """Run ``attempt(table, latest_id, pending)`` → snapshot document, commit it, retry.

    ``attempt`` returns ``None`` when there is nothing to commit any more. Returns the new
    snapshot id (``None`` when nothing was committed).
    """
    root = table_root(table)
    for tries in range(retries):
        table.refresh()
        latest = table.current_snapshot_id()
        if latest is None:
            raise PublishError(f"{table.location}: the table has no snapshot to commit after")
        pending = PendingFiles()
        try:
            document = attempt(table, latest, pending)
            if document is None:
                pending.discard()
                return None
            if try_create_snapshot(root, latest + 1, document):
                write_latest_hint(root, latest + 1)
                table.refresh()
                return latest + 1
        except BaseException:
            pending.discard()
            raise
        pending.discard()
        time.sleep(min(0.01 * (2**tries), 0.5))
    raise PublishError(f"{table.location}: could not commit after {retries} conflicting commits")


def next_snapshot(
    table: PaimonTable, latest: int, pending: PendingFiles, *, delta: Sequence[Any]
) -> dict[str, Any]:
    """A snapshot document after ``latest``: base = latest's files, ``delta`` = the changes.

    ``delta`` is the manifest-list records of this commit's new manifests. The caller sets
    ``commitKind`` and counts.
    """
    root = table_root(table)
    parent = table.files.snapshot(latest)
    list_schema, base_records = avro_records(table, str(parent["baseManifestList"]))
    _, delta_records = avro_records(table, str(parent["deltaManifestList"]))
    base_name, base_size = write_avro(
        root, pending, "manifest-list", list_schema, [*base_records, *delta_records]
    )
    delta_name, delta_size = write_avro(root, pending, "manifest-list", list_schema, delta)
    document = {k: v for k, v in parent.items() if k not in ("statistics", "uuid")}
    document.update(
        id=latest + 1,
        baseManifestList=base_name,
        baseManifestListSize=base_size,
        deltaManifestList=delta_name,
        deltaManifestListSize=delta_size,
        changelogManifestList=None,
        commitUser=COMMIT_USER,
        commitIdentifier=int(time.time() * 1000),
        timeMillis=max(int(time.time() * 1000), int(parent.get("timeMillis") or 0)),
        deltaRecordCount=0,
        changelogRecordCount=0,
    )
    if "changelogManifestListSize" in document:
        document["changelogManifestListSize"] = None
    if "uuid" in parent:
        document["uuid"] = str(uuid.uuid4())
    return document


def list_entries(
    table: PaimonTable, snapshot: Mapping[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(manifest name, manifest-list record) of a snapshot's base and delta lists."""
    for key in ("baseManifestList", "deltaManifestList"):
        try:
            _, records = avro_records(table, str(snapshot[key]))
        except KeyError as exc:
            raise MetadataError(f"snapshot {snapshot.get('id')} has no {key}") from exc
        for record in records:
            yield str(record["_FILE_NAME"]), record
