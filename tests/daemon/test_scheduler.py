"""The per-table queue's rules, with real process functions injected (no Spark, no tables)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from lakestats.exceptions import ConcurrentUpdateError, MetadataError, PartialMetadataError
from lakestatsd.scheduler import RunChecks, RunState, StopCheck, TableQueue, WaitOutcome


class Recorder:
    """A process function that records runs and can block, fail or be slow on demand."""

    def __init__(self, duration_s: float = 0.0) -> None:
        self.duration_s = duration_s
        self.runs: list[tuple[str, float, float]] = []  # table, start, end
        self.fail: dict[str, int] = {}  # table -> failures left
        self.gates: dict[str, threading.Event] = {}
        self.started = threading.Condition()
        self.active: dict[str, int] = {}
        self.max_active_total = 0
        self.max_active_per_table: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, table: str, should_stop: StopCheck) -> bool:
        start = time.monotonic()
        with self._lock:
            self.active[table] = self.active.get(table, 0) + 1
            self.max_active_per_table[table] = max(
                self.max_active_per_table.get(table, 0), self.active[table]
            )
            self.max_active_total = max(self.max_active_total, sum(self.active.values()))
        with self.started:
            self.started.notify_all()
        try:
            gate = self.gates.get(table)
            if gate is not None:
                gate.wait(10)
            time.sleep(self.duration_s)
            if self.fail.get(table, 0) > 0:
                self.fail[table] -= 1
                raise MetadataError(f"{table}: metadata.json unreadable")
            return not should_stop()
        finally:
            with self._lock:
                self.active[table] -= 1
                self.runs.append((table, start, time.monotonic()))

    def count(self, table: str) -> int:
        with self._lock:
            return sum(1 for r in self.runs if r[0] == table)


def wait_for(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


@pytest.fixture
def make_queue() -> Iterator[Callable[..., TableQueue]]:
    queues: list[TableQueue] = []

    def make(
        process: Callable[[str, StopCheck], bool], tables: tuple[str, ...], **kw: float
    ) -> TableQueue:
        options: dict[str, float] = {
            "debounce_s": 0.05,
            "max_concurrent": 2,
            "backoff_initial_s": 0.05,
            "backoff_max_s": 0.2,
        }
        options.update(kw)
        queue = TableQueue(
            tables,
            process,
            debounce_s=options["debounce_s"],
            max_concurrent=int(options["max_concurrent"]),
            backoff_initial_s=options["backoff_initial_s"],
            backoff_max_s=options["backoff_max_s"],
        )
        queue.start()
        queues.append(queue)
        return queue

    yield make
    for queue in queues:
        assert queue.stop(5.0)


def test_a_burst_of_hints_becomes_one_run(make_queue: Callable[..., TableQueue]) -> None:
    rec = Recorder()
    queue = make_queue(rec, ("a",), debounce_s=0.2)
    for _ in range(10):  # ten commits in well under the debounce delay
        queue.hint("a", "watch")
        time.sleep(0.005)
    wait_for(lambda: rec.count("a") == 1)
    time.sleep(0.3)
    assert rec.count("a") == 1
    assert queue.status()["a"].state is RunState.IDLE


def test_a_hint_during_a_run_is_not_lost(make_queue: Callable[..., TableQueue]) -> None:
    rec = Recorder()
    rec.gates["a"] = threading.Event()
    queue = make_queue(rec, ("a",))
    queue.hint("a")
    wait_for(lambda: queue.status()["a"].state is RunState.RUNNING)
    ticket = queue.hint("a")  # the commit landed after the run read the metadata
    queue.hint("a")  # and more: they coalesce into one follow-up run
    rec.gates["a"].set()
    assert queue.wait("a", ticket, 5.0) is WaitOutcome.DONE
    wait_for(lambda: queue.status()["a"].state is RunState.IDLE)
    assert rec.count("a") == 2


def test_one_worker_per_table_and_a_global_limit(make_queue: Callable[..., TableQueue]) -> None:
    rec = Recorder(duration_s=0.05)
    tables = ("a", "b", "c", "d")
    queue = make_queue(rec, tables, max_concurrent=2, debounce_s=0.0)
    for _ in range(5):
        for t in tables:
            queue.hint(t)
        time.sleep(0.02)
    wait_for(lambda: queue.running() == 0 and queue.depth() == 0)
    assert rec.max_active_total == 2
    assert max(rec.max_active_per_table.values()) == 1
    assert all(rec.count(t) >= 1 for t in tables)


def test_failures_back_off_exponentially_and_recover(make_queue: Callable[..., TableQueue]) -> None:
    rec = Recorder()
    rec.fail["a"] = 3
    queue = make_queue(rec, ("a",), debounce_s=0.0, backoff_initial_s=0.1, backoff_max_s=0.25)
    queue.hint("a")
    wait_for(lambda: rec.count("a") == 4, timeout_s=3)  # three failures, then a success
    starts = [r[1] for r in rec.runs]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[0] >= 0.1 * 0.9 and gaps[1] >= 0.2 * 0.9 and gaps[2] >= 0.25 * 0.9
    assert gaps[2] < 0.25 + 0.2  # capped at backoff_max_s
    wait_for(lambda: queue.status()["a"].healthy)
    status = queue.status()["a"]
    assert status.last_error is None and status.state is RunState.IDLE


def test_a_writer_notification_skips_the_backoff_but_events_do_not(
    make_queue: Callable[..., TableQueue],
) -> None:
    rec = Recorder()
    rec.fail["a"] = 1
    queue = make_queue(rec, ("a",), debounce_s=0.0, backoff_initial_s=30.0, backoff_max_s=60.0)
    queue.hint("a", "watch")
    wait_for(lambda: rec.count("a") == 1)  # failed: next try in 30 s
    queue.hint("a", "poll")
    time.sleep(0.3)
    assert rec.count("a") == 1  # file events and polls wait out the backoff
    queue.hint("a", "api")
    wait_for(lambda: rec.count("a") == 2, timeout_s=3)  # an explicit notification does not
    wait_for(lambda: queue.status()["a"].healthy)


def test_a_broken_table_never_stops_the_others(make_queue: Callable[..., TableQueue]) -> None:
    rec = Recorder()
    rec.fail["broken"] = 10**6
    queue = make_queue(rec, ("broken", "ok"), debounce_s=0.0, max_concurrent=1)
    for _ in range(3):
        queue.hint("broken")
        ticket = queue.hint("ok")
        assert queue.wait("ok", ticket, 2.0) is WaitOutcome.DONE
    status = queue.status()
    assert status["broken"].state is RunState.BACKOFF
    assert status["broken"].last_error == "MetadataError: broken: metadata.json unreadable"
    assert status["broken"].last_error_kind == "MetadataError"
    assert status["ok"].healthy


def test_wait_needs_a_run_that_started_after_the_hint(
    make_queue: Callable[..., TableQueue],
) -> None:
    rec = Recorder()
    rec.gates["a"] = threading.Event()
    queue = make_queue(rec, ("a",), debounce_s=0.0)
    queue.hint("a")
    wait_for(lambda: queue.status()["a"].state is RunState.RUNNING)
    ticket = queue.hint("a")
    # the run in progress started before the ticket: finishing it is not enough
    assert queue.wait("a", ticket, 0.05) is WaitOutcome.TIMEOUT
    rec.gates["a"].set()
    assert queue.wait("a", ticket, 5.0) is WaitOutcome.DONE


def test_stop_lets_the_run_finish_and_wakes_waiters() -> None:
    rec = Recorder()
    rec.gates["a"] = threading.Event()
    queue = TableQueue(
        ("a",),
        rec,
        debounce_s=0.0,
        max_concurrent=1,
        backoff_initial_s=1,
        backoff_max_s=1,
    )
    queue.start()
    queue.hint("a")
    wait_for(lambda: queue.running() == 1)
    ticket = queue.hint("a")
    outcome: list[WaitOutcome] = []
    waiter = threading.Thread(target=lambda: outcome.append(queue.wait("a", ticket, 10)))
    waiter.start()
    threading.Timer(0.1, rec.gates["a"].set).start()
    assert queue.stop(5.0)
    waiter.join(5)
    assert outcome == [WaitOutcome.STOPPING]
    assert queue.should_stop()
    assert rec.count("a") == 1  # the dirty re-run is not started once stopping
    assert not queue.accepting


def test_stop_reports_a_run_that_does_not_finish_in_time() -> None:
    gate = threading.Event()

    def stuck(table: str, should_stop: StopCheck) -> bool:
        gate.wait(10)
        return True

    queue = TableQueue(
        ("a",), stuck, debounce_s=0, max_concurrent=1, backoff_initial_s=1, backoff_max_s=1
    )
    queue.start()
    queue.hint("a")
    wait_for(lambda: queue.running() == 1)
    assert queue.stop(0.1) is False
    gate.set()
    wait_for(lambda: queue.running() == 0)


def test_unknown_table_is_a_key_error(make_queue: Callable[..., TableQueue]) -> None:
    queue = make_queue(Recorder(), ("a",))
    with pytest.raises(KeyError):
        queue.hint("../../etc")


@pytest.mark.parametrize(
    "contention",
    [
        ConcurrentUpdateError("log/00000000000000000007.json: another writer first"),
        PartialMetadataError(
            "metadata file v8.metadata.json is not valid JSON (truncated?); written 0.2 s "
            "ago: a writer may still be writing it"
        ),
    ],
    ids=["another process committed first", "a writer mid-file"],
)
def test_another_process_committing_first_is_contention_not_failure(
    contention: Exception,
) -> None:
    """Two daemons (or a daemon and `lakestats analyze`) on one store race for the next
    state version, or a table's writer is still writing the metadata file the run found;
    the run is expected contention: no failure, no backoff, no error report, and the table
    runs again soon."""
    from lakestatsd.scheduler import RunReport

    reports: list[RunReport] = []
    calls = itertools.count()

    def loses_once(table: str, should_stop: StopCheck) -> bool:
        if next(calls) == 0:
            raise contention
        return True

    queue = TableQueue(
        ("a",),
        loses_once,
        debounce_s=0,
        max_concurrent=1,
        backoff_initial_s=0.05,
        backoff_max_s=10,
        on_run=reports.append,
    )
    queue.start()
    try:
        ticket = queue.hint("a", "poll")
        wait_for(lambda: len(reports) >= 2)
        status = queue.status()["a"]
        assert status.healthy and status.failures == 0 and status.last_error is None
        assert reports[0].contended and reports[0].error is None and reports[0].ok
        assert queue.is_done("a", ticket)  # the retry completed the hint
    finally:
        assert queue.stop(5)


def test_a_run_silent_past_the_stall_timeout_is_reported_once() -> None:
    """A run that reaches no commit boundary (a read that hangs) is stalled; one that keeps
    reaching them is not, however long it takes. Real threads, a clock the test moves."""
    now = [1000.0]
    hung, busy_done = threading.Event(), threading.Event()
    boundaries = threading.Semaphore(0)

    def process(table: str, should_stop: StopCheck) -> bool:
        if table == "hung":
            hung.wait(10)  # never asks should_stop: blocked in a read
            return True
        while not busy_done.is_set():  # a long run, between commits
            boundaries.acquire(timeout=10)
            should_stop()
        return True

    queue = TableQueue(
        ("hung", "busy", "idle"),
        process,
        debounce_s=0,
        max_concurrent=3,
        backoff_initial_s=1,
        backoff_max_s=1,
        clock=lambda: now[0],
    )
    queue.start()
    try:
        queue.hint("hung")
        queue.hint("busy")
        wait_for(lambda: queue.running() == 2)
        assert queue.stalled(60) == {}
        for _ in range(3):  # ten minutes pass; the busy run reaches a commit now and then
            now[0] += 200
            boundaries.release()
            wait_for(lambda: queue.stalled(100).keys() == {"hung"})
        assert queue.stalled(300) == {"hung": 600.0}
        assert queue.stalled(700) == {}
        first = queue.report_stalled(300)
        assert first == {"hung": 600.0} and queue.report_stalled(300) == first
        assert queue.status()["hung"].state is RunState.RUNNING
    finally:
        hung.set()
        busy_done.set()
        boundaries.release()
        wait_for(lambda: queue.running() == 0)
        assert queue.stalled(0) == {}
        assert queue.stop(5.0)


class Backlog:
    """A table with ``batches`` batches to do, ``batch_s`` each, asking its checks between
    them as ``analyze_table`` does (``give_way`` never before its first batch); what it has
    done survives a run that gives way, like committed state versions."""

    def __init__(self, batches: int, batch_s: float) -> None:
        self.left = batches
        self.batch_s = batch_s
        self.events: list[tuple[str, str]] = []  # (table, "batch" | "gave way" | "done")

    def __call__(self, table: str, should_stop: StopCheck) -> bool:
        if table != "big":
            self.events.append((table, "done"))
            return True
        give_way = should_stop.give_way if isinstance(should_stop, RunChecks) else None
        first = True
        while self.left:
            if should_stop() or (not first and give_way is not None and give_way()):
                self.events.append((table, "gave way"))
                return False
            time.sleep(self.batch_s)
            self.left -= 1
            first = False
            self.events.append((table, "batch"))
        self.events.append((table, "done"))
        return True


def one_worker_queue(
    process: Callable[[str, StopCheck], bool], *, run_slice_s: float, backoff_s: float = 1.0
) -> TableQueue:
    """Tables "big" and "small" sharing one worker, started."""
    queue = TableQueue(
        ("big", "small"),
        process,
        debounce_s=0.0,
        max_concurrent=1,
        backoff_initial_s=backoff_s,
        backoff_max_s=backoff_s,
        run_slice_s=run_slice_s,
    )
    queue.start()
    return queue


def test_a_long_backlog_gives_way_to_a_table_waiting_for_its_worker() -> None:
    """One worker; a table with a backlog of 30 batches is running when another table is
    hinted. Past its slice the backlog gives the worker back at a batch boundary, the other
    table runs, and the backlog goes on after it until done — a waiter on it is woken only
    then."""
    work = Backlog(batches=30, batch_s=0.02)
    queue = one_worker_queue(work, run_slice_s=0.1)
    try:
        ticket = queue.hint("big")
        wait_for(lambda: ("big", "batch") in work.events)
        queue.hint("small")
        assert queue.wait("big", ticket, 10.0) is WaitOutcome.DONE
        assert work.left == 0
        small_done = work.events.index(("small", "done"))
        gave_way = work.events.index(("big", "gave way"))
        assert gave_way < small_done < work.events.index(("big", "done"))
        assert work.events.count(("big", "batch")) == 30
        # it ran past its slice before giving way: at least 0.1 s of batches
        assert work.events[:gave_way].count(("big", "batch")) >= 5
    finally:
        assert queue.stop(5.0)


def test_a_backlog_nobody_waits_for_runs_to_the_end_in_one_run() -> None:
    work = Backlog(batches=20, batch_s=0.01)
    queue = one_worker_queue(work, run_slice_s=0.02)
    try:
        assert queue.wait("big", queue.hint("big"), 10.0) is WaitOutcome.DONE
        assert ("big", "gave way") not in work.events
        assert work.left == 0 and queue.status()["big"].runs == 1
    finally:
        assert queue.stop(5.0)


def test_a_run_that_gives_way_after_a_failure_is_healthy_again() -> None:
    """A table catching up after an outage made progress before giving way: it shows no
    old error and no backoff while it waits for its next turn."""
    work = Backlog(batches=40, batch_s=0.02)
    failed: list[bool] = []

    def process(table: str, should_stop: StopCheck) -> bool:
        if table == "big" and not failed:
            failed.append(True)
            raise MetadataError("big: catalog down")
        return work(table, should_stop)

    queue = one_worker_queue(process, run_slice_s=0.1, backoff_s=0.05)
    try:
        queue.hint("big")
        wait_for(lambda: queue.status()["big"].failures == 1)
        wait_for(lambda: ("big", "batch") in work.events)
        queue.hint("small")
        wait_for(lambda: ("big", "gave way") in work.events)
        status = queue.status()["big"]
        assert status.failures == 0 and status.last_error is None
        assert status.state is not RunState.BACKOFF
        wait_for(lambda: ("big", "done") in work.events, timeout_s=10)
    finally:
        assert queue.stop(5.0)
