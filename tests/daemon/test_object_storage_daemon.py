"""A real ``lakestatsd`` following a table on S3: polled (object stores send no file-system
events), sketched by the Arrow engine in the daemon's own Spark, whose Python workers read
the data files from S3 with the credentials and endpoint of the daemon's environment, and
published in the table's sidecar on S3.

The S3 server is moto's on 127.0.0.1 (AWS cannot exist here; ``tests/object_store.py``),
running in the test process; the daemon inherits the AWS environment pointing at it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakestatsd_harness import DaemonProcess, fast_config_text

from delta_tables import assert_describes_live_rows
from lakestatsd.wiring import state_dir_writable
from object_store import S3Server

OPTIONS = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # one writer: delta-rs needs no lock table
WITH_SKETCHES = """[sketch]
enabled = true
[spark]
master = "local[2]"
[spark.conf]
"spark.ui.enabled" = "false"
"spark.sql.shuffle.partitions" = "2"
"""


def rows(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i % 13}" if i % 5 else None for i in ids], pa.string()),
        }
    )


@pytest.mark.parametrize("store", ["local", "s3"])
def test_the_daemon_polls_a_delta_table_on_s3_and_sketches_its_new_files(
    store: str, tmp_path: Path, s3_server: S3Server, run_daemon: Callable[..., DaemonProcess]
) -> None:
    """``store``: where the stats store lives; on S3, the daemon writes no file of its own."""
    bucket = s3_server.new_bucket()
    uri = f"{bucket}/events"
    write_deltalake(uri, rows(0, 300), storage_options=OPTIONS)
    state_dir = f"{bucket}/lakestats" if store == "s3" else tmp_path / "state"
    text = fast_config_text(state_dir, f'[[table]]\nname = "t"\nlocation = "{uri}"\n')
    daemon = run_daemon(text.replace("[sketch]\nenabled = false\n", WITH_SKETCHES))

    write_deltalake(uri, rows(300, 200), mode="append", storage_options=OPTIONS)
    write_deltalake(uri, rows(500, 100), mode="append", storage_options=OPTIONS)
    table = DeltaTable(uri, storage_options=OPTIONS)
    table.delete("id < 50")
    version = table.version()

    def served() -> Any:
        resp = daemon.request("GET", "/v1/tables/t/stats")
        return resp.json() if resp.status == 200 else None

    daemon.wait_until(lambda: (served() or {}).get("snapshot_id") == version, timeout_s=120)
    doc = served()
    assert_describes_live_rows(doc, DeltaTable(uri).to_pyarrow_table(), ndv=True)
    assert doc["columns"]["id"]["sketch"]["quantiles"] is not None  # sketched, not metadata
    assert not daemon.events("table_run_failed"), daemon.tail()
    index = f"{uri}/_delta_log/_lakestats/index.json"  # published beside the log, on S3

    def published() -> bool:
        if index not in s3_server.keys(f"{uri}/_delta_log/_lakestats"):
            return False
        return str(version) in json.loads(s3_server.read(index))["versions"]

    daemon.wait_until(published, timeout_s=30)
    if store == "s3":
        versions = [k for k in s3_server.keys(f"{bucket}/lakestats") if "/log/" in k]
        assert versions and not (tmp_path / "state").exists()
        ready = daemon.request("GET", "/readyz").json()
        assert ready["checks"]["state_dir"] == {"ok": True, "path": state_dir, "error": None}
    assert daemon.terminate() == 0


def test_readiness_sees_a_state_dir_on_s3_without_writing(s3_server: S3Server) -> None:
    """``/readyz``'s ``state_dir`` check for a store on S3: its bucket must be there (one
    request, nothing written); a missing bucket is reported, naming it."""
    bucket = s3_server.new_bucket()
    assert state_dir_writable(f"{bucket}/lakestats") == (True, None)
    assert s3_server.keys(bucket) == []  # nothing written
    ok, error = state_dir_writable("s3://no-such-bucket-lakestats/lakestats")
    assert not ok and error is not None
    assert "no-such-bucket-lakestats" in error and "does not exist" in error
