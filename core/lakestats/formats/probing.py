"""Finding a table's new commit files by name instead of listing their folder.

Delta (``_delta_log/<version:020>.json``) and Paimon (``snapshot/snapshot-<id>``) number
their commit files one after the other, and a commit file is created whole and never
rewritten in place. A listing costs one object-store request per 1,000 entries and grows
with the history a table keeps (30 days of log by default for Delta, whatever
``snapshot.time-retained`` says for Paimon); asking for the newest known file and the next
by name costs a HEAD each, whatever the history. A format lists once, then probes while
its folder is big, and lists again when a probe cannot tell or every ``RELIST_EVERY_S``
(for what a probe does not look at: files deleted or added before the newest).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pyarrow import fs as pafs

from lakestats.locations import TableLocation

# a listing returns 1,000 entries per object-store request: below that, one listing is as
# cheap as the two or three requests of a probe, and sees everything
PROBE_ABOVE_ENTRIES = 1000
PROBE_LIMIT = 16  # more new files than this: a burst, which one listing reads cheaper
RELIST_EVERY_S = 600.0


@dataclass(frozen=True)
class FileStamp:
    """What tells a file from another written under its name later (a log cut back or a
    snapshot rolled back, then committed again)."""

    size: int
    mtime_ms: int

    @classmethod
    def of(cls, info: pafs.FileInfo) -> FileStamp:
        mtime = int(info.mtime_ns // 1_000_000) if info.mtime_ns is not None else 0
        return cls(int(info.size or 0), mtime)


class Listed(Protocol):
    @property
    def entries(self) -> int:
        """What the listing returned, every kind of file: its cost."""
        ...


L = TypeVar("L", bound=Listed)


def probe_or_list(
    previous: L,
    listed_at: float,
    probe_above_entries: int,
    probe: Callable[[L], L | None],
    list_folder: Callable[[], L],
) -> tuple[L, float]:
    """A refresh's listing and when it was listed: ``previous`` brought up to date by
    ``probe`` while the last listing returned more than ``probe_above_entries`` files and
    is younger than ``RELIST_EVERY_S``, else (or when the probe cannot tell) a listing."""
    if previous.entries > probe_above_entries and time.monotonic() - listed_at < RELIST_EVERY_S:
        probed = probe(previous)
        if probed is not None:
            return probed, listed_at
    return list_folder(), time.monotonic()


def probe_after(
    location: TableLocation,
    folder: str,
    name_of: Callable[[int], str],
    newest: int,
    known: FileStamp,
) -> dict[int, pafs.FileInfo] | None:
    """The files numbered after ``newest`` in ``folder`` (none: an empty dict), found by
    name, or None when only a listing can tell:

    * ``newest`` is gone or another file (``known`` differs): history was cut back or
      replaced;
    * more than ``PROBE_LIMIT`` new files;
    * the files cannot be asked for (the listing reports why, in its own words).

    Each question is one request on object storage: the newest file's stamp (a file-info
    request), then whether the next one is there (``TableLocation.present``, a HEAD,
    where a file-info request for a missing key adds a LIST) and, while it is, its stamp:
    an unchanged table costs two HEADs, each new file two more.
    """
    found: dict[int, pafs.FileInfo] = {}
    try:
        [info] = location.files(folder, [name_of(newest)])
        if info is None or FileStamp.of(info) != known:
            return None
        number = newest + 1
        while location.present(folder, name_of(number)):
            if len(found) == PROBE_LIMIT:
                return None
            [info] = location.files(folder, [name_of(number)])
            if info is None:  # there a moment ago: taken back meanwhile
                return None
            found[number] = info
            number += 1
    except OSError:
        return None
    return found
