"""Spark as a supervised dependency.

The daemon's one SparkSession can become unusable behind its back: the master is
unreachable at start, Spark stops the context itself ("All masters are unresponsive!
Giving up."), every executor is lost (workers killed), or a restarted master no longer
knows the application. Nothing in pyspark says so: jobs hang ("Initial job has not
accepted any resources") or fail with "Cannot call methods on a stopped SparkContext"
forever. So a thread checks the session every ``daemon.spark_check_interval_s``:

* a stopped context, or no executor for ``spark.executor_wait_s`` (cluster mode), marks
  Spark ``failed`` with the cause — reported by ``/readyz`` (503), the ``lakestats_spark_up``
  metric and one ``spark_unavailable`` log event — and the session is stopped;
* a failed Spark is started again with backoff (1 s doubling to
  ``daemon.spark_retry_max_s``); success logs ``spark_recovered``;
* Spark failed for longer than ``daemon.spark_unavailable_timeout_s`` fails liveness
  (``/healthz`` 503), so systemd or Kubernetes restarts the whole process.

Running jobs are guarded in core (``lakestats.pipeline.JobLimits``): a job without
executors or past ``spark.job_timeout_s`` is cancelled, so the table's run fails with the
cause as its ``last_error`` instead of hanging.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import structlog

log = structlog.get_logger("lakestatsd.spark")

SparkState = Literal["disabled", "starting", "up", "failed"]
_RETRY_INITIAL_S = 1.0


@dataclass
class SparkStatus:
    """What readiness, liveness and the metrics report about Spark."""

    state: SparkState
    error: str | None = None
    down_since: float | None = None  # monotonic time Spark became unusable
    restarts: int = 0


class StopSpark(Protocol):
    """Stops the session; ``reason`` is what a job still running on it reports."""

    def __call__(self, reason: str | None = None) -> None: ...


@dataclass(frozen=True)
class SparkControl:
    """What the watcher calls in core (``lakestats.sketches.spark``)."""

    start: Callable[[], None]  # create the session (raises with the cause)
    stop: StopSpark
    health: Callable[[], Any]  # -> lakestats.sketches.spark.SparkHealth


class SparkWatch:
    """Starts Spark, checks it, restarts it with backoff, and says whether it is usable."""

    def __init__(
        self,
        control: SparkControl,
        *,
        check_interval_s: float,
        retry_max_s: float,
        unavailable_timeout_s: float,
        executor_wait_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._control = control
        self._interval = check_interval_s
        self._retry_max = max(retry_max_s, _RETRY_INITIAL_S)
        self._unavailable_timeout = unavailable_timeout_s
        self._executor_wait = executor_wait_s
        self._clock = clock
        self.status = SparkStatus(state="starting")
        self.first_attempt_done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._retry_delay = _RETRY_INITIAL_S
        self._next_try = 0.0
        self._no_executors_since: float | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lakestatsd-spark", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- what the API reads ------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self.status.state == "up"

    def alive(self) -> tuple[bool, str | None]:
        """False once Spark has been unusable for longer than the configured time."""
        status = self.status
        if status.state != "failed" or status.down_since is None:
            return True, None
        down = self._clock() - status.down_since
        if down <= self._unavailable_timeout:
            return True, None
        return False, (
            f"Spark unusable for {down:.0f}s (limit daemon.spark_unavailable_timeout_s = "
            f"{self._unavailable_timeout:g}s): {status.error}"
        )

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        self._attempt(first=True)
        self.first_attempt_done.set()
        while not self._stop.wait(self._interval):
            try:
                self.check_once()
            except Exception:  # the watcher itself must never die
                log.exception("spark_watch_error")

    def check_once(self) -> None:
        """One round: notice a broken session, or retry a failed one when due."""
        if self.status.state == "up":
            problem = self._problem()
            if problem is not None:
                self._failed(problem)
                self._control.stop(problem)
        if self.status.state == "failed" and self._clock() >= self._next_try:
            self._attempt(first=False)

    def _problem(self) -> str | None:
        health = self._control.health()
        if not health.exists:
            # a run found the context stopped and discarded it, then could not start a new
            # one (or has not yet): start it here, so the outage is seen and reported
            self._no_executors_since = None
            try:
                self._control.start()
            except Exception as exc:
                return _one_line(exc)
            return None
        if health.stopped:
            return (
                "the SparkContext was stopped (Spark gave up on the master, or the driver "
                "failed); see the Spark log"
            )
        if health.executors is None or health.executors > 0:
            self._no_executors_since = None
            return None
        now = self._clock()
        since = self._no_executors_since = self._no_executors_since or now
        if now - since < self._executor_wait:
            return None
        return (
            f"no Spark executor for {now - since:.0f}s (workers lost, or the master was "
            f"restarted and no longer knows this application; master {health.master})"
        )

    def _attempt(self, *, first: bool) -> None:
        started = self._clock()
        try:
            self._control.start()
        except Exception as exc:  # reported; retried with backoff
            self._failed(_one_line(exc))
            self._next_try = self._clock() + self._retry_delay
            self._retry_delay = min(self._retry_max, self._retry_delay * 2)
            return
        recovered = self.status.state == "failed"
        down_for = (
            None if self.status.down_since is None else self._clock() - self.status.down_since
        )
        self.status = SparkStatus(state="up", restarts=self.status.restarts + (not first))
        self._retry_delay = _RETRY_INITIAL_S
        self._no_executors_since = None
        seconds = round(self._clock() - started, 3)
        if recovered:
            log.info("spark_recovered", seconds=seconds, down_for_s=round(down_for or 0.0, 3))
        else:
            log.info("spark_ready", seconds=seconds)

    def _failed(self, error: str) -> None:
        status = self.status
        if status.state != "failed":
            # one event per outage, with the cause; retries are quiet until it recovers
            log.error("spark_unavailable", error=error)
            self.status = SparkStatus(
                state="failed", error=error, down_since=self._clock(), restarts=status.restarts
            )
        else:
            log.debug("spark_retry_failed", error=error)
            status.error = error


def _one_line(exc: BaseException) -> str:
    from lakestats.sketches.spark import first_line  # noqa: PLC0415 - no pyspark import

    return f"{type(exc).__name__}: {first_line(exc)}"
