"""``GET /v1/tables/{name}/estimate`` through the ASGI interface.

The backend serves the real stats document of a real Iceberg table (pyiceberg) analyzed by
the real pipeline (Spark); the rest of the backend is test_api's stand-in. The answers
must be the library's (``lakestats.selectivity``), whose accuracy against exact counts
``tests/core/test_estimate.py`` checks; here: the route, its parameters and its errors.
A real daemon answers the route in ``test_e2e``.
"""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_api import FakeBackend, call, make_config

import lakestats
from lakestats.config import Config
from lakestats.estimates import estimate_from
from lakestats.predicates import parse_conjunction
from lakestats.selectivity import selectivity
from lakestats.testing import IcebergWarehouse
from lakestatsd.api import MAX_PREDICATE_CHARS
from lakestatsd.openapi import openapi_document

SCHEMA = pa.schema([("id", pa.int64()), ("price", pa.float64()), ("mode", pa.string())])


class StatsBackend(FakeBackend):
    """Serves one real stats document; the stand-in's ids 404 and 503 still fail."""

    def __init__(self, config: Config, doc: dict[str, Any]) -> None:
        super().__init__(config)
        self.doc = doc
        self.asked: list[int | None] = []

    def read_stats(self, name: str, snapshot_id: int | None) -> dict[str, Any]:
        self.asked.append(snapshot_id)
        if snapshot_id in (404, 503):
            return super().read_stats(name, snapshot_id)
        return self.doc


@pytest.fixture(scope="module")
def served(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], pa.Table]:
    root = tmp_path_factory.mktemp("api-estimate")
    warehouse = IcebergWarehouse(root / "wh")
    warehouse.create_table("t", SCHEMA)
    rng = random.Random(5)
    n = 5_000
    warehouse.append(
        "t",
        {
            "id": list(range(n)),
            "price": [None if i % 10 == 0 else rng.uniform(0, 100) for i in range(n)],
            "mode": [rng.choice(["AIR", "RAIL"]) for _ in range(n)],
        },
    )
    config = Config(state_dir=str(root / "state"))
    lakestats.analyze_table(warehouse.location("t"), config=config)
    doc = lakestats.read_stats(warehouse.location("t"), config=config)
    return doc, warehouse.table("t").scan().to_arrow()


def estimate(backend: FakeBackend, predicate: str, extra: str = "") -> tuple[int, Any]:
    status, _, body = call(
        backend, "GET", "/v1/tables/sales/estimate", f"predicate={quote(predicate)}{extra}"
    )
    return status, body


def test_the_route_answers_what_the_library_estimates(
    served: tuple[dict[str, Any], pa.Table],
) -> None:
    doc, data = served
    backend = StatsBackend(make_config(), doc)
    for text in (
        "price BETWEEN 10 AND 20",
        "id < 1000",
        "mode IN ('AIR')",
        "price IS NULL",
        "mode = 'AIR' AND id BETWEEN 100 AND 200",
    ):
        status, body = estimate(backend, text)
        assert status == 200, body
        library, terms = estimate_from(doc, text), parse_conjunction(text)
        assert body == {
            "table": "sales",
            "snapshot_id": doc["snapshot_id"],
            "table_rows": len(data),
            "predicate": text,
            "terms": [
                {
                    "column": t.column,
                    "op": t.op,
                    "values": list(t.values),
                    "selectivity": selectivity(doc, t),
                }
                for t in terms
            ],
            "independent_columns": len(terms) > 1,
            "rows": library.rows,
            "selectivity": library.selectivity,
        }
    # null counts are exact, and so is the estimate from them
    assert estimate(backend, "price IS NULL")[1]["rows"] == data.column("price").null_count
    exact_ids = pc.sum(pc.less(data.column("id"), 1000)).as_py()
    assert abs(estimate(backend, "id < 1000")[1]["rows"] - exact_ids) <= len(data) / 100 + 20
    # an older snapshot is asked of the backend
    status, body = estimate(backend, "id = 3", f"&snapshot={doc['snapshot_id']}")
    assert status == 200 and backend.asked[-1] == doc["snapshot_id"]


def test_bad_requests_are_4xx_with_the_reason(served: tuple[dict[str, Any], pa.Table]) -> None:
    doc, _ = served
    backend = StatsBackend(make_config(), doc)
    for predicate, error, words in (
        ("nope = 1", "bad_predicate", "no column 'nope'"),
        ("mode < 'B'", "bad_predicate", "has no histogram"),
        ("id = 1e999", "bad_predicate", "out of range"),
        ("id ~ 1", "bad_predicate", "cannot read predicate"),
        ("id IN (" + ", ".join(["1"] * 2000) + ")", "bad_query", "longer than"),
        ("   ", "bad_query", "predicate is required"),
    ):
        status, body = estimate(backend, predicate)
        assert status == 400 and body["error"] == error and words in body["message"], body
    status, _, body = call(backend, "GET", "/v1/tables/sales/estimate")
    assert status == 400 and "predicate is required" in body["message"]
    status, _, body = call(backend, "GET", "/v1/tables/sales/estimate", "predicate=x&bogus=1")
    assert status == 400 and body["error"] == "bad_query"
    assert estimate(backend, "id = 1", "&snapshot=abc")[0] == 400
    status, _, body = call(backend, "GET", "/v1/tables/nope/estimate", "predicate=id%20%3D%201")
    assert status == 404 and body["error"] == "unknown_table"
    status, body = estimate(backend, "id = 1", "&snapshot=404")
    assert status == 404 and body["error"] == "no_stats"
    status, body = estimate(backend, "id = 1", "&snapshot=503")
    assert status == 503 and body["error"] == "table_unavailable"
    assert len("id IN (" + ", ".join(["1"] * 2000) + ")") > MAX_PREDICATE_CHARS
    route = openapi_document()["paths"]["/v1/tables/{name}/estimate"]["get"]
    [predicate] = [p for p in route["parameters"] if p["name"] == "predicate"]
    assert predicate["schema"]["maxLength"] == MAX_PREDICATE_CHARS  # the documented limit
