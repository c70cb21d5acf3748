"""The Delta transaction log on disk: listing ``_delta_log/`` and reading its files.

* commits: ``<version:020>.json``, one action per line;
* checkpoints: classic ``<v>.checkpoint.parquet``, multi-part
  ``<v>.checkpoint.<part:010>.<parts:010>.parquet`` and v2 ``<v>.checkpoint.<uuid>.json|
  .parquet`` whose file actions may live in ``_sidecars/``;
* ignored: log-compaction files (``<a>.<b>.compacted.json``), ``.crc`` checksums,
  ``_last_checkpoint`` (a hint; the listing is the truth), temporary files and any
  directory (``_sidecars/`` is read through its v2 checkpoint, ``_lakestats/`` is ours).

Every read error becomes one ``MetadataError`` line naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from hashlib import sha256
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyarrow import fs as pafs

from lakestats.exceptions import MetadataError, TableNotFoundError, first_line
from lakestats.formats.probing import FileStamp, probe_after
from lakestats.locations import TableLocation

LOG_DIR = "_delta_log"
SIDECAR_DIR = "_sidecars"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")
_CHECKPOINT_COLUMNS = ("add", "metaData", "protocol", "sidecar")


@dataclass(frozen=True)
class LogFile:
    name: str
    mtime_ms: int
    size: int = 0


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint of one version: its files, and whether every part is there."""

    version: int
    files: tuple[str, ...]  # names under _delta_log/
    complete: bool
    missing: str = ""  # what is missing when not complete
    mtime_ms: int = 0


@dataclass(frozen=True)
class LogListing:
    """What ``_delta_log/`` holds at one moment."""

    commits: Mapping[int, LogFile] = field(default_factory=dict)
    checkpoints: Mapping[int, Checkpoint] = field(default_factory=dict)  # best per version
    last_checkpoint: int | None = None  # the version ``_last_checkpoint`` names
    entries: int = 0  # what the listing returned, every kind of file: its cost

    @property
    def versions(self) -> frozenset[int]:
        return frozenset(self.commits) | frozenset(self.checkpoints)

    @property
    def current_version(self) -> int | None:
        versions = self.versions
        return max(versions) if versions else None

    def complete_checkpoints(self) -> list[int]:
        return sorted(v for v, c in self.checkpoints.items() if c.complete)


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def list_log(location: TableLocation) -> LogListing:
    """The log's commits and checkpoints; ``TableNotFoundError`` without ``_delta_log/``."""
    selector = pafs.FileSelector(location.fs_path(LOG_DIR), allow_not_found=True)
    try:
        infos = location.filesystem.get_file_info(selector)
    except OSError as exc:
        raise TableNotFoundError(
            f"{location.uri}: cannot list {LOG_DIR}/ ({first_line(exc)})"
        ) from exc
    if not infos and location.file_type(LOG_DIR) != pafs.FileType.Directory:
        raise TableNotFoundError(f"{location.uri} is not a Delta table: no {LOG_DIR}/")
    commits: dict[int, LogFile] = {}
    classic: dict[int, LogFile] = {}
    parts: dict[tuple[int, int], dict[int, LogFile]] = {}
    v2: dict[int, LogFile] = {}
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        name = info.base_name
        entry = LogFile(name, *_stamp(info))
        if m := _COMMIT.match(name):
            commits[int(m.group(1))] = entry
        elif m := _CLASSIC.match(name):
            classic[int(m.group(1))] = entry
        elif m := _MULTIPART.match(name):
            key = (int(m.group(1)), int(m.group(3)))
            parts.setdefault(key, {})[int(m.group(2))] = entry
        elif m := _V2.match(name):
            v2[int(m.group(1))] = entry
    checkpoints: dict[int, Checkpoint] = {}
    for (version, total), found in parts.items():
        missing = [i for i in range(1, total + 1) if i not in found]
        names = tuple(found[i].name for i in sorted(found))
        checkpoints[version] = Checkpoint(
            version,
            names,
            complete=not missing,
            missing=(
                f"part {missing[0]} of {total} "
                f"({version:020d}.checkpoint.{missing[0]:010d}.{total:010d}.parquet)"
                if missing
                else ""
            ),
            mtime_ms=max(f.mtime_ms for f in found.values()),
        )
    for single in (classic, v2):  # a complete single-file checkpoint wins over a partial one
        for version, entry in single.items():
            checkpoints[version] = Checkpoint(version, (entry.name,), True, mtime_ms=entry.mtime_ms)
    hint = any(info.base_name == "_last_checkpoint" for info in infos)
    last = _last_checkpoint(location) if hint else None
    return LogListing(commits, checkpoints, last, entries=len(infos))


def probe_log(location: TableLocation, listing: LogListing) -> LogListing | None:
    """``listing`` brought up to date without listing ``_delta_log/``, or None when only
    a listing can tell (``probing.probe_after``: the newest known commit gone or another
    file — the log was cut back or replaced, by a rollback by hand or a table written again
    at this path — or a burst of new commits).

    A listing costs a request per 1,000 entries on object stores, and a log keeps 30 days
    of commits by default (``delta.logRetentionDuration``), with a checksum beside each:
    tens of requests per poll for a busy table. What a probe does not see — checkpoints
    written since, old files the writer's log cleanup deleted — neither changes which
    commits follow the known ones; the caller lists again from time to time for them.
    """
    current = listing.current_version
    known = listing.commits.get(current) if current is not None else None
    if current is None or known is None:
        return None
    found = probe_after(
        location, LOG_DIR, commit_name, current, FileStamp(known.size, known.mtime_ms)
    )
    if found is None:
        return None
    if not found:
        return listing
    new = {v: LogFile(info.base_name, *_stamp(info)) for v, info in found.items()}
    return replace(listing, commits={**listing.commits, **new})


def _stamp(info: pafs.FileInfo) -> tuple[int, int]:
    stamp = FileStamp.of(info)
    return stamp.mtime_ms, stamp.size


def _last_checkpoint(location: TableLocation) -> int | None:
    """The version ``_last_checkpoint`` names; ``None`` if it is unreadable (only a hint)."""
    try:
        hint = json.loads(_read_text(location, "_last_checkpoint"))
        return int(hint["version"])
    except (MetadataError, ValueError, KeyError, TypeError):
        return None


def read_commit_fingerprinted(
    location: TableLocation, version: int
) -> tuple[list[dict[str, Any]], str]:
    """The actions of one commit file, in file order, and a digest of its bytes: what
    tells this commit apart from another one written under its version after the log was
    cut back (a commit file is never rewritten in place; every writer's adds name new
    files)."""
    name = commit_name(version)
    text = _read_text(location, name)
    return _commit_actions(text, name), "sha256:" + sha256(text.encode()).hexdigest()[:32]


def _commit_actions(text: str, name: str) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as exc:
            raise MetadataError(
                f"{LOG_DIR}/{name} line {number} is not valid JSON ({exc}): the commit is corrupt"
            ) from None
        if not isinstance(action, dict):
            raise MetadataError(f"{LOG_DIR}/{name} line {number} is not a JSON object")
        actions.append(action)
    return actions


def read_checkpoint(location: TableLocation, checkpoint: Checkpoint) -> list[dict[str, Any]]:
    """The ``add``, ``metaData`` and ``protocol`` actions of a checkpoint (sidecars read)."""
    if not checkpoint.complete:
        raise MetadataError(
            f"checkpoint {checkpoint.version} in {LOG_DIR}/ is incomplete: "
            f"{checkpoint.missing} is missing"
        )
    actions: list[dict[str, Any]] = []
    for name in checkpoint.files:
        if name.endswith(".json"):
            actions.extend(_json_lines(location, name))
        else:
            actions.extend(_parquet_actions(location, f"{LOG_DIR}/{name}"))
    sidecars = [a["sidecar"] for a in actions if a.get("sidecar")]
    for sidecar in sidecars:
        name = sidecar_name(sidecar)
        if location.file_type(LOG_DIR, SIDECAR_DIR, name) == pafs.FileType.NotFound:
            raise MetadataError(
                f"checkpoint {checkpoint.version} in {LOG_DIR}/ is incomplete: its sidecar "
                f"file {LOG_DIR}/{SIDECAR_DIR}/{name} is missing"
            )
        actions.extend(_parquet_actions(location, f"{LOG_DIR}/{SIDECAR_DIR}/{name}"))
    return [a for a in actions if not a.get("sidecar") and not a.get("checkpointMetadata")]


def sidecar_name(sidecar: Mapping[str, Any]) -> str:
    """The file name a ``sidecar`` action points at. Its ``path`` is URI-encoded and may
    be a whole URI, but sidecars always live in the table's own ``_delta_log/_sidecars/``
    (PROTOCOL.md, "Sidecar File Information"): the last segment names the file."""
    path = unquote(str(sidecar.get("path") or ""))
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise MetadataError(f"a sidecar action in {LOG_DIR}/ has no path")
    return name


def _read_text(location: TableLocation, name: str) -> str:
    where = location.fs_path(LOG_DIR, name)
    try:
        with location.filesystem.open_input_stream(where) as stream:
            data: bytes = stream.read()
    except FileNotFoundError as exc:
        raise MetadataError(f"{LOG_DIR}/{name} disappeared while reading the log") from exc
    except OSError as exc:
        raise MetadataError(f"cannot read {LOG_DIR}/{name}: {first_line(exc)}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetadataError(f"{LOG_DIR}/{name} is not UTF-8 text ({exc})") from None


def _json_lines(location: TableLocation, name: str) -> list[dict[str, Any]]:
    actions = []
    for number, line in enumerate(_read_text(location, name).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            actions.append(json.loads(line))
        except ValueError as exc:
            raise MetadataError(
                f"{LOG_DIR}/{name} line {number} is not valid JSON ({exc})"
            ) from None
    return actions


def _parquet_actions(location: TableLocation, relative: str) -> list[dict[str, Any]]:
    where = location.fs_path(*relative.split("/"))
    try:
        parquet = pq.ParquetFile(where, filesystem=location.filesystem)
        names = set(parquet.schema_arrow.names)
        table = parquet.read(columns=[c for c in _CHECKPOINT_COLUMNS if c in names])
    except (OSError, ValueError) as exc:
        raise MetadataError(f"cannot read checkpoint file {relative}: {first_line(exc)}") from exc
    actions: list[dict[str, Any]] = []
    for column in table.column_names:
        for value in table.column(column).to_pylist():
            if value is not None:
                actions.append({column: _maps_to_dicts(value)})
    return actions


def _maps_to_dicts(value: Any) -> Any:
    """Parquet maps come back as lists of (key, value) pairs: make them dicts."""
    if isinstance(value, dict):
        return {k: _maps_to_dicts(v) for k, v in value.items()}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(item, tuple) and len(item) == 2 for item in value)
    ):
        return {k: _maps_to_dicts(v) for k, v in value}
    return value
