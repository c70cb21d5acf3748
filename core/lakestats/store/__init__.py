"""The crash-safe stats store: immutable data files plus a create-only state log.

Layout, one folder per table id under ``state_dir`` (see ``docs/store-format.md``)::

    <state_dir>/<table-id>/
      log/00000000000000000042.json         StateVersion 42 (created exclusively, never rewritten)
      segments/<snapshot>-<uuid>.parquet    one row per (data file, field id) a commit added
      aggregates/<snapshot>-<uuid>.parquet  a segment's live files merged per partition
      stats/<snapshot>-<uuid>.json          table-level stats document of one snapshot

Crash safety rests on two rules:

1. Every data file (segment, aggregate, stats) gets a fresh uuid name and is written to a
   hidden temporary name, fsynced, renamed into place and its directory fsynced before the
   writer returns. A file that a name points to is therefore whole, and nothing already
   committed is ever overwritten.
2. The only mutation of the table's state is creating ``log/<N+1>.json`` with
   ``os.link`` from a complete, fsynced temporary file. ``link`` is atomic and fails when
   the name exists, so the version file either does not exist or is complete, and of two
   writers racing for N+1 exactly one wins (the other gets ``ConcurrentUpdateError``).

On S3 (``state_dir = "s3://…"``, ``objectstore``) the same rules hold with objects: a PUT
shows a whole object or none, and a conditional PUT (``If-None-Match: *``) is the create
that exactly one writer wins.

A version is committed only after everything it references is durable (rule 1 runs before
rule 2), so a crash at any instant leaves the newest version file valid with all its files
present; at worst it leaves unreferenced files (orphans, hidden temporaries) that
``list_files(...) - referenced_files(...)`` finds for cleanup.
"""

from lakestats.store.aggregates import read_aggregate, write_aggregate
from lakestats.store.atomic import atomic_write, create_exclusive
from lakestats.store.segments import (
    read_segment,
    read_segment_contents,
    read_segment_paths,
    write_segment,
)
from lakestats.store.statelog import (
    latest_version,
    list_versions,
    read_version,
    version_from_json,
    version_to_json,
)
from lakestats.store.store import StatsStore, list_files, merge_key, referenced_files

__all__ = [
    "StatsStore",
    "atomic_write",
    "create_exclusive",
    "latest_version",
    "list_files",
    "list_versions",
    "merge_key",
    "read_aggregate",
    "read_segment",
    "read_segment_contents",
    "read_segment_paths",
    "read_version",
    "referenced_files",
    "version_from_json",
    "version_to_json",
    "write_aggregate",
    "write_segment",
]
