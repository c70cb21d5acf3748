"""The per-table work queue: hints in, one run per table at a time, bounded concurrency.

Watch events, poll ticks and HTTP notifications are *hints*: each only says "look at this
table again". The queue turns a stream of hints into runs of a ``process`` callable, which
asks core for every unprocessed commit (the table's metadata is the truth, never the hint).

Rules, each one a reason this module exists:

* a table is processed by at most one worker at a time, tables run concurrently up to
  ``max_concurrent`` (one Spark session is shared, so more would only queue inside it);
* hints coalesce: the first hint of an idle table schedules a run ``debounce_s`` later and
  later hints ride along, so a burst of commits becomes one run (one Spark job). The delay
  is not extended by later hints, which bounds the latency under a steady stream;
* a hint that arrives during a run marks the table dirty and it runs again after, so a
  commit that lands after the run read the metadata is never lost;
* a failure backs off exponentially (``backoff_initial_s`` doubling up to ``backoff_max_s``)
  and only delays that table;
* a run past ``run_slice_s`` gives its worker back at the next batch boundary while another
  table waits for one (``RunChecks.give_way``), and goes on after the tables that waited:
  a long backlog (hundreds of commits, a first baseline) shares the workers instead of
  holding one until it is done;
* ``wait`` lets a caller block until a run that *started after* its hint has completed,
  which means the run saw at least the snapshot that was current when the caller asked.

``process`` is injected (as APScheduler injects its stores), so the rules are tested with
plain functions and no Spark. Worker threads are daemon threads: a run stuck in a JVM call
cannot keep the process alive past the shutdown timeout (the store's create-only state log
makes abandoning a commit safe).
"""

from __future__ import annotations

import enum
import errno
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import structlog

from lakestats.exceptions import (
    ConcurrentUpdateError,
    ExpiredWhileReadingError,
    LakestatsError,
    PartialMetadataError,
)

log = structlog.get_logger("lakestatsd.scheduler")

StopCheck = Callable[[], bool]
ProcessFn = Callable[[str, StopCheck], bool]
"""``process(table, should_stop)``: True when the table is up to date, False when it
stopped early because ``should_stop()`` (or ``should_stop.give_way()``, when it is a
``RunChecks``) said so. Raising means the run failed."""


@dataclass(frozen=True)
class RunChecks:
    """The ``should_stop`` a queue hands a run: calling it asks whether the queue is
    stopping (and is the run's sign of life); ``give_way`` whether to give the worker back
    to a table waiting for one (asked between batches only: ``analyze_table``'s
    ``should_yield``)."""

    stop: StopCheck
    give_way: StopCheck

    def __call__(self) -> bool:
        return self.stop()


class RunState(enum.StrEnum):
    IDLE = "idle"  # up to date as of the last run
    PENDING = "pending"  # hinted, waiting for its debounce delay or a free worker
    RUNNING = "running"
    BACKOFF = "backoff"  # the last run failed; retried after a delay


class WaitOutcome(enum.Enum):
    DONE = "done"
    TIMEOUT = "timeout"
    STOPPING = "stopping"


@dataclass
class _Table:
    name: str
    hint_seq: int = 0  # number of hints received so far
    done_seq: int = 0  # hints covered by the last successful run
    pending: bool = False
    running: bool = False
    due_at: float = 0.0  # monotonic time the next run may start
    failures: int = 0  # consecutive failed runs
    last_error: str | None = None
    last_error_kind: str | None = None
    last_success_at: float | None = None  # wall clock, for humans
    last_run_s: float | None = None
    runs: int = 0
    hint_sources: set[str] = field(default_factory=set)
    # while running: when the run last showed a sign of life (started, or reached a commit
    # boundary, where core asks ``should_stop``); a stall is reported once per run
    beat_at: float = 0.0
    stall_reported: bool = False

    def clear_failures(self) -> None:
        """A run committed work: whatever failed before is over."""
        self.failures = 0
        self.last_error = None
        self.last_error_kind = None


@dataclass(frozen=True)
class TableStatus:
    """What ``/readyz`` and ``/v1/tables`` show about one table's processing."""

    name: str
    state: RunState
    failures: int
    last_error: str | None
    last_error_kind: str | None
    last_success_at: float | None
    last_run_s: float | None
    runs: int
    retry_in_s: float | None

    @property
    def healthy(self) -> bool:
        return self.failures == 0

    def as_json(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "healthy": self.healthy,
            "consecutive_failures": self.failures,
            "last_error": self.last_error,
            "last_error_kind": self.last_error_kind,
            "last_success_at": self.last_success_at,
            "last_run_seconds": self.last_run_s,
            "runs": self.runs,
            "retry_in_seconds": self.retry_in_s,
        }


@dataclass(frozen=True)
class RunReport:
    """Passed to ``on_run`` after every run, for metrics and logs."""

    table: str
    ok: bool
    completed: bool
    duration_s: float
    error: BaseException | None
    sources: frozenset[str]
    # another process (a second daemon, a CLI run) committed first: expected contention,
    # not a failure (``error`` is None, the table stays healthy, it runs again shortly)
    contended: bool = False


_MAX_DOUBLINGS = 60
_MAX_WAIT_S = 3600.0  # the dispatcher re-checks at least hourly


def is_contention(exc: BaseException) -> bool:
    """Another writer of the same stats store won the race, a table's writer is still
    writing the metadata file the run found, or expired snapshots the run was reading:
    retry, do not alarm."""
    return isinstance(exc, ConcurrentUpdateError | PartialMetadataError | ExpiredWhileReadingError)


# errnos of a storage problem the operator fixes (space, permissions, a read-only mount)
_STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.ENOTDIR}
)
STORAGE = "storage"


def error_kind(exc: BaseException) -> str:
    """A bounded label for metrics: our named errors by class, a full, read-only or
    unreadable disk as 'storage', anything else 'unexpected' (a bug)."""
    if isinstance(exc, LakestatsError):
        return type(exc).__name__
    if isinstance(exc, OSError) and (
        exc.errno in _STORAGE_ERRNOS or isinstance(exc, PermissionError)
    ):
        return STORAGE
    return "unexpected"


class TableQueue:
    """Schedules runs of ``process`` per table from hints. Thread-safe."""

    def __init__(
        self,
        tables: Iterable[str],
        process: ProcessFn,
        *,
        debounce_s: float,
        max_concurrent: int,
        backoff_initial_s: float,
        backoff_max_s: float,
        run_slice_s: float = 30.0,
        on_run: Callable[[RunReport], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tables = {name: _Table(name) for name in tables}
        self._process = process
        self._debounce_s = debounce_s
        self._max_concurrent = max_concurrent
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = max(backoff_max_s, backoff_initial_s)
        self._run_slice_s = run_slice_s
        self._on_run = on_run
        self._clock = clock
        self._cond = threading.Condition()
        self._accepting = False
        self._stopping = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._workers: set[threading.Thread] = set()
        self._crashed: str | None = None  # a thread of ours died of a bug: liveness fails

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        with self._cond:
            if self._dispatcher is not None:
                raise RuntimeError("queue already started")
            self._accepting = True
            self._dispatcher = threading.Thread(
                target=self._dispatch_loop, name="lakestatsd-dispatch", daemon=True
            )
            self._dispatcher.start()

    def should_stop(self) -> bool:
        """Whether the queue is stopping. Each run hands core a check that asks this and
        records the run's sign of life (``_run_once``): core checks it between commits, so
        a run ends at a commit boundary."""
        return self._stopping.is_set()

    def stop(self, timeout_s: float) -> bool:
        """Stop taking hints, let running commits finish; True if all workers ended in time."""
        deadline = self._clock() + timeout_s
        with self._cond:
            self._accepting = False
            self._stopping.set()
            self._cond.notify_all()
            workers = list(self._workers)
            dispatcher = self._dispatcher
        if dispatcher is not None:
            dispatcher.join(max(0.0, deadline - self._clock()))
        for worker in workers:
            worker.join(max(0.0, deadline - self._clock()))
        with self._cond:
            return not any(w.is_alive() for w in self._workers)

    @property
    def alive(self) -> bool:
        """The dispatcher runs (for the systemd watchdog: a dead loop must not be pinged)."""
        return self._dispatcher is not None and self._dispatcher.is_alive()

    @property
    def crashed(self) -> str | None:
        """Why the queue cannot work any more (a dispatcher or worker thread died of a
        bug), else None. Liveness (``/healthz``) fails on it, so the process is restarted
        instead of answering 200 while nothing is processed."""
        if self._crashed is not None:
            return self._crashed
        dispatcher = self._dispatcher
        if dispatcher is not None and not dispatcher.is_alive() and not self._stopping.is_set():
            return "the dispatcher thread ended"
        return None

    # -- hints -----------------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return name in self._tables

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tables)

    def hint(self, name: str, source: str = "api") -> int:
        """Ask for ``name`` to be looked at; returns a ticket for ``wait``.

        Raises ``KeyError`` for a table that is not configured.
        """
        with self._cond:
            table = self._tables[name]
            table.hint_seq += 1
            if not self._accepting:
                return table.hint_seq
            table.hint_sources.add(source)
            soon = self._clock() + self._debounce_s
            if source == "api":
                # A writer saying "I committed" is definite (no burst of file events to
                # coalesce) and worth a prompt try even in backoff: what failed (a missing
                # table, a bad file) may be what that commit fixed.
                now = self._clock()
                table.due_at = min(table.due_at, now) if table.pending else now
                table.pending = True
            elif not table.pending:
                table.pending = True
                # events and polls never skip a backoff: they would retry a broken table
                # at the rate files change
                table.due_at = max(table.due_at, soon)
            self._cond.notify_all()
            return table.hint_seq

    def retry_now(self, kind: str) -> int:
        """Cut the backoff of tables whose last run failed with ``kind`` (the cause went
        away, e.g. disk space was freed); returns how many."""
        with self._cond:
            now = self._clock()
            due = [
                t
                for t in self._tables.values()
                if t.failures and t.last_error_kind == kind and not t.running and t.due_at > now
            ]
            for table in due:
                table.due_at = now
                table.pending = True
            if due:
                self._cond.notify_all()
            return len(due)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def accepting(self) -> bool:
        with self._cond:
            return self._accepting

    def is_done(self, name: str, ticket: int) -> bool:
        """Has a run that started after hint ``ticket`` completed successfully?"""
        with self._cond:
            return self._tables[name].done_seq >= ticket

    def wait(self, name: str, ticket: int, timeout_s: float) -> WaitOutcome:
        """Block until a run that started after hint ``ticket`` completed successfully."""
        deadline = self._clock() + timeout_s
        with self._cond:
            table = self._tables[name]
            while table.done_seq < ticket:
                if self._stopping.is_set():
                    return WaitOutcome.STOPPING
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return WaitOutcome.TIMEOUT
                self._cond.wait(remaining)
            return WaitOutcome.DONE

    # -- status ----------------------------------------------------------------------------

    def status(self) -> Mapping[str, TableStatus]:
        now = self._clock()
        with self._cond:
            return {name: self._status(t, now) for name, t in self._tables.items()}

    def _status(self, t: _Table, now: float) -> TableStatus:
        if t.running:
            state = RunState.RUNNING
        elif t.failures:
            state = RunState.BACKOFF
        elif t.pending:
            state = RunState.PENDING
        else:
            state = RunState.IDLE
        retry = max(0.0, t.due_at - now) if t.failures and not t.running else None
        return TableStatus(
            name=t.name,
            state=state,
            failures=t.failures,
            last_error=t.last_error,
            last_error_kind=t.last_error_kind,
            last_success_at=t.last_success_at,
            last_run_s=t.last_run_s,
            runs=t.runs,
            retry_in_s=retry,
        )

    def stalled(self, timeout_s: float) -> dict[str, float]:
        """Running tables with no sign of life for more than ``timeout_s``: name → seconds.

        A run shows one when it starts and at every commit boundary. Python cannot cancel a
        thread blocked in a read (a hung NFS mount, a store that never answers), and such a
        run holds one of the ``max_concurrent`` workers for good: liveness fails on it, so
        the supervisor restarts the process (the store's create-only log makes that safe).
        """
        now = self._clock()
        with self._cond:
            return {
                t.name: now - t.beat_at
                for t in self._tables.values()
                if t.running and now - t.beat_at > timeout_s
            }

    def report_stalled(self, timeout_s: float) -> dict[str, float]:
        """``stalled``, logging ``table_run_stalled`` once per stalled run."""
        found = self.stalled(timeout_s)
        with self._cond:
            new = [n for n in found if not self._tables[n].stall_reported]
            for name in new:
                self._tables[name].stall_reported = True
        for name in new:
            log.warning(
                "table_run_stalled",
                table=name,
                silent_s=round(found[name], 1),
                stall_timeout_s=timeout_s,
                note="no commit boundary reached: a read may hang; /healthz fails",
            )
        return found

    def _others_waiting(self, table: _Table) -> bool:
        """Whether a table other than ``table`` is due and waits for a worker."""
        now = self._clock()
        with self._cond:
            return any(
                t is not table and t.pending and not t.running and t.due_at <= now
                for t in self._tables.values()
            )

    def depth(self) -> int:
        """Tables waiting for a run (hinted, not yet started): the queue depth metric."""
        with self._cond:
            return sum(1 for t in self._tables.values() if t.pending and not t.running)

    def running(self) -> int:
        with self._cond:
            return sum(1 for t in self._tables.values() if t.running)

    # -- dispatch --------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        try:
            self._dispatch()
        except BaseException as exc:
            self._crashed = f"dispatcher thread died: {type(exc).__name__}: {exc}"
            log.critical("dispatcher_died", error=self._crashed, exc_info=True)

    def _dispatch(self) -> None:
        with self._cond:
            while not self._stopping.is_set():
                now = self._clock()
                next_due: float | None = None
                # oldest due first: a table that waited longest gets the next free worker
                for table in sorted(self._tables.values(), key=lambda t: t.due_at):
                    if not table.pending or table.running:
                        continue
                    if table.due_at > now:
                        next_due = table.due_at if next_due is None else min(next_due, table.due_at)
                        continue
                    if len(self._workers) >= self._max_concurrent:
                        break
                    self._start_run(table)
                timeout = None if next_due is None else max(0.0, next_due - self._clock())
                # bounded: a wait longer than threading.TIMEOUT_MAX raises OverflowError
                self._cond.wait(None if timeout is None else min(timeout, _MAX_WAIT_S))

    def _start_run(self, table: _Table) -> None:
        # called with the lock held
        table.pending = False
        table.running = True
        table.beat_at = self._clock()
        table.stall_reported = False
        started_seq = table.hint_seq
        sources = frozenset(table.hint_sources)
        table.hint_sources.clear()
        worker = threading.Thread(
            target=self._run,
            args=(table, started_seq, sources),
            name=f"lakestatsd-table-{table.name}",
            daemon=True,
        )
        self._workers.add(worker)
        worker.start()

    def _run(self, table: _Table, started_seq: int, sources: frozenset[str]) -> None:
        try:
            self._run_once(table, started_seq, sources)
        except BaseException as exc:  # a bug in the bookkeeping below: fail liveness
            self._crashed = f"worker of table {table.name} died: {type(exc).__name__}: {exc}"
            log.critical("worker_died", table=table.name, error=self._crashed, exc_info=True)

    def _run_once(self, table: _Table, started_seq: int, sources: frozenset[str]) -> None:
        started = self._clock()
        error: BaseException | None = None
        completed = False

        def should_stop() -> bool:
            table.beat_at = self._clock()  # core asks at every commit boundary: alive
            return self.should_stop()

        def give_way() -> bool:
            table.beat_at = self._clock()
            return self._clock() - started >= self._run_slice_s and self._others_waiting(table)

        try:
            completed = self._process(table.name, RunChecks(should_stop, give_way))
        except Exception as exc:  # one broken table must never stop the others
            error = exc
        duration = self._clock() - started
        contended = error is not None and is_contention(error)
        with self._cond:
            table.running = False
            table.runs += 1
            table.last_run_s = duration
            if contended:
                # the other process's work is as good as ours: look again soon, no backoff
                table.pending = True
                table.due_at = self._clock() + self._backoff_initial_s
            elif error is not None:
                table.failures += 1
                table.last_error = f"{type(error).__name__}: {error}"
                table.last_error_kind = error_kind(error)
                # the exponent is capped: 2 ** 1100 does not fit a float
                doublings = min(table.failures - 1, _MAX_DOUBLINGS)
                delay = min(self._backoff_max_s, self._backoff_initial_s * 2.0**doublings)
                table.pending = True  # retry even without a new hint
                table.due_at = self._clock() + delay
            elif completed:
                table.clear_failures()
                table.done_seq = max(table.done_seq, started_seq)
                table.last_success_at = time.time()
            elif not self._stopping.is_set():
                # it gave way: on again once the tables that waited have their turn (they
                # were due before now, so the oldest-due-first dispatch takes them first);
                # it committed work, so an earlier failure is over
                table.clear_failures()
                table.pending = True
                table.due_at = self._clock()
            self._workers.discard(threading.current_thread())
            self._cond.notify_all()
            failures = table.failures
            retry_in = max(0.0, table.due_at - self._clock())
        report = RunReport(
            table=table.name,
            ok=error is None or contended,
            completed=completed,
            duration_s=duration,
            error=None if contended else error,
            sources=sources,
            contended=contended,
        )
        if contended:
            log.info("table_run_contended", table=table.name, error=str(error))
        elif error is not None:
            log.warning(
                "table_run_failed",
                table=table.name,
                error=f"{type(error).__name__}: {error}",
                kind=error_kind(error),
                consecutive_failures=failures,
                retry_in_s=round(retry_in, 3),
                exc_info=error_kind(error) == "unexpected",
            )
        elif not completed and not self._stopping.is_set():
            log.info("table_run_gave_way", table=table.name, seconds=round(duration, 3))
        if self._on_run is not None:
            try:
                self._on_run(report)
            except Exception:  # metrics must not break scheduling
                log.exception("on_run_hook_failed", table=table.name)
