"""What every ``make demo`` shares: lakestatsd running beside the writes.

``run_beside_daemon`` starts ``lakestatsd --config <file>`` in the background (its output
in a log file), waits until it is ready, runs the demo's writes, prints the final stats
of one table as ``lakestats show`` prints them and stops the daemon with SIGTERM. An
example module, not part of the library (``examples/`` is on ``sys.path`` when a demo
script runs).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakestats.config import Config
from lakestats.render import render_stats

READY_TIMEOUT_S = 180


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback URL
        return json.loads(response.read())


def base_url(config: Config) -> str:
    return f"http://{config.http.host}:{config.http.port}"


def wait_ready(base: str, daemon: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise SystemExit(f"demo: lakestatsd exited early; see {log}")
        try:
            get_json(f"{base}/readyz")
            return
        except (urllib.error.URLError, OSError):
            print(".", end="", flush=True)
            time.sleep(1)
    raise SystemExit(f"demo: lakestatsd was not ready within {READY_TIMEOUT_S} s; see {log}")


def run_beside_daemon(
    config_path: Path,
    config: Config,
    log: Path,
    writes: Callable[[subprocess.Popen[bytes]], None],
    *,
    final_table: str = "orders",
) -> int:
    """Run ``writes`` (given the daemon process) while lakestatsd serves ``config``; the
    daemon's exit code after SIGTERM."""
    base = base_url(config)
    print(f"demo: starting lakestatsd --config {config_path} (log: {log})", end="", flush=True)
    with log.open("wb") as log_file:
        daemon = subprocess.Popen(  # noqa: S603 - our own console script
            [sys.executable, "-m", "lakestatsd", "--config", str(config_path)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_ready(base, daemon, log)
            print(" ready", flush=True)
            writes(daemon)
            doc = get_json(f"{base}/v1/tables/{final_table}/stats")
            print("\ndemo: final stats, as `lakestats show` prints them:\n", flush=True)
            print(render_stats(doc), flush=True)
        finally:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=60)
    print(f"demo: lakestatsd stopped with exit code {code} after SIGTERM", flush=True)
    return code
