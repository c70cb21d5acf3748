"""Daemon test fixtures: a real ``lakestatsd`` subprocess, and a leak check for threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lakestatsd_harness import DaemonProcess, daemon_env


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while True:
        leaked = [
            t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon
        ]
        # daemon threads of ours are named lakestatsd-*; they must end too
        leaked += [
            t
            for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith("lakestatsd-")
        ]
        leaked = [t for t in leaked if t not in _shared_pool_threads()]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"threads leaked: {[t.name for t in leaked]}"


def _shared_pool_threads() -> set[threading.Thread]:
    """pyiceberg's process-wide manifest-reading pool lives as long as the process, by design."""
    from pyiceberg.utils.concurrent import ExecutorFactory

    pool = ExecutorFactory._instance
    return set(getattr(pool, "_threads", ()))


@pytest.fixture
def run_daemon(tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    started: list[DaemonProcess] = []

    def run(config_text: str, *, wait_ready: bool = True, **env: str) -> DaemonProcess:
        config = tmp_path / "lakestatsd.toml"
        config.write_text(config_text)
        log = tmp_path / f"daemon-{len(started)}.log"  # one log per start: ports differ
        daemon = DaemonProcess(config, log, daemon_env(**env))
        started.append(daemon)
        return daemon.start() if wait_ready else daemon

    yield run
    for daemon in started:
        daemon.close()
