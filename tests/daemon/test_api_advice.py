"""``GET /v1/tables/{name}/advice`` through the ASGI interface.

The backend answers with the real advisor (``lakestats.advise_io.advise_store``) over a
real stats store written with ``StatsStore`` (real datasketches sketches, no Spark); the
rest of the backend is test_api's stand-in. ``Daemon.advise`` delegates to
``advise_io.advise_table``, which the CLI tests exercise over a real table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasketches import kll_doubles_sketch, update_theta_sketch
from test_api import FakeBackend, call, make_config

from lakestats.advise import report_json
from lakestats.advise_io import advise_store
from lakestats.config import Config
from lakestats.model import (
    UNPARTITIONED,
    Column,
    ColumnMetrics,
    ColumnSketch,
    DataFile,
    FileContent,
    SegmentEntry,
    StateVersion,
    TableSchema,
)
from lakestats.sketches.hashing import THETA_SEED
from lakestats.store import StatsStore

SCHEMA = TableSchema(0, (Column(1, "id", "long"), Column(2, "bucket", "long")))


def data_file(i: int) -> DataFile:
    ids = list(range(i * 100, (i + 1) * 100))
    buckets = [j % 7 for j in range(100)]
    sketches = {}
    for fid, values in ((1, ids), (2, buckets)):
        theta, kll = update_theta_sketch(12, seed=THETA_SEED), kll_doubles_sketch(200)
        for v in values:
            theta.update(v)
            kll.update(float(v))
        sketches[fid] = ColumnSketch(
            theta=bytes(theta.compact().serialize(False)), kll=bytes(kll.serialize())
        )
    return DataFile(
        path=f"file:///wh/t/data/{i}.parquet",
        content=FileContent.DATA,
        file_format="PARQUET",
        record_count=100,
        file_size_bytes=4000,
        partition=UNPARTITIONED,
        columns={
            1: ColumnMetrics(value_count=100, null_count=0, lower=min(ids), upper=max(ids)),
            2: ColumnMetrics(value_count=100, null_count=0, lower=0, upper=6),
        },
        field_ids=frozenset({1, 2}),
        sketches=sketches,
    )


class AdviceBackend(FakeBackend):
    def __init__(self, config: Config, state: Path) -> None:
        super().__init__(config)
        self.state = state

    def advise(self, name: str, columns: list[str] | None) -> dict[str, Any]:
        store = StatsStore(self.state, name)
        return report_json(advise_store(store, SCHEMA, table=name, columns=columns))


def test_advice_route(tmp_path: Path) -> None:
    backend = AdviceBackend(make_config(), tmp_path)
    # nothing analyzed yet: 404, like stats for an unknown snapshot
    status, _, body = call(backend, "GET", "/v1/tables/sales/advice")
    assert status == 404 and body["error"] == "no_stats"

    store = StatsStore(tmp_path, "sales")
    segment = store.write_segment(1, [data_file(i) for i in range(8)], {1: "long", 2: "long"})
    store.commit(
        StateVersion(
            version=1,
            table_id="sales",
            format="iceberg",
            location="file:///wh/t",
            last_snapshot_id=1,
            segments=(SegmentEntry(1, segment, segment, 8),),
        )
    )
    status, _, body = call(backend, "GET", "/v1/tables/sales/advice")
    assert status == 200, body
    assert body["snapshot_id"] == 1 and body["files"] == 8 and body["partitions"] == []
    cols = {c["name"]: c for c in body["columns"]}
    assert cols["id"]["point_lookup"]["files_expected"] == 1.0
    assert cols["id"]["recommendation"]["kind"] == "none"
    # 7 values in every file: 8 files per lookup, and 7 values is fewer than 8 files
    assert cols["bucket"]["point_lookup"]["files_max"] == 8
    assert cols["bucket"]["recommendation"]["kind"] == "partition"

    status, _, body = call(backend, "GET", "/v1/tables/sales/advice", "column=bucket")
    assert status == 200 and [c["name"] for c in body["columns"]] == ["bucket"]
    status, _, body = call(backend, "GET", "/v1/tables/sales/advice", "column=id,bucket")
    assert [c["name"] for c in body["columns"]] == ["id", "bucket"]

    status, _, body = call(backend, "GET", "/v1/tables/sales/advice", "column=nope")
    assert status == 400 and body["error"] == "unknown_column" and "id, bucket" in body["message"]
    for query in ("columns=id", "column=id&column=bucket"):
        status, _, body = call(backend, "GET", "/v1/tables/sales/advice", query)
        assert status == 400 and body["error"] == "bad_query", query
    assert call(backend, "GET", "/v1/tables/nope/advice")[0] == 404
    assert call(backend, "POST", "/v1/tables/sales/advice")[0] == 405
