"""HTTP API behaviour on bad input, auth and limits, driven through the ASGI interface.

A fake backend stands in for the daemon; the real one is exercised end to end in
test_e2e.py. (httpx, which starlette's TestClient needs, is not a dependency.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from lakestats.config import Config
from lakestats.exceptions import MetadataError, SnapshotNotFoundError
from lakestats.shards import ShardPlan
from lakestatsd.api import create_app
from lakestatsd.openapi import openapi_document

TOKEN = "s3cret-token"


class FakeBackend:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.hints: list[str] = []
        self.done = True
        self.accepting = True
        self.ready = True
        self.alive = True
        self.dead_status = "failing"  # what the daemon's liveness answers when not alive
        self.shard_count = 1
        self.other_shards: dict[str, int] = {}  # tables other replicas keep: name → shard

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        return self.ready, {"ready": self.ready}

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        return self.alive, {"status": "ok" if self.alive else self.dead_status}

    def tables(self) -> list[dict[str, Any]]:
        return [{"name": t.name} for t in self.config.table]

    def read_stats(self, name: str, snapshot_id: int | None) -> dict[str, Any]:
        if snapshot_id == 404:
            raise SnapshotNotFoundError("snapshot 404 does not exist or was expired")
        if snapshot_id == 503:
            raise MetadataError("metadata.json unreadable")
        return {"table": name, "snapshot_id": snapshot_id}

    def hint(self, name: str, source: str) -> int | None:
        if not self.accepting:
            return None
        self.hints.append(name)
        return len(self.hints)

    def wait_state(self, name: str, ticket: int) -> str | None:
        return "done" if self.done else None

    def table_status(self, name: str) -> dict[str, Any]:
        return {"name": name, "last_snapshot_id": 7}

    def metrics_payload(self) -> bytes:
        return b"lakestats_ready 1.0\n"

    def shards(self) -> ShardPlan:
        # as the daemon's: its config holds its own tables only, the plan knows the others
        own = tuple((t.name, 0) for t in self.config.table)
        return ShardPlan(0, self.shard_count, own + tuple(self.other_shards.items()))


def make_config(**http: Any) -> Config:
    return Config.model_validate(
        {
            "http": {"max_body_bytes": 16, "wait_timeout_s": 0.3, **http},
            "table": [{"name": "sales", "location": "/data/sales"}],
        }
    )


def call(
    backend: FakeBackend,
    method: str,
    path: str,
    query: str = "",
    *,
    headers: Sequence[tuple[str, str]] = (),
    chunks: Sequence[bytes] = (b"",),
) -> tuple[int, dict[str, str], Any]:
    app = create_app(backend)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8765),
    }
    pending = list(chunks)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    headers_out = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    ctype = headers_out.get("content-type", "")
    return start["status"], headers_out, json.loads(body) if "json" in ctype else body


def test_health_ready_metrics() -> None:
    backend = FakeBackend(make_config())
    assert call(backend, "GET", "/healthz")[0] == 200
    assert call(backend, "GET", "/readyz")[0] == 200
    backend.ready = False
    assert call(backend, "GET", "/readyz")[0] == 503
    status, headers, body = call(backend, "GET", "/metrics")
    assert status == 200 and body == b"lakestats_ready 1.0\n"
    backend.alive = False  # e.g. Spark unusable past daemon.spark_unavailable_timeout_s
    status, _, body = call(backend, "GET", "/healthz")
    assert status == 503 and body == {"status": "failing"}
    assert headers["content-type"].startswith("text/plain")


def test_unknown_table_is_404_for_every_route() -> None:
    backend = FakeBackend(make_config())
    for name in ("nope", "..", "%2e%2e%2fetc%2fpasswd", "sales.x"):
        assert call(backend, "GET", f"/v1/tables/{name}/stats")[0] == 404
        status, _, body = call(backend, "POST", f"/v1/tables/{name}/commits")
        assert status == 404 and body["error"] == "unknown_table"
    assert backend.hints == []


def test_a_table_another_replica_keeps_is_421_naming_it() -> None:
    backend = FakeBackend(make_config(token=TOKEN))
    backend.shard_count, backend.other_shards = 3, {"returns": 2}
    auth = [("Authorization", f"Bearer {TOKEN}")]
    for method, path in (
        ("GET", "/v1/tables/returns/stats"),
        ("GET", "/v1/tables/returns/advice"),
        ("POST", "/v1/tables/returns/commits"),
    ):
        status, _, body = call(backend, method, path, headers=auth)
        assert status == 421, (path, body)
        assert body["error"] == "other_shard"
        assert (body["shard"], body["shard_count"]) == (2, 3)
        assert "shard 2 of 3" in body["message"] and "this daemon is shard 0" in body["message"]
    assert call(backend, "GET", "/v1/tables/nope/stats")[0] == 404  # not configured at all
    assert call(backend, "GET", "/v1/tables/sales/stats")[0] == 200
    # the token is checked first: a misdirected POST without it is still a 401
    assert call(backend, "POST", "/v1/tables/returns/commits")[0] == 401
    assert backend.hints == []
    status, _, body = call(backend, "GET", "/v1/tables")
    assert body["shard"] == {"index": 0, "count": 3}
    assert [t["name"] for t in body["tables"]] == ["sales"]


@pytest.mark.parametrize(
    ("method", "path", "query"),
    [
        ("GET", "/v1/tables/sales/stats", "snapshot=abc"),
        ("GET", "/v1/tables/sales/stats", "snapshot=1.5"),
        ("GET", "/v1/tables/sales/stats", "snapshot=99999999999999999999"),
        ("GET", "/v1/tables/sales/stats", "snapshot=1&snapshot=2"),
        ("GET", "/v1/tables/sales/stats", "snapshot=%EF%BC%91"),  # a full-width digit one
        ("GET", "/v1/tables/sales/stats", "snapshot=1%0A"),  # a trailing newline
        ("GET", "/v1/tables/sales/stats", "snap=1"),
        ("POST", "/v1/tables/sales/commits", "wait=maybe"),
        ("POST", "/v1/tables/sales/commits", "wait=true&timeout_s=-1"),
        ("POST", "/v1/tables/sales/commits", "wait=true&timeout_s=nan"),
        ("POST", "/v1/tables/sales/commits", "wait=true&timeout_s=100000"),
        ("POST", "/v1/tables/sales/commits", "timeout_s=5"),  # waits only with wait=true
        ("POST", "/v1/tables/sales/commits", "wait=false&timeout_s=5"),
        ("POST", "/v1/tables/sales/commits", "path=/etc/passwd"),
        ("GET", "/healthz", "x=1"),
    ],
)
def test_malformed_queries_are_400(method: str, path: str, query: str) -> None:
    backend = FakeBackend(make_config())
    status, _, body = call(backend, method, path, query)
    assert status == 400, body
    assert body["error"] == "bad_query" and body["message"]
    assert backend.hints == []


def test_stats_document_and_errors() -> None:
    backend = FakeBackend(make_config())
    assert call(backend, "GET", "/v1/tables/sales/stats")[2] == {
        "table": "sales",
        "snapshot_id": None,
    }
    assert call(backend, "GET", "/v1/tables/sales/stats", "snapshot=-42")[2]["snapshot_id"] == -42
    status, _, body = call(backend, "GET", "/v1/tables/sales/stats", "snapshot=404")
    assert status == 404 and body["error"] == "no_stats"
    status, _, body = call(backend, "GET", "/v1/tables/sales/stats", "snapshot=503")
    assert status == 503 and "MetadataError" in body["message"]


def test_post_queues_and_waits() -> None:
    backend = FakeBackend(make_config())
    status, _, body = call(backend, "POST", "/v1/tables/sales/commits")
    assert status == 202 and body == {"table": "sales", "queued": True}
    status, _, body = call(backend, "POST", "/v1/tables/sales/commits", "wait=true")
    assert status == 200 and body["up_to_date"] is True and body["last_snapshot_id"] == 7
    backend.done = False
    status, _, body = call(backend, "POST", "/v1/tables/sales/commits", "wait=true&timeout_s=0.1")
    assert status == 504 and body["error"] == "timeout"
    backend.accepting = False
    assert call(backend, "POST", "/v1/tables/sales/commits")[0] == 503


def test_token_is_required_for_post_only() -> None:
    backend = FakeBackend(make_config(token=TOKEN))
    for headers in ([], [("Authorization", "Bearer wrong")], [("Authorization", TOKEN)]):
        status, out, _ = call(backend, "POST", "/v1/tables/sales/commits", headers=headers)
        assert status == 401 and out["www-authenticate"] == "Bearer"
    # unauthenticated clients do not learn which tables exist
    assert call(backend, "POST", "/v1/tables/nope/commits")[0] == 401
    ok = [("Authorization", f"Bearer {TOKEN}")]
    assert call(backend, "POST", "/v1/tables/sales/commits", headers=ok)[0] == 202
    assert call(backend, "GET", "/v1/tables/sales/stats")[0] == 200
    assert backend.hints == ["sales"]


def test_body_size_is_limited_by_header_and_by_stream() -> None:
    backend = FakeBackend(make_config())
    path = "/v1/tables/sales/commits"
    assert call(backend, "POST", path, headers=[("Content-Length", "17")])[0] == 413
    assert call(backend, "POST", path, headers=[("Content-Length", "x")])[0] == 400
    # a client that lies about (or omits) the length is cut off by the streamed count
    status, _, body = call(
        backend, "POST", path, headers=[("Content-Length", "4")], chunks=[b"a" * 10, b"b" * 10]
    )
    assert status == 413 and body["error"] == "body_too_large"
    assert call(backend, "POST", path, chunks=[b"x" * 16])[0] == 202
    assert backend.hints == ["sales"]


def test_wrong_method_and_unknown_route_are_not_500() -> None:
    backend = FakeBackend(make_config())
    assert call(backend, "GET", "/v1/tables/sales/commits")[0] == 405
    assert call(backend, "DELETE", "/v1/tables/sales/stats")[0] == 405
    assert call(backend, "GET", "/v2/anything")[0] == 404


def test_openapi_describes_exactly_the_routes() -> None:
    backend = FakeBackend(make_config())
    status, _, doc = call(backend, "GET", "/openapi.json")
    assert status == 200 and doc == json.loads(json.dumps(openapi_document()))
    app = create_app(backend)
    routes = {
        (r.path, m.lower())  # type: ignore[attr-defined]
        for r in app.routes
        for m in (r.methods or ())  # type: ignore[attr-defined]
        if m != "HEAD"
    }
    described = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert routes == described


def test_every_route_is_400_on_an_unknown_query_parameter_as_described() -> None:
    backend = FakeBackend(make_config())
    for path, ops in openapi_document()["paths"].items():
        for method, op in ops.items():
            assert "400" in op["responses"], (path, method)
            url = path.replace("{name}", "sales")
            status, _, body = call(backend, method.upper(), url, "bogus=1")
            assert (status, body["error"]) == (400, "bad_query"), (path, method, body)


def test_healthz_fails_once_a_thread_the_daemon_needs_is_dead() -> None:
    backend = FakeBackend(make_config())
    backend.alive, backend.dead_status = False, "dead"
    status, _, body = call(backend, "GET", "/healthz")
    assert status == 503 and body["status"] == "dead"
