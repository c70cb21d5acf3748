"""``make demo FORMAT=paimon`` (examples/demo_paimon.py) runs end to end: the real script,
its real daemon and pypaimon writes, in a temporary warehouse on a free port.

Bounded in time: sketching is off (``LAKESTATS_SKETCH__ENABLED=false``: no Spark), so
the run takes seconds; everything else is what ``make demo FORMAT=paimon`` runs. The
published ``mergedRecordCount`` after each step is checked against pypaimon's reader.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from lakestatsd_harness import daemon_env
from pypaimon import CatalogFactory

from lakestats.config import load_config

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo_paimon.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_the_paimon_demo_publishes_every_step_and_stops_cleanly(tmp_path: Path) -> None:
    location = tmp_path / "demo" / "warehouse" / "shop.db" / "orders"
    env = daemon_env(
        LAKESTATS_TABLE__ORDERS__LOCATION=str(location),
        LAKESTATS_STATE_DIR=str(tmp_path / "state"),
        LAKESTATS_HTTP__LISTEN=f"127.0.0.1:{free_port()}",
        LAKESTATS_SKETCH__ENABLED="false",
        LAKESTATS_WATCH__POLL_INTERVAL_S="1",
    )
    run = subprocess.run(
        [sys.executable, str(DEMO)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    log = tmp_path / "demo" / "lakestatsd.log"
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:], log.read_text()[-2000:])
    published = [
        (m["label"], int(m["data"]), int(m["analyze"]), int(m["merged"]))
        for m in re.finditer(
            r"demo: (?P<label>.+?)\s+data snapshot\s+(?P<data>\d+) -> ANALYZE snapshot\s+"
            r"(?P<analyze>\d+): mergedRecordCount\s+(?P<merged>\d+)",
            run.stdout,
        )
    ]
    assert [p[0] for p in published] == [
        "first commit",
        "append 5000 rows",
        "append 5000 rows",
        "overwrite region=apac",
    ]
    # every ANALYZE snapshot follows the data snapshot it describes
    assert all(analyzed > data for _, data, analyzed, _ in published)
    assert [merged for *_, merged in published][:3] == [5000, 10000, 15000]
    catalog = CatalogFactory.create({"warehouse": str(location.parents[1])})
    table = catalog.get_table("shop.orders")
    read = table.new_read_builder()
    rows = read.new_read().to_arrow(read.new_scan().plan().splits())
    assert published[-1][3] == rows.num_rows  # the overwrite replaced region apac only
    latest = table.snapshot_manager().get_latest_snapshot()
    assert latest.commit_kind == "ANALYZE"
    stats = json.loads((location / "statistics" / latest.statistics).read_text())
    assert stats["mergedRecordCount"] == rows.num_rows
    assert "final stats, as `lakestats show` prints them" in run.stdout
    assert "lakestatsd stopped with exit code 0 after SIGTERM" in run.stdout


def test_the_paimon_demo_finds_the_repository_config_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # not the repository
    monkeypatch.syspath_prepend(str(REPO / "examples"))  # as for a script: its shared module
    spec = importlib.util.spec_from_file_location("demo_paimon_example", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.CONFIG_PATH == REPO / "config" / "local-paimon.toml"
    (table,) = load_config(demo.CONFIG_PATH, env={}).table
    assert table.location is not None and table.publish
    wanted = REPO / "demo-warehouse-paimon/warehouse/shop.db/orders"
    assert Path(table.location).resolve() == wanted
