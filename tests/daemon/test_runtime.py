"""``lakestatsd.runtime``: what one poll of a table does."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from call_counts import count_calls
from lakestats.tables import OpenedTable
from lakestats.testing import IcebergWarehouse
from lakestatsd.config import ServiceConfig as Config
from lakestatsd.wiring import Service, core_fns

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def test_a_processed_commit_loads_the_table_once(tmp_path: Path) -> None:
    """The poll refreshes the table to see that there is work; the run it starts takes the
    table as refreshed (``analyze_table(refreshed=True)``) instead of loading it again —
    for a catalog table each load parses the whole metadata file. The daemon's own
    runtime on a catalog table; the refreshes counted around the real one."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", pa.table({"id": [1]}, schema=SCHEMA))
    config = Config.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "catalog": {wh.catalog_name: dict(wh.catalog_properties)},
            "table": [{"name": "t", "catalog": wh.catalog_name, "identifier": wh.identifier("t")}],
        }
    )
    core = core_fns(config)
    calls: Counter[str] = Counter()

    def counting_opener(table: Any, cfg: Any) -> OpenedTable:
        opened = core.opener(table, cfg)
        count_calls(opened.table, "refresh", calls)
        return opened

    service = Service(config, dataclasses.replace(core, opener=counting_opener))
    for i in range(2, 5):
        snapshot_id = wh.append("t", pa.table({"id": [i]}, schema=SCHEMA))
        before = calls["refresh"]
        assert service.runtime.process("t", lambda: False)
        assert calls["refresh"] - before == 1
        assert service.runtime.read_stats("t", None)["snapshot_id"] == snapshot_id
