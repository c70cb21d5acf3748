"""Which format a table location holds, and opening it behind the ``TableFormat`` Protocol."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyarrow import fs as pafs

from lakestats.exceptions import TableNotFoundError
from lakestats.formats.base import TableFormat, WatchSpec
from lakestats.formats.iceberg import (
    FORMAT_NAME as ICEBERG,
)
from lakestats.formats.iceberg import (
    is_iceberg_location,
    open_iceberg_catalog,
    open_iceberg_location,
)
from lakestats.locations import resolve_location

OPENERS: dict[str, Callable[[str], TableFormat]] = {ICEBERG: open_iceberg_location}
# Layouts recognised so that users get a clear answer rather than "not a table".
_NOT_BUILT = (
    (("_delta_log",), "a Delta table; Delta support is not built yet"),
    (("snapshot", "schema"), "a Paimon table; Paimon support is not built yet"),
)


def detect_format(path: str) -> str:
    """The format name of the table at ``path`` (``"iceberg"``).

    Raises ``TableNotFoundError`` naming the path when it does not exist, is no table, or
    holds a format lakestats cannot read yet.
    """
    location = resolve_location(path)
    try:
        info = location.filesystem.get_file_info(location.root)
    except OSError as exc:
        raise TableNotFoundError(f"{path}: cannot read this location ({exc})") from exc
    if info.type == pafs.FileType.NotFound:
        raise TableNotFoundError(f"{path} does not exist")
    if info.type != pafs.FileType.Directory:
        raise TableNotFoundError(f"{path} is not a table: it is a file, not a table directory")
    if is_iceberg_location(path):
        return ICEBERG
    for dirs, what in _NOT_BUILT:
        if all(_is_dir(location.filesystem, location.fs_path(d)) for d in dirs):
            raise TableNotFoundError(f"{path} looks like {what}")
    raise TableNotFoundError(
        f"{path} is not a table: found no metadata/*.metadata.json (Iceberg), "
        "_delta_log/ (Delta) or snapshot/ + schema/ (Paimon)"
    )


def open_table(
    location: str | None = None,
    *,
    catalog: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    identifier: str | None = None,
) -> TableFormat:
    """Open a table by location (format detected) or by catalog name and identifier."""
    if catalog is not None or identifier is not None:
        if location is not None:
            raise ValueError("give either a location or a catalog and identifier, not both")
        if catalog is None or identifier is None:
            raise ValueError("opening through a catalog needs both catalog and identifier")
        return open_iceberg_catalog(catalog, dict(catalog_properties or {}), identifier)
    if location is None:
        raise ValueError("give a table location, or a catalog and identifier")
    return OPENERS[detect_format(location)](location)


def _is_dir(filesystem: pafs.FileSystem, path: str) -> bool:
    try:
        return bool(filesystem.get_file_info(path).type == pafs.FileType.Directory)
    except OSError:
        return False


_WATCH = {
    ICEBERG: WatchSpec(directories=("metadata",), markers=(".metadata.json", "version-hint.text"))
}


def watch_spec(format_name: str) -> WatchSpec:
    """What the daemon watches for a table of this format (``KeyError`` if unknown)."""
    return _WATCH[format_name]
