"""Process lifecycle: start order, signals, systemd notify, the shutdown budget.

Start: bind the port (fail fast, one line; ``bind_socket``) → serve HTTP (/healthz
answers at once) → start the queue, the watchers and the poller (whose first tick looks
at every table, which is how a restart resumes from the state log) → warm Spark → ready
(``READY=1``).

Stop (SIGTERM/SIGINT): not ready, stop hinting, let each running table finish the commit
it is on (core checks ``should_stop`` between commits), stop HTTP, stop Spark, exit 0 —
all within ``daemon.shutdown_timeout_s``. A commit still running when the time is up is
abandoned: the store writes a state version only after everything it references is
durable, so the next start redoes that commit and nothing is corrupted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import structlog
import uvicorn

from lakestats.locations import local_path
from lakestatsd import __version__
from lakestatsd.api import Backend, create_app
from lakestatsd.httpproto import timed_h11_protocol
from lakestatsd.presence import RECHECK_S, Presence
from lakestatsd.systemd import Notifier
from lakestatsd.wiring import Service

log = structlog.get_logger("lakestatsd")

EXIT_RUNTIME = 1
_FORCE_EXIT_MARGIN_S = 0.3  # leave room for the interpreter to exit inside the budget


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the daemon owns SIGTERM/SIGINT."""

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        return

    @contextmanager
    def capture_signals(self) -> Iterator[None]:  # uvicorn >= 0.29
        yield


class Lifecycle:
    """Runs a built ``Service`` behind its API until a signal, then stops it in budget."""

    def __init__(self, service: Service, backend: Backend, notifier: Notifier) -> None:
        self._service = service
        self._backend = backend
        self._notifier = notifier

    def run(self, sock: socket.socket) -> int:
        return asyncio.run(self._main(sock))

    async def _main(self, sock: socket.socket) -> int:
        service = self._service
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_signal(signum: int) -> None:
            log.info("signal_received", signal=signal.Signals(signum).name)
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal, signum)

        _prepare_state_dir(service.config.state_dir)
        presence = Presence.for_config(service.config)
        if presence is not None:
            await asyncio.to_thread(presence.announce)
        server = _Server(
            uvicorn.Config(
                create_app(self._backend),
                http=timed_h11_protocol(service.config.http.request_timeout_s),
                log_config=None,
                access_log=False,
                lifespan="off",
                server_header=False,
                timeout_graceful_shutdown=max(1, int(service.config.daemon.shutdown_timeout_s / 4)),
            )
        )
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if serving.done():
            log.error("http_failed_to_start")
            return EXIT_RUNTIME
        host, port = sock.getsockname()[:2]
        log.info("http_listening", host=host, port=port, version=__version__)

        service.queue.start()
        if service.watcher is not None:
            service.watcher.start(background=True)  # opening a table may hang
        service.poller.start()
        if service.maintenance_jobs is not None:
            service.maintenance_jobs.start()
        watch = service.spark_watch
        if watch is not None:
            # warm Spark (the first commit is then fast), then keep checking it
            watch.start()
            while not watch.first_attempt_done.is_set() and not stop.is_set():
                await asyncio.sleep(0.05)
        if not stop.is_set():
            ready, _ = await asyncio.to_thread(self._backend.readiness)
            self._notifier.send(f"READY=1\nSTATUS={'ready' if ready else 'started, not ready'}")
            log.info("ready", ready=ready, tables=list(service.queue.names))
        pinger = asyncio.create_task(self._watchdog_pings())
        looker = asyncio.create_task(_look_for_others(presence))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({stopped, serving}, return_when=asyncio.FIRST_COMPLETED)
        pinger.cancel()
        looker.cancel()
        try:
            return await self._shutdown(server, serving)
        finally:
            if presence is not None:
                presence.withdraw()

    async def _watchdog_pings(self) -> None:
        interval = self._notifier.watchdog_interval_s
        if interval is None:
            return
        while True:
            # pinged from the event loop and only while the dispatcher lives: a hung loop
            # or a dead scheduler lets systemd restart us
            if self._service.queue.alive and self._backend.liveness()[0]:
                self._notifier.send("WATCHDOG=1")
            await asyncio.sleep(interval)

    async def _shutdown(self, server: _Server, serving: asyncio.Task[None]) -> int:
        service = self._service
        budget = service.config.daemon.shutdown_timeout_s
        deadline = time.monotonic() + budget
        _arm_forced_exit(budget - _FORCE_EXIT_MARGIN_S)
        service.status.stopping = True
        self._notifier.send("STOPPING=1")
        log.info("shutdown_started", timeout_s=budget)

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic() - _FORCE_EXIT_MARGIN_S)

        await asyncio.to_thread(service.poller.stop)
        if service.maintenance_jobs is not None:
            await asyncio.to_thread(service.maintenance_jobs.stop)
        if service.watcher is not None:
            service.watcher.stop(min(2.0, remaining()))
        # most of the budget goes to letting a commit in progress finish
        finished = await asyncio.to_thread(service.queue.stop, remaining() * 0.8)
        if not finished:
            log.warning("shutdown_abandoned_runs", note="the next start redoes those commits")
        server.should_exit = True
        try:
            await asyncio.wait_for(serving, timeout=max(0.1, remaining() / 2))
        except TimeoutError:
            server.force_exit = True
        if service.spark_watch is not None:
            await asyncio.to_thread(service.spark_watch.stop, min(2.0, remaining()))
        stop_spark = service.core.stop_spark
        if stop_spark is not None and finished:
            # a job still running means Spark is busy: leave it, the JVM exits with us
            stopper = threading.Thread(target=stop_spark, daemon=True)
            stopper.start()
            await asyncio.to_thread(stopper.join, remaining())
        log.info("shutdown_done", clean=finished)
        return 0


async def _look_for_others(presence: Presence | None) -> None:
    """Warn of another daemon keeping these tables: at start, then every ``RECHECK_S``
    (one started later is seen by both)."""
    if presence is None:
        return
    while True:
        await asyncio.to_thread(presence.warn_about_others)
        await asyncio.sleep(RECHECK_S)


def _arm_forced_exit(after_s: float) -> None:
    """Exit 0 at the end of the budget even if a thread ignores every polite request."""

    def force() -> None:
        log.warning("shutdown_forced")
        sys.stdout.flush()
        os._exit(0)

    timer = threading.Timer(max(0.1, after_s), force)
    timer.daemon = True
    timer.start()


def _prepare_state_dir(state_dir: str) -> None:
    directory = local_path(state_dir)
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.error("state_dir_unusable", path=state_dir, error=str(exc))


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
