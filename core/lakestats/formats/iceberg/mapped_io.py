"""A pyiceberg ``FileIO`` that reads files where they really are (``LocationMap``).

pyiceberg loads the FileIO class named by the ``py-io-impl`` property, so a table opened
by location or through a catalog gets this one by adding two properties (``io_properties``):
the class, and the mapping as JSON. Every file pyiceberg and lakestats read through the
table's IO — manifest lists, manifests, and the metadata file a catalog names — is then
opened at its mapped location. Nothing on disk is rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyiceberg.io import PY_IO_IMPL, FileIO, InputFile, OutputFile, load_file_io
from pyiceberg.typedef import EMPTY_DICT, Properties

from lakestats.locations import LocationMap

LOCATION_MAP_KEY = "lakestats.location-map"
# A py-io-impl the catalog had before, kept so the mapped IO wraps it rather than replace it
INNER_IO_IMPL_KEY = "lakestats.inner-py-io-impl"
_THIS_CLASS = f"{__name__}.MappedFileIO"


def io_properties(
    mapping: LocationMap, properties: Mapping[str, str] = EMPTY_DICT
) -> dict[str, str]:
    """``properties`` plus what makes pyiceberg read through ``MappedFileIO`` with ``mapping``
    (``properties`` unchanged when the mapping is empty)."""
    out = dict(properties)
    if not mapping:
        return out
    inner = out.get(PY_IO_IMPL)
    if inner and inner != _THIS_CLASS:
        out[INNER_IO_IMPL_KEY] = inner
    out[PY_IO_IMPL] = _THIS_CLASS
    out[LOCATION_MAP_KEY] = json.dumps(mapping.as_dict(), sort_keys=True)
    return out


class MappedFileIO(FileIO):
    """Opens every location at its mapped place, through the IO the properties otherwise pick."""

    def __init__(self, properties: Properties = EMPTY_DICT) -> None:
        super().__init__(properties)
        raw = properties.get(LOCATION_MAP_KEY) or "{}"
        self.mapping = LocationMap.of(json.loads(raw))
        inner = {k: v for k, v in properties.items() if k not in (PY_IO_IMPL, LOCATION_MAP_KEY)}
        if INNER_IO_IMPL_KEY in inner:
            inner[PY_IO_IMPL] = inner.pop(INNER_IO_IMPL_KEY)
        self._properties = inner
        self._ios: dict[str, FileIO] = {}

    def _io(self, location: str) -> FileIO:
        # pyiceberg picks the IO implementation by scheme; mapped paths may change it
        scheme = location.split("://", 1)[0] if "://" in location else ""
        io = self._ios.get(scheme)
        if io is None:
            io = load_file_io(self._properties, location)
            self._ios[scheme] = io
        return io

    def new_input(self, location: str) -> InputFile:
        mapped = self.mapping.apply(location)
        return self._io(mapped).new_input(mapped)

    def new_output(self, location: str) -> OutputFile:
        mapped = self.mapping.apply(location)
        return self._io(mapped).new_output(mapped)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        mapped = self.mapping.apply(path)
        self._io(mapped).delete(mapped)
