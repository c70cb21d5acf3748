"""Prometheus metrics, on a registry of our own (tests build several daemons in one process).

Freshness lag, precisely: for a table whose stats reflect snapshot S while the table's
current snapshot is C (both as of the daemon's last look at the table, which happens on
every watch event, notification and poll tick),

* ``lakestats_freshness_lag_seconds = 0`` when S == C (or the table has no commit);
* otherwise ``now − timestamp(oldest commit after S on C's lineage)``: how long the
  published stats have been missing a commit. While a backlog is processed, it drops to
  the age of the next unprocessed commit after each commit.

The *oldest* missing commit is used, not the newest: under a steady stream of commits the
newest one is always young, so a lag measured from it would look healthy while the stats
fall ever further behind. The value is exported only once the table has been looked at.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakestats.cache import process_cache

# commit work spans milliseconds (manifest-only) to minutes (a big Spark job)
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)


@dataclass
class _Freshness:
    last_snapshot_id: int | None = None
    current_snapshot_id: int | None = None
    stale_since_ms: int | None = None  # commit timestamp of the oldest unreflected commit
    checked_at: float | None = None


class FreshnessTracker:
    """What the daemon last saw of each table's processed vs current snapshot."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._tables: dict[str, _Freshness] = {}

    def observe(
        self,
        table: str,
        *,
        current: int | None,
        processed: int | None,
        oldest_unreflected_ms: int | None,
    ) -> None:
        with self._lock:
            f = self._tables.setdefault(table, _Freshness())
            f.current_snapshot_id = current
            f.last_snapshot_id = processed
            f.stale_since_ms = None if current == processed else oldest_unreflected_ms
            f.checked_at = self._clock()

    def processed(self, table: str, snapshot_id: int, next_unreflected_ms: int | None) -> None:
        with self._lock:
            f = self._tables.setdefault(table, _Freshness())
            f.last_snapshot_id = snapshot_id
            f.stale_since_ms = next_unreflected_ms
            f.checked_at = self._clock()

    def failing(self, table: str, current: int | None) -> None:
        """A run failed with ``current`` not processed: the lag counts from now unless it
        already counts (a commit that cannot be read has no time to count from; 0 would
        say the table is up to date)."""
        with self._lock:
            f = self._tables.setdefault(table, _Freshness())
            f.current_snapshot_id = current
            if current != f.last_snapshot_id and f.stale_since_ms is None:
                f.stale_since_ms = int(self._clock() * 1000)
            f.checked_at = self._clock()

    def lag_s(self, table: str) -> float | None:
        with self._lock:
            f = self._tables.get(table)
            if f is None or f.checked_at is None:
                return None
            if f.stale_since_ms is None:
                return 0.0
            return max(0.0, self._clock() - f.stale_since_ms / 1000.0)

    def snapshot_ids(self, table: str) -> tuple[int | None, int | None]:
        """(last processed, current) as last seen."""
        with self._lock:
            f = self._tables.get(table, _Freshness())
            return f.last_snapshot_id, f.current_snapshot_id


class _LagCollector(Collector):
    def __init__(self, tables: tuple[str, ...], tracker: FreshnessTracker) -> None:
        self._tables = tables
        self._tracker = tracker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "lakestats_freshness_lag_seconds",
            "Seconds since the oldest commit not yet reflected in the stats (0 = up to date)",
            labels=["table"],
        )
        for table in self._tables:
            lag = self._tracker.lag_s(table)
            if lag is not None:
                family.add_metric([table], lag)
        yield family


class _CacheCollector(Collector):
    """What the process's cache holds, per kind of entry (``lakestats.cache``)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "lakestats_cache_bytes",
            "What the process's cache of table metadata and stats files holds, by kind "
            "(estimated; within cache_size in all)",
            labels=["kind"],
        )
        for kind, held in sorted(process_cache().held_by_kind().items()):
            family.add_metric([kind], held)
        yield family


class Metrics:
    """Every metric the daemon exports."""

    def __init__(self, tables: tuple[str, ...], tracker: FreshnessTracker) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.commits_processed = Counter(
            "lakestats_commits_processed",
            "Commits whose stats were computed and published",
            ["table"],
            registry=r,
        )
        self.files_sketched = Counter(
            "lakestats_files_sketched",
            "Data files read by the sketch pipeline",
            ["table"],
            registry=r,
        )
        self.files_reused = Counter(
            "lakestats_files_reused",
            "Data files a walk that started over did not read: stored sketches stood in",
            ["table"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            "lakestats_commit_processing_seconds",
            "Time to process one commit, end to end inside core",
            ["table"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.phase_seconds = Histogram(
            "lakestats_commit_phase_seconds",
            "Time per phase of commit processing (plan, sketch, store, merge, publish …)",
            ["phase"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.commit_to_stats_seconds = Histogram(
            "lakestats_commit_to_stats_seconds",
            "From the commit's timestamp to its stats being published",
            ["table"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.run_seconds = Histogram(
            "lakestats_run_seconds",
            "Time of one worker run (all commits pending for a table)",
            ["table", "outcome"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "lakestats_errors",
            "Failed runs by error kind (exception class; 'unexpected' for bugs)",
            ["table", "kind"],
            registry=r,
        )
        self.hints = Counter(
            "lakestats_hints",
            "Hints received by source (watch, poll, api, maintenance)",
            ["source"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "lakestats_queue_depth", "Tables hinted and waiting for a worker", registry=r
        )
        self.tables_running = Gauge(
            "lakestats_tables_running", "Tables being processed right now", registry=r
        )
        self.tables_stalled = Gauge(
            "lakestats_tables_stalled",
            "Runs silent (no commit boundary) past watch.stall_timeout_s; /healthz fails",
            registry=r,
        )
        self.table_healthy = Gauge(
            "lakestats_table_healthy",
            "1 unless the last run of the table failed",
            ["table"],
            registry=r,
        )
        self.ready = Gauge("lakestats_ready", "1 when /readyz answers 200", registry=r)
        self.spark_up = Gauge(
            "lakestats_spark_up",
            "1 when the SparkSession is usable (or sketches are off), 0 while Spark is down",
            registry=r,
        )
        self.spark_restarts = Gauge(
            "lakestats_spark_restarts",
            "SparkSessions recreated after Spark became unusable, since the daemon started",
            registry=r,
        )
        r.register(_CacheCollector())
        r.register(_LagCollector(tables, tracker))
        for table in tables:
            self.table_healthy.labels(table).set(1)
            self.commits_processed.labels(table)  # export zeros from the start
