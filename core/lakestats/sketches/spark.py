"""The process-wide SparkSession.

Starting a JVM and a SparkContext costs seconds, so lakestats creates one session per process
and reuses it for every batch of commits (DESIGN §10). pyspark itself takes a noticeable time
to import, so it is imported inside the functions only: the CLI must start fast when no
sketching is needed.

Settings apply only when the session is created. A later ``get_spark`` call with different
settings gets the existing session and a warning in the log: Spark cannot change its master
or static configuration on a live context, and silently building a second context in the
same JVM is not possible either.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import structlog

from lakestats.exceptions import SketchError, SparkUnavailableError

_log = structlog.get_logger(__name__)

# Matching Parquet columns by field id is what keeps renamed columns readable (DESIGN §5);
# it is forced on whatever the configuration says.
FIELD_ID_READ_KEY = "spark.sql.parquet.fieldId.read.enabled"
# The Python of Spark's Python workers (the Arrow sketch engine's tasks). PySpark itself
# takes it from the PYSPARK_PYTHON environment variable when the context starts.
PYTHON_KEY = "spark.pyspark.python"
# The module Spark's Python worker daemon runs: lakestats' imports numpy, pyarrow and
# datasketches once, and every worker forked from it has them (lakestats/arrow_sketch/
# worker_daemon.py); Spark ends idle workers after a minute, the daemon lives on.
DAEMON_MODULE_KEY = "spark.python.daemon.module"
WORKER_DAEMON = "lakestats.arrow_sketch.worker_daemon"
_DEFAULT_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # The sketch job aggregates every column in one pass; its generated code is larger
        # than the JIT's 8000-byte "huge method" limit, so by default the JVM would run it
        # interpreted. Measured on TPC-H lineitem SF1: 47.6 s → 25-32 s for a full build.
        "spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods",
        "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
    }
)


@dataclass(frozen=True)
class SparkSettings:
    """How to build the session: ``spark.master``, extra Spark conf, application name.

    ``log_level`` is the JVM log level (Spark's default, WARN, prints a stack trace for every
    failed task; lakestats reports failures itself).
    """

    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    app_name: str = "lakestats"
    log_level: str = "ERROR"
    # a cluster session gets this long for its first executor (else it is unusable)
    executor_wait_s: float = 60.0
    # where the JVM's own output (log4j, Java stack traces) goes; None: this process's stderr
    jvm_log_path: str | None = None

    def __post_init__(self) -> None:
        # Frozen means frozen: a caller mutating its dict later must not change the settings
        # a live session was compared against.
        object.__setattr__(self, "conf", MappingProxyType(dict(self.conf)))

    def effective_conf(self) -> dict[str, str]:
        """The conf the session is built with: defaults, then the caller's, then forced keys.

        A local master's Python workers run this interpreter (``sys.executable``: it has
        lakestats and its dependencies) unless ``spark.pyspark.python`` or the environment's
        ``PYSPARK_PYTHON`` names another, and start from lakestats' worker daemon. On a
        cluster the executors' Python is the cluster's (docs/sketches.md, "The Arrow
        engine"): nothing is set.
        """
        conf = dict(_DEFAULT_CONF)
        conf.update({str(k): str(v) for k, v in self.conf.items()})
        conf[FIELD_ID_READ_KEY] = "true"
        if is_local(self.master) and PYTHON_KEY not in conf and "PYSPARK_PYTHON" not in os.environ:
            conf[PYTHON_KEY] = sys.executable
            conf.setdefault(DAEMON_MODULE_KEY, WORKER_DAEMON)
        return conf

    def _key(self) -> tuple[str, str, str, tuple[tuple[str, str], ...]]:
        return (self.master, self.app_name, self.log_level, tuple(sorted(self.conf.items())))


_lock = threading.Lock()
# Held while a session given up by ``stop_spark`` is being stopped (outside ``_lock``: a stop
# can take seconds); a new session waits for it, else Spark hands back the dying context.
_stopping = threading.Lock()
_session: Any = None
_session_settings: SparkSettings | None = None
_created_at = 0.0  # time.perf_counter() when the current session was created
# Why the session was last stopped on purpose (a supervisor saw it unusable), so a job
# that dies with "SparkContext was shut down" can name the real cause.
_stop_reason: str | None = None
# New sessions in a row that got no executor in time. Each one waits twice as long as the
# last (up to 8×): an executor JVM that starts slower than ``executor_wait_s`` (a loaded
# worker) must not be killed with its application over and over.
_executor_wait_failures = 0
_MAX_EXECUTOR_WAIT_DOUBLINGS = 3
# Standalone masters that may have just (re)started: found unreachable, or their session was
# given up as unusable (a restarted master no longer knows the application). A master that
# has just opened its port is still in STANDBY for a moment (about two seconds here) and
# ignores an application's registration without answering; Spark's client then waits 20 s
# (hard-coded) before it asks again. The next session waits this long before registering.
_masters_to_settle: set[str] = set()
MASTER_SETTLE_S = 3.0


def spark_started_since(moment: float) -> bool:
    """Was the process-wide session created after ``moment`` (``time.perf_counter()``)?"""
    return _session is not None and _created_at >= moment


def get_spark(settings: SparkSettings | None = None) -> Any:
    """The process-wide SparkSession, created on first use with ``settings``.

    Later calls return the same session; settings that differ from those it was created with
    are ignored with a logged warning (see the module docstring).
    """
    global _session, _session_settings, _created_at, _stop_reason  # noqa: PLW0603 - the process-wide singleton
    wanted = settings or SparkSettings()
    with _lock:
        if _session is not None and _is_stopped(_session):
            _log.warning("spark_context_stopped", note="creating a new SparkSession")
            _discard(_session)
            _session, _session_settings = None, None
        if _session is not None:
            if _session_settings is not None and wanted._key() != _session_settings._key():
                _log.warning(
                    "spark_settings_ignored",
                    reason="the SparkSession already exists; settings apply at creation only",
                    active_master=_session_settings.master,
                    requested_master=wanted.master,
                )
            return _session
        with _stopping:  # a session stop_spark gave up is gone first
            pass
        _session = _create(wanted)
        _session_settings = wanted
        _stop_reason = None  # it named the session before this one
        _created_at = time.perf_counter()
        return _session


@dataclass(frozen=True)
class SparkHealth:
    """What the process-wide session looks like now (``spark_health``)."""

    exists: bool
    stopped: bool
    master: str | None
    executors: int | None  # live executors; None in local mode (the driver runs tasks)


def spark_health() -> SparkHealth:
    """The process-wide session's state, without creating one."""
    with _lock:
        session, settings = _session, _session_settings
    if session is None:
        return SparkHealth(False, False, None, None)
    master = settings.master if settings is not None else None
    try:
        stopped = _is_stopped(session)
        executors = None if stopped else executor_count(session)
    except Exception:  # a dead gateway: as unusable as a stopped context
        return SparkHealth(True, True, master, None)
    return SparkHealth(True, stopped, master, executors)


def is_local(master: str) -> bool:
    return master.startswith("local")


def executor_count(session: Any) -> int | None:
    """Executors registered with the driver; None in local mode."""
    sc = session.sparkContext
    if is_local(str(sc.master)):
        return None
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()
    return max(0, len(infos) - 1)  # the driver is listed too


def probe_master(master: str, timeout_s: float = 3.0) -> None:
    """Fail fast, in one line, when no standalone master of ``spark://h:p[,h2:p2]`` accepts
    a connection (Spark itself retries for a minute, then stops the context). The first
    probe that reaches a master found unreachable before, or whose session was given up
    (``stop_spark(reason)``), waits ``MASTER_SETTLE_S``: a master just started ignores
    registrations for a moment."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                pass
        except (OSError, ValueError) as exc:
            errors.append(f"{address}: {getattr(exc, 'strerror', None) or exc}")
            continue
        if master in _masters_to_settle:
            _masters_to_settle.discard(master)
            time.sleep(MASTER_SETTLE_S)  # maybe just started: let it leave STANDBY first
        return
    _masters_to_settle.add(master)
    raise SparkUnavailableError(f"Spark master {master} is unreachable ({'; '.join(errors)})")


def stop_spark(reason: str | None = None) -> None:
    """Stop the process-wide session (if any); the next ``get_spark`` creates a new one.

    ``reason`` (why a supervisor gave up on it) is what a job still running on the session
    reports as its failure (``stop_reason``).
    """
    global _session, _session_settings, _stop_reason  # noqa: PLW0603 - the process-wide singleton
    with _lock:
        if reason is not None and _session_settings is not None:
            _masters_to_settle.add(_session_settings.master)
        session, _session, _session_settings = _session, None, None
        if reason is not None:
            _stop_reason = reason
        _stopping.acquire()
    try:
        if session is not None:
            _discard(session)  # a dead context or gateway has nothing left to stop
    finally:
        _stopping.release()


def stop_reason() -> str | None:
    """Why the session was last stopped by ``stop_spark(reason)``, if it was."""
    return _stop_reason


def _is_stopped(session: Any) -> bool:
    context = session.sparkContext
    if context is None or getattr(context, "_jsc", None) is None:
        return True
    # Spark stops the context itself (e.g. "All masters are unresponsive! Giving up."):
    # the Python side never hears of it, so ask the JVM
    return bool(context._jsc.sc().isStopped())


def _discard(session: Any) -> None:
    try:
        session.stop()
    except Exception as exc:  # already dead: nothing left to stop
        _log.info("spark_stop_failed", error=first_line(exc))


def first_line(exc: BaseException) -> str:
    """The message of a Spark/Py4J error without its Java stack."""
    text = str(exc).strip()
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("at ", "An error occurred while calling")):
            return line
    return type(exc).__name__


def _create(settings: SparkSettings) -> Any:
    from pyspark.sql import SparkSession

    probe_master(settings.master)
    conf = settings.effective_conf()
    if settings.conf.get(FIELD_ID_READ_KEY, "true").lower() != "true":
        _log.warning("spark_conf_overridden", key=FIELD_ID_READ_KEY, value="true")
    if PYTHON_KEY in conf:
        # PySpark reads the workers' Python from the environment, not from the conf
        os.environ["PYSPARK_PYTHON"] = conf[PYTHON_KEY]
    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with _jvm_output_to(settings.jvm_log_path):
            session = builder.getOrCreate()
    except Exception as exc:  # Java missing, bad master URL, port clash …
        raise SketchError(
            f"cannot start Spark (master {settings.master!r}): {first_line(exc)}"
        ) from exc
    session.sparkContext.setLogLevel(settings.log_level)
    _wait_for_executors(session, settings)
    _log.info(
        "spark_started",
        master=settings.master,
        version=session.version,
        default_parallelism=session.sparkContext.defaultParallelism,
    )
    return session


def _wait_for_executors(session: Any, settings: SparkSettings) -> None:
    """A cluster session is usable once an executor registered; without one in
    ``executor_wait_s`` it is stopped and the cause raised (Spark would only log "Initial
    job has not accepted any resources" and wait forever)."""
    global _executor_wait_failures  # noqa: PLW0603 - process-wide, like the session
    if is_local(settings.master):
        return
    wait_s = settings.executor_wait_s * 2 ** min(
        _executor_wait_failures, _MAX_EXECUTOR_WAIT_DOUBLINGS
    )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if _is_stopped(session):
            break
        if (executor_count(session) or 0) > 0:
            _executor_wait_failures = 0
            return
        time.sleep(0.2)
    stopped = _is_stopped(session)
    _discard(session)
    _executor_wait_failures += not stopped
    cause = (
        "the master stopped the application"
        if stopped
        else f"no executor registered within {wait_s:g}s"
    )
    raise SparkUnavailableError(
        f"Spark at {settings.master} is unusable: {cause} (are workers running, with free "
        "cores and the memory spark.executor.memory asks for, and can they reach the "
        "driver at spark.driver.host?)"
    )


class _jvm_output_to:  # noqa: N801 - used as a context manager, reads like one
    """Point this process's stderr (fd 2) at ``path`` while the JVM is launched, so the
    JVM inherits it: Spark's log4j console output and Java stack traces land in that file,
    never interleaved with a JSON log stream. Python's own stderr is restored at once."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._saved: int | None = None

    def __enter__(self) -> None:
        if self._path is None:
            return
        target = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        self._saved = os.dup(2)
        os.dup2(target, 2)
        os.close(target)

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None
