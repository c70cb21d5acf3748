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
random snapshot ids are never reused) is trusted as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from lakestats.exceptions import LineageError
from lakestats.formats.base import SupportsCommitFingerprint, TableFormat
from lakestats.model import UNPARTITIONED, Commit, DataFile, FileContent, StateVersion


@dataclass(frozen=True)
class Pending:
    """The commits to process, oldest first, and why the walk started over (if it did)."""

    commits: Sequence[Commit]
    # None: the walk continues after the processed commit; else why it starts over
    started_over: str | None = None
    # the processed id names another commit now: nothing recorded about the table's
    # history can be trusted (stats of older snapshots included)
    id_reused: bool = False


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
        return Pending(table.commits_since(None), replaced, id_reused=True)
    try:
        return Pending(table.commits_since(last))
    except LineageError as exc:  # rolled back past the stats
        return Pending(table.commits_since(None), str(exc))


def rebased_baseline(baseline: Commit, held: Mapping[str, tuple[FileContent, bool]]) -> Commit:
    """A baseline that starts a run over (the processed commit was cut from the table's
    history), as a change to the files the stats already hold (``held``:
    ``StatsStore.live_file_contents``): a data file the store holds whose stored stats
    describe every row, listed again with no row-level deletes, is the same file (data
    files are never rewritten in place) and stays as it is, not read again; the
    baseline's other files are added, and the held files it does not keep are removed.
    Still a baseline: what it replaces is re-merged whole."""
    kept = {
        f.path
        for f in baseline.added_files
        if not f.deletes and held.get(f.path, (FileContent.DATA, False))[1]
    }
    removed = [_removed(path, content) for path, (content, _) in held.items() if path not in kept]
    return replace(
        baseline,
        added_files=tuple(f for f in baseline.added_files if f.path not in kept),
        removed_files=tuple(f for f in removed if f.content == FileContent.DATA),
        removed_delete_files=tuple(f for f in removed if f.content != FileContent.DATA),
    )


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
