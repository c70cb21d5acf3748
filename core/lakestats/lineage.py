"""Which commits a table's stats do not reflect yet: the one lineage walk that ``analyze``,
``freshness`` (``status``, the "behind" note of ``show``) and the daemon share.

``TableFormat.commits_since(last processed)`` lists them, or raises ``LineageError`` when
the processed commit is no ancestor of the current one (a rollback): the walk then starts
over from the table's lineage. Delta versions and Paimon snapshot ids are reused after a
rollback, so a rollback followed by as many new commits brings the processed id back,
naming a different commit. The state records the processed commit's
``Commit.fingerprint`` (``StateVersion.last_fingerprint``); when the format now names
another fingerprint for that id (``SupportsCommitFingerprint``), the walk starts over too.
A state without a fingerprint (written before it existed, or an Iceberg table, whose
random snapshot ids are never reused) is trusted as before. A walk that reaches a commit
it cannot read (``UnreadableCommitError``) gives the commits before it, and the error to
report once they are processed.

A walk that starts over (except after a reused id) need not read again what the store
already holds: ``rebased_baseline`` keeps held files in their segments when the walk
starts with a baseline, and ``reusable_sketches`` names the files it adds again whose
stored sketches stand in for reading them (``docs/architecture.md``, "Lineage").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from lakestats.exceptions import LineageError, UnreadableCommitError
from lakestats.formats.base import SupportsCommitFingerprint, TableFormat
from lakestats.model import (
    UNPARTITIONED,
    Commit,
    DataFile,
    FileContent,
    HeldFile,
    StateVersion,
)


@dataclass(frozen=True)
class Pending:
    """The commits to process, oldest first, and why the walk started over (if it did)."""

    commits: Sequence[Commit]
    # None: the walk continues after the processed commit; else why it starts over
    started_over: str | None = None
    # the processed id names another commit now: nothing recorded about the table's
    # history can be trusted (stats of older snapshots included)
    id_reused: bool = False
    # the walk stopped at a commit it cannot read: ``commits`` are those before it, to be
    # processed before the error is reported
    stopped: UnreadableCommitError | None = None


def replaced_commit(table: TableFormat, state: StateVersion | None) -> str | None:
    """Why the state's processed snapshot id names a different commit now (rolled back and
    committed again); ``None`` when it names the same one or that cannot be told."""
    if state is None or state.last_snapshot_id is None or state.last_fingerprint is None:
        return None
    if not isinstance(table, SupportsCommitFingerprint):
        return None
    now = table.commit_fingerprint(state.last_snapshot_id)
    if now is None or now == state.last_fingerprint:
        return None  # gone altogether: commits_since says so (LineageError)
    return (
        f"snapshot {state.last_snapshot_id} of table {table.location} is no longer the "
        "commit the stats describe (rolled back and committed again, reusing its id); "
        "starting over from the table's lineage"
    )


def pending_commits(table: TableFormat, state: StateVersion | None) -> Pending:
    """The commits ``state`` does not reflect, from one lineage walk of ``table``."""
    last = state.last_snapshot_id if state is not None else None
    replaced = replaced_commit(table, state)
    if replaced is not None:
        return _walk(table, None, replaced, id_reused=True)
    try:
        return _walk(table, last)
    except LineageError as exc:  # rolled back past the stats
        return _walk(table, None, str(exc))


def _walk(
    table: TableFormat,
    after: int | None,
    started_over: str | None = None,
    *,
    id_reused: bool = False,
) -> Pending:
    try:
        commits = table.commits_since(after)
    except UnreadableCommitError as exc:
        if not exc.readable:
            raise
        return Pending(exc.readable, started_over, id_reused, stopped=exc)
    return Pending(commits, started_over, id_reused)


def rebased_baseline(baseline: Commit, held: Mapping[str, HeldFile]) -> Commit:
    """A baseline that starts a run over (the processed commit was cut from the table's
    history), as a change to the files the stats already hold (``held``: the live files
    of ``StatsStore.held_files``): a held data file whose stored stats describe every row,
    listed again as the same file (``HeldFile.describes``) with no row-level deletes,
    stays as it is, not read again; the baseline's other files are added, and the held
    files it does not keep are removed. Still a baseline: what it replaces is re-merged
    whole."""
    kept = {
        f.path
        for f in baseline.added_files
        if (found := held.get(f.path)) is not None and not found.dead and found.describes(f)
    }
    removed = [
        _removed(path, found.content)
        for path, found in held.items()
        if path not in kept and not found.dead
    ]
    return replace(
        baseline,
        added_files=tuple(f for f in baseline.added_files if f.path not in kept),
        removed_files=tuple(f for f in removed if f.content == FileContent.DATA),
        removed_delete_files=tuple(f for f in removed if f.content != FileContent.DATA),
    )


def reusable_sketches(commits: Sequence[Commit], held: Mapping[str, HeldFile]) -> dict[str, str]:
    """The files a walk that starts over adds again as the same files the store holds
    stats of (live or tombstoned: ``HeldFile.describes``) → the segment holding them:
    their stored sketches stand in for reading them again."""
    return {
        f.path: found.segment
        for commit in commits
        for f in commit.added_files
        if (found := held.get(f.path)) is not None and found.describes(f)
    }


def _removed(path: str, content: FileContent) -> DataFile:
    """A removed file by its path: the store holds its stats."""
    return DataFile(
        path=path,
        content=content,
        file_format="PARQUET",
        record_count=0,
        file_size_bytes=0,
        partition=UNPARTITIONED,
    )
