"""Building the service's parts from config, and routing hints between them.

``CoreFns`` is everything the daemon calls in core (analyze, read, open, Spark, the
maintenance jobs); ``core_fns`` binds the real ones, tests pass plain functions. ``Service``
holds the parts — metrics, the per-table runtime and queue, the watcher, the poller, the
maintenance scheduler — and is where every hint (watch event, poll tick, API call, due
maintenance job) enters the queue. It starts nothing: ``lakestatsd.lifecycle`` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from lakestats import cache
from lakestats.analyze import AnalyzeResult, BatchProgress, CommitReport, PendingCallback
from lakestats.locations import local_path
from lakestats.model import StateVersion
from lakestats.shards import ShardPlan
from lakestats.store import objectstore
from lakestats.tables import OpenedTable
from lakestatsd.config import ServiceConfig
from lakestatsd.maintenance import MaintenanceFns, MaintenanceRunner, MaintenanceScheduler
from lakestatsd.metrics import FreshnessTracker, Metrics
from lakestatsd.runtime import AnalyzeFn, Opener, StatsReader, TableRuntime
from lakestatsd.scheduler import STORAGE, RunReport, StopCheck, TableQueue, error_kind
from lakestatsd.spark_watch import SparkControl, SparkState, SparkWatch, StopSpark
from lakestatsd.watch import MetadataWatcher, Poller

_log = structlog.get_logger("lakestatsd.runtime")


@dataclass(frozen=True)
class CoreFns:
    """What the daemon calls in core (``core_fns`` binds the real ones)."""

    analyze: AnalyzeFn
    read_stats: StatsReader
    opener: Opener
    warm_spark: Callable[[], None] | None  # None: sketches off, no Spark at all
    stop_spark: StopSpark | None
    maintenance: MaintenanceFns | None = None
    # a processed snapshot's stats wait for their registration in the table: run it
    unregistered: Callable[[OpenedTable, StateVersion | None], bool] | None = None
    spark_health: Callable[[], Any] | None = None  # None: Spark is not supervised (tests)


def core_fns(config: ServiceConfig) -> CoreFns:
    """The real core, bound to ``config`` (imported here so tests can build a service
    without importing Spark)."""
    from lakestats.analyze import analyze_table, unregistered_stats  # noqa: PLC0415
    from lakestats.analyze import read_stats as core_read_stats  # noqa: PLC0415
    from lakestats.maintenance import compact, expire, stale_stats  # noqa: PLC0415
    from lakestats.sketches.spark import spark_health  # noqa: PLC0415
    from lakestats.sketching import SparkSketcher  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    # one sketcher, so one warm SparkSession, for the life of the process; the JVM's own
    # output goes to a file of its own, never into the JSON log stream on stdout
    sketcher = (
        SparkSketcher(
            config,
            jvm_log_path=spark_log_path(config),
            log_level=config.daemon.spark_log_level,
        )
        if config.sketch.enabled
        else None
    )

    def analyze(
        opened: OpenedTable,
        *,
        should_stop: StopCheck,
        on_commit: Callable[[CommitReport], None],
        on_pending: PendingCallback,
        should_yield: StopCheck | None = None,
        first_batch_commits: int = 1,
    ) -> AnalyzeResult:
        return analyze_table(
            opened,
            config=config,
            sketcher=sketcher,
            should_stop=should_stop,
            should_yield=should_yield,
            first_batch_commits=first_batch_commits,
            on_commit=on_commit,
            on_pending=on_pending,
            on_progress=log_progress,
            refreshed=True,  # the runtime's poll refreshed it to see that there is work
        )

    def stop_spark(reason: str | None = None) -> None:
        from lakestats.sketches.spark import stop_spark as stop  # noqa: PLC0415

        stop(reason)

    return CoreFns(
        analyze=analyze,
        read_stats=core_read_stats,
        opener=open_configured,
        warm_spark=sketcher.warm if sketcher is not None else None,
        stop_spark=stop_spark if sketcher is not None else None,
        maintenance=MaintenanceFns(
            expire=lambda opened: expire(opened, config),
            compact=lambda opened: compact(opened, config),
            stale=stale_stats,
        ),
        unregistered=unregistered_stats,
        spark_health=spark_health if sketcher is not None else None,
    )


def log_progress(event: BatchProgress) -> None:
    """Long work is never silent: one event before and after each batch's Spark job."""
    if not event.files:
        return  # a metadata-only batch takes milliseconds
    _log.info("analyze_progress", **event.log_fields(), spark_start_s=round(event.spark_start_s, 3))


def spark_log_path(config: ServiceConfig) -> str | None:
    """Where the JVM's output goes: ``daemon.spark_log``, else a file in a local state
    dir; None (stderr) when set to "" or when the state dir is remote."""
    configured = config.daemon.spark_log
    if configured is not None:
        return configured or None
    directory = local_path(config.state_dir)
    return None if directory is None else str(directory / "lakestatsd-spark.log")


@dataclass
class ProcessStatus:
    """What the lifecycle changes and readiness reports: shutting down (Spark's state
    lives in ``Service.spark_watch``)."""

    stopping: bool = False


class Service:
    """The daemon's parts, built from config, and how hints reach the queue."""

    def __init__(self, config: ServiceConfig, core: CoreFns) -> None:
        # [shards]: every part below sees only this replica's tables; the plan remembers
        # the others' owners, so a request for one of them is told where it lives
        self.shards = config.shard_plan()
        config = own_tables(config, self.shards)
        self.config = config
        cache.configure(config.cache_size)  # every table's metadata and stats, one budget
        self.core = core
        names = tuple(t.name for t in config.table)
        self.freshness = FreshnessTracker()
        self.metrics = Metrics(names, self.freshness)
        self.maintenance = (
            MaintenanceRunner(config, self.metrics.registry, core.maintenance)
            if core.maintenance is not None
            else None
        )
        self.runtime = TableRuntime(
            config,
            analyze=core.analyze,
            read_stats=core.read_stats,
            opener=core.opener,
            metrics=self.metrics,
            freshness=self.freshness,
            maintenance=self.maintenance,
            unregistered=core.unregistered,
        )
        w = config.watch
        self.queue = TableQueue(
            names,
            self.runtime.process,
            debounce_s=w.debounce_s,
            max_concurrent=w.max_concurrent_tables,
            backoff_initial_s=w.backoff_initial_s,
            backoff_max_s=w.backoff_max_s,
            run_slice_s=w.run_slice_s,
            on_run=self._on_run,
        )
        self.metrics.queue_depth.set_function(self.queue.depth)
        self.metrics.tables_running.set_function(self.queue.running)
        self.metrics.tables_stalled.set_function(
            lambda: float(len(self.queue.stalled(self.config.stall_timeout_s)))
        )
        self.watcher = (
            MetadataWatcher(names, self.hint, self.runtime.watch_target) if w.enabled else None
        )
        self.poller = Poller(w.poll_interval_s, self.poll_tick)
        self.maintenance_jobs = (
            MaintenanceScheduler(config, self.request_maintenance)
            if self.maintenance is not None
            else None
        )
        self.status = ProcessStatus()
        self.spark_watch = (
            SparkWatch(
                SparkControl(
                    start=core.warm_spark,
                    stop=core.stop_spark or _no_stop,
                    health=core.spark_health or _no_health,
                ),
                check_interval_s=config.daemon.spark_check_interval_s,
                retry_max_s=config.daemon.spark_retry_max_s,
                unavailable_timeout_s=config.daemon.spark_unavailable_timeout_s,
                executor_wait_s=config.spark.executor_wait_s,
            )
            if core.warm_spark is not None
            else None
        )
        self.metrics.spark_up.set_function(
            lambda: 1.0 if self.spark_state in ("up", "disabled") else 0.0
        )
        self.metrics.spark_restarts.set_function(
            lambda: float(self.spark_watch.status.restarts) if self.spark_watch else 0.0
        )

    @property
    def spark_state(self) -> SparkState:
        return "disabled" if self.spark_watch is None else self.spark_watch.status.state

    def hint(self, name: str, source: str) -> int | None:
        """Look at ``name`` again; a ticket for ``queue.is_done``, None when shutting down."""
        if not self.queue.accepting:
            return None
        self.metrics.hints.labels(source).inc()
        return self.queue.hint(name, source)

    def poll_tick(self) -> None:
        self.queue.report_stalled(self.config.stall_timeout_s)
        if state_dir_writable(self.config.state_dir)[0]:
            # space freed, permissions fixed: retry now rather than after a long backoff
            self.queue.retry_now(STORAGE)
        if self.watcher is not None:
            self.watcher.ensure_watches_soon()  # tables that could not be watched before
        for name in self.queue.names:
            self.hint(name, "poll")

    def request_maintenance(self, name: str, job: str) -> None:
        """A scheduled job is due: the table's worker runs it after its next analyze."""
        assert self.maintenance is not None
        self.maintenance.request(name, job)
        self.hint(name, "maintenance")

    def _on_run(self, report: RunReport) -> None:
        outcome = "contended" if report.contended else "ok" if report.ok else "error"
        self.metrics.run_seconds.labels(report.table, outcome).observe(report.duration_s)
        if report.error is not None:
            self.metrics.errors.labels(report.table, error_kind(report.error)).inc()
            self.metrics.table_healthy.labels(report.table).set(0)


def own_tables(config: ServiceConfig, plan: ShardPlan) -> ServiceConfig:
    """``config`` with only the tables ``plan`` gives this replica."""
    if plan.count == 1:
        return config
    own = set(plan.own)
    return config.model_copy(update={"table": tuple(t for t in config.table if t.name in own)})


def state_dir_writable(state_dir: str) -> tuple[bool, str | None]:
    """A local state dir: a file created and removed in it. On S3: its bucket there and
    visible (no write: the first commit that cannot write fails as ``storage``)."""
    directory = local_path(state_dir)
    if directory is None:
        try:
            objectstore.check_reachable(state_dir)
        except OSError as exc:
            return False, f"{type(exc).__name__}: {exc.strerror or exc}"
        return True, None
    probe = directory / f".lakestatsd-ready-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc.strerror or exc}"
    return True, None


def _no_health() -> Any:
    from lakestats.sketches.spark import SparkHealth  # noqa: PLC0415

    return SparkHealth(exists=True, stopped=False, master=None, executors=None)


def _no_stop(reason: str | None = None) -> None:
    """Spark is not supervised (tests without a sketcher): nothing to stop."""
