"""Concurrent writers and crashes, with real processes and real files."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from multiprocessing.context import ForkServerContext
from pathlib import Path

import pytest
import store_workers
from store_workers import TABLE_ID, check_store, commit_with_retry

from lakestats.store import StatsStore, list_files, referenced_files
from lakestats.store.atomic import is_temp_name
from lakestats.store.segments import read_segment


@pytest.fixture(scope="module")
def ctx() -> Iterator[ForkServerContext]:
    # forkserver: children start in milliseconds with the store preloaded, without
    # inheriting this process's pyarrow threads the way a plain fork would. (Python 3.11's
    # forkserver preloads with the environment's sys.path, so name importable packages.)
    context = multiprocessing.get_context("forkserver")
    # pandas too where installed (pypaimon, a test dependency, brings it): pyarrow imports
    # it on a commit's first array conversion, ~0.3 s a child would spend before committing
    preload = ["lakestats.store", "pyarrow.parquet"]
    context.set_forkserver_preload(
        [*preload, "pandas"] if importlib.util.find_spec("pandas") else preload
    )
    yield context


def _assert_orphans_are_whole(state_dir: Path) -> None:
    """A file under a final name is always complete, referenced or not."""
    store = StatsStore(state_dir, TABLE_ID)
    state = store.current()
    for rel in sorted(set(list_files(store.table_dir)) - referenced_files(state)):
        name = rel.rsplit("/", 1)[-1]
        if is_temp_name(name):
            continue
        if rel.startswith("segments/"):
            read_segment(store.path(rel))
        elif rel.startswith("aggregates/"):
            store.read_aggregate(rel)
        elif rel.startswith("stats/"):
            store.read_stats(rel)
        else:
            pytest.fail(f"unexpected file {rel}")


def test_racing_writers_leave_a_gapless_log(tmp_path: Path, ctx: ForkServerContext) -> None:
    writers, commits = 2, 20
    start = ctx.Event()
    losses = ctx.Queue()
    procs = [
        ctx.Process(
            target=store_workers.racing_writer,
            args=(str(tmp_path), w, commits, start, losses),
        )
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    lost = sum(losses.get(timeout=5) for _ in procs)

    state = check_store(tmp_path)
    assert state is not None
    store = StatsStore(tmp_path, TABLE_ID)
    assert store.versions() == list(range(1, writers * commits + 1))
    tags = state.published["tags"]
    assert sorted(map(tuple, tags)) == [(w, i) for w in range(writers) for i in range(commits)]
    # every version extends the one before: no commit was lost or overwritten
    for version in range(1, writers * commits + 1):
        assert store.read_version(version).published["tags"] == tags[:version]
    assert len(state.segments) == writers * commits
    # a lost race leaves the loser's files unreferenced, never broken
    assert len(list_files(store.table_dir)) == 3 * (writers * commits + lost)
    _assert_orphans_are_whole(tmp_path)


def test_sigkill_at_random_moments(tmp_path: Path, ctx: ForkServerContext) -> None:
    rng = random.Random(20240611)
    verified: set[str] = set()
    # At least 10 kills and one landed commit however loaded the machine is (a slow
    # machine lands fewer commits between kills); then up to 40 kills within 12 s.
    deadline, give_up = time.monotonic() + 12, time.monotonic() + 120
    trials, progressed = 0, False
    while (trials < 40 and time.monotonic() < deadline) or trials < 10 or not progressed:
        assert time.monotonic() < give_up, f"no commit landed in {trials} trials"
        ready = ctx.Event()
        proc = ctx.Process(target=store_workers.endless_writer, args=(str(tmp_path), ready))
        proc.start()
        assert ready.wait(10)
        time.sleep(rng.uniform(0, 0.06))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        assert proc.exitcode == -signal.SIGKILL
        state = check_store(tmp_path, verified)
        progressed = state is not None and state.version > 0
        trials += 1

    assert trials >= 10
    before = check_store(tmp_path, verified)
    assert before is not None and before.version > 0  # the writers made progress
    store = StatsStore(tmp_path, TABLE_ID)
    commit_with_retry(store, (before.last_snapshot_id or 0) + 1, ["after", 0])
    after = check_store(tmp_path, verified)
    assert after is not None and after.version == before.version + 1
    _assert_orphans_are_whole(tmp_path)


@pytest.mark.parametrize("prior_commits", [0, 2])
def test_crash_before_each_filesystem_call(
    tmp_path: Path, ctx: ForkServerContext, prior_commits: int
) -> None:
    def fresh(name: str) -> Path:
        state_dir = tmp_path / name
        store = StatsStore(state_dir, TABLE_ID)
        for snapshot_id in range(1, prior_commits + 1):
            commit_with_retry(store, snapshot_id, ["prior", snapshot_id])
        return state_dir

    def run(state_dir: Path, step: int) -> tuple[int | None, int]:
        calls = ctx.Value("i", 0)
        proc = ctx.Process(target=store_workers.crash_at_step, args=(str(state_dir), step, calls))
        proc.start()
        proc.join(30)
        return proc.exitcode, int(calls.value)

    exitcode, total = run(fresh("count"), 0)
    assert exitcode == 0
    assert total > 10  # the hooks really see the store's writes

    for step in range(1, total + 1):
        state_dir = fresh(f"step{step}")
        exitcode, _ = run(state_dir, step)
        assert exitcode == 77, f"step {step} did not crash"
        state = check_store(state_dir)
        version = 0 if state is None else state.version
        # the new version exists whole or not at all
        assert version in (prior_commits, prior_commits + 1), (step, version)
        store = StatsStore(state_dir, TABLE_ID)
        commit_with_retry(store, 100, ["after", step])
        after = check_store(state_dir)
        assert after is not None and after.version == version + 1
        _assert_orphans_are_whole(state_dir)
