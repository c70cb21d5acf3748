"""The Spark supervisor's rules with a scripted Spark and a fake clock (the real thing runs
against a standalone cluster in test_spark_cluster.py). Spark is stood in for because
its failures cannot be produced on demand in-process; the stand-in follows
``lakestats.sketches.spark``'s contract (``SparkHealth``, exceptions from ``start``)."""

from __future__ import annotations

from typing import Any

import structlog

from lakestats.exceptions import SparkUnavailableError
from lakestats.sketches.spark import SparkHealth
from lakestatsd.spark_watch import SparkControl, SparkWatch


class ScriptedSpark:
    def __init__(self) -> None:
        self.health = SparkHealth(exists=True, stopped=False, master="spark://m:7077", executors=1)
        self.start_error: Exception | None = None
        self.starts = 0
        self.stops = 0
        self.stop_reasons: list[str | None] = []

    def start(self) -> None:
        self.starts += 1
        if self.start_error is not None:
            raise self.start_error
        self.health = SparkHealth(exists=True, stopped=False, master="spark://m:7077", executors=1)

    def stop(self, reason: str | None = None) -> None:
        self.stops += 1
        self.stop_reasons.append(reason)
        self.health = SparkHealth(exists=False, stopped=False, master=None, executors=None)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(spark: ScriptedSpark, clock: Clock) -> SparkWatch:
    return SparkWatch(
        SparkControl(start=spark.start, stop=spark.stop, health=lambda: spark.health),
        check_interval_s=1,
        retry_max_s=8,
        unavailable_timeout_s=60,
        executor_wait_s=10,
        clock=clock,
    )


def events(captured: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in captured if e["event"] == name]


def test_lost_executors_restart_spark_once_per_outage_with_backoff() -> None:
    spark, clock = ScriptedSpark(), Clock()
    watch = make(spark, clock)
    with structlog.testing.capture_logs() as captured:
        watch._attempt(first=True)
        assert watch.status.state == "up" and spark.starts == 1
        spark.health = SparkHealth(True, False, "spark://m:7077", executors=0)
        watch.check_once()
        assert watch.status.state == "up"  # not yet executor_wait_s without executors
        clock.now += 10
        spark.start_error = SparkUnavailableError("no executor registered within 10s")
        watch.check_once()
        status = watch.status
        assert status.state == "failed" and spark.stops == 1
        assert status.error is not None and "no executor registered" in status.error
        # the stop names why, so a job still running on the session reports that cause
        (reason,) = spark.stop_reasons
        assert reason is not None and reason.startswith("no Spark executor for 10s")
        starts = spark.starts
        for delay in (1, 2, 4, 8, 8):  # backoff doubles up to retry_max_s
            clock.now += delay - 0.01
            watch.check_once()
            assert spark.starts == starts  # not due yet
            clock.now += 0.01
            watch.check_once()
            starts += 1
            assert spark.starts == starts
        assert len(events(captured, "spark_unavailable")) == 1  # one event per outage
        assert watch.alive() == (True, None)
        clock.now += 61
        alive, why = watch.alive()
        assert not alive and why is not None and "no executor registered" in why
        spark.start_error = None
        clock.now += 8
        watch.check_once()
    assert watch.status.state == "up" and watch.status.restarts == 1
    assert watch.alive() == (True, None)
    assert events(captured, "spark_recovered")


def test_a_stopped_context_is_noticed_and_replaced() -> None:
    spark, clock = ScriptedSpark(), Clock()
    watch = make(spark, clock)
    watch._attempt(first=True)
    spark.health = SparkHealth(True, True, "spark://m:7077", None)
    watch.check_once()  # noticed, stopped, and started again in the same round
    assert spark.stops == 1 and spark.starts == 2
    assert watch.status.state == "up" and watch.status.restarts == 1


def test_a_session_a_run_discarded_is_started_by_the_watch() -> None:
    """A run found the context stopped and dropped it, then failed to start one: the watch
    must not keep reporting "up"."""
    spark, clock = ScriptedSpark(), Clock()
    watch = make(spark, clock)
    watch._attempt(first=True)
    spark.health = SparkHealth(False, False, None, None)
    spark.start_error = SparkUnavailableError("Spark master spark://m:7077 is unreachable")
    watch.check_once()
    assert watch.status.state == "failed"
    assert watch.status.error is not None and "unreachable" in watch.status.error


def test_local_mode_never_counts_executors() -> None:
    spark, clock = ScriptedSpark(), Clock()
    watch = make(spark, clock)
    watch._attempt(first=True)
    spark.health = SparkHealth(True, False, "local[2]", executors=None)
    clock.now += 1000
    watch.check_once()
    assert watch.status.state == "up" and spark.stops == 0
