"""End to end: a real ``lakestatsd`` process, real Iceberg tables written by pyiceberg."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pytest
from lakestatsd_harness import DaemonProcess, past

from lakestats.analyze import analyze_table, make_sketcher, read_stats
from lakestats.config import Config, TableConfig
from lakestats.exceptions import TableNotFoundError
from lakestats.notify import DaemonUnavailableError, NotifyAuthError, notify
from lakestats.tables import open_configured
from lakestats.testing import IcebergWarehouse

TOKEN = "e2e-token"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
VOLATILE = {"computed_at_ms"}

Runner = Callable[..., DaemonProcess]


def rows(i: int, n: int = 5) -> dict[str, list[Any]]:
    return {
        "id": [i * n + k for k in range(n)],
        "name": [f"n{(i * n + k) % 7}" for k in range(n)],
        "score": [float((i * 31 + k) % 13) for k in range(n)],
    }


def config_text(
    state_dir: Path,
    tables: dict[str, str],
    *,
    sketches: bool = False,
    watch: bool = True,
    poll_s: float = 30,
    extra: str = "",
) -> str:
    table_sections = "".join(
        f'\n[[table]]\nname = "{name}"\nlocation = "{loc}"\n' for name, loc in tables.items()
    )
    return f"""
state_dir = "{state_dir}"
[http]
listen = "127.0.0.1:0"
token = "{TOKEN}"
max_body_bytes = 1024
wait_timeout_s = 30
[sketch]
enabled = {str(sketches).lower()}
[spark]
master = "local[2]"
[spark.conf]
"spark.ui.enabled" = "false"
"spark.sql.shuffle.partitions" = "2"
[watch]
enabled = {str(watch).lower()}
poll_interval_s = {poll_s}
debounce_s = 0.2
backoff_initial_s = 0.2
backoff_max_s = 1
[daemon]
shutdown_timeout_s = 10
{extra}
{table_sections}
"""


def from_scratch(location: str, state_dir: Path, *, sketches: bool) -> dict[str, Any]:
    """What a fresh ``lakestats analyze`` computes for the table's current snapshot."""
    config = Config.model_validate(
        {
            "state_dir": str(state_dir),
            "sketch": {"enabled": sketches},
            "spark": {
                "master": "local[2]",
                "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
            },
        }
    )
    opened = open_configured(TableConfig(name="t", location=location), config)
    sketcher = make_sketcher(config) if sketches else None
    analyze_table(opened, config=config, sketcher=sketcher)
    return read_stats(opened)


def stable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in VOLATILE}


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    started = time.monotonic()
    while not predicate():
        if past(started, timeout_s):
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def stats_snapshot(daemon: DaemonProcess, name: str = "t") -> int | None:
    resp = daemon.request("GET", f"/v1/tables/{name}/stats")
    return int(resp.json()["snapshot_id"]) if resp.status == 200 else None


def cache_bytes(daemon: DaemonProcess) -> dict[str, float]:
    """``lakestats_cache_bytes`` by kind."""
    held = {}
    for line in daemon.request("GET", "/metrics").body.decode().splitlines():
        if line.startswith("lakestats_cache_bytes{"):
            labels, _, value = line.rpartition(" ")
            held[labels.split('kind="', 1)[1].split('"', 1)[0]] = float(value)
    return held


def client_config(daemon: DaemonProcess, token: str = TOKEN) -> Config:
    return Config.model_validate({"http": {"listen": f"127.0.0.1:{daemon.port}", "token": token}})


def test_a_small_cache_budget_bounds_what_the_daemon_keeps(
    tmp_path: Path, run_daemon: Runner
) -> None:
    """``cache_size``: the daemon's cache of manifests and stats files stays within it
    (the gauge says what it holds), and the stats it serves are a from-scratch build's."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    current = wh.append("t", rows(0))
    text = config_text(tmp_path / "state", {"t": wh.location("t")})
    daemon = run_daemon(text.replace("\n[http]", '\ncache_size = "48KiB"\n[http]', 1))
    for i in range(1, 8):
        current = wh.append("t", rows(i))
    wait_until(lambda: stats_snapshot(daemon) == current, 30, "stats of the last commit")
    assert stable(daemon.get_json("/v1/tables/t/stats")) == stable(
        from_scratch(wh.location("t"), tmp_path / "scratch", sketches=False)
    )
    held = cache_bytes(daemon)
    assert 0 < sum(held.values()) <= 48 * 1024, held


def test_watching_converges_and_serves_everything(tmp_path: Path, run_daemon: Runner) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", rows(0))
    location = wh.location("t")
    daemon = run_daemon(
        config_text(tmp_path / "state", {"t": location, "broken": str(tmp_path / "missing")})
    )
    # twenty commits from a writer while the daemon watches
    for i in range(1, 21):
        current = wh.append("t", rows(i))
    wait_until(lambda: stats_snapshot(daemon) == current, 30, "stats of the last commit")
    assert stable(daemon.get_json("/v1/tables/t/stats")) == stable(
        from_scratch(location, tmp_path / "scratch", sketches=False)
    )
    processed = daemon.events("commit_processed")
    assert {e["snapshot_id"] for e in processed} >= {current}
    assert all({"table", "added_files", "added_records", "timings"} <= e.keys() for e in processed)
    # bursts coalesced: fewer runs than commits
    assert len(daemon.events("table_run_done")) < 21

    # readiness: ready, the broken table reported with its error, the healthy one fine
    ready = daemon.request("GET", "/readyz")
    assert ready.status == 200
    detail = ready.json()
    assert detail["tables"]["broken"]["healthy"] is False
    assert "does not exist" in detail["tables"]["broken"]["last_error"]
    assert detail["tables"]["t"]["healthy"] is True
    assert detail["tables"]["t"]["freshness_lag_seconds"] == 0
    assert daemon.metric("lakestats_table_healthy", table="broken") == 0
    assert daemon.metric("lakestats_table_healthy", table="t") == 1
    assert daemon.metric("lakestats_errors_total", table="broken", kind="TableNotFoundError")
    assert daemon.metric("lakestats_commits_processed_total", table="t") == 21
    assert daemon.metric("lakestats_freshness_lag_seconds", table="t") == 0
    assert daemon.metric("lakestats_queue_depth") is not None
    held = cache_bytes(daemon)
    assert held["store_merged_views"] > 0 and sum(held.values()) <= 512 * 2**20
    tables = daemon.get_json("/v1/tables")["tables"]
    assert [t["name"] for t in tables] == ["t", "broken"]
    assert daemon.get_json("/openapi.json")["openapi"].startswith("3.")

    # an older snapshot's stats by id; bad ids are 4xx
    first = processed[0]["snapshot_id"]
    assert stats_snapshot(daemon) == current
    assert daemon.get_json(f"/v1/tables/t/stats?snapshot={first}")["snapshot_id"] == first
    assert daemon.request("GET", "/v1/tables/t/stats?snapshot=123").status == 404
    assert daemon.request("GET", "/v1/tables/t/stats?snapshot=abc").status == 400
    assert daemon.request("GET", "/v1/tables/nope/stats").status == 404

    # estimates from the served stats: null counts are exact; a range needs a histogram,
    # which metadata-only stats do not have
    served = daemon.get_json("/v1/tables/t/stats")
    answer = daemon.get_json("/v1/tables/t/estimate?predicate=" + quote("score IS NOT NULL"))
    assert answer["snapshot_id"] == served["snapshot_id"] == current
    assert answer["rows"] == answer["table_rows"] == served["record_count"]
    older = daemon.get_json(f"/v1/tables/t/estimate?snapshot={first}&predicate=id%20IS%20NULL")
    assert older["snapshot_id"] == first and older["rows"] == 0
    resp = daemon.request("GET", "/v1/tables/t/estimate?predicate=" + quote("id < 3"))
    assert resp.status == 400 and resp.json()["error"] == "bad_predicate"
    assert daemon.request("GET", "/v1/tables/t/estimate").status == 400

    # on-commit notifications: auth, limits, unknown tables, wait
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert daemon.request("POST", "/v1/tables/t/commits").status == 401
    assert daemon.request("POST", "/v1/tables/nope/commits", headers=auth).status == 404
    assert (
        daemon.request("POST", "/v1/tables/t/commits", headers=auth, body=b"x" * 2048).status == 413
    )
    assert daemon.request("POST", "/v1/tables/t/commits?wait=maybe", headers=auth).status == 400
    assert daemon.request("POST", "/v1/tables/t/commits", headers=auth).status == 202
    newest = wh.append("t", rows(99))
    resp = daemon.request("POST", "/v1/tables/t/commits?wait=true", headers=auth)
    assert resp.status == 200 and resp.json()["last_snapshot_id"] == newest

    # the hook client in core
    newest = wh.append("t", rows(100))
    result = notify(client_config(daemon), "t", wait=True, timeout_s=20)
    assert result.waited and result.last_snapshot_id == newest
    assert notify(client_config(daemon), "t", wait=False, timeout_s=5).status == 202
    with pytest.raises(TableNotFoundError, match="nope"):
        notify(client_config(daemon), "nope", wait=False, timeout_s=5)
    with pytest.raises(NotifyAuthError, match="token"):
        wrong = client_config(daemon, token="wrong")
        notify(wrong, "t", wait=False, timeout_s=5)

    # SIGTERM: exit 0 well within daemon.shutdown_timeout_s
    started = time.monotonic()
    assert daemon.terminate(timeout_s=15) == 0
    assert time.monotonic() - started < 10
    assert daemon.events("shutdown_done")
    with pytest.raises(DaemonUnavailableError, match="cannot reach"):
        notify(client_config(daemon), "t", wait=False, timeout_s=2)


def test_polling_alone_catches_up(tmp_path: Path, run_daemon: Runner) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    location = wh.location("t")
    daemon = run_daemon(config_text(tmp_path / "state", {"t": location}, watch=False, poll_s=0.5))
    for i in range(5):
        current = wh.append("t", rows(i))
    wait_until(lambda: stats_snapshot(daemon) == current, 20, "polling to catch up")
    assert not daemon.events("watching")
    assert stable(daemon.get_json("/v1/tables/t/stats")) == stable(
        from_scratch(location, tmp_path / "scratch", sketches=False)
    )
    assert daemon.terminate() == 0


def test_systemd_notify_ready_watchdog_stopping(tmp_path: Path, run_daemon: Runner) -> None:
    sock_path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(sock_path))
        sock.settimeout(20)
        daemon = run_daemon(
            config_text(tmp_path / "state", {}),
            NOTIFY_SOCKET=str(sock_path),
            WATCHDOG_USEC="200000",
        )
        messages: list[str] = []
        while not any("WATCHDOG=1" in m for m in messages):
            messages.append(sock.recv(4096).decode())
        assert any(m.startswith("READY=1") for m in messages)
        assert daemon.terminate() == 0
        while not any("STOPPING=1" in m for m in messages):
            messages.append(sock.recv(4096).decode())


def test_bad_config_is_one_line_and_exit_2(tmp_path: Path, run_daemon: Runner) -> None:
    daemon = run_daemon("[watch]\npoll_interval_s = -1\n", wait_ready=False)
    assert daemon.proc.wait(30) == 2
    out = daemon.log_path.read_text().strip().splitlines()
    assert len(out) == 1 and "watch.poll_interval_s" in out[0] and "Traceback" not in out[0]


@pytest.mark.spark
@pytest.mark.slow
def test_sketches_kill_mid_commit_and_restart_converges(tmp_path: Path, run_daemon: Runner) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    location = wh.location("t")
    text = config_text(tmp_path / "state", {"t": location}, sketches=True, poll_s=1)
    daemon = run_daemon(text)
    assert daemon.events("spark_ready")
    # Spark's own output (log4j, JVM warnings) goes to its own file: stdout is JSON only
    spark_log = tmp_path / "state" / "lakestatsd-spark.log"
    assert spark_log.is_file() and "log4j" in spark_log.read_text()
    lines = [line for line in daemon.log_path.read_text().splitlines() if line.strip()]
    assert all(isinstance(json.loads(line), dict) for line in lines), lines
    for i in range(6):
        wh.append("t", rows(i, n=50))
    # kill -9 while the backlog is being processed
    daemon.wait_event("commit_processed", timeout_s=60)
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(10)
    for i in range(6, 9):
        current = wh.append("t", rows(i, n=50))
    restarted = run_daemon(text)
    wait_until(lambda: stats_snapshot(restarted) == current, 90, "restart to converge")
    got = stable(restarted.get_json("/v1/tables/t/stats"))
    want = stable(from_scratch(location, tmp_path / "scratch", sketches=True))
    # KLL compaction is randomized, so quantiles and histograms of a sketch merged commit
    # by commit differ from one built at once, within the sketch's rank error; every other
    # value (counts, bounds, theta NDV at this size) must be identical
    for doc in (got, want):
        for column in doc["columns"].values():
            quantiles = column.pop("quantiles", None) or {}
            column.pop("histogram", None)
            column.setdefault("_quantile_ranks", sorted(quantiles))
    assert got == want
    assert got["columns"]["id"]["ndv"] == 450 and got["record_count"] == 450
    assert restarted.terminate() == 0
