"""Which format a table location holds, and opening it behind the ``TableFormat`` Protocol.

The registry is a table of lazy ``FormatEntry`` s. An entry names a format, the module that
reads it, how to recognise its layout on disk, what the daemon watches, and the pip extra
of its optional dependency. Recognising a layout and answering ``watch_spec`` never import
the format's module, so a process that never opens an Iceberg table never loads the Iceberg
library, and a format whose dependency is missing fails only when one of its tables is
opened, with ``FormatUnavailableError`` saying which extra to install.

How to add a format (Delta as the example):

1. Write the package ``formats/delta/`` whose ``__init__`` exposes
   ``open_location(location) -> TableFormat`` and, if the format has catalogs,
   ``open_catalog(catalog_name, catalog_properties, identifier) -> TableFormat``. It may
   import its dependency (``deltalake``) at the top: only the registry imports it, on first
   use.
2. In ``ENTRIES`` below, give the Delta entry its ``module="lakestats.formats.delta"``,
   its ``watch`` spec (the directories and marker files one commit writes last), its
   ``extra`` (declared in ``pyproject.toml``) and ``catalogs=True`` if it has ``open_catalog``.
3. Add a table driver for it to ``tests/core/formats/test_contract.py``: the behaviour
   suite every ``TableFormat`` passes then runs over it too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import cast

from pyarrow import fs as pafs

from lakestats.exceptions import (
    ConfigError,
    FormatUnavailableError,
    TableNotFoundError,
    first_line,
    first_of,
)
from lakestats.formats.base import TableFormat, WatchSpec
from lakestats.locations import LocationMap, TableLocation, resolve_location

DEFAULT_CATALOG_FORMAT = "iceberg"


# how far the "is not a table" message looks for the table the path meant
_PARENTS_LOOKED_AT = 3
_CHILDREN_LOOKED_AT = 50


@dataclass(frozen=True)
class FormatEntry:
    """One table format as the registry knows it, before its module is imported."""

    name: str  # "iceberg": the name stored in state and given as ``format=``
    title: str  # "Iceberg": how messages name it
    layout: str  # what ``detect`` looks for, for "is not a table" messages
    detect: Callable[[TableLocation], bool]  # checks the layout only; never raises
    module: str | None = None  # exposes ``open_location`` (and ``open_catalog``); None: not built
    watch: WatchSpec | None = None
    extra: str | None = None  # the pip extra that installs the module's dependency
    catalogs: bool = False  # the module has ``open_catalog``

    @property
    def built(self) -> bool:
        return self.module is not None


class FormatRegistry:
    """Format entries in detection order; the module-level functions use ``REGISTRY``.

    Tests build their own registry from entries of their own.
    """

    def __init__(self, entries: Iterable[FormatEntry]) -> None:
        self.entries = tuple(entries)
        self._by_name = {entry.name: entry for entry in self.entries}

    def entry(self, format_name: str) -> FormatEntry:
        """The entry of a format name (``KeyError`` if unknown)."""
        return self._by_name[format_name]

    def detect(self, path: str) -> str:
        """The name of the format of the table at ``path``; see ``detect_format``."""
        location = resolve_location(path)
        try:
            info = location.filesystem.get_file_info(location.root)
        except OSError as exc:
            raise TableNotFoundError(f"{path}: cannot read this location ({exc})") from exc
        if info.type == pafs.FileType.NotFound:
            raise TableNotFoundError(f"{path} does not exist")
        if info.type != pafs.FileType.Directory:
            raise TableNotFoundError(f"{path} is not a table: it is a file, not a table directory")
        try:
            listed = location.filesystem.get_file_info(pafs.FileSelector(location.root))
        except OSError as exc:
            # e.g. chmod 000: say so, rather than "not a table" after finding nothing
            raise TableNotFoundError(f"{path}: cannot read this location ({exc})") from exc
        found = self._detected(location)
        if found is not None:
            if not found.built:
                raise TableNotFoundError(
                    f"{path} looks like a {found.title} table; "
                    f"{found.title} support is not built yet"
                )
            return found.name
        raise TableNotFoundError(
            f"{path} is not a table: found no {self._layouts()}{self._nearby(location, listed)}"
        )

    def _detected(self, location: TableLocation) -> FormatEntry | None:
        return next((entry for entry in self.entries if entry.detect(location)), None)

    def _nearby(self, location: TableLocation, listed: Sequence[pafs.FileInfo]) -> str:
        """Where the table may be instead, for the "is not a table" message: a table the
        path is inside (``t/_delta_log``, ``t/metadata``, a partition folder), or the
        tables the path holds (a warehouse folder)."""
        base = location.uri.rstrip("/")
        root, uri = location.root, base
        for _ in range(_PARENTS_LOOKED_AT):
            if "/" not in root.strip("/") or "/" not in uri.split("://", 1)[-1].strip("/"):
                break
            root, uri = root.rsplit("/", 1)[0], uri.rsplit("/", 1)[0]
            entry = self._detected(TableLocation(location.filesystem, root, uri))
            if entry is not None:
                return f"; it is inside the {entry.title} table {uri}"
        folders = sorted(i.base_name for i in listed if i.type == pafs.FileType.Directory)
        held = [
            name
            for name in folders[:_CHILDREN_LOOKED_AT]
            if self._detected(
                TableLocation(location.filesystem, f"{location.root}/{name}", f"{base}/{name}")
            )
        ]
        return f"; it holds tables: {first_of(held, 10)} (give one)" if held else ""

    def open_location(
        self,
        location: str,
        format_name: str | None = None,
        location_map: LocationMap | None = None,
    ) -> TableFormat:
        entry = self._known(format_name or self.detect(location))
        opener = cast(Callable[..., TableFormat], self._load(entry).open_location)
        if location_map:
            return opener(location, location_map=location_map)
        return opener(location)

    def open_catalog(
        self,
        catalog_name: str,
        catalog_properties: Mapping[str, str],
        identifier: str,
        format_name: str | None = None,
        location_map: LocationMap | None = None,
    ) -> TableFormat:
        entry = self._known(format_name or DEFAULT_CATALOG_FORMAT)
        if entry.built and not entry.catalogs:
            raise ConfigError(
                f"{entry.title} tables cannot be opened through a catalog: "
                "give the table's location instead"
            )
        opener = cast(Callable[..., TableFormat], self._load(entry).open_catalog)
        if location_map:
            return opener(
                catalog_name, dict(catalog_properties), identifier, location_map=location_map
            )
        return opener(catalog_name, dict(catalog_properties), identifier)

    def watch_spec(self, format_name: str) -> WatchSpec:
        watch = self.entry(format_name).watch
        if watch is None:
            raise KeyError(format_name)
        return watch

    def _known(self, format_name: str) -> FormatEntry:
        try:
            return self.entry(format_name)
        except KeyError:
            known = ", ".join(entry.name for entry in self.entries)
            raise ConfigError(f"unknown table format {format_name!r} (known: {known})") from None

    def _load(self, entry: FormatEntry) -> ModuleType:
        if entry.module is None:
            raise ConfigError(f"{entry.title} support is not built yet")
        try:
            return importlib.import_module(entry.module)
        except ImportError as exc:
            missing = exc.name or ""
            if missing == "lakestats" or missing.startswith("lakestats."):
                raise  # our own module is missing: a packaging bug, not a missing extra
            install = (
                f"install the `lakestats[{entry.extra}]` extra"
                if entry.extra
                else f"install {missing or 'its dependency'}"
            )
            raise FormatUnavailableError(
                f"reading {entry.title} tables needs {missing or entry.module}, which cannot "
                f"be imported ({first_line(exc)}): {install}"
            ) from exc

    def _layouts(self) -> str:
        found = [f"{entry.layout} ({entry.title})" for entry in self.entries]
        if len(found) == 1:
            return found[0]
        return f"{', '.join(found[:-1])} or {found[-1]}"


# --- detectors: the layout on disk, checked without the format's dependency ---------------


def _has_file_ending(location: TableLocation, directory: str, suffix: str) -> bool:
    selector = pafs.FileSelector(location.fs_path(directory), allow_not_found=True)
    try:
        infos = location.filesystem.get_file_info(selector)
    except OSError as exc:
        if isinstance(exc, PermissionError) or "permission denied" in str(exc).lower():
            raise TableNotFoundError(
                f"{location.fs_path(directory)}: cannot read this location ({exc})"
            ) from exc
        return False
    return any(
        info.type == pafs.FileType.File and info.base_name.endswith(suffix) for info in infos
    )


def _is_paimon(location: TableLocation) -> bool:
    """``schema/schema-N`` files: a new Paimon table has no ``snapshot/`` yet."""
    selector = pafs.FileSelector(location.fs_path("schema"), allow_not_found=True)
    try:
        infos = location.filesystem.get_file_info(selector)
    except OSError:
        return False
    return any(
        info.type == pafs.FileType.File
        and info.base_name.startswith("schema-")
        and info.base_name[len("schema-") :].isdigit()
        for info in infos
    )


def _has_directories(*names: str) -> Callable[[TableLocation], bool]:
    def detect(location: TableLocation) -> bool:
        return all(location.file_type(name) == pafs.FileType.Directory for name in names)

    return detect


def _is_iceberg(location: TableLocation) -> bool:
    return _has_file_ending(location, "metadata", ".metadata.json")


ENTRIES = (
    FormatEntry(
        name="iceberg",
        title="Iceberg",
        layout="metadata/*.metadata.json",
        detect=_is_iceberg,
        module="lakestats.formats.iceberg",
        watch=WatchSpec(directories=("metadata",), markers=(".metadata.json", "version-hint.text")),
        extra="iceberg",
        catalogs=True,
    ),
    FormatEntry(
        name="delta",
        title="Delta",
        layout="_delta_log/",
        detect=_has_directories("_delta_log"),
        module="lakestats.formats.delta",
        # a commit is one new <version>.json; checkpoints follow the commit they cover
        watch=WatchSpec(directories=("_delta_log",), markers=(".json",)),
        extra="delta",
    ),
    # Layouts recognised so that users get a clear answer rather than "not a table".
    FormatEntry(
        name="paimon",
        title="Paimon",
        layout="schema/schema-N",
        detect=_is_paimon,
        module="lakestats.formats.paimon",
        # writers rename snapshot-N into place, then write the LATEST hint (Java, pypaimon)
        watch=WatchSpec(directories=("snapshot",), markers=("LATEST",)),
        extra="paimon",
    ),
)
REGISTRY = FormatRegistry(ENTRIES)


def detect_format(path: str) -> str:
    """The format name of the table at ``path`` (``"iceberg"``).

    Raises ``TableNotFoundError`` naming the path when it does not exist, is no table, or
    holds a format lakestats cannot read yet.
    """
    return REGISTRY.detect(path)


def open_table(
    location: str | None = None,
    *,
    catalog: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    identifier: str | None = None,
    format: str | None = None,
    location_map: LocationMap | None = None,
) -> TableFormat:
    """Open a table by location or by catalog name and identifier.

    By location the format is detected unless ``format`` names it; through a catalog the
    format is ``format``, Iceberg by default. ``location_map`` says where the files the
    metadata names really are.
    """
    if catalog is not None or identifier is not None:
        if location is not None:
            raise ValueError("give either a location or a catalog and identifier, not both")
        if catalog is None or identifier is None:
            raise ValueError("opening through a catalog needs both catalog and identifier")
        return REGISTRY.open_catalog(
            catalog, catalog_properties or {}, identifier, format, location_map
        )
    if location is None:
        raise ValueError("give a table location, or a catalog and identifier")
    return REGISTRY.open_location(location, format, location_map)


def watch_spec(format_name: str) -> WatchSpec:
    """What the daemon watches for a table of this format (``KeyError`` if unknown)."""
    return REGISTRY.watch_spec(format_name)
