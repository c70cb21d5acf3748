"""Iceberg type promotions between incremental runs (int → long, float → double, a
decimal's precision): the files written before hold theta sketches hashed as values of the
old type (an int's 4 bytes, a long's 8), so the first commit after the promotion lists every
live file again and the stats count each value once, as a from-scratch run does.

The same 50 values are appended before and after the promotion; the oracle is pyarrow's
exact count of distinct values over pyiceberg's read of the table.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.types import DecimalType, DoubleType, LongType

from cli_runs import analyzed_stats
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12
ROWS = 50


def test_values_written_before_and_after_a_promotion_count_once(spark: Any, tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table(
        "t", pa.schema([("a", pa.int32()), ("f", pa.float32()), ("d", pa.decimal128(5, 2))])
    )

    def append() -> None:
        table = wh.table("t")
        rows = {
            "a": list(range(ROWS)),
            "f": [i + 0.5 for i in range(ROWS)],
            "d": [Decimal(i) / 4 for i in range(ROWS)],
        }
        table.append(pa.table(rows, schema=table.schema().as_arrow()))

    append()
    location = wh.location("t")
    before = analyzed_stats(location, tmp_path / "inc")
    assert before["columns"]["a"]["type"] == "int"
    with wh.table("t").update_schema() as update:
        update.update_column("a", LongType())
        update.update_column("f", DoubleType())
        update.update_column("d", DecimalType(10, 2))
    append()
    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    rows = wh.table("t").scan().to_arrow()
    assert after["record_count"] == rows.num_rows == 2 * ROWS
    for name, type_str in (("a", "long"), ("f", "double"), ("d", "decimal(10, 2)")):
        got = after["columns"][name]
        assert got["type"] == type_str
        exact = pc.count_distinct(rows.column(name)).as_py()
        assert exact == ROWS
        assert abs(got["ndv"] - exact) <= max(1, 3 * THETA_RSE * exact), (name, got["ndv"])
        assert got == scratch["columns"][name], name
