"""Hostile configuration values and dead threads: rejected at load, or fatal to liveness.

Every duration, size and count of the daemon's file is range-checked: ``inf``, ``nan``,
``1e10`` or a negative number is a one-line error naming the key (``--check-config``
exits 2), from the file and from the environment alike. A thread the daemon cannot work
without that dies anyway fails ``/healthz``.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from lakestats.exceptions import ConfigError, MetadataError
from lakestatsd.cli import main
from lakestatsd.config import load_service_config
from lakestatsd.scheduler import StopCheck, TableQueue

TABLE = '\n[[table]]\nname = "t"\nlocation = "/nowhere"\n'

# (section, key): every duration and bounded number of the daemon's file
KEYS = [
    ("watch", "poll_interval_s"),
    ("watch", "debounce_s"),
    ("watch", "backoff_initial_s"),
    ("watch", "backoff_max_s"),
    ("daemon", "shutdown_timeout_s"),
    ("maintenance", "compaction_interval_s"),
    ("maintenance", "grace_period"),
    ("maintenance", "log_retention"),
    ("http", "wait_timeout_s"),
    ("http", "max_body_bytes"),
    ("sketch", "batch_target_s"),
    ("sketch", "max_files_per_job"),
    ("sketch", "max_bytes_per_job"),
    ("sketch", "kll_k"),
    ("maintenance", "min_log_versions"),
    ("watch", "max_concurrent_tables"),
    ("watch", "stall_timeout_s"),
    ("shards", "count"),
    ("shards", "index"),
]
HOSTILE = ["inf", "-inf", "nan", "1e10", "-1", "1e308", '"99999999999w"']


@pytest.mark.parametrize(("value", "key"), list(itertools.product(HOSTILE, KEYS)))
def test_hostile_numbers_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, key: tuple[str, str]
) -> None:
    section, name = key
    path = tmp_path / "lakestatsd.toml"
    path.write_text(f"[{section}]\n{name} = {value}\n{TABLE}")
    assert main(["--config", str(path), "--check-config"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and name in err, err


@pytest.mark.parametrize("value", ["inf", "nan", "1e10", "-5", "Infinity"])
@pytest.mark.parametrize("var", ["WATCH__BACKOFF_MAX_S", "WATCH__BACKOFF_INITIAL_S"])
def test_hostile_numbers_from_the_environment(tmp_path: Path, var: str, value: str) -> None:
    path = tmp_path / "lakestatsd.toml"
    path.write_text(TABLE)
    with pytest.raises(ConfigError, match=var.split("__")[1].lower()):
        load_service_config(path, env={f"LAKESTATS_{var}": value})


def test_the_largest_accepted_values_still_run(tmp_path: Path) -> None:
    path = tmp_path / "lakestatsd.toml"
    path.write_text("[watch]\nbackoff_initial_s = 3600\nbackoff_max_s = '1d'\n" + TABLE)
    config = load_service_config(path)
    assert config.watch.backoff_max_s == 86400.0


@pytest.mark.parametrize("token", ['""', '"   "', '"two words"'])
def test_a_blank_token_does_not_silently_disable_auth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], token: str
) -> None:
    path = tmp_path / "lakestatsd.toml"
    path.write_text(f"[http]\ntoken = {token}\n{TABLE}")
    assert main(["--config", str(path), "--check-config"]) == 2
    assert "http.token" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"http\.token"):
        load_service_config(None, env={"LAKESTATS_HTTP__TOKEN": " "})


def test_backoff_survives_thousands_of_failures() -> None:
    """2 ** failures overflows a float after ~1024 failures: the delay is capped."""
    calls = itertools.count()

    def always_fails(name: str, should_stop: StopCheck) -> bool:
        next(calls)
        raise MetadataError("metadata.json unreadable")

    queue = TableQueue(
        ["t"],
        always_fails,
        debounce_s=0,
        max_concurrent=1,
        backoff_initial_s=1e-9,
        backoff_max_s=1e-9,
    )
    queue.start()
    try:
        queue.hint("t", "poll")
        deadline = time.monotonic() + 60
        while queue.status()["t"].failures < 1200:
            assert queue.crashed is None, queue.crashed
            assert time.monotonic() < deadline, queue.status()["t"]
            time.sleep(0.01)
        assert queue.crashed is None and queue.alive
    finally:
        assert queue.stop(5)


class FailingClock:
    """A monotonic clock that raises once armed: stands for any bug inside the dispatch
    loop (an injected dependency of the queue, like its process function)."""

    def __init__(self) -> None:
        self.armed = threading.Event()

    def __call__(self) -> float:
        if self.armed.is_set():
            raise OverflowError("timeout value is too large")
        return time.monotonic()


def test_a_dead_dispatcher_is_reported_for_liveness() -> None:
    clock = FailingClock()
    queue = TableQueue(
        ["t"],
        lambda name, stop: True,
        debounce_s=0,
        max_concurrent=1,
        backoff_initial_s=1,
        backoff_max_s=1,
        clock=clock,
    )
    queue.start()
    assert queue.crashed is None
    clock.armed.set()
    with queue._cond:  # wake the dispatcher: its next look at the clock raises
        queue._cond.notify_all()
    deadline = time.monotonic() + 5
    while queue.alive:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert queue.crashed is not None and "OverflowError" in queue.crashed
