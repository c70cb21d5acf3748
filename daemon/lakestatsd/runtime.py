"""The daemon's bridge to core: open tables, run ``analyze_table``, read stats.

Nothing here computes statistics. This module decides which ``OpenedTable`` a caller
uses, turns core's per-commit reports into log events and metrics, and records what the
daemon last saw of each table for the freshness lag.

Each table has two opened handles: the worker's (touched only by the one worker that runs
the table, so metadata refreshes never race) and the reader's, shared by HTTP requests
under a lock. A handle is dropped after an error so the next use reopens the table: a
catalog that moved the table, or a location that appeared late, heals without a restart.
A table dropped and created again at its place is a new table (a new id, a store folder
of its own): where the stats' commit is gone, a fresh open tells, and both handles follow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from lakestats.analyze import AnalyzeResult, CommitReport, PendingCallback
from lakestats.config import Config, TableConfig
from lakestats.exceptions import (
    LakestatsError,
    MetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from lakestats.lineage import replaced_commit
from lakestats.model import Commit, StateVersion
from lakestats.read import read_last_stats
from lakestats.tables import OpenedTable
from lakestatsd.maintenance import MaintenanceRunner, newest_version
from lakestatsd.metrics import FreshnessTracker, Metrics
from lakestatsd.scheduler import RunChecks, StopCheck, is_contention
from lakestatsd.watch import WatchTarget

log = structlog.get_logger("lakestatsd.runtime")

_SEARCH_AGAIN_S = 30.0  # a never-opened table's stats are looked for at most this often


class AnalyzeFn(Protocol):
    def __call__(
        self,
        opened: OpenedTable,
        *,
        should_stop: StopCheck,
        on_commit: Callable[[CommitReport], None],
        on_pending: PendingCallback,
        should_yield: StopCheck | None = None,
        first_batch_commits: int = 1,
    ) -> AnalyzeResult: ...


Opener = Callable[[TableConfig, Config], OpenedTable]
StatsReader = Callable[[OpenedTable, int | None], dict[str, Any]]


@dataclass(frozen=True)
class _Looked:
    """What one look at a table's commits found: whether it completed, and whether the
    table was unchanged (the cheap path), with the store's newest state version it read."""

    completed: bool
    unchanged: bool = False
    newest: int | None = None


class TableRuntime:
    """Per-table handles and the ``process`` callable the queue runs."""

    def __init__(
        self,
        config: Config,
        *,
        analyze: AnalyzeFn,
        read_stats: StatsReader,
        opener: Opener,
        metrics: Metrics,
        freshness: FreshnessTracker,
        maintenance: MaintenanceRunner | None = None,
        unregistered: Callable[[OpenedTable, StateVersion | None], bool] | None = None,
    ) -> None:
        self._config = config
        self._unregistered = unregistered
        self._maintenance = maintenance
        self._analyze = analyze
        self._read_stats = read_stats
        self._opener = opener
        self._metrics = metrics
        self._freshness = freshness
        self._workers: dict[str, OpenedTable] = {}
        self._readers: dict[str, OpenedTable] = {}
        self._reader_locks = {t.name: threading.Lock() for t in config.table}
        self._open_locks = {t.name: threading.Lock() for t in config.table}
        self._handles_lock = threading.Lock()
        self._store_folders: dict[str, str] = {}  # name → store folder, for stale reads
        # name → why the worker's last look could not read the table's metadata: stats
        # served meanwhile are flagged stale (the reader's handle reads only the store)
        self._unreadable: dict[str, LakestatsError] = {}
        # when a search of the state dir for a never-opened table's stats found none
        self._searched_in_vain: dict[str, float] = {}
        # name → the batch size a run that stopped early (gave way) reached: its next turn
        # goes on at that size instead of ramping up from one commit again
        self._next_batch: dict[str, int] = {}

    def _table_config(self, name: str) -> TableConfig:
        table = self._config.find_table(name)
        if table is None:
            raise TableNotFoundError(f"{name!r} is not a configured table")
        return table

    def _worker_handle(self, name: str) -> OpenedTable:
        with self._handles_lock:
            handle = self._workers.get(name)
        if handle is not None:
            return handle
        # one open at a time per table: the watch thread and the first run both ask at
        # start, and two opens of a copied table both claimed a store folder
        with self._open_locks[name]:
            with self._handles_lock:
                handle = self._workers.get(name)
            if handle is None:
                handle = self._adopt(name, self._opener(self._table_config(name), self._config))
        return handle

    def _adopt(self, name: str, handle: OpenedTable) -> OpenedTable:
        """Make a newly opened ``handle`` the worker's. When its store folder is not the
        one the table's stats were read from (the table was created again at its place: a
        new id), the reader's handle goes too, so reads follow the new table."""
        with self._handles_lock:
            self._workers[name] = handle
        with self._reader_locks[name]:
            known = self._store_folders.get(name)
            if known is not None and known != handle.store.folder:
                log.info(
                    "table_replaced",
                    table=name,
                    old_store_folder=known,
                    store_folder=handle.store.folder,
                )
                self._readers.pop(name, None)
            self._store_folders[name] = handle.store.folder
        return handle

    def store_folder(self, name: str) -> str | None:
        """The folder under the state dir that holds the table's stats, once a run or a
        read has opened the table (None before)."""
        with self._handles_lock:
            handle = self._workers.get(name) or self._readers.get(name)
        return handle.store.folder if handle is not None else self._store_folders.get(name)

    def watch_target(self, name: str) -> WatchTarget | None:
        """Where the table lives and its format, for the watcher; None while it cannot be
        opened (the run reports why; the next poll tick asks again)."""
        try:
            fmt = self._worker_handle(name).table
        except Exception:  # reported by the run; watching just waits
            return None
        configured = self._table_config(name).location
        # a configured location is watched as written (the catalog's for catalog tables)
        return WatchTarget(configured if configured is not None else fmt.location, fmt.format_name)

    # -- the queue's process callable ------------------------------------------------------

    def process(self, name: str, should_stop: StopCheck) -> bool:
        try:
            return self._process(name, should_stop)
        except BaseException as exc:
            # contention (another process committed first, a writer mid-file): the table
            # is healthy and its handle good
            if not is_contention(exc):
                with self._handles_lock:
                    self._workers.pop(name, None)
                self._metrics.table_healthy.labels(name).set(0)
            raise

    def _process(self, name: str, should_stop: StopCheck) -> bool:
        try:
            looked = self._process_commits(name, should_stop)
        except MetadataError as exc:
            # metadata the look could read but the rest of the run could not (a Paimon
            # snapshot file corrupt in place: the look reads only LATEST) leaves the stats
            # as stale as an unreadable look does; a maintenance job's own failure below
            # (an expiring snapshot's file) says nothing of the stats
            if not is_contention(exc):
                self._unreadable[name] = exc
            raise
        if self._maintenance is None or not looked.completed:
            return looked.completed
        # scheduled expiry/compaction, in this table's worker: never beside its analyze
        opened = self._worker_handle(name)
        # an unchanged table with no job to run: the store's newest version is the one the
        # cheap path has just read (a job requested in between only costs one more measure)
        quiet = looked.unchanged and not self._maintenance.pending(name)
        done = self._maintenance.run_pending(name, opened, should_stop)
        newest = looked.newest if quiet else newest_version(opened)
        self._maintenance.observe_store(name, opened, newest)
        return done

    def _stale(self, opened: OpenedTable, state: StateVersion | None) -> bool:
        if self._unregistered is not None and self._unregistered(opened, state):
            return True  # stats of a run killed before registering them: publish them now
        return self._maintenance is not None and self._maintenance.stale(opened, state)

    def _look(self, name: str) -> tuple[OpenedTable, StateVersion | None, bool]:
        """The worker's handle, its table refreshed, the store's newest state, and whether
        that state's snapshot id names another commit now (``replaced_commit``). A failure
        to read the table's metadata is remembered for ``read_stats``."""
        try:
            opened = self._worker_handle(name)
            opened.table.refresh()
            current = opened.table.current_snapshot_id()
        except LakestatsError as exc:
            if not is_contention(exc):
                self._unreadable[name] = exc
            raise
        self._unreadable.pop(name, None)
        state = opened.store.current()
        processed = state.last_snapshot_id if state is not None else None
        replaced = replaced_commit(opened.table, state) is not None
        if state is not None and processed is not None:
            gone = processed != current and processed not in opened.table.snapshot_ids()
            if replaced or gone:
                fresh = self._reopen_if_replaced(name, opened)
                if fresh is not opened:
                    state = fresh.store.current()
                    return fresh, state, replaced_commit(fresh.table, state) is not None
        return opened, state, replaced

    def _reopen_if_replaced(self, name: str, opened: OpenedTable) -> OpenedTable:
        """The stats' commit is gone or names another commit: rolled back — or the table
        was dropped and created again at the same place, a new table (a new id, so a new
        store folder) that a handle opened before cannot tell from a rollback. A fresh
        open tells (rare: only where a run would start over anyway)."""
        fresh = self._opener(self._table_config(name), self._config)
        if fresh.store.folder == opened.store.folder:
            return opened
        return self._adopt(name, fresh)

    def _process_commits(self, name: str, should_stop: StopCheck) -> _Looked:
        opened, state, replaced = self._look(name)
        current = opened.table.current_snapshot_id()
        processed = state.last_snapshot_id if state is not None else None
        if replaced:
            processed = None  # its id names another commit now: the run starts over
        if (current is None or current == processed) and not self._stale(opened, state):
            # the cheap path of every poll tick: no Spark, no manifest read
            self._freshness.observe(
                name, current=current, processed=processed, oldest_unreflected_ms=None
            )
            self._metrics.table_healthy.labels(name).set(1)
            return _Looked(
                completed=True,
                unchanged=True,
                newest=state.version if state is not None else None,
            )
        order: list[int] = []
        stamps: dict[int, int] = {}

        def on_pending(pending: Sequence[Commit]) -> None:
            # core's one lineage walk of this run (inside its rollback fallback) is also
            # what the freshness lag is measured from
            order[:] = [c.snapshot_id for c in pending]
            stamps.update({c.snapshot_id: c.timestamp_ms for c in pending})
            self._freshness.observe(
                name,
                current=current,
                processed=processed,
                oldest_unreflected_ms=pending[0].timestamp_ms if pending else None,
            )

        def on_commit(report: CommitReport) -> None:
            self._commit_done(name, report, order, stamps)

        started = time.monotonic()
        try:
            # the queue's checks give way between batches only (RunChecks); a plain check
            # (tests, the library) never does
            give_way = should_stop.give_way if isinstance(should_stop, RunChecks) else None
            result = self._analyze(
                opened,
                should_stop=should_stop,
                on_commit=on_commit,
                on_pending=on_pending,
                should_yield=give_way,
                first_batch_commits=self._next_batch.pop(name, 1),
            )
        except LakestatsError:
            self._freshness.failing(name, current)
            raise
        if result.stopped_early:
            self._next_batch[name] = result.next_batch_commits
        self._metrics.table_healthy.labels(name).set(1)
        log.info(
            "table_run_done",
            table=name,
            last_snapshot_id=result.last_snapshot_id,
            stopped_early=result.stopped_early,
            seconds=round(time.monotonic() - started, 3),
        )
        return _Looked(completed=not result.stopped_early)

    def _commit_done(
        self, name: str, report: CommitReport, order: list[int], stamps: Mapping[int, int]
    ) -> None:
        now = time.time()
        try:
            nxt = order[order.index(report.snapshot_id) + 1]
            next_ms: int | None = stamps[nxt]
        except (ValueError, IndexError):
            next_ms = None
        self._freshness.processed(name, report.snapshot_id, next_ms)
        total = sum(report.timings.values())
        self._metrics.commits_processed.labels(name).inc()
        self._metrics.files_sketched.labels(name).inc(report.sketched_files)
        self._metrics.files_reused.labels(name).inc(report.reused_files)
        self._metrics.commit_seconds.labels(name).observe(total)
        for phase, seconds in report.timings.items():
            self._metrics.phase_seconds.labels(phase).observe(seconds)
        latency = max(0.0, now - report.timestamp_ms / 1000.0)
        self._metrics.commit_to_stats_seconds.labels(name).observe(latency)
        # the one event per processed commit that the issue asks for
        log.info(
            "commit_processed",
            **{**report.log_fields(), "table": name},
            seconds=round(total, 4),
            commit_to_stats_s=round(latency, 3),
        )

    # -- HTTP reads --------------------------------------------------------------------------

    def read_stats(self, name: str, snapshot_id: int | None) -> dict[str, Any]:
        """The ``lakestats show --json`` document, read through the reader handle.

        When the table cannot be opened (its metadata is unreadable or corrupt) — here, or
        at the worker's last look — the newest stats in the store are served anyway,
        flagged ``"stale": true`` with the reason.
        """
        unreadable = self._unreadable.get(name) if snapshot_id is None else None
        if unreadable is None:
            try:
                return self._read_through_handle(name, snapshot_id)
            except SnapshotNotFoundError:
                raise
            except LakestatsError as exc:
                if snapshot_id is not None:
                    raise
                unreadable = exc
        return self._stale_stats(name, unreadable)

    def _stale_stats(self, name: str, exc: LakestatsError) -> dict[str, Any]:
        """The newest stats in the store, flagged stale because of ``exc``."""
        folder = self._store_folders.get(name)
        if folder is None:
            # a table never opened: its folder is found by reading every folder's newest
            # stats — not again for each request (no token needed to ask) while a recent
            # search found none
            searched = self._searched_in_vain.get(name)
            if searched is not None and time.monotonic() - searched < _SEARCH_AGAIN_S:
                raise exc
        try:
            doc, folder = read_last_stats(self._table_config(name), self._config, folder=folder)
        except LakestatsError:
            if name not in self._store_folders:
                self._searched_in_vain[name] = time.monotonic()
            raise exc from None
        self._searched_in_vain.pop(name, None)
        self._store_folders[name] = folder
        return {
            **doc,
            "published": ["unknown: the table's metadata cannot be read right now"],
            "stale": True,
            "stale_reason": f"{type(exc).__name__}: {exc}",
        }

    def _read_through_handle(self, name: str, snapshot_id: int | None) -> dict[str, Any]:
        with self._reader_locks[name]:
            handle = self._readers.get(name)
            try:
                if handle is None:
                    handle = self._opener(self._table_config(name), self._config)
                    self._readers[name] = handle
                    self._store_folders[name] = handle.store.folder
                return self._read_stats(handle, snapshot_id)
            except SnapshotNotFoundError:
                raise  # the client asked for a snapshot without stats: the handle is fine
            except BaseException:
                # reopened by the next request: a moved table or a late location heals
                self._readers.pop(name, None)
                raise
