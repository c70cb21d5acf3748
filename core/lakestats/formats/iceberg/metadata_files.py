"""Finding an Iceberg table's current metadata file from its location, without a catalog.

Writers that use no catalog (Hadoop tables, copies of a warehouse, tests) leave the commit
state in the file names under ``metadata/``: ``vN.metadata.json`` or
``NNNNN-<uuid>.metadata.json``, the highest version being current, and optionally
``version-hint.text`` naming the current version.
"""

from __future__ import annotations

import re

from pyarrow import fs as pafs

from lakestats.exceptions import MetadataError, TableNotFoundError, first_line
from lakestats.locations import TableLocation

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
_METADATA_SUFFIX = ".metadata.json"
# The optional ".gz" is the compression codec Java writers put before the suffix.
_VERSIONED_NAME = re.compile(r"^(?:v(\d+)|(\d+)-[0-9A-Za-z-]+)(?:\.gz)?\.metadata\.json$")


def metadata_version(file_name: str) -> int | None:
    """The version number in a metadata file name, ``None`` if the name carries none."""
    match = _VERSIONED_NAME.match(file_name)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def list_metadata_files(location: TableLocation) -> list[str]:
    """Names of the ``*.metadata.json`` files under ``metadata/`` (empty if none or no dir)."""
    selector = pafs.FileSelector(location.fs_path(METADATA_DIR), allow_not_found=True)
    try:
        infos = location.filesystem.get_file_info(selector)
    except OSError:
        return []
    return [
        info.base_name
        for info in infos
        if info.type == pafs.FileType.File and info.base_name.endswith(_METADATA_SUFFIX)
    ]


def current_metadata_file(location: TableLocation) -> str:
    """The location (as pyiceberg wants it) of the table's current metadata file.

    ``version-hint.text`` wins when present; like Java's Hadoop tables, a numeric hint is
    only a starting point and later ``vN`` files are followed, since the rename of the next
    ``vN`` file is the commit and the hint is updated after it. Without a hint the highest
    version present wins.
    """
    names = list_metadata_files(location)
    if not names:
        raise TableNotFoundError(
            f"{location.uri} is not an Iceberg table: no metadata/*{_METADATA_SUFFIX} found"
        )
    hinted = _hinted_file(location, set(names))
    if hinted is not None:
        return location.join(METADATA_DIR, hinted)
    versioned = [(v, n) for n in names if (v := metadata_version(n)) is not None]
    if not versioned:
        raise MetadataError(
            f"{location.join(METADATA_DIR)}: no metadata file has a version in its name "
            "(expected vN.metadata.json or NNNNN-<uuid>.metadata.json)"
        )
    return location.join(METADATA_DIR, max(versioned)[1])


def _hinted_file(location: TableLocation, names: set[str]) -> str | None:
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
    if hint.isdigit():
        version = int(hint)
        while f"v{version + 1}{_METADATA_SUFFIX}" in names:
            version += 1
        name = f"v{version}{_METADATA_SUFFIX}"
    else:
        name = hint if hint.endswith(_METADATA_SUFFIX) else f"{hint}{_METADATA_SUFFIX}"
    # A hint naming a file that is gone is stale (old metadata files get cleaned up after
    # commits): the listing is then the better witness.
    return name if name in names else None
