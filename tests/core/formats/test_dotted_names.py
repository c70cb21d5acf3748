"""Column names that hold dots ("event.ts", as JSON flattened into columns names them), beside
a struct whose field path is dotted too. A column was found in the files by its dotted name
split at the dots, so ``event.ts`` was looked for as field ``ts`` of a struct ``event``:
NDV 0, no min/max and no quantiles, presented as complete. Written by delta-rs and
pyiceberg; expected values from pyarrow over the rows each writer reads back; both sketch
engines.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from cli_runs import analyzed_stats
from lakestats.cli import main
from lakestats.formats.delta import open_location
from lakestats.model import SketchSettings
from lakestats.pipeline import sketch_files
from lakestats.sketches.merge import theta_estimate
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark


def _rows() -> pa.Table:
    n = 60
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "event.ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(hours=i % 30) for i in range(n)],
                pa.timestamp("us"),
            ),
            "s.long": pa.array([f"{'x' * 40}-{i % 20:02d}" for i in range(n)]),
            "s": pa.array(
                [{"q.r": i % 7, "plain": i % 11} for i in range(n)],
                pa.struct([("q.r", pa.int64()), ("plain", pa.int64())]),
            ),
        }
    )


EXPECTED_NDV = {"id": 60, "event.ts": 30, "s.long": 20, "s.q.r": 7, "s.plain": 11}


def _leaf(data: pa.Table, name: str) -> pa.ChunkedArray:
    if name.startswith("s.") and name != "s.long":
        return pc.struct_field(data.column("s"), name.removeprefix("s."))
    return data.column(name)


def _check(doc: dict[str, Any], data: pa.Table) -> None:
    for name, ndv in EXPECTED_NDV.items():
        column = doc["columns"][name]
        values = _leaf(data, name)
        low = pc.min_max(values)["min"]
        assert column["ndv"] == ndv, name
        assert column["min_max_exact"] is True, name
        assert (column["min"] is None) is (low.as_py() is None), name
        assert column["null_count"] == values.null_count, name
        if name != "s.long":
            assert sum(b["count"] for b in column["histogram"]) == data.num_rows, name
    long = doc["columns"]["s.long"]
    assert (long["min"], long["max"]) == ("x" * 40 + "-00", "x" * 40 + "-19")
    assert long["avg_len"] == 43.0
    event = doc["columns"]["event.ts"]
    assert event["min"].startswith("2024-01-01T00:00:00")
    assert event["max"].startswith("2024-01-02T05:00:00")


def test_a_delta_table_with_dotted_column_names(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    write_deltalake(table, _rows())
    _check(analyzed_stats(table, tmp_path / "state"), DeltaTable(table).to_pyarrow_table())


@pytest.mark.parametrize("engine", ["sql", "auto"])
def test_both_engines_find_a_column_by_its_names_not_its_dotted_name(
    spark: Any, tmp_path: Path, engine: Literal["sql", "auto"]
) -> None:
    table = str(tmp_path / "t")
    write_deltalake(table, _rows())
    opened = open_location(table)
    schema = opened.schema()
    paths = [f.path for c in opened.commits_since(None) for f in c.added_files]

    (sketches,) = sketch_files(
        spark, paths, schema, SketchSettings(), match_by="name", engine=engine
    ).values()

    for column in schema.columns:
        assert round(theta_estimate(sketches[column.field_id].theta)) == EXPECTED_NDV[column.name]


def test_an_iceberg_table_with_dotted_column_names(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    data = _rows()
    wh.create_table("t", data.schema)
    wh.append("t", data)
    _check(analyzed_stats(wh.location("t"), tmp_path / "state"), wh.table("t").scan().to_arrow())


def test_a_dotted_name_that_is_also_a_struct_field_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without column mapping Delta knows a column by its name alone: a column ``a.b`` and
    field ``b`` of a struct ``a`` cannot be told apart (one line, no traceback)."""
    table = str(tmp_path / "t")
    struct = pa.array([{"b": 1}], pa.struct([("b", pa.int64())]))
    write_deltalake(table, pa.table({"a.b": pa.array([1], pa.int64()), "a": struct}))
    code = main(["analyze", table, "--state-dir", str(tmp_path / "state"), "--no-sketches"])

    assert code == 1
    message = capsys.readouterr().err.strip()
    assert "columns 'a.b' and 'b' of struct 'a' are both 'a.b'" in message, message
    assert "Traceback" not in message
