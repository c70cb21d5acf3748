"""HTTP API (starlette): health, readiness, metrics, stats, estimates, on-commit
notifications.

Security stance, because the port may be reachable by more than the writers:

* clients name configured tables only; the name is looked up, never joined into a path,
  so no request can make the daemon read a file of the client's choosing;
* request bodies are not used, and are capped at ``http.max_body_bytes`` by both the
  declared Content-Length and the bytes actually streamed (413);
* with ``http.token`` set, state-changing requests (POST) need ``Authorization: Bearer``
  with that token, compared in constant time (401);
* query parameters are validated strictly, unknown ones included: bad input is a 4xx
  with a JSON ``{"error", "message"}`` body, never a 500.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
from collections.abc import Mapping
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lakestats.advise_io import UnknownColumnError
from lakestats.config import Config
from lakestats.estimates import estimate_json
from lakestats.exceptions import LakestatsError, SnapshotNotFoundError
from lakestats.predicates import PredicateError
from lakestats.render import described_rows
from lakestats.shards import ShardPlan
from lakestatsd.openapi import openapi_document

# ASCII digits to the very end: \d takes any script's digits, $ a final newline
_INT64 = re.compile(r"-?[0-9]{1,19}")
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}
_WAIT_POLL_S = 0.05
MAX_PREDICATE_CHARS = 4096  # room for an IN list of hundreds of values; bounds the parsing


class Backend(Protocol):
    """What the API needs from the daemon (``lakestatsd.backend.ApiBackend`` implements it)."""

    @property
    def config(self) -> Config: ...
    def liveness(self) -> tuple[bool, dict[str, Any]]: ...
    def readiness(self) -> tuple[bool, dict[str, Any]]: ...
    def tables(self) -> list[dict[str, Any]]: ...
    def read_stats(self, name: str, snapshot_id: int | None) -> dict[str, Any]: ...
    def hint(self, name: str, source: str) -> int | None:
        """A ticket for ``wait_state``, or None when shutting down."""
        ...

    def wait_state(self, name: str, ticket: int) -> str | None:
        """None while waiting, else "done" or "stopping"."""
        ...

    def table_status(self, name: str) -> dict[str, Any]: ...
    def shards(self) -> ShardPlan:
        """Which replica keeps which configured table (``[shards]``)."""
        ...

    def metrics_payload(self) -> bytes: ...
    def advise(self, name: str, columns: list[str] | None) -> dict[str, Any]:
        """The ``lakestats advise --json`` report (``lakestats.advise_io``)."""
        ...


class BadRequestError(Exception):
    def __init__(
        self, status: int, error: str, message: str, detail: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.detail = dict(detail or {})  # more keys of the JSON body


def _error(
    status: int,
    error: str,
    message: str,
    detail: Mapping[str, Any] | None = None,
    **headers: str,
) -> JSONResponse:
    body = {"error": error, "message": message, **(detail or {})}
    return JSONResponse(body, status_code=status, headers=headers)


def _query(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    items = request.query_params.multi_items()
    seen: dict[str, str] = {}
    for key, value in items:
        if key not in allowed:
            names = ", ".join(sorted(allowed)) or "none"
            raise BadRequestError(
                400, "bad_query", f"unknown query parameter {key!r} (allowed: {names})"
            )
        if key in seen:
            raise BadRequestError(400, "bad_query", f"query parameter {key!r} given twice")
        seen[key] = value
    return seen


def _bool(params: Mapping[str, str], key: str) -> bool:
    value = params.get(key)
    if value is None:
        return False
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise BadRequestError(400, "bad_query", f"{key} must be true or false, got {value!r}")


def _snapshot(params: Mapping[str, str]) -> int | None:
    value = params.get("snapshot")
    if value is None:
        return None
    if not _INT64.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
        raise BadRequestError(
            400, "bad_query", f"snapshot must be a snapshot id (integer), got {value!r}"
        )
    return int(value)


def _timeout(params: Mapping[str, str], maximum: float) -> float:
    value = params.get("timeout_s")
    if value is None:
        return maximum
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= maximum:  # also rejects nan and inf
        raise BadRequestError(400, "bad_query", f"timeout_s must be a number in (0, {maximum:g}]")
    return seconds


def _table(backend: Backend, request: Request) -> str:
    name = str(request.path_params["name"])
    if backend.config.find_table(name) is not None:
        return name
    shards = backend.shards()
    owner = shards.owner(name)
    if owner is None:
        raise BadRequestError(404, "unknown_table", f"no configured table named {name!r}")
    # 421 Misdirected Request: the table is configured, and kept by another replica
    raise BadRequestError(
        421,
        "other_shard",
        f"table {name!r} is kept by shard {owner} of {shards.count}; this daemon is "
        f"shard {shards.index}",
        {"shard": owner, "shard_count": shards.count},
    )


def _check_token(config: Config, request: Request) -> None:
    expected = config.http.token
    if not expected:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("utf-8"), expected.encode("utf-8")
    )
    if not ok:
        raise BadRequestError(
            401, "unauthorized", "a valid 'Authorization: Bearer <token>' is required"
        )


async def _drain_body(request: Request, limit: int) -> int:
    """Read (and discard) the body, enforcing ``limit`` on declared and streamed size."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BadRequestError(400, "bad_request", "Content-Length must be a number")
        if int(declared) > limit:
            raise BadRequestError(413, "body_too_large", f"request body exceeds {limit} bytes")
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequestError(413, "body_too_large", f"request body exceeds {limit} bytes")
    except ClientDisconnect:
        # gone before its body arrived (or cut off by http.request_timeout_s): nothing
        # was queued, and the answer goes nowhere
        raise BadRequestError(400, "incomplete_request", "the request body never arrived") from None
    return size


def create_app(backend: Backend) -> Starlette:
    config = backend.config

    async def healthz(request: Request) -> Response:
        _query(request, frozenset())
        alive, detail = backend.liveness()  # in memory, no I/O: stays on the event loop
        return JSONResponse(detail, status_code=200 if alive else 503)

    async def readyz(request: Request) -> Response:
        _query(request, frozenset())
        ready, detail = await run_in_threadpool(backend.readiness)
        return JSONResponse(detail, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        _query(request, frozenset())
        payload = await run_in_threadpool(backend.metrics_payload)
        return Response(payload, media_type=CONTENT_TYPE_LATEST)

    async def openapi(request: Request) -> Response:
        _query(request, frozenset())
        return JSONResponse(openapi_document())

    async def list_tables(request: Request) -> Response:
        _query(request, frozenset())
        shards = backend.shards()
        return JSONResponse(
            {
                "tables": await run_in_threadpool(backend.tables),
                "shard": {"index": shards.index, "count": shards.count},
            }
        )

    async def stats(request: Request) -> Response:
        name = _table(backend, request)
        snapshot = _snapshot(_query(request, frozenset({"snapshot"})))
        try:
            doc = await run_in_threadpool(backend.read_stats, name, snapshot)
        except SnapshotNotFoundError as exc:
            return _error(404, "no_stats", str(exc))
        except LakestatsError as exc:
            # the table or its store cannot be read right now: not the client's fault
            return _error(503, "table_unavailable", f"{type(exc).__name__}: {exc}")
        return JSONResponse(doc)

    async def advice(request: Request) -> Response:
        name = _table(backend, request)
        params = _query(request, frozenset({"column"}))
        given = params.get("column")
        columns = [c.strip() for c in given.split(",") if c.strip()] if given else None
        try:
            doc = await run_in_threadpool(backend.advise, name, columns)
        except UnknownColumnError as exc:
            return _error(400, "unknown_column", str(exc))
        except SnapshotNotFoundError as exc:
            return _error(404, "no_stats", str(exc))
        except LakestatsError as exc:
            return _error(503, "table_unavailable", f"{type(exc).__name__}: {exc}")
        return JSONResponse(doc)

    async def estimate(request: Request) -> Response:
        name = _table(backend, request)
        params = _query(request, frozenset({"predicate", "snapshot"}))
        text = params.get("predicate", "").strip()
        if not text:
            raise BadRequestError(
                400, "bad_query", "predicate is required, e.g. ?predicate=price < 10"
            )
        if len(text) > MAX_PREDICATE_CHARS:
            raise BadRequestError(
                400, "bad_query", f"predicate is longer than {MAX_PREDICATE_CHARS} characters"
            )
        snapshot = _snapshot(params)
        try:
            doc = await run_in_threadpool(backend.read_stats, name, snapshot)
            result = await run_in_threadpool(estimate_json, doc, text)
        except PredicateError as exc:  # before LakestatsError, of which it is one
            return _error(400, "bad_predicate", str(exc))
        except SnapshotNotFoundError as exc:
            return _error(404, "no_stats", str(exc))
        except LakestatsError as exc:
            return _error(503, "table_unavailable", f"{type(exc).__name__}: {exc}")
        table = {"table": name, "snapshot_id": doc["snapshot_id"]}
        # stats served while the table's metadata is unreadable say so here too
        stale = {k: doc[k] for k in ("stale", "stale_reason") if k in doc}
        return JSONResponse({**table, "table_rows": described_rows(doc), **result, **stale})

    async def commits(request: Request) -> Response:
        _check_token(config, request)
        name = _table(backend, request)
        params = _query(request, frozenset({"wait", "timeout_s"}))
        wait = _bool(params, "wait")
        timeout = _timeout(params, config.http.wait_timeout_s)
        if "timeout_s" in params and not wait:
            # a hook that meant to wait would take the 202 for fresh stats
            raise BadRequestError(400, "bad_query", "timeout_s is how long wait=true waits")
        await _drain_body(request, config.http.max_body_bytes)
        ticket = backend.hint(name, "api")
        if ticket is None:
            return _error(503, "shutting_down", "the daemon is shutting down")
        if not wait:
            return JSONResponse({"table": name, "queued": True}, status_code=202)
        deadline = time.monotonic() + timeout
        # polled rather than a blocking wait in a thread: many waiting writers must not
        # use up the thread pool that serves /healthz and /readyz
        while (state := backend.wait_state(name, ticket)) is None:
            if time.monotonic() >= deadline:
                return JSONResponse(
                    {
                        "error": "timeout",
                        "message": f"table {name!r} was not up to date within {timeout:g}s",
                        "table": name,
                        "status": backend.table_status(name),
                    },
                    status_code=504,
                )
            await asyncio.sleep(_WAIT_POLL_S)
        if state == "stopping":
            return _error(503, "shutting_down", "the daemon is shutting down")
        return JSONResponse({"table": name, "up_to_date": True, **backend.table_status(name)})

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequestError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        return _error(exc.status, exc.error, exc.message, exc.detail, **headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, "http_error", str(exc.detail), None, **(exc.headers or {}))

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            Route("/v1/tables", list_tables, methods=["GET"]),
            Route("/v1/tables/{name}/stats", stats, methods=["GET"]),
            Route("/v1/tables/{name}/advice", advice, methods=["GET"]),
            Route("/v1/tables/{name}/estimate", estimate, methods=["GET"]),
            Route("/v1/tables/{name}/commits", commits, methods=["POST"]),
        ],
        exception_handlers={BadRequestError: bad_request, HTTPException: http_error},
    )
    # "/healthz/" → 307 to an absolute URL built from the Host header would let any
    # client make us redirect elsewhere; a path is matched exactly or is a 404
    app.router.redirect_slashes = False
    return app
