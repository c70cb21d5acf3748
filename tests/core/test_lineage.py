"""The core's lineage check (``lakestats.lineage``) over a ``MemoryTable`` cut back as Delta
and Paimon roll back: the processed id comes back naming another commit.

Metadata-only (no Spark): the real writers' versions are in
``tests/core/formats/test_reused_ids.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lakestats.analyze import BatchProgress, analyze_table, read_stats
from lakestats.cli import behind_note
from lakestats.config import Config, TableConfig
from lakestats.formats.memory import MemoryTable
from lakestats.freshness import freshness
from lakestats.lineage import (
    pending_commits,
    rebased_baseline,
    replaced_commit,
    reusable_sketches,
)
from lakestats.model import (
    BASELINE_OPERATION,
    ColumnSketch,
    Commit,
    DataFile,
    DeletionVector,
    FileContent,
    HeldFile,
    PartitionKey,
)
from lakestats.store import StatsStore
from lakestats.tables import OpenedTable

VOLATILE = {"computed_at_ms"}


def _opened(table: MemoryTable, state: Path) -> OpenedTable:
    return OpenedTable(
        config=TableConfig(name="t", location=str(state / "unused")),
        table=table,  # type: ignore[arg-type]
        store=StatsStore(str(state), table.table_id),
    )


def _analyze(opened: OpenedTable) -> list[int]:
    processed: list[int] = []
    analyze_table(
        opened,
        config=Config(state_dir=str(opened.store.table_dir.parent)),
        sketcher=None,
        on_commit=lambda report: processed.append(report.snapshot_id),
    )
    return processed


def _stable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}


def _append(table: MemoryTable, name: str, ids: list[int]) -> int:
    return table.append(
        table.data_file(
            f"memory://t/data/{name}.parquet", len(ids), bounds={"id": (min(ids), max(ids))}
        )
    )


@pytest.fixture
def table() -> MemoryTable:
    made = MemoryTable([("id", "long")], name="t")
    _append(made, "a", [1, 2])
    _append(made, "b", [3, 4, 5])
    _append(made, "c", [6])
    return made


def test_a_reused_id_starts_over_and_equals_a_fresh_analyze(
    table: MemoryTable, tmp_path: Path
) -> None:
    opened = _opened(table, tmp_path / "state")
    assert _analyze(opened) == [1, 2, 3]
    state = opened.store.current()
    assert state is not None and state.last_fingerprint == table.commit_fingerprint(3)

    table.cut_back(1)  # snapshots 2 and 3 deleted; the next commits get their ids again
    assert _append(table, "d", [10, 20]) == 2
    assert _append(table, "e", [30]) == 3
    # same id, same commit time (MemoryTable derives it from the sequence): only the
    # fingerprint tells the commits apart
    assert replaced_commit(table, opened.store.current()) is not None

    fresh = freshness(opened)
    assert fresh.current_snapshot_id == fresh.last_snapshot_id == 3
    assert fresh.commits_behind == 3  # the whole lineage is processed again
    assert not fresh.up_to_date
    assert fresh.starts_over is not None and "no longer the commit" in fresh.starts_over
    note = behind_note(fresh, "lakestats analyze t")
    assert "no longer the commit" in note and "run `lakestats analyze t`" in note

    assert _analyze(opened) == [1, 2, 3]
    doc = read_stats(opened)
    assert doc["record_count"] == 2 + 2 + 1
    assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["max"]) == (1, 30)
    scratch = _opened(table, tmp_path / "scratch")
    _analyze(scratch)
    assert _stable(doc) == _stable(read_stats(scratch))
    again = freshness(opened)
    assert again.up_to_date and again.starts_over is None
    assert _analyze(opened) == []  # and it stays up to date


def test_stats_of_older_snapshots_are_not_kept_after_a_reused_id(
    table: MemoryTable, tmp_path: Path
) -> None:
    opened = _opened(table, tmp_path / "state")
    _analyze(opened)
    table.cut_back(1)
    _append(table, "d", [10])
    _append(table, "e", [30])
    _analyze(opened)
    state = opened.store.current()
    assert state is not None
    assert sorted(state.stats) == [1, 2, 3]  # every one written again by the new walk
    assert read_stats(opened, 2)["record_count"] == 2 + 1


def test_a_store_without_a_fingerprint_keeps_the_old_behaviour(
    table: MemoryTable, tmp_path: Path
) -> None:
    opened = _opened(table, tmp_path / "state")
    _analyze(opened)
    state = opened.store.current()
    assert state is not None
    # a state version written before fingerprints existed
    opened.store.commit(replace(state, version=state.version + 1, last_fingerprint=None))
    table.cut_back(1)
    _append(table, "d", [10])
    _append(table, "e", [30])
    assert replaced_commit(table, opened.store.current()) is None
    assert freshness(opened).up_to_date  # the documented limit of such a store
    assert _analyze(opened) == []


def test_a_rollback_past_the_stats_is_still_a_start_over(
    table: MemoryTable, tmp_path: Path
) -> None:
    opened = _opened(table, tmp_path / "state")
    _analyze(opened)
    table.cut_back(2)  # snapshot 3 is gone and no commit took its id yet
    pending = pending_commits(table, opened.store.current())
    assert pending.started_over is not None and not pending.id_reused
    assert [c.snapshot_id for c in pending.commits] == [1, 2]
    assert _analyze(opened) == [1, 2]


def _data_file(path: str, **kwargs: Any) -> DataFile:
    return DataFile(
        path=path,
        content=kwargs.pop("content", FileContent.DATA),
        file_format="PARQUET",
        record_count=kwargs.pop("record_count", 10),
        file_size_bytes=kwargs.pop("file_size_bytes", 100),
        partition=PartitionKey(0),
        **kwargs,
    )


def _held(**kwargs: Any) -> HeldFile:
    facts: dict[str, Any] = {
        "content": FileContent.DATA,
        "record_count": 10,
        "file_size_bytes": 100,
        "whole": True,
        "segment": "segments/1.parquet",
    }
    return HeldFile(**{**facts, **kwargs})


def test_a_rebased_baseline_keeps_only_held_files_whose_stats_hold_every_row() -> None:
    vector = DeletionVector(bitmap=b"", cardinality=1)
    baseline = Commit(
        snapshot_id=9,
        parent_id=None,
        sequence_number=9,
        timestamp_ms=0,
        operation=BASELINE_OPERATION,
        schema_id=0,
        added_files=(
            _data_file("same"),
            _data_file("new"),
            _data_file("now with a vector", deletes=(vector,)),
            _data_file("held with deletes applied"),
        ),
        added_delete_files=(_data_file("positions", content=FileContent.POSITION_DELETES),),
    )
    held = {
        "same": _held(),
        "now with a vector": _held(),
        "held with deletes applied": _held(whole=False),
        "gone": _held(),
        "positions": _held(content=FileContent.POSITION_DELETES, whole=False),
        "removed before": _held(dead=True),  # tombstoned: not live, so not removed again
    }

    rebased = rebased_baseline(baseline, held)

    assert rebased.is_baseline and rebased.snapshot_id == 9
    assert [f.path for f in rebased.added_files] == [
        "new",
        "now with a vector",
        "held with deletes applied",
    ]
    assert rebased.added_delete_files == baseline.added_delete_files  # read again, always
    assert sorted(f.path for f in rebased.removed_files) == [
        "gone",
        "held with deletes applied",
        "now with a vector",
    ]
    assert [(f.path, f.content) for f in rebased.removed_delete_files] == [
        ("positions", FileContent.POSITION_DELETES)
    ]
    assert rebased_baseline(baseline, {}) == baseline  # nothing held: the baseline itself


def test_a_walk_reuses_the_sketches_of_held_files_that_are_the_same_files() -> None:
    """Same path, rows and bytes, every row live then and now: the same file (data files
    are never rewritten in place); anything else is read again."""
    vector = DeletionVector(bitmap=b"", cardinality=1)
    walk = [
        Commit(
            snapshot_id=1,
            parent_id=None,
            sequence_number=1,
            timestamp_ms=0,
            operation="append",
            schema_id=0,
            added_files=(
                _data_file("same"),
                _data_file("same, removed since"),
                _data_file("other rows", record_count=11),
                _data_file("other bytes", file_size_bytes=101),
                _data_file("stats after deletes"),
                _data_file("never held"),
            ),
        ),
        Commit(
            snapshot_id=2,
            parent_id=1,
            sequence_number=2,
            timestamp_ms=0,
            operation="overwrite",
            schema_id=0,
            added_files=(_data_file("now with a vector", deletes=(vector,)),),
        ),
    ]
    held = {
        "same": _held(),
        "same, removed since": _held(dead=True, segment="segments/0.parquet"),
        "other rows": _held(),
        "other bytes": _held(),
        "stats after deletes": _held(whole=False),
        "now with a vector": _held(),
    }

    assert reusable_sketches(walk, held) == {
        "same": "segments/1.parquet",
        "same, removed since": "segments/0.parquet",
    }
    assert reusable_sketches(walk, {}) == {}


class _RecordingSketcher:
    def __init__(self) -> None:
        self.read: list[str] = []

    def __call__(self, paths: Sequence[str], schema: Any, bounds_for: Any) -> dict[str, Any]:
        self.read.extend(paths)
        return {path: {1: ColumnSketch(null_count=0)} for path in paths}


def test_after_a_reused_id_only_files_the_store_does_not_hold_are_read(
    table: MemoryTable, tmp_path: Path
) -> None:
    """A reused id says the stats of older snapshots cannot be trusted (they are written
    again), not the files: the same path with the same rows and bytes is the same file,
    whichever commit adds it now. The commit replaced by the reused id added another."""
    opened = _opened(table, tmp_path / "state")
    sketcher = _RecordingSketcher()
    config = Config(state_dir=str(tmp_path / "state"))
    analyze_table(opened, config=config, sketcher=sketcher)
    assert len(sketcher.read) == 3
    table.cut_back(2)
    _append(table, "d", [10])  # takes id 3: the processed id, another commit
    sketcher.read.clear()

    reports = analyze_table(opened, config=config, sketcher=sketcher).commits

    assert sketcher.read == ["memory://t/data/d.parquet"]
    assert [(r.snapshot_id, r.reused_files, r.sketched_files) for r in reports] == [
        (1, 1, 0),
        (2, 1, 0),
        (3, 0, 1),
    ]
    state = opened.store.current()
    assert state is not None and sorted(state.stats) == [1, 2, 3]  # written again
    scratch = _opened(table, tmp_path / "scratch")
    analyze_table(scratch, config=Config(state_dir=str(tmp_path / "scratch")), sketcher=sketcher)
    assert _stable(read_stats(opened)) == _stable(read_stats(scratch))


def test_after_a_rollback_held_files_are_not_read_again(table: MemoryTable, tmp_path: Path) -> None:
    opened = _opened(table, tmp_path / "state")
    sketcher = _RecordingSketcher()
    config = Config(state_dir=str(tmp_path / "state"))
    analyze_table(opened, config=config, sketcher=sketcher)
    table.rollback(2)  # as Iceberg does: snapshot 3 leaves the lineage, its id stays taken
    _append(table, "d", [10, 11])  # the walk reads this one file
    sketcher.read.clear()
    progress: list[BatchProgress] = []

    reports = analyze_table(
        opened, config=config, sketcher=sketcher, on_progress=progress.append
    ).commits

    assert sketcher.read == ["memory://t/data/d.parquet"]
    assert {(p.files_total, p.rows_total) for p in progress} == {(1, 2)}  # nothing else to read
    assert progress[-1].files_done == 1
    assert [(r.snapshot_id, r.sketched_files, r.reused_files) for r in reports] == [
        (1, 0, 1),
        (2, 0, 1),
        (4, 1, 0),
    ]
    scratch = _opened(table, tmp_path / "scratch")
    analyze_table(scratch, config=Config(state_dir=str(tmp_path / "scratch")), sketcher=sketcher)
    assert _stable(read_stats(opened)) == _stable(read_stats(scratch))
