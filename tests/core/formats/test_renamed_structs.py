"""A struct column's leaves are found in data files by the struct's field id where the
format has one (Iceberg; Delta with column mapping), not by its name: a struct renamed
since a file was written, and a Delta struct whose files name it by its physical name
(``col-<uuid>``), still read as their values, not as NULL. Both sketch engines (Arrow and
Spark SQL), from scratch and incrementally; the oracle is the writer's own read of the
table, counted with pyarrow.compute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from cli_runs import cli
from delta_tables import DeltaWriter, live_rows
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12
ROWS = 100
STRUCT = pa.struct([("p", pa.int32()), ("r", pa.string())])


def struct_rows(base: int) -> tuple[list[int], list[dict[str, Any] | None]]:
    """Ids and struct values (every fourth NULL) starting at ``base``."""
    ids = list(range(base, base + ROWS))
    values = [{"p": base + i, "r": f"r{base + i}"} if i % 4 else None for i in range(ROWS)]
    return ids, values


def stats(location: str, state: Path, engine: str) -> dict[str, Any]:
    config = state.parent / f"{engine}.toml"
    config.write_text(f'[sketch]\nengine = "{engine}"\n')
    common = ("--state-dir", str(state), "--config", str(config))
    cli("analyze", location, *common, "-q")
    doc: dict[str, Any] = json.loads(cli("show", location, *common, "--json"))
    return doc


def assert_leaves_exact(doc: dict[str, Any], rows: pa.Table, struct: str) -> None:
    values = rows.column(struct).combine_chunks()
    for leaf in ("p", "r"):
        got = doc["columns"][f"{struct}.{leaf}"]
        exact = pc.struct_field(values, leaf)
        if exact.type == pa.string_view():  # deltalake's read; pyarrow has no min over it
            exact = exact.cast(pa.string())
        assert got["null_count"] == exact.null_count, leaf
        assert got["min"] == pc.min(exact).as_py(), leaf
        assert got["max"] == pc.max(exact).as_py(), leaf
        distinct = pc.count_distinct(exact).as_py()
        assert abs(got["ndv"] - distinct) <= max(1, 3 * THETA_RSE * distinct), leaf


@pytest.mark.parametrize("engine", ["auto", "sql"])
def test_iceberg_struct_renamed_after_files_were_written(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64()), ("s", STRUCT)]))

    def append(base: int) -> None:
        table = wh.table("t")
        schema = table.schema().as_arrow()
        ids, values = struct_rows(base)
        table.append(pa.table([ids, values], schema=schema))

    append(0)
    location = wh.location("t")
    stats(location, tmp_path / "inc", engine)
    with wh.table("t").update_schema() as update:
        update.rename_column("s", "s2")
    append(1000)

    rows = wh.table("t").scan().to_arrow()
    scratch = stats(location, tmp_path / "scratch", engine)
    after = stats(location, tmp_path / "inc", engine)
    assert_leaves_exact(scratch, rows, "s2")
    for leaf in ("s2.p", "s2.r"):
        assert after["columns"][leaf] == scratch["columns"][leaf]


@pytest.mark.parametrize("engine", ["auto", "sql"])
def test_delta_struct_read_by_its_column_mapping_id(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    table = DeltaWriter(tmp_path / "t")
    table.create([("id", "long"), ("s", STRUCT)], column_mapping=True)
    table.append(dict(zip(("id", "s"), struct_rows(0), strict=True)))
    location = table.path
    stats(location, tmp_path / "inc", engine)
    table.rename_column("s", "s2")
    table.append(dict(zip(("id", "s2"), struct_rows(1000), strict=True)))

    rows = live_rows(location)
    scratch = stats(location, tmp_path / "scratch", engine)
    after = stats(location, tmp_path / "inc", engine)
    assert_leaves_exact(scratch, rows, "s2")
    for leaf in ("s2.p", "s2.r"):
        assert after["columns"][leaf] == scratch["columns"][leaf]
