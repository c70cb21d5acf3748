"""A writer waiting on a table whose runs fail is told why, not only that it timed out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from lakestatsd_harness import DaemonProcess, fast_config_text

from lakestats.config import Config
from lakestats.notify import NotifyTimeoutError, notify


def test_a_wait_on_a_failing_table_names_its_error(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    missing = tmp_path / "nowhere" / "t"
    tables = f'[[table]]\nname = "t"\nlocation = "{missing}"\n'
    daemon = run_daemon(fast_config_text(tmp_path / "state", tables))
    daemon.wait_event("table_run_failed")
    client = Config.model_validate({"http": {"listen": f"127.0.0.1:{daemon.port}"}})
    with pytest.raises(NotifyTimeoutError) as raised:
        notify(client, "t", wait=True, timeout_s=1)
    message = str(raised.value)
    assert "was not up to date within 1s" in message
    assert "its last run failed: " in message and str(missing) in message


def test_a_wait_capped_by_the_clients_wait_timeout_says_how_long_it_waited(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    """``--timeout 30`` with ``http.wait_timeout_s = 1`` waits 1 s: the message says 1 s and
    why, not the 30 s asked for."""
    tables = f'[[table]]\nname = "t"\nlocation = "{tmp_path / "nowhere"}"\n'
    daemon = run_daemon(fast_config_text(tmp_path / "state", tables))
    daemon.wait_event("table_run_failed")
    client = Config.model_validate(
        {"http": {"listen": f"127.0.0.1:{daemon.port}", "wait_timeout_s": 1}}
    )
    with pytest.raises(NotifyTimeoutError) as raised:
        notify(client, "t", wait=True, timeout_s=30)
    message = str(raised.value)
    assert "was not up to date within 1s (capped by http.wait_timeout_s)" in message
