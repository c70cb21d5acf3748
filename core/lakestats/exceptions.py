"""The errors lakestats raises on purpose. The CLI prints each as one line, no traceback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class LakestatsError(Exception):
    """Base of every expected error: its message is meant for the user as it stands."""


class ConfigError(LakestatsError):
    """A configuration file, key or value is wrong. The message names the key."""


class TableNotFoundError(LakestatsError):
    """A path or name does not designate a table lakestats can read."""


class MetadataError(LakestatsError):
    """Table metadata (metadata.json, manifest list, manifest) is missing or unreadable.

    The message names the file and the problem.
    """


class PartialMetadataError(MetadataError):
    """The newest metadata file cannot be parsed and was written moments ago: a writer
    that writes it in place (not to a temporary name) may still be at it. Retry soon; the
    daemon counts it as contention, not as a failure."""


class ExpiredWhileReadingError(MetadataError):
    """Metadata went missing because snapshots were expired while a run read them (a
    writer's own expiry, Paimon's on commit; a Delta log cleanup): nothing is damaged, the
    next run starts from what is left. The daemon counts it as contention."""


class UnsupportedTableError(MetadataError):
    """The table needs a reader lakestats is not (a Delta reader version or feature, a
    Paimon BLOB column): none of its commits is processed, whatever the walk read before."""


class UnreadableCommitError(MetadataError):
    """One commit of a lineage walk cannot be read, or describes what lakestats cannot:
    the walk stops there. ``readable`` are the commits before it (``model.Commit``, oldest
    first), each whole: a run processes them, then reports this error, so the stats reach
    the commit before the bad one instead of staying where they were."""

    def __init__(self, message: str, readable: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.readable = tuple(readable)


class DataFileError(LakestatsError):
    """A data file listed by the table is missing or unreadable."""


class LineageError(LakestatsError):
    """The last processed snapshot is not an ancestor of the current one (rollback)."""


class StoreError(LakestatsError):
    """The stats store is unreadable or was written by something else."""


class ConcurrentUpdateError(StoreError):
    """Another process wrote the next state version first."""


class VersionGapError(StoreError, ValueError):
    """A state version that does not follow the store's newest: the log was deleted under
    the writer (``lakestats forget`` from a config sharing the state dir) — or a caller's
    bug, hence also a ``ValueError``."""


class SnapshotNotFoundError(LakestatsError):
    """The requested snapshot has no stats (never processed, unknown, or expired)."""


class NotAnalyzedError(SnapshotNotFoundError):
    """The table has commits but no stats yet: ``lakestats analyze`` makes them."""


class PublishError(LakestatsError):
    """Stats could not be published where engines read them (e.g. table metadata)."""


class SketchError(LakestatsError):
    """The sketch pipeline failed (Spark unavailable, unsupported input)."""


class SparkUnavailableError(SketchError):
    """Spark cannot run a job: master unreachable, no executors, a stopped context, or a
    job past its time limit. The message names the cause in Spark's words."""


class ExpiryError(LakestatsError):
    """Managed snapshot expiry cannot run on this table (e.g. opened read-only by location)."""


class FormatUnavailableError(LakestatsError):
    """A table format's optional dependency is not installed (the message names the extra)."""


def first_line(exc: BaseException) -> str:
    """An exception as one short line, for errors that name a file and the problem."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def first_of(names: Sequence[str], limit: int) -> str:
    """The first ``limit`` of ``names`` and how many more, for a message: a long list
    stays one readable line ("none" for no names)."""
    shown = ", ".join(names[:limit]) or "none"
    return shown + (f", … {len(names) - limit} more" if len(names) > limit else "")
