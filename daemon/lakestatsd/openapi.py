"""The OpenAPI 3.1 description served at ``/openapi.json``.

Written by hand rather than generated: starlette's generator parses YAML docstrings (an
extra dependency) and would still need every schema spelled out. A test checks that every
route of the app is described here and the other way round.
"""

from __future__ import annotations

from typing import Any

from lakestatsd import __version__

_ERROR = {"$ref": "#/components/schemas/Error"}
_MISDIRECTED = {"$ref": "#/components/schemas/Misdirected"}
_OTHER_SHARD = "the table is kept by another replica ([shards]): `shard` names it"
_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "A table name from the daemon's configuration",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"},
}
_SNAPSHOT = {
    "name": "snapshot",
    "in": "query",
    "required": False,
    "description": "Snapshot id (default: the newest processed one)",
    "schema": {"type": "integer", "format": "int64"},
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


# every route answers malformed or unknown query parameters so (api._query)
_BAD_QUERY = _json(_ERROR, "malformed query")


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "lakestatsd",
            "version": __version__,
            "description": "Incremental statistics service for lakehouse tables.",
        },
        "paths": {
            "/healthz": {
                "get": {
                    "summary": "Liveness: 503 when a restart would help (a thread the daemon needs "
                    "died, Spark stayed unusable past daemon.spark_unavailable_timeout_s, or a "
                    "table's run stalled past watch.stall_timeout_s: `stalled`)",
                    "responses": {
                        "200": _json({"type": "object"}, "alive"),
                        "400": _BAD_QUERY,
                        "503": _json(
                            {"type": "object"},
                            "restart me: says why",
                        ),
                    },
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness: Spark up (when sketches are on), scheduler alive",
                    "description": "Per-table status is included; a broken table is reported "
                    "with its last error but does not make the daemon unready.",
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Readiness"}, "ready"),
                        "400": _BAD_QUERY,
                        "503": _json({"$ref": "#/components/schemas/Readiness"}, "not ready"),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (text exposition format)",
                    "responses": {
                        "200": {
                            "description": "metrics",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        "400": _BAD_QUERY,
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {
                        "200": _json({"type": "object"}, "OpenAPI 3.1"),
                        "400": _BAD_QUERY,
                    },
                }
            },
            "/v1/tables": {
                "get": {
                    "summary": "Configured tables and their processing status",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "tables": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/TableStatus"},
                                    },
                                    "shard": {
                                        "type": "object",
                                        "description": "[shards]: this replica's index and "
                                        "the replica count; only this replica's tables are "
                                        "listed",
                                        "properties": {
                                            "index": {"type": "integer"},
                                            "count": {"type": "integer"},
                                        },
                                    },
                                },
                            },
                            "tables",
                        ),
                        "400": _BAD_QUERY,
                    },
                }
            },
            "/v1/tables/{name}/stats": {
                "get": {
                    "summary": "Table statistics, as `lakestats show --json` prints them",
                    "parameters": [
                        _NAME,
                        _SNAPSHOT,
                    ],
                    "responses": {
                        "200": _json({"type": "object"}, "the stats document"),
                        "400": _BAD_QUERY,
                        "404": _json(_ERROR, "unknown table, or no stats for that snapshot"),
                        "421": _json(_MISDIRECTED, _OTHER_SHARD),
                        "503": _json(_ERROR, "the table or its stats store is unreadable"),
                    },
                }
            },
            "/v1/tables/{name}/advice": {
                "get": {
                    "summary": "Data-skipping advice, as `lakestats advise --json` prints it",
                    "description": "Per column: files (and bytes) a point lookup and ranges "
                    "of given selectivity read after min/max pruning (expected over the "
                    "column's KLL distribution, and worst case), the file overlap profile, "
                    "and a recommendation (none, partition, sort, bloom_filter, value_set, "
                    "min_max) with its reason; the same per partition. Read from the stats "
                    "store only (docs/advisor.md).",
                    "parameters": [
                        _NAME,
                        {
                            "name": "column",
                            "in": "query",
                            "required": False,
                            "description": "Column name(s) to analyse, comma-separated "
                            "(default: every column)",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": _json({"type": "object"}, "the advice report"),
                        "400": _json(_ERROR, "malformed query, or an unknown column"),
                        "404": _json(_ERROR, "unknown table, or no stats stored yet"),
                        "421": _json(_MISDIRECTED, _OTHER_SHARD),
                        "503": _json(_ERROR, "the table or its stats store is unreadable"),
                    },
                }
            },
            "/v1/tables/{name}/estimate": {
                "get": {
                    "summary": "Estimated rows matching a predicate, as one entry of "
                    "`lakestats estimate --json`",
                    "description": "Columns compared with constants (=, <, <=, >, >=, "
                    "BETWEEN, IN, IS [NOT] NULL), joined by AND, estimated from the stored "
                    "histogram, frequent values, NDV and null counts; no data is read "
                    '(docs/sketches.md, "Selectivity"). Comparisons on one column are '
                    "combined into one range or value set; different columns are taken as "
                    "independent. The answer carries the table, the snapshot the stats "
                    "describe, its rows, the predicate as given and as read (terms), and "
                    "the estimated rows and selectivity.",
                    "parameters": [
                        _NAME,
                        {
                            "name": "predicate",
                            "in": "query",
                            "required": True,
                            "description": "e.g. `price BETWEEN 10 AND 20`, "
                            "`day < '2024-02-01' AND mode IN ('AIR', 'RAIL')`, `x IS NULL` "
                            "(URL-encoded; at most 4096 characters)",
                            # api.MAX_PREDICATE_CHARS (test_api_estimate checks they agree)
                            "schema": {"type": "string", "maxLength": 4096},
                        },
                        _SNAPSHOT,
                    ],
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "table": {"type": "string"},
                                    "snapshot_id": {"type": "integer", "format": "int64"},
                                    "table_rows": {"type": "integer"},
                                    "predicate": {"type": "string"},
                                    "terms": {
                                        "type": "array",
                                        "description": "the comparisons as read, each "
                                        "with its own selectivity",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "column": {"type": "string"},
                                                "op": {"type": "string"},
                                                "values": {"type": "array", "items": {}},
                                                "selectivity": {"type": "number"},
                                            },
                                        },
                                    },
                                    "independent_columns": {
                                        "type": "boolean",
                                        "description": "comparisons on several columns, "
                                        "their fractions multiplied",
                                    },
                                    "rows": {"type": "number"},
                                    "selectivity": {"type": "number"},
                                    "stale": {
                                        "type": "boolean",
                                        "description": "present (true) when the stats "
                                        "are served while the table's metadata is "
                                        "unreadable, as for /stats",
                                    },
                                    "stale_reason": {"type": "string"},
                                },
                            },
                            "the estimate",
                        ),
                        "400": _json(
                            _ERROR,
                            "malformed query, or a predicate that cannot be read or estimated "
                            "(error bad_predicate: unknown column, wrong constant, a range on "
                            "a column without a histogram, = or IN on one without an NDV)",
                        ),
                        "404": _json(_ERROR, "unknown table, or no stats for that snapshot"),
                        "421": _json(_MISDIRECTED, _OTHER_SHARD),
                        "503": _json(_ERROR, "the table or its stats store is unreadable"),
                    },
                }
            },
            "/v1/tables/{name}/commits": {
                "post": {
                    "summary": "On-commit notification: a commit landed, look at the table",
                    "description": "The body is ignored (and capped at http.max_body_bytes). "
                    "With wait=true the answer comes once a run that started after this "
                    "request has completed, i.e. the stats cover at least the snapshot that "
                    "was current when the request arrived.",
                    "security": [{"bearer": []}],
                    "parameters": [
                        _NAME,
                        {
                            "name": "wait",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "boolean", "default": False},
                        },
                        {
                            "name": "timeout_s",
                            "in": "query",
                            "required": False,
                            "description": "With wait=true (400 without): give up after "
                            "this many seconds (at most http.wait_timeout_s, the default)",
                            "schema": {"type": "number", "exclusiveMinimum": 0},
                        },
                    ],
                    "responses": {
                        "200": _json(
                            {"$ref": "#/components/schemas/TableStatus"}, "up to date (wait=true)"
                        ),
                        "202": _json({"type": "object"}, "queued"),
                        "400": _BAD_QUERY,
                        "401": _json(_ERROR, "missing or wrong bearer token"),
                        "404": _json(_ERROR, "unknown table"),
                        "421": _json(_MISDIRECTED, _OTHER_SHARD),
                        "413": _json(_ERROR, "body too large"),
                        "503": _json(_ERROR, "shutting down"),
                        "504": _json(_ERROR, "not up to date within the timeout"),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "message"],
                    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
                },
                "Misdirected": {
                    "type": "object",
                    "required": ["error", "message", "shard", "shard_count"],
                    "properties": {
                        "error": {"const": "other_shard"},
                        "message": {"type": "string"},
                        "shard": {"type": "integer"},
                        "shard_count": {"type": "integer"},
                    },
                },
                "TableStatus": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "state": {"enum": ["idle", "pending", "running", "backoff"]},
                        "healthy": {"type": "boolean"},
                        "last_snapshot_id": {"type": ["integer", "null"]},
                        "current_snapshot_id": {"type": ["integer", "null"]},
                        "freshness_lag_seconds": {"type": ["number", "null"]},
                        "store_folder": {
                            "type": ["string", "null"],
                            "description": "the folder under state_dir holding the table's "
                            "stats (null until the daemon has opened the table)",
                        },
                        "consecutive_failures": {"type": "integer"},
                        "last_error": {"type": ["string", "null"]},
                        "last_error_kind": {"type": ["string", "null"]},
                        "last_success_at": {"type": ["number", "null"]},
                        "last_run_seconds": {"type": ["number", "null"]},
                        "runs": {"type": "integer"},
                        "retry_in_seconds": {"type": ["number", "null"]},
                        "source": {
                            "type": "object",
                            "description": "/v1/tables: where the table is configured, "
                            "{location} or {catalog, identifier}",
                        },
                        "watched": {
                            "type": "boolean",
                            "description": "/v1/tables: whether a watcher follows its folder",
                        },
                        "table": {
                            "type": "string",
                            "description": "POST …/commits?wait=true, 200: the table",
                        },
                        "up_to_date": {
                            "type": "boolean",
                            "description": "POST …/commits?wait=true, 200: always true",
                        },
                    },
                },
                "Readiness": {
                    "type": "object",
                    "properties": {
                        "ready": {"type": "boolean"},
                        "checks": {"type": "object"},
                        "tables": {
                            "type": "object",
                            "additionalProperties": {"$ref": "#/components/schemas/TableStatus"},
                        },
                    },
                },
            },
        },
    }
