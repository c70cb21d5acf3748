"""Child-process bodies for the concurrency and crash tests.

Kept apart from the test modules so a forkserver child imports only the store, not pytest.
"""

from __future__ import annotations

import os
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from lakestats.exceptions import ConcurrentUpdateError
from lakestats.model import (
    UNPARTITIONED,
    ColumnAggregate,
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    PartitionAggregate,
    PartitionKey,
    SegmentEntry,
    StateVersion,
)
from lakestats.store import StatsStore

TABLE_ID = "tbl-0001"
TYPES = {1: "long", 2: "string", 3: "decimal(12, 2)"}
FILES_PER_SEGMENT = 40


def _blob(snapshot_id: int, i: int) -> bytes:
    return (snapshot_id * 1000 + i).to_bytes(8, "little") * 8


def segment_files(snapshot_id: int) -> list[DataFile]:
    """Deterministic content per snapshot, so a reader can check a segment is the whole one."""
    return [
        DataFile(
            path=f"file:///wh/t/data/{snapshot_id}-{i}.parquet",
            content=FileContent.DATA,
            file_format="PARQUET",
            record_count=snapshot_id + i,
            file_size_bytes=1000 + i,
            partition=PartitionKey(spec_id=1, values=(("day", i % 3),)),
            columns={
                1: ColumnMetrics(1, 2, 3, 0, lower=-i, upper=snapshot_id),
                2: ColumnMetrics(lower=f"a{i}", upper="z" * 40, bounds_may_be_truncated=True),
                3: ColumnMetrics(lower=Decimal("-1.25"), upper=Decimal(f"{i}.00")),
            },
            field_ids=frozenset(TYPES),
            sketches={1: ColumnSketch(theta=_blob(snapshot_id, i), kll=bytes(200), min=-i, max=i)},
        )
        for i in range(FILES_PER_SEGMENT)
    ]


def aggregate_parts(snapshot_id: int) -> list[PartitionAggregate]:
    return [
        PartitionAggregate(
            partition=UNPARTITIONED,
            record_count=snapshot_id,
            file_count=FILES_PER_SEGMENT,
            columns={1: ColumnAggregate(1, "long", files=1, lower=0, upper=snapshot_id)},
        )
    ]


def stats_doc(snapshot_id: int) -> dict[str, Any]:
    return {"snapshot_id": snapshot_id, "record_count": snapshot_id, "columns": {"1": [1.5]}}


def next_state(
    store: StatsStore, current: StateVersion | None, snapshot_id: int, tag: list[Any]
) -> StateVersion:
    """Write one commit's files and build (not commit) the state on top of ``current``."""
    seg = store.write_segment(snapshot_id, segment_files(snapshot_id), TYPES)
    agg = store.write_aggregate(snapshot_id, aggregate_parts(snapshot_id))
    stats = store.write_stats(snapshot_id, stats_doc(snapshot_id))
    entry = SegmentEntry(snapshot_id, seg, agg, FILES_PER_SEGMENT)
    if current is None:
        current = StateVersion(0, TABLE_ID, "iceberg", "file:///wh/t", None)
    tags = [*current.published.get("tags", []), tag]
    return replace(
        current,
        version=current.version + 1,
        last_snapshot_id=snapshot_id,
        segments=(*current.segments, entry),
        stats={**current.stats, snapshot_id: stats},
        published={"tags": tags},
        created_at_ms=0,
    )


def commit_with_retry(store: StatsStore, snapshot_id: int, tag: list[Any]) -> int:
    """Commit one snapshot, redoing the work on top of whoever won; returns losses."""
    losses = 0
    while True:
        current = store.current()
        try:
            store.commit(next_state(store, current, snapshot_id, tag))
        except ConcurrentUpdateError:
            losses += 1
            continue
        return losses


def racing_writer(state_dir: str, writer: int, commits: int, start: Any, losses: Any) -> None:
    start.wait()
    store = StatsStore(state_dir, TABLE_ID)
    lost = 0
    for i in range(commits):
        lost += commit_with_retry(store, writer * 1_000_000 + i + 1, [writer, i])
    losses.put(lost)


def endless_writer(state_dir: str, ready: Any) -> None:
    store = StatsStore(state_dir, TABLE_ID)
    ready.set()
    snapshot_id = 1
    current = store.current()
    if current is not None and current.last_snapshot_id is not None:
        snapshot_id = current.last_snapshot_id + 1
    while True:
        commit_with_retry(store, snapshot_id, ["endless", snapshot_id])
        snapshot_id += 1


def crash_at_step(state_dir: str, crash_step: int, calls_out: Any) -> None:
    """One full commit, dying (as if SIGKILLed) right before filesystem call ``crash_step``.

    Completes normally when the commit needs fewer calls; ``calls_out`` gets the count.
    """
    calls = 0
    originals = {name: getattr(os, name) for name in CRASH_POINTS}

    def hooked(name: str) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == crash_step:
                os._exit(77)  # no cleanup, no flush: the closest a test gets to a kill
            return originals[name](*args, **kwargs)

        return wrapper

    for name in CRASH_POINTS:
        setattr(os, name, hooked(name))
    try:
        store = StatsStore(state_dir, TABLE_ID)
        current = store.current()
        snapshot_id = 1 if current is None else (current.last_snapshot_id or 0) + 1
        commit_with_retry(store, snapshot_id, ["step", crash_step])
    finally:
        for name, original in originals.items():
            setattr(os, name, original)
    calls_out.value = calls


CRASH_POINTS = ("open", "write", "fsync", "replace", "link", "unlink", "mkdir")


def check_store(state_dir: str | Path, verified: set[str] | None = None) -> StateVersion | None:
    """Assert the invariants a crash must never break; returns the current state.

    Files named in ``verified`` were checked before (they are immutable) and are skipped;
    the newly checked ones are added to it.
    """
    seen = set() if verified is None else verified
    store = StatsStore(state_dir, TABLE_ID)
    state = store.current()
    versions = store.versions()
    assert versions == list(range(1, len(versions) + 1)), versions
    for version in versions:
        if f"log/{version}" not in seen:
            store.read_version(version)  # every log file is whole
            seen.add(f"log/{version}")
    if state is None:
        return None
    assert len(state.published["tags"]) == state.version
    for seg in state.segments:
        if seg.path not in seen:
            assert store.read_segment(seg.path) == tuple(segment_files(seg.snapshot_id))
            seen.add(seg.path)
        if seg.aggregate_path not in seen:
            assert store.read_aggregate(seg.aggregate_path) == tuple(
                aggregate_parts(seg.snapshot_id)
            )
            seen.add(seg.aggregate_path)
    for snapshot_id, rel in state.stats.items():
        if rel not in seen:
            assert store.read_stats(rel) == stats_doc(snapshot_id)
            seen.add(rel)
    return state
