"""End to end: a real ``lakestatsd`` watching a Paimon table that pypaimon writes to, and
publishing the Paimon statistics file (``publish = true``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakestatsd_harness import DaemonProcess
from test_e2e import config_text, from_scratch, wait_until

from paimon_tables import PaimonWarehouse

Runner = Callable[..., DaemonProcess]


def rows(i: int) -> dict[str, list[Any]]:
    return {"id": [i * 3, i * 3 + 1, i * 3 + 2], "name": [f"n{i}", None, f"m{i}"]}


def test_daemon_watches_snapshots_and_publishes_the_statistics_file(
    tmp_path: Path, run_daemon: Runner
) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("name", "string")])
    warehouse.write("t", rows(0))
    text = config_text(tmp_path / "state", {"t": str(location)}).replace(
        f'location = "{location}"\n', f'location = "{location}"\npublish = true\n'
    )
    daemon = run_daemon(text)
    for i in range(1, 6):
        warehouse.write("t", rows(i))

    def published_latest() -> bool:
        latest = warehouse.table("t").snapshot_manager().get_latest_snapshot()
        if latest.commit_kind != "ANALYZE" or not latest.statistics:
            return False
        stats = json.loads((location / "statistics" / latest.statistics).read_text())
        resp = daemon.request("GET", "/v1/tables/t/stats")
        return bool(stats["mergedRecordCount"] == 18 and resp.status == 200)

    wait_until(published_latest, 60, "an ANALYZE snapshot with the stats of all 18 rows")
    served = daemon.get_json("/v1/tables/t/stats")
    scratch = from_scratch(str(location), tmp_path / "scratch", sketches=False)
    assert served["record_count"] == scratch["record_count"] == 18
    assert served["columns"] == scratch["columns"]
    assert served["paimon"]["merged_record_count"] == 18
    latest = warehouse.table("t").snapshot_manager().get_latest_snapshot()
    stats = json.loads((location / "statistics" / latest.statistics).read_text())
    assert stats["colStats"]["name"]["nullCount"] == served["columns"]["name"]["null_count"] == 6
    # the daemon processed its own ANALYZE snapshot without publishing again (no loop)
    wait_until(
        lambda: daemon.get_json("/v1/tables/t/stats")["snapshot_id"] == latest.id, 30, "catch up"
    )
    kinds = [
        json.loads(p.read_text())["commitKind"] for p in (location / "snapshot").glob("snapshot-*")
    ]
    assert kinds.count("APPEND") == 6
    assert kinds.count("ANALYZE") <= 6
    assert daemon.terminate() == 0
