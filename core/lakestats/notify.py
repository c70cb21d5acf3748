"""On-commit hook client: tell a running ``lakestatsd`` that a table has a new commit.

Stdlib only (``urllib``), so a writer's hook needs nothing beyond lakestats itself. The
daemon's address comes from ``http.url`` when set (a daemon on another host), else from
``http.listen`` (a wildcard bind address is reached via loopback); the token from
``http.token``. Both can come from the environment (``LAKESTATS_HTTP__URL``,
``LAKESTATS_HTTP__TOKEN``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from lakestats.config import SHARD_PLACEHOLDER, Config
from lakestats.exceptions import LakestatsError, TableNotFoundError
from lakestats.shards import shard_of

# extra socket time beyond the server-side wait, so the daemon's 504 arrives before ours
_WAIT_SLACK_S = 5.0
_MAX_RESPONSE_BYTES = 1024 * 1024


class DaemonUnavailableError(LakestatsError):
    """The daemon could not be reached, or answered with an unexpected error."""


class NotifyAuthError(LakestatsError):
    """The daemon rejected the token (``http.token`` / ``LAKESTATS_HTTP__TOKEN``)."""


class NotifyTimeoutError(LakestatsError):
    """``wait`` was asked and the table was not up to date in time."""


@dataclass(frozen=True)
class NotifyResult:
    table: str
    waited: bool  # True: the stats now cover the commit (HTTP 200); False: queued (202)
    status: int
    detail: dict[str, Any] = field(default_factory=dict)  # the daemon's JSON answer

    @property
    def last_snapshot_id(self) -> int | None:
        value = self.detail.get("last_snapshot_id")
        return value if isinstance(value, int) else None


def daemon_url(config: Config, table_name: str | None = None) -> str:
    """Base URL of the daemon keeping ``table_name``, without a trailing slash:
    ``http.url`` with ``{shard}`` replaced by the table's replica (``lakestats.shards``)."""
    if config.http.url:
        url = config.http.url
        if SHARD_PLACEHOLDER in url:
            if table_name is None:
                raise ValueError("http.url names a replica by {shard}: give the table")
            url = url.replace(SHARD_PLACEHOLDER, str(shard_of(table_name, config.shards.count)))
        return url.rstrip("/")
    host = config.http.host
    if host in ("0.0.0.0", ""):  # noqa: S104 - a bind-all address, reached via loopback
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{config.http.port}"


def daemon_urls(config: Config) -> list[str]:
    """Every daemon replica's base URL (one unless ``http.url`` names replicas by
    ``{shard}``)."""
    if config.http.url and SHARD_PLACEHOLDER in config.http.url:
        base = config.http.url.rstrip("/")
        return [base.replace(SHARD_PLACEHOLDER, str(i)) for i in range(config.shards.count)]
    return [daemon_url(config)]


def notify(config: Config, table_name: str, *, wait: bool, timeout_s: float) -> NotifyResult:
    """POST ``/v1/tables/{table}/commits``; with ``wait``, block until the stats are fresh.

    ``timeout_s`` bounds the whole call: without ``wait`` it is the socket timeout; with
    ``wait`` the daemon waits up to ``timeout_s`` (capped by its ``http.wait_timeout_s``).
    Raises ``TableNotFoundError`` (404), ``NotifyAuthError`` (401), ``NotifyTimeoutError``
    (504 or socket timeout while waiting) and ``DaemonUnavailableError`` (anything else).
    """
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    base = daemon_url(config, table_name)
    query: dict[str, str] = {}
    waits_s = min(timeout_s, config.http.wait_timeout_s)
    if wait:
        query = {"wait": "true", "timeout_s": f"{waits_s:g}"}
    url = f"{base}/v1/tables/{urllib.parse.quote(table_name, safe='')}/commits"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    headers = {"Accept": "application/json", "Content-Length": "0"}
    if config.http.token:
        headers["Authorization"] = f"Bearer {config.http.token}"
    request = urllib.request.Request(url, data=b"", headers=headers, method="POST")  # noqa: S310 - scheme checked by config
    socket_timeout = timeout_s + _WAIT_SLACK_S if wait else timeout_s
    try:
        with urllib.request.urlopen(request, timeout=socket_timeout) as response:  # noqa: S310
            status = int(response.status)
            body = _json(response.read(_MAX_RESPONSE_BYTES))
    except urllib.error.HTTPError as exc:
        status = exc.code
        body = _json(exc.read(_MAX_RESPONSE_BYTES))
        exc.close()
        message = str(body.get("message") or exc.reason)
        if status == 404:
            raise TableNotFoundError(f"lakestatsd at {base}: {message}") from None
        if status == 401:
            raise NotifyAuthError(
                f"lakestatsd at {base} rejected the request: {message} "
                "(set http.token or LAKESTATS_HTTP__TOKEN to the daemon's token)"
            ) from None
        if status == 421:  # a sharded daemon that does not keep this table
            raise DaemonUnavailableError(
                f"lakestatsd at {base} does not keep table {table_name!r}: {message} "
                "(with [shards], set http.url to each replica's address with {shard} in "
                "it, e.g. http://lakestatsd-{shard}.lakestatsd-shards:8765)"
            ) from None
        if status == 504:
            table = body.get("status")
            failing = table.get("last_error") if isinstance(table, dict) else None
            # a table whose runs fail is why a writer waits in vain: say so, not just "late"
            why = f"; its last run failed: {failing}" if failing else ""
            capped = " (capped by http.wait_timeout_s)" if waits_s < timeout_s else ""
            raise NotifyTimeoutError(
                f"table {table_name!r} was not up to date within {waits_s:g}s{capped} "
                f"(lakestatsd at {base}: {message}){why}"
            ) from None
        raise DaemonUnavailableError(
            f"lakestatsd at {base} answered HTTP {status}: {message}"
        ) from None
    except TimeoutError:
        if wait:
            raise NotifyTimeoutError(
                f"table {table_name!r}: no answer from lakestatsd at {base} within "
                f"{socket_timeout:g}s"
            ) from None
        raise DaemonUnavailableError(
            f"lakestatsd at {base} did not answer within {timeout_s:g}s"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise DaemonUnavailableError(
            f"cannot reach lakestatsd at {base}: {reason} (is the daemon running? "
            "set http.url or LAKESTATS_HTTP__URL if it runs elsewhere)"
        ) from None
    return NotifyResult(table=table_name, waited=status == 200, status=status, detail=body)


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
