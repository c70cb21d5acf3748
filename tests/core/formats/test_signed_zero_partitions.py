"""A table partitioned by a double column holding both -0.0 and 0.0 (delta-rs writes
them as two partitions, as Iceberg and Paimon do): two partitions in the stats too, and a
delete in one leaves the other's rows counted — after every commit, incrementally and from
scratch, against the rows delta-rs reads."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lakestats.analyze import analyze_table
from lakestats.config import Config, TableConfig
from lakestats.read import read_stats
from lakestats.tables import open_configured

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.float64())])
VOLATILE = {"computed_at_ms", "published"}


def analyzed(location: Path, state: Path) -> dict[str, Any]:
    config = Config.model_validate({"state_dir": str(state), "sketch": {"enabled": False}})
    opened = open_configured(TableConfig(name="t", location=str(location)), config)
    analyze_table(opened, config=config, sketcher=None)
    return {k: v for k, v in read_stats(opened).items() if k not in VOLATILE}


def signed(value: float) -> tuple[float, float]:
    return value, math.copysign(1.0, value)


def test_minus_zero_and_zero_are_two_partitions_through_a_delete(tmp_path: Path) -> None:
    location = tmp_path / "t"
    steps = [
        lambda: write_deltalake(
            location,
            pa.table({"id": [1, 3], "p": [-0.0, 0.0]}, schema=SCHEMA),
            mode="append",
            partition_by=["p"],
        ),
        lambda: write_deltalake(
            location,
            pa.table({"id": [6, 7, 9], "p": [0.0, 0.0, -0.0]}, schema=SCHEMA),
            mode="append",
        ),
        lambda: DeltaTable(location).delete("id IN (3, 6, 9)"),
    ]
    for step in steps:
        step()
        doc = analyzed(location, tmp_path / "incremental")
        rows = DeltaTable(location).to_pyarrow_table()
        expected = Counter(signed(v) for v in rows["p"].to_pylist())
        assert doc["record_count"] == rows.num_rows
        got = {signed(part["partition"]["p"]): part["record_count"] for part in doc["partitions"]}
        assert got == dict(expected), (got, expected)
        ids = rows["id"].to_pylist()
        assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["max"]) == (min(ids), max(ids))
    assert len(expected) == 2  # both zeros still hold a row at the end
    assert doc == analyzed(location, tmp_path / "from-scratch")
