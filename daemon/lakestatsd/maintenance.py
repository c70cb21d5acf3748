"""Scheduled maintenance: managed expiry (cron per table) and compaction (interval).

Nothing here decides what to delete (that is ``lakestats.expiry``) or deletes anything
(``lakestats.maintenance``). The APScheduler jobs only *request* a job for a table and hint
the per-table queue; the table's worker runs pending jobs right after its analyze run.
So maintenance shares the one-worker-per-table rule: it never runs concurrently with
analyze on the same table, and a table in backoff does not run maintenance either.

Order inside one worker run: analyze (which also drops stats of snapshots expired by
anyone) → expire (the table format's own expiry per policy, stats expiry, cleanup) →
compact (segments, log retention, orphans). ``should_stop`` is checked between jobs; a job
not started stays pending for the next run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakestats.maintenance import CompactionReport, ExpiryReport
from lakestats.model import StateVersion
from lakestats.tables import OpenedTable
from lakestatsd.config import ServiceConfig
from lakestatsd.schedules import cron_trigger

log = structlog.get_logger("lakestatsd.maintenance")

EXPIRE = "expire"
COMPACT = "compact"
JOBS = (EXPIRE, COMPACT)  # the order a worker runs them in
# the store's files and bytes are measured again at least this often (``observe_store``)
STORE_OBSERVE_EVERY_S = 600.0


def _folder(path: str) -> str:
    head = path.split("/", 1)[0]
    return head if head in ("segments", "aggregates", "stats", "log") else "other"


class _SinceCollector(Collector):
    def __init__(self, runner: MaintenanceRunner) -> None:
        self._runner = runner

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for job in JOBS:
            name = "expiry" if job == EXPIRE else "compaction"
            family = GaugeMetricFamily(
                f"lakestats_seconds_since_last_{name}",
                f"Seconds since the last successful {name} job of the table (absent before)",
                labels=["table"],
            )
            for table, seconds in self._runner.seconds_since(job).items():
                family.add_metric([table], seconds)
            yield family


class MaintenanceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.store_files = Gauge(
            "lakestats_store_files",
            "Files in the table's stats store (state versions included)",
            ["table"],
            registry=registry,
        )
        self.store_bytes = Gauge(
            "lakestats_store_bytes",
            "Bytes in the table's stats store",
            ["table"],
            registry=registry,
        )
        self.files_removed = Counter(
            "lakestats_maintenance_files_removed",
            "Store files deleted by maintenance, by folder "
            "(log, segments, aggregates, stats, other)",
            ["table", "kind"],
            registry=registry,
        )
        self.bytes_removed = Counter(
            "lakestats_maintenance_bytes_removed",
            "Bytes of store files deleted by maintenance",
            ["table"],
            registry=registry,
        )
        self.runs = Counter(
            "lakestats_maintenance_runs",
            "Maintenance jobs run, by job (expire, compact) and outcome (ok, error)",
            ["table", "job", "outcome"],
            registry=registry,
        )
        self.stats_expired = Counter(
            "lakestats_stats_expired_snapshots",
            "Snapshots whose stats were dropped because the table expired them",
            ["table"],
            registry=registry,
        )


@dataclass(frozen=True)
class MaintenanceFns:
    """Core's maintenance entry points, bound to the daemon's config (``Daemon.from_config``)."""

    expire: Callable[[OpenedTable], ExpiryReport]
    compact: Callable[[OpenedTable], CompactionReport]
    stale: Callable[[OpenedTable, StateVersion | None], bool]


def newest_version(opened: OpenedTable) -> int | None:
    """The store's newest state version (``current``: two stats when it is the one held)."""
    state = opened.store.current()
    return state.version if state is not None else None


class MaintenanceRunner:
    """Pending maintenance jobs per table, and running them inside a table's worker."""

    def __init__(
        self,
        config: ServiceConfig,
        registry: CollectorRegistry,
        fns: MaintenanceFns,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._fns = fns
        self._stale = fns.stale
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, set[str]] = {t.name: set() for t in config.table}
        self._last_ok: dict[str, dict[str, float]] = {job: {} for job in JOBS}
        # per table: the newest state version and when its store was last measured
        self._observed: dict[str, tuple[int | None, float]] = {}
        self.metrics = MaintenanceMetrics(registry)
        registry.register(_SinceCollector(self))

    def request(self, table: str, job: str) -> None:
        if job not in JOBS:
            raise ValueError(f"unknown maintenance job {job!r}")
        with self._lock:
            self._pending[table].add(job)

    def pending(self, table: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._pending[table])

    def seconds_since(self, job: str) -> dict[str, float]:
        now = self._clock()
        with self._lock:
            return {t: max(0.0, now - at) for t, at in self._last_ok[job].items()}

    def stale(self, opened: OpenedTable, state: StateVersion | None) -> bool:
        """Stats kept for snapshots the table no longer lists (expired by anyone)."""
        return self._stale(opened, state)

    def observe_store(self, table: str, opened: OpenedTable, newest: int | None) -> None:
        """The store's files and bytes, measured again when a new state version was
        written (a commit, a compaction), after a maintenance job, and at least every
        ``STORE_OBSERVE_EVERY_S`` (a cleanup by another process): every poll tick runs
        this, and the measure walks the table's whole folder (on S3, lists the whole
        prefix). ``newest``: the store's newest state version, as the caller has just
        read it (the poll's cheap path reads it anyway)."""
        now = self._clock()
        with self._lock:
            seen = self._observed.get(table)
        if seen is not None and seen[0] == newest and now - seen[1] < STORE_OBSERVE_EVERY_S:
            return
        files, size = opened.store.usage()
        self.metrics.store_files.labels(table).set(files)
        self.metrics.store_bytes.labels(table).set(size)
        with self._lock:
            self._observed[table] = (newest, now)

    def run_pending(self, table: str, opened: OpenedTable, should_stop: Callable[[], bool]) -> bool:
        """Run the table's pending jobs in order; False if it stopped with jobs left."""
        for job in JOBS:
            with self._lock:
                if job not in self._pending[table]:
                    continue
            if should_stop():
                return False
            with self._lock:
                self._pending[table].discard(job)
            self._run(table, job, opened)
        return True

    def _run(self, table: str, job: str, opened: OpenedTable) -> None:
        with self._lock:
            self._observed.pop(table, None)  # measure the store again after any job
        started = time.monotonic()
        try:
            report = self._fns.expire(opened) if job == EXPIRE else self._fns.compact(opened)
        except Exception:
            self.metrics.runs.labels(table, job, "error").inc()
            with self._lock:
                self._pending[table].add(job)  # retried with the table's next run
            raise
        self.metrics.runs.labels(table, job, "ok").inc()
        with self._lock:
            self._last_ok[job][table] = self._clock()
        cleaned = report.cleanup
        removed = [f"log/{v:020d}.json" for v in cleaned.versions_deleted]
        removed += list(cleaned.files_deleted)
        for path in removed:
            self.metrics.files_removed.labels(table, _folder(path)).inc()
        self.metrics.bytes_removed.labels(table).inc(cleaned.bytes_deleted)
        fields: dict[str, Any] = {
            "versions_deleted": len(cleaned.versions_deleted),
            "files_deleted": len(cleaned.files_deleted),
            "bytes_deleted": cleaned.bytes_deleted,
            "files_waiting_grace": len(cleaned.waiting),
        }
        if isinstance(report, ExpiryReport):
            dropped = len(report.dropped_stats)
            self.metrics.stats_expired.labels(table).inc(dropped)
            fields |= {"snapshots_expired": len(report.expired_snapshots), "stats_dropped": dropped}
        else:
            fields |= {
                "segments_before": report.segments_before,
                "segments_after": report.segments_after,
                "dead_rows_dropped": report.dead_rows_dropped,
                "dead_rows_retired": report.dead_rows_retired,
            }
        self.observe_store(table, opened, newest_version(opened))
        log.info(f"{job}_done", table=table, seconds=round(time.monotonic() - started, 3), **fields)


class MaintenanceScheduler:
    """APScheduler jobs that request maintenance and hint the table's queue."""

    def __init__(self, config: ServiceConfig, request: Callable[[str, str], None]) -> None:
        self._config = config
        self._request = request
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1)},
            # a job missed while the daemon was down or busy runs once, not once per miss
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )

    def start(self) -> None:
        for table in self._config.table:
            policy = table.expire
            if policy is not None and policy.schedule is not None:
                self._scheduler.add_job(
                    self._fire,
                    cron_trigger(policy.schedule),
                    args=(table.name, EXPIRE),
                    id=f"{EXPIRE}:{table.name}",
                )
            elif policy is not None:
                log.info("expire_policy_unscheduled", table=table.name, hint="set expire.schedule")
            if self._config.maintenance.enabled:
                self._scheduler.add_job(
                    self._fire,
                    "interval",
                    seconds=self._config.maintenance.compaction_interval_s,
                    args=(table.name, COMPACT),
                    id=f"{COMPACT}:{table.name}",
                )
        self._scheduler.start()

    def jobs(self) -> dict[str, datetime | None]:
        """job id → next run time (UTC), for status and tests."""
        return {job.id: job.next_run_time for job in self._scheduler.get_jobs()}

    def triggers(self) -> dict[str, str]:
        return {job.id: str(job.trigger) for job in self._scheduler.get_jobs()}

    def _fire(self, table: str, job: str) -> None:
        try:
            self._request(table, job)
        except Exception:  # a failed request must not unschedule the job
            log.exception("maintenance_request_failed", table=table, job=job)

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
