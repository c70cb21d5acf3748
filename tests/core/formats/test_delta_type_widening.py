"""Delta type widening between incremental runs (int → long, float → double, a decimal's
scale): the files written before hold theta sketches of values of the old type (an int
hashed as 4 bytes, a long as 8; a decimal at its old scale), so the first data commit after
the widening lists every live file again and the stats count each value once, as a
from-scratch run does. The same 50 values are written before and after; the oracle is
deltalake's own read of the table, counted with pyarrow.compute.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from cli_runs import analyzed_stats
from delta_tables import DeltaWriter, live_rows
from lakestats.formats.delta import open_location
from lakestats.values import to_json

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12
ROWS = 50
WIDENED = {"a": "long", "f": "double", "d": "decimal(10, 4)"}


def rows(decimal_scale: int) -> dict[str, list[Any]]:
    quantum = Decimal(1).scaleb(-decimal_scale)
    return {
        "a": list(range(ROWS)),
        "f": [i + 0.5 for i in range(ROWS)],
        "d": [(Decimal(i) / 4).quantize(quantum) for i in range(ROWS)],
    }


def test_values_written_before_and_after_a_widening_count_once(spark: Any, tmp_path: Path) -> None:
    table = DeltaWriter(tmp_path / "t")
    table.create([("a", "int"), ("f", "float"), ("d", "decimal(5, 2)")])
    table.append(rows(2))
    location = str(tmp_path / "t")
    before = analyzed_stats(location, tmp_path / "inc")
    assert before["columns"]["a"]["type"] == "int"
    for name, type_str in WIDENED.items():
        table.widen_column(name, type_str)
    table.append(rows(4))

    # the data commit after the widening removes the older file and adds both
    opened = open_location(location)
    *_, first, widened = opened.commits_since(None)
    assert len(first.added_files) == 1
    assert {f.path for f in widened.removed_files} == {f.path for f in first.added_files}
    assert len(widened.added_files) == 2

    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    live = live_rows(location)
    assert after["record_count"] == live.num_rows == 2 * ROWS
    for name, type_str in WIDENED.items():
        got = after["columns"][name]
        assert got["type"] == type_str
        values = live.column(name)
        exact = pc.count_distinct(values).as_py()
        assert exact == ROWS
        assert abs(got["ndv"] - exact) <= max(1, 3 * THETA_RSE * exact), (name, got["ndv"])
        low, high = pc.min_max(values).values()
        assert (got["min"], got["max"]) == (to_json(low.as_py()), to_json(high.as_py())), name
        assert got == scratch["columns"][name], name


def test_an_overwrite_that_changes_a_columns_type_reads_from_scratch(
    spark: Any, tmp_path: Path
) -> None:
    """Without column mapping a column's name is its identity: an overwrite with
    ``schema_mode="overwrite"`` turning ``g`` from a string into a long keeps its id. The
    removed file of the first commit is read, from scratch, with the schema it was written
    with (a Spark read of a string column as a long fails), as an incremental run read it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    location = str(tmp_path / "t")
    ids = pa.array(range(ROWS), pa.int64())
    write_deltalake(location, pa.table({"id": ids, "g": [f"g{i}" for i in range(ROWS)]}))
    analyzed_stats(location, tmp_path / "inc")
    longs = pa.table({"id": ids, "g": pa.array(range(-ROWS, 0), pa.int64())})
    write_deltalake(location, longs, mode="overwrite", schema_mode="overwrite")  # type: ignore[arg-type]

    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    live = live_rows(location)
    got = scratch["columns"]["g"]
    assert got["type"] == "long"
    assert (got["min"], got["max"], got["null_count"]) == (-ROWS, -1, 0)
    assert abs(got["ndv"] - pc.count_distinct(live.column("g")).as_py()) <= 1
    assert got == after["columns"]["g"]
