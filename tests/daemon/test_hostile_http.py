"""Hostile HTTP against a real daemon on 127.0.0.1: slow clients, forged Host headers,
unknown parameters, and a bounded fuzz of random requests.

Asserted: partial requests are cut off after ``http.request_timeout_s``; no redirect
reflects the Host header; unknown query parameters are 400 on every route; random
requests never make the app raise ("Exception in ASGI application") nor answer 500; an
unknown ``?snapshot=`` does not reopen the table per request.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pytest
from lakestatsd_harness import DaemonProcess, daemon_env

from lakestats.config import Config, TableConfig
from lakestats.exceptions import SnapshotNotFoundError
from lakestats.tables import OpenedTable, open_configured
from lakestats.testing import IcebergWarehouse
from lakestatsd.config import ServiceConfig
from lakestatsd.wiring import Service, core_fns

Runner = Callable[..., DaemonProcess]
TIMEOUT_S = 1.0
ROUTES = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/v1/tables",
    "/v1/tables/t/stats",
    "/v1/tables/t/estimate",
]


def config_text(state_dir: Path, location: str) -> str:
    return f"""
state_dir = "{state_dir}"
[http]
listen = "127.0.0.1:0"
token = "hostile-http-token"
max_body_bytes = 64
request_timeout_s = {TIMEOUT_S}
[sketch]
enabled = false
[watch]
poll_interval_s = 30
[[table]]
name = "t"
location = "{location}"
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One daemon for the module (its tests only send requests): a start costs seconds."""
    root = tmp_path_factory.mktemp("hostile")
    wh = IcebergWarehouse(root / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1, 2, 3]})
    config = root / "lakestatsd.toml"
    config.write_text(config_text(root / "state", wh.location("t")))
    started = DaemonProcess(config, root / "daemon.log", daemon_env())
    try:
        started.start()
        started.wait_until(
            lambda: started.request("GET", "/v1/tables/t/stats").status == 200, timeout_s=30
        )
        yield started
    finally:
        started.close()


def raw(daemon: DaemonProcess, data: bytes, *, wait_s: float = 10) -> tuple[bytes, float]:
    """Send ``data`` and read until the server closes; (what it answered, seconds taken)."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=wait_s) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except TimeoutError:
            return received + b"<still open>", time.monotonic() - began
    return received, time.monotonic() - began


@pytest.mark.parametrize(
    "partial",
    [
        b"",  # connected, silent
        b"GET /healthz HT",  # half a request line
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ",  # headers never finished
        b"POST /v1/tables/t/commits HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n"
        b"Authorization: Bearer hostile-http-token\r\n\r\nonly-part",  # body never finished
    ],
)
def test_partial_requests_time_out(daemon: DaemonProcess, partial: bytes) -> None:
    answer, seconds = raw(daemon, partial)
    assert b"<still open>" not in answer, answer  # closed by the server, not by our timeout
    assert seconds < 10
    if not partial.startswith(b"POST"):
        assert answer.startswith(b"HTTP/1.1 408"), answer
    # and the daemon still serves everyone else, and nothing raised inside the app
    assert daemon.request("GET", "/healthz").status == 200
    assert "Exception in ASGI application" not in daemon.log_path.read_text(errors="replace")


def test_a_complete_request_on_a_kept_alive_connection_is_not_cut(daemon: DaemonProcess) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(request)
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                chunk = sock.recv(4096)
                assert chunk, answer  # closed on us
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
            time.sleep(TIMEOUT_S * 0.7)  # idle, not mid-request: not cut


@pytest.mark.parametrize("path", ["/healthz/", "/v1/tables/", "/v1/tables/t/stats/"])
def test_no_redirect_reflects_the_host_header(daemon: DaemonProcess, path: str) -> None:
    answer, _ = raw(
        daemon, f"GET {path} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n".encode()
    )
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert b"evil.example" not in head, head
    assert head.startswith(b"http/1.1 404"), head


@pytest.mark.parametrize("route", ROUTES)
def test_unknown_query_parameters_are_400_everywhere(daemon: DaemonProcess, route: str) -> None:
    resp = daemon.request("GET", f"{route}?bogus=1")
    assert resp.status == 400, (route, resp.status, resp.body)
    assert resp.json()["error"] == "bad_query"


def test_fuzz_never_raises_in_the_app(daemon: DaemonProcess) -> None:
    rng = random.Random(16)
    methods = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "G3T"]
    pieces = ["v1", "tables", "t", "stats", "commits", "healthz", "..", "%2e%2e", "%00", "%ff"]
    pieces += ["a" * 300, "ü", "%", "t%2Fstats", "openapi.json", "readyz", "metrics", ""]
    pieces += ["estimate", "t/estimate"]
    keys = ["snapshot", "wait", "timeout_s", "bogus", "", "snapshot[]", "%ff", "wait"]
    keys += ["predicate"]
    values = ["1", "-1", "true", "nan", "inf", "1e309", "9" * 40, "", "%ff", "x" * 500]
    values += ["id%20%3D%201", "id%3C1e309", "id%20IN%20(" + "1,%20" * 1500 + "1)"]
    values += ["id%20BETWEEN%20'%00'%20AND%20'%ff'", "id%20IS%20NULL", "%27%27%27"]
    headers_pool = [
        ("Authorization", "Bearer hostile-http-token"),
        ("Authorization", "Bearer"),
        ("Authorization", "Basic Zm9vOmJhcg=="),
        ("Content-Length", "-1"),
        ("Content-Length", "abc"),
        ("Content-Length", "99999999999999999999"),
        ("Content-Type", "application/json"),
        ("Host", "evil.example"),
        ("Transfer-Encoding", "chunked"),
        ("Accept", "*/*"),
    ]
    statuses: list[int] = []
    for _ in range(400):
        path = "/" + "/".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
        query = "&".join(
            f"{rng.choice(keys)}={rng.choice(values)}" for _ in range(rng.randint(0, 3))
        )
        target = path + ("?" + query if query else "")
        head = [f"{rng.choice(methods)} {target} HTTP/1.1", "Host: 127.0.0.1"]
        head += [f"{k}: {v}" for k, v in rng.sample(headers_pool, rng.randint(0, 3))]
        head.append("Connection: close")
        body = rng.choice([b"", b"{}", b"x" * 100, b"0\r\n\r\n"])
        answer, _ = raw(daemon, ("\r\n".join(head) + "\r\n\r\n").encode() + body, wait_s=10)
        status_line = answer.split(b"\r\n", 1)[0]
        assert b"<still open>" not in answer, target
        if status_line.startswith(b"HTTP/1.1 "):
            statuses.append(int(status_line.split()[1]))
    assert len(statuses) > 300  # most requests were answered, not dropped
    assert not [s for s in statuses if s >= 500 and s != 503], sorted(set(statuses))
    log = daemon.log_path.read_text(errors="replace")
    assert "Exception in ASGI application" not in log, daemon.tail(80)
    assert daemon.request("GET", "/healthz").status == 200


def test_hostile_predicates_are_answered_never_raised(daemon: DaemonProcess) -> None:
    """The estimate route parses text from anyone: every predicate gets 200 or a 400 that
    says why, within its time, and nothing raises inside the app."""
    hostile = [
        "id = 99999999999999999999999999",
        "id = -1e308",
        "id = 1e-400",
        "id IN ()",
        "id IN (1,,2)",
        "id IN (" + ", ".join(["'" + "x" * 30 + "'"] * 120) + ")",
        "id = 1; DROP TABLE t",
        "id = '1",
        "id BETWEEN 5 AND 1",
        "id BETWEEN 'a' AND 'b'",
        "id = true",
        "id\x00 = 1",
        "ü = 1",
        "id IS NOT NULL OR 1=1",
        "id " + "<" * 3000 + " 1",
        "x" + "=" * 4000 + "1!",
        "id = " + "1" * 4000 + "!",
        "id = NaN",
        "id = --1",
        "id IN ('" + "''" * 1000 + "')",
    ]
    for text in hostile:
        began = time.monotonic()
        resp = daemon.request("GET", "/v1/tables/t/estimate?predicate=" + quote(text))
        assert resp.status in (200, 400), (text[:80], resp.status, resp.body[:200])
        assert time.monotonic() - began < 10, text[:80]  # a runaway parse takes far longer
        if resp.status == 400:
            assert resp.json()["error"] in ("bad_predicate", "bad_query"), resp.body[:200]
    log = daemon.log_path.read_text(errors="replace")
    assert "Exception in ASGI application" not in log, daemon.tail(80)


def test_unknown_snapshots_do_not_reopen_the_table(tmp_path: Path) -> None:
    """An unauthenticated ``?snapshot=<random>`` is answered from the open handle: the
    table is opened once, however many such requests arrive."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1]})
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "table": [{"name": "t", "location": wh.location("t")}],
        }
    )
    opened: list[OpenedTable] = []

    def counting_opener(table: TableConfig, cfg: Config) -> OpenedTable:
        handle = open_configured(table, cfg)
        opened.append(handle)
        return handle

    core = core_fns(config)
    service = Service(config, replace(core, opener=counting_opener))
    assert service.runtime.process("t", lambda: False)
    before = len(opened)
    for _ in range(20):
        snapshot = random.randint(1, 2**62)
        with pytest.raises(SnapshotNotFoundError):
            service.runtime.read_stats("t", snapshot)
    assert len(opened) == before + 1  # the reader handle, opened once
    assert service.runtime.read_stats("t", None)["table"] == "t"
