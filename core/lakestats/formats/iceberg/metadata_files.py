"""Finding an Iceberg table's current metadata file from its location, without a catalog.

Writers that use no catalog (Hadoop tables, copies of a warehouse, tests) leave the commit
state in the file names under ``metadata/``: ``vN.metadata.json`` or
``NNNNN-<uuid>.metadata.json``, the highest version being current, and optionally
``version-hint.text`` naming the current version.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from pyarrow import fs as pafs

from lakestats.exceptions import MetadataError, TableNotFoundError, first_line
from lakestats.locations import TableLocation

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
_METADATA_SUFFIX = ".metadata.json"
_FOLLOW_BATCH = 4  # later vN files asked for per round while they exist
# The optional ".gz" is the compression codec Java writers put before the suffix.
_VERSIONED_NAME = re.compile(r"^(?:v(\d+)|(\d+)-[0-9A-Za-z-]+)(?:\.gz)?\.metadata\.json$")


def metadata_version(file_name: str) -> int | None:
    """The version number in a metadata file name, ``None`` if the name carries none."""
    match = _VERSIONED_NAME.match(file_name)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


@dataclass(frozen=True)
class MetadataFile:
    """The current metadata file: its location (as pyiceberg wants it) and, from the
    request that found it, its size and mtime (what tells a rewrite in place)."""

    location: str
    size: int | None
    mtime_ns: int | None


def _metadata_infos(location: TableLocation) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(location.fs_path(METADATA_DIR), allow_not_found=True)
    try:
        infos = location.filesystem.get_file_info(selector)
    except OSError:
        return []
    return [
        info
        for info in infos
        if info.type == pafs.FileType.File and info.base_name.endswith(_METADATA_SUFFIX)
    ]


def list_metadata_files(location: TableLocation) -> list[str]:
    """Names of the ``*.metadata.json`` files under ``metadata/`` (empty if none or no dir)."""
    return [info.base_name for info in _metadata_infos(location)]


def current_metadata_file(location: TableLocation) -> str:
    """The location (as pyiceberg wants it) of the table's current metadata file."""
    return find_current_metadata(location).location


def _found(location: TableLocation, info: pafs.FileInfo) -> MetadataFile:
    return MetadataFile(location.join(METADATA_DIR, info.base_name), info.size, info.mtime_ns)


def find_current_metadata(location: TableLocation) -> MetadataFile:
    """The table's current metadata file.

    ``version-hint.text`` wins when present; like Java's Hadoop tables, a numeric hint is
    only a starting point and later ``vN`` files are followed, since the rename of the next
    ``vN`` file is the commit and the hint is updated after it. Without a hint the highest
    version present wins.

    With a hint, the files it leads to are asked for by name (a HEAD each on object
    storage) and ``metadata/`` is not listed: it also holds every manifest list and
    manifest, and Iceberg keeps old metadata files unless told to delete them
    (``write.metadata.delete-after-commit.enabled``), so a listing grows with every commit
    and was paid on every poll. A hint naming a file that is gone falls back to the listing.
    """
    hinted = _hinted_file(location)
    if hinted is not None:
        return _found(location, hinted)
    infos = _metadata_infos(location)
    if not infos:
        raise TableNotFoundError(
            f"{location.uri} is not an Iceberg table: no metadata/*{_METADATA_SUFFIX} found"
        )
    versioned = [
        (v, info.base_name, info)
        for info in infos
        if (v := metadata_version(info.base_name)) is not None
    ]
    if not versioned:
        raise MetadataError(
            f"{location.join(METADATA_DIR)}: no metadata file has a version in its name "
            "(expected vN.metadata.json or NNNNN-<uuid>.metadata.json)"
        )
    return _found(location, max(versioned, key=lambda entry: entry[:2])[2])


def _hinted_file(location: TableLocation) -> pafs.FileInfo | None:
    """The metadata file the hint leads to, if it exists; None without a hint or when
    what it names is gone (a stale hint: old metadata files get cleaned up after commits,
    and the listing is then the better witness)."""
    hint_path = location.fs_path(METADATA_DIR, VERSION_HINT)
    try:
        with location.filesystem.open_input_stream(hint_path) as stream:
            raw = stream.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MetadataError(
            f"version hint {location.join(METADATA_DIR, VERSION_HINT)} is unreadable "
            f"({first_line(exc)})"
        ) from exc
    hint = raw.decode("utf-8", errors="replace").strip()
    if not hint or any(c in hint for c in "/\\") or hint.startswith("."):
        return None  # not a file name in metadata/: the listing decides
    if not hint.isdigit():
        name = hint if hint.endswith(_METADATA_SUFFIX) else f"{hint}{_METADATA_SUFFIX}"
        return _existing(location, [name])[0]
    version = int(hint)
    [hinted] = _existing(location, [_hadoop_name(version)])
    if not _present(location, _hadoop_name(version + 1)):  # the usual poll: the hint is current
        return hinted
    [following] = _existing(location, [_hadoop_name(version + 1)])
    if following is None:  # taken back meanwhile: the hint is current
        return hinted
    current = following  # commits the hint does not name yet: follow them
    version += 1
    while True:
        batch = [version + 1 + i for i in range(_FOLLOW_BATCH)]
        for candidate, info in zip(
            batch, _existing(location, [_hadoop_name(v) for v in batch]), strict=True
        ):
            if info is None:
                return current
            current, version = info, candidate


def _hadoop_name(version: int) -> str:
    return f"v{version}{_METADATA_SUFFIX}"


def _present(location: TableLocation, name: str) -> bool:
    """Whether ``metadata/<name>`` exists (one HEAD on object storage, no LIST)."""
    with _readable(location):
        return location.present(METADATA_DIR, name)


def _existing(location: TableLocation, names: list[str]) -> list[pafs.FileInfo | None]:
    """Each file under ``metadata/`` that exists, None for one that does not (one
    file-info request each)."""
    with _readable(location):
        return location.files(METADATA_DIR, names)


@contextlib.contextmanager
def _readable(location: TableLocation) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise MetadataError(
            f"{location.join(METADATA_DIR)} is unreadable ({first_line(exc)})"
        ) from exc
