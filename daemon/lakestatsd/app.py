"""Process lifecycle: configuration, start order, signals, systemd, shutdown.

Start: bind the port (fail fast, one line) → serve HTTP (/healthz answers at once) →
start the queue, the watchers and the poller (whose first tick looks at every table, which
is how a restart resumes from the state log) → warm Spark → ready (``READY=1``).

Stop (SIGTERM/SIGINT): not ready, stop hinting, let each running table finish the commit
it is on (core checks ``should_stop`` between commits), stop HTTP, stop Spark, exit 0 —
all within ``daemon.shutdown_timeout_s``. A commit still running when the time is up is
abandoned: the store writes a state version only after everything it references is
durable, so the next start redoes that commit and nothing is corrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog
import uvicorn
from prometheus_client import generate_latest

from lakestats.config import Config, load_config
from lakestats.exceptions import ConfigError
from lakestatsd import __version__
from lakestatsd.api import create_app
from lakestatsd.maintenance import MaintenanceFns, MaintenanceRunner, MaintenanceScheduler
from lakestatsd.metrics import FreshnessTracker, Metrics
from lakestatsd.runtime import AnalyzeFn, Opener, StatsReader, TableRuntime
from lakestatsd.scheduler import RunReport, TableQueue, error_kind
from lakestatsd.systemd import Notifier
from lakestatsd.watch import MetadataWatcher, Poller

log = structlog.get_logger("lakestatsd")

_EXIT_CONFIG = 2
_EXIT_RUNTIME = 1
_FORCE_EXIT_MARGIN_S = 0.3  # leave room for the interpreter to exit inside the budget


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the daemon owns SIGTERM/SIGINT."""

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        return

    @contextmanager
    def capture_signals(self) -> Iterator[None]:  # uvicorn >= 0.29
        yield


class Daemon:
    """Wires config, queue, watchers, poller, API and Spark warm-up together."""

    def __init__(
        self,
        config: Config,
        *,
        analyze: AnalyzeFn,
        read_stats: StatsReader,
        opener: Opener,
        warm_spark: Callable[[], None] | None,
        stop_spark: Callable[[], None] | None,
        notifier: Notifier | None = None,
        maintenance: MaintenanceFns | None = None,
    ) -> None:
        self.config = config
        names = tuple(t.name for t in config.table)
        self.freshness = FreshnessTracker()
        self.metrics = Metrics(names, self.freshness)
        self.maintenance = (
            MaintenanceRunner(config, self.metrics.registry, maintenance)
            if maintenance is not None
            else None
        )
        self.runtime = TableRuntime(
            config,
            analyze=analyze,
            read_stats=read_stats,
            opener=opener,
            metrics=self.metrics,
            freshness=self.freshness,
            maintenance=self.maintenance,
        )
        w = config.watch
        self.queue = TableQueue(
            names,
            self.runtime.process,
            debounce_s=w.debounce_s,
            max_concurrent=w.max_concurrent_tables,
            backoff_initial_s=w.backoff_initial_s,
            backoff_max_s=w.backoff_max_s,
            on_run=self._on_run,
        )
        self.metrics.queue_depth.set_function(self.queue.depth)
        self.metrics.tables_running.set_function(self.queue.running)
        self.watcher = (
            MetadataWatcher(names, self._hint_from, self.runtime.location) if w.enabled else None
        )
        self.poller = Poller(w.poll_interval_s, self._poll_tick)
        self.maintenance_jobs = (
            MaintenanceScheduler(config, self._request_maintenance)
            if self.maintenance is not None
            else None
        )
        self._warm_spark = warm_spark
        self._stop_spark = stop_spark
        self._spark_state = "disabled" if warm_spark is None else "starting"
        self._spark_error: str | None = None
        self._stopping = False
        self._notifier = notifier or Notifier()

    @classmethod
    def from_config(cls, config: Config) -> Daemon:
        """The real wiring to core (imported here so tests can build a Daemon without it)."""
        from lakestats.analyze import analyze_table, make_sketcher  # noqa: PLC0415
        from lakestats.analyze import read_stats as core_read_stats  # noqa: PLC0415
        from lakestats.maintenance import compact, expire, stale_stats  # noqa: PLC0415
        from lakestats.tables import OpenedTable, open_configured  # noqa: PLC0415

        # one sketcher, so one warm SparkSession, for the life of the process
        sketcher = make_sketcher(config) if config.sketch.enabled else None

        def analyze(
            opened: OpenedTable, *, should_stop: Callable[[], bool], on_commit: Callable[..., None]
        ) -> Any:
            return analyze_table(
                opened,
                config=config,
                sketcher=sketcher,
                should_stop=should_stop,
                on_commit=on_commit,
            )

        def stop_spark() -> None:
            from lakestats.sketches.spark import stop_spark as stop  # noqa: PLC0415

            stop()

        return cls(
            config,
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
        )

    # -- hints -----------------------------------------------------------------------------

    def _hint_from(self, name: str, source: str) -> int | None:
        if not self.queue.accepting:
            return None
        self.metrics.hints.labels(source).inc()
        return self.queue.hint(name, source)

    def _poll_tick(self) -> None:
        if self.watcher is not None:
            self.watcher.ensure_watches()  # tables that could not be watched before
        for name in self.queue.names:
            self._hint_from(name, "poll")

    def _request_maintenance(self, name: str, job: str) -> None:
        """A scheduled job is due: the table's worker runs it after its next analyze."""
        assert self.maintenance is not None
        self.maintenance.request(name, job)
        self._hint_from(name, "maintenance")

    def _on_run(self, report: RunReport) -> None:
        outcome = "ok" if report.ok else "error"
        self.metrics.run_seconds.labels(report.table, outcome).observe(report.duration_s)
        if report.error is not None:
            self.metrics.errors.labels(report.table, error_kind(report.error)).inc()
            self.metrics.table_healthy.labels(report.table).set(0)

    # -- api.Backend -----------------------------------------------------------------------

    def hint(self, name: str, source: str) -> int | None:
        return self._hint_from(name, source)

    def wait_state(self, name: str, ticket: int) -> str | None:
        if self.queue.is_done(name, ticket):
            return "done"
        if self.queue.stopping:
            return "stopping"
        return None

    def table_status(self, name: str) -> dict[str, Any]:
        status = self.queue.status()[name]
        processed, current = self.freshness.snapshot_ids(name)
        return {
            "name": name,
            "last_snapshot_id": processed,
            "current_snapshot_id": current,
            "freshness_lag_seconds": self.freshness.lag_s(name),
            **status.as_json(),
        }

    def tables(self) -> list[dict[str, Any]]:
        out = []
        watched = self.watcher.watched() if self.watcher is not None else {}
        for table in self.config.table:
            entry = self.table_status(table.name)
            entry["source"] = (
                {"location": table.location}
                if table.location is not None
                else {"catalog": table.catalog, "identifier": table.identifier}
            )
            entry["watched"] = table.name in watched
            out.append(entry)
        return out

    def read_stats(self, name: str, snapshot_id: int | None) -> dict[str, Any]:
        return self.runtime.read_stats(name, snapshot_id)

    def advise(self, name: str, columns: list[str] | None) -> dict[str, Any]:
        """Data-skipping advice from the table's stored stats; reads no data, no Spark."""
        from lakestats.advise import report_json  # noqa: PLC0415 - only this endpoint needs it
        from lakestats.advise_io import advise_table  # noqa: PLC0415
        from lakestats.exceptions import TableNotFoundError  # noqa: PLC0415
        from lakestats.tables import open_configured  # noqa: PLC0415

        table = self.config.find_table(name)
        if table is None:  # the API looked the name up already; a direct caller may not
            raise TableNotFoundError(f"no configured table named {name!r}")
        return report_json(advise_table(open_configured(table, self.config), self.config, columns))

    def metrics_payload(self) -> bytes:
        self.metrics.ready.set(1 if self.readiness()[0] else 0)
        return generate_latest(self.metrics.registry)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        spark_ok = self._spark_state in ("up", "disabled")
        state_ok, state_error = _state_dir_writable(self.config.state_dir)
        checks: dict[str, Any] = {
            "spark": {"ok": spark_ok, "state": self._spark_state, "error": self._spark_error},
            "state_dir": {"ok": state_ok, "path": self.config.state_dir, "error": state_error},
            "scheduler": {"ok": self.queue.alive},
            "shutting_down": {"ok": not self._stopping},
        }
        ready = all(c["ok"] for c in checks.values())
        # a broken table is reported here but does not make the daemon unready: the
        # healthy tables and the API must stay in service (alert on lakestats_table_healthy)
        tables = {t.name: self.table_status(t.name) for t in self.config.table}
        return ready, {"ready": ready, "checks": checks, "tables": tables}

    # -- lifecycle -------------------------------------------------------------------------

    def _warm(self) -> None:
        assert self._warm_spark is not None
        started = time.monotonic()
        try:
            self._warm_spark()
        except Exception as exc:  # reported by /readyz, runs retry Spark lazily
            self._spark_state = "failed"
            self._spark_error = f"{type(exc).__name__}: {exc}"
            log.error("spark_start_failed", error=self._spark_error)
            return
        self._spark_state = "up"
        log.info("spark_ready", seconds=round(time.monotonic() - started, 3))

    def run(self, sock: socket.socket) -> int:
        return asyncio.run(self._main(sock))

    async def _main(self, sock: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_signal(signum: int) -> None:
            log.info("signal_received", signal=signal.Signals(signum).name)
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal, signum)

        _prepare_state_dir(self.config.state_dir)
        server = _Server(
            uvicorn.Config(
                create_app(self),
                log_config=None,
                access_log=False,
                lifespan="off",
                server_header=False,
                timeout_graceful_shutdown=max(1, int(self.config.daemon.shutdown_timeout_s / 4)),
            )
        )
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if serving.done():
            log.error("http_failed_to_start")
            return _EXIT_RUNTIME
        host, port = sock.getsockname()[:2]
        log.info("http_listening", host=host, port=port, version=__version__)

        self.queue.start()
        if self.watcher is not None:
            self.watcher.start()
        self.poller.start()
        if self.maintenance_jobs is not None:
            self.maintenance_jobs.start()
        if self._warm_spark is not None:
            warm = threading.Thread(target=self._warm, name="lakestatsd-spark-warm", daemon=True)
            warm.start()
            while warm.is_alive() and not stop.is_set():
                await asyncio.sleep(0.05)
        if not stop.is_set():
            ready, _ = await asyncio.to_thread(self.readiness)
            self._notifier.send(f"READY=1\nSTATUS={'ready' if ready else 'started, not ready'}")
            log.info("ready", ready=ready, tables=list(self.queue.names))
        pinger = asyncio.create_task(self._watchdog_pings())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({stopped, serving}, return_when=asyncio.FIRST_COMPLETED)
        pinger.cancel()
        return await self._shutdown(server, serving)

    async def _watchdog_pings(self) -> None:
        interval = self._notifier.watchdog_interval_s
        if interval is None:
            return
        while True:
            # pinged from the event loop and only while the dispatcher lives: a hung loop
            # or a dead scheduler lets systemd restart us
            if self.queue.alive:
                self._notifier.send("WATCHDOG=1")
            await asyncio.sleep(interval)

    async def _shutdown(self, server: _Server, serving: asyncio.Task[None]) -> int:
        budget = self.config.daemon.shutdown_timeout_s
        deadline = time.monotonic() + budget
        _arm_forced_exit(budget - _FORCE_EXIT_MARGIN_S)
        self._stopping = True
        self._notifier.send("STOPPING=1")
        log.info("shutdown_started", timeout_s=budget)

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic() - _FORCE_EXIT_MARGIN_S)

        await asyncio.to_thread(self.poller.stop)
        if self.maintenance_jobs is not None:
            await asyncio.to_thread(self.maintenance_jobs.stop)
        if self.watcher is not None:
            self.watcher.stop(min(2.0, remaining()))
        # most of the budget goes to letting a commit in progress finish
        finished = await asyncio.to_thread(self.queue.stop, remaining() * 0.8)
        if not finished:
            log.warning("shutdown_abandoned_runs", note="the next start redoes those commits")
        server.should_exit = True
        try:
            await asyncio.wait_for(serving, timeout=max(0.1, remaining() / 2))
        except TimeoutError:
            server.force_exit = True
        if self._stop_spark is not None and finished:
            # a job still running means Spark is busy: leave it, the JVM exits with us
            stopper = threading.Thread(target=self._stop_spark, daemon=True)
            stopper.start()
            await asyncio.to_thread(stopper.join, remaining())
        log.info("shutdown_done", clean=finished)
        return 0


def _arm_forced_exit(after_s: float) -> None:
    """Exit 0 at the end of the budget even if a thread ignores every polite request."""

    def force() -> None:
        log.warning("shutdown_forced")
        sys.stdout.flush()
        os._exit(0)

    timer = threading.Timer(max(0.1, after_s), force)
    timer.daemon = True
    timer.start()


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def _prepare_state_dir(state_dir: str) -> None:
    if not _is_local(state_dir):
        return
    try:
        _local(state_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.error("state_dir_unusable", path=state_dir, error=str(exc))


def _state_dir_writable(state_dir: str) -> tuple[bool, str | None]:
    if not _is_local(state_dir):
        return True, None  # remote stores are checked by the first commit that writes
    probe = _local(state_dir) / f".lakestatsd-ready-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc.strerror or exc}"
    return True, None


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before anything else starts, so a busy port is a one-line error."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lakestatsd",
        description="Keep lakehouse table statistics fresh: watch, schedule, serve.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get("LAKESTATS_CONFIG"),
        help="TOML configuration (default: $LAKESTATS_CONFIG; every key can be "
        "overridden by LAKESTATS_<SECTION>__<KEY>)",
    )
    parser.add_argument(
        "--check-config", action="store_true", help="validate the configuration and exit"
    )
    parser.add_argument("--version", action="version", version=f"lakestatsd {__version__}")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"lakestatsd: {exc}", file=sys.stderr)
        return _EXIT_CONFIG
    if args.check_config:
        print(f"lakestatsd: configuration OK ({len(config.table)} tables)")
        return 0
    try:
        sock = bind_socket(config.http.host, config.http.port)
    except OSError as exc:
        print(
            f"lakestatsd: cannot listen on {config.http.listen} (http.listen): "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return _EXIT_RUNTIME
    from lakestatsd.logs import configure_logging  # noqa: PLC0415

    configure_logging(config.daemon.log_level)
    if not config.table:
        log.warning("no_tables_configured", hint="add [[table]] sections to the config")
    try:
        daemon = Daemon.from_config(config)
    except Exception as exc:  # wiring failed before anything ran: say why, once
        print(f"lakestatsd: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        sock.close()
        return _EXIT_RUNTIME
    return daemon.run(sock)
