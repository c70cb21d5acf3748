"""A real ``lakestatsd`` subprocess for tests (imported by conftest and the e2e tests)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakestats.store import StatsStore

REPO = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join([str(REPO / "core"), str(REPO / "daemon")])


def past(started: float, timeout_s: float) -> bool:
    """Whether a wait begun at ``started`` (monotonic) has run out: after ``timeout_s``,
    stretched by the machine's load per core when that is above 1. These waits assert that
    something happens, not how fast (speed is benchmarked): at a load of 10 on 2 cores a
    daemon's start takes five times as long, and that is no failure."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return time.monotonic() - started > timeout_s * max(1.0, per_core)


class WriterLoop(threading.Thread):
    """A writer committing small appends at random short intervals until ``stop`` is set,
    as a table's real writers do beside the daemon. Subclasses commit batch ``i`` in
    ``commit``; an exception ends the loop and is kept in ``error`` for the test."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stop = threading.Event()
        self.commits = 0
        self.error: BaseException | None = None

    def commit(self, batch: dict[str, list[Any]]) -> None:
        raise NotImplementedError

    def run(self) -> None:
        rng = random.Random(7)
        try:
            while not self.stop.is_set():
                i = self.commits
                self.commit({"id": [i * 10 + k for k in range(10)], "cat": [f"c{i % 4}"] * 10})
                self.commits += 1
                self.stop.wait(rng.uniform(0.1, 0.6))
        except BaseException as exc:
            self.error = exc


def processed(state_dir: Path) -> int:
    """How many commits the store's current state holds (0 before its first state)."""
    # hidden entries are not table folders (the running daemons' announcements)
    tables = (
        [p for p in state_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
        if state_dir.exists()
        else []
    )
    if not tables:
        return 0
    state = StatsStore(state_dir, tables[0].name).current()
    return 0 if state is None else len(state.stats)


def kill_while_writing(
    run_daemon: Callable[..., DaemonProcess],
    config_text: str,
    writer: WriterLoop,
    state_dir: Path,
    kills: int,
) -> list[int]:
    """Start ``writer``, then the daemon ``kills`` times, each life ended by SIGKILL: every
    third right after a commit was processed, the others at a random moment. Returns
    ``processed`` after each kill; the writer is stopped and joined (its ``error`` and
    ``commits`` are the test's to check)."""
    writer.start()
    rng = random.Random(1)
    progress: list[int] = []
    try:
        for kill in range(kills):
            daemon = run_daemon(config_text, wait_ready=False)
            daemon.wait_event("http_listening", timeout_s=30)
            if kill % 3 == 0:
                # right after a commit's state version: mid-batch, before its registration
                daemon.wait_event("commit_processed", timeout_s=30)
                time.sleep(rng.uniform(0, 0.2))
            else:
                time.sleep(rng.uniform(0.05, 1.5))  # anywhere: starting, mid-run, idle
            daemon.proc.kill()
            daemon.proc.wait(10)
            progress.append(processed(state_dir))
    finally:
        writer.stop.set()
        writer.join(30)
    return progress


def daemon_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKESTATS_")}
    env.pop("NOTIFY_SOCKET", None)
    env["PYTHONPATH"] = PYTHONPATH
    env.update(extra)
    return env


def fast_config_text(
    state_dir: Path | str, tables: str, *, maintenance: str = "", http: str = "", watch: str = ""
) -> str:
    """A daemon config for tests: a port the kernel picks, no sketches (no JVM: a restart
    takes a second), fast polling and backoff, scheduled maintenance off unless
    ``maintenance`` (more ``[maintenance]`` lines) says otherwise, a 1 s grace period and
    a quick shutdown. ``tables``: the ``[catalog.*]`` and ``[[table]]`` sections (and any
    other section); ``http``, ``watch``: more ``[http]``, ``[watch]`` lines."""
    return f"""
state_dir = "{state_dir}"
[http]
listen = "127.0.0.1:0"
{http}
[sketch]
enabled = false
[watch]
poll_interval_s = 0.5
debounce_s = 0.05
backoff_initial_s = 0.1
backoff_max_s = 0.5
{watch}
[maintenance]
{maintenance or "enabled = false"}
grace_period = "1s"
[daemon]
shutdown_timeout_s = 5
{tables}
"""


class Response:
    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    def json(self) -> Any:
        return json.loads(self.body)


class DaemonProcess:
    """``python -m lakestatsd`` on 127.0.0.1 with a port chosen by the kernel."""

    def __init__(self, config: Path, log: Path, env: dict[str, str]) -> None:
        self.config = config
        self.log_path = log
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakestatsd", "--config", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(config.parent),
        )
        self.host = "127.0.0.1"
        self.port = 0

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                out.append(event)
        return out

    def wait_event(self, name: str, timeout_s: float = 60, count: int = 1) -> list[dict[str, Any]]:
        started = time.monotonic()
        while True:
            found = self.events(name)
            if len(found) >= count:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited ({self.proc.returncode}):\n{self.tail()}")
            if past(started, timeout_s):
                raise AssertionError(f"no {count}× {name!r} in time:\n{self.tail()}")
            time.sleep(0.05)

    def wait_until(self, done: Callable[[], bool], timeout_s: float = 60) -> None:
        """Poll ``done`` until it holds; after ``timeout_s`` (``past``) fail with the log's tail."""
        started = time.monotonic()
        while not done():
            assert not past(started, timeout_s), self.tail()
            time.sleep(0.2)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def start(self, timeout_s: float = 60) -> DaemonProcess:
        listening = self.wait_event("http_listening", timeout_s)[0]
        self.host, self.port = str(listening["host"]), int(listening["port"])
        self.wait_event("ready", timeout_s)
        return self

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 30,
    ) -> Response:
        req = urllib.request.Request(
            f"http://{self.host}:{self.port}{path}", data=body, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - http only
                return Response(resp.status, resp.read(), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            with exc:
                return Response(exc.code, exc.read(), dict(exc.headers))

    def get_json(self, path: str) -> Any:
        resp = self.request("GET", path)
        assert resp.status == 200, (resp.status, resp.body)
        return resp.json()

    def metric(self, name: str, **labels: str) -> float | None:
        text = self.request("GET", "/metrics").body.decode()
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            metric, _, rest = key.partition("{")
            got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
            if metric == name and got == want:
                return float(value)
        return None

    def terminate(self, timeout_s: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()
