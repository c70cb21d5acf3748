"""String and binary bounds cut by the writer's metrics mode (Iceberg's
``write.metadata.metrics.*``): a file's bounds are cut or not by the mode it was written
under, which the table may no longer state. With sketches the scan's exact min/max win for
such columns; the oracle is pyiceberg's read of the table, and an incremental run must
equal a from-scratch one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import parquet_file_to_data_file

from cli_runs import analyzed_stats, cli
from lakestats.testing import IcebergWarehouse

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("b", pa.binary())])


def _rows(start: int, prefix: str) -> dict[str, list[Any]]:
    ids = list(range(start, start + 20))
    return {
        "id": ids,
        "s": [f"{prefix * 20}-{i:04d}" for i in ids],
        "b": [prefix.encode() * 20 + i.to_bytes(2, "big") for i in ids],
    }


def _exact(wh: IcebergWarehouse) -> dict[str, tuple[Any, Any]]:
    data = wh.table("t").scan().to_arrow()
    out = {}
    for name in ("s", "b"):
        found = pc.min_max(data.column(name)).as_py()
        out[name] = (found["min"], found["max"])
    return out


def _shown(doc: dict[str, Any], name: str) -> tuple[Any, Any]:
    column = doc["columns"][name]
    assert column["min_max_exact"] is True, column
    if name == "b":
        return bytes.fromhex(column["min"]), bytes.fromhex(column["max"])
    return column["min"], column["max"]


def test_bounds_cut_under_an_earlier_mode_are_not_taken_for_exact(tmp_path: Path) -> None:
    """Files written under ``truncate(4)``, then the table switched to ``full``: the older
    files' bounds (``mmmm``, ``nnnn`` for a max — not a value of the column) must not be
    read as exact once the table says ``full``."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, properties={"write.metadata.metrics.default": "truncate(4)"})
    location = wh.location("t")
    wh.append("t", _rows(0, "m"))
    incremental = analyzed_stats(location, tmp_path / "inc")
    with wh.table("t").transaction() as tx:
        tx.set_properties({"write.metadata.metrics.default": "full"})
    wh.append("t", _rows(100, "c"))

    incremental = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")

    exact = _exact(wh)
    assert exact["s"] == ("c" * 20 + "-0100", "m" * 20 + "-0019")
    for doc in (incremental, scratch):
        for name in ("s", "b"):
            assert _shown(doc, name) == exact[name], name


def _with_java_cut_max(wh: IcebergWarehouse, tmp_path: Path) -> bytes:
    """A file whose binary max has 0xff from byte 2 on, added with the upper bound Java
    Iceberg writes for it under truncate(16) (``BinaryUtil.truncateBinaryMax``: the prefix
    up to the last byte below 0xff, incremented — ``02``). Java Iceberg is not installed
    here, so pyiceberg's metrics are written and that one bound replaced, as Java has it."""
    wh.create_table("t", pa.schema([("id", pa.int64()), ("b", pa.binary())]))
    table = wh.table("t")
    big = b"\x01" + b"\xff" * 15 + b"\x05"
    path = os.fspath(tmp_path / "f1.parquet")
    written = {"id": pa.array([1, 2], pa.int64()), "b": pa.array([b"\x01", big], pa.binary())}
    pq.write_table(pa.table(written), path)
    with table.transaction() as tx:  # an id-less file is read through the name mapping
        tx.set_properties(
            {"schema.name-mapping.default": table.schema().name_mapping.model_dump_json()}
        )
    table = wh.table("t")
    data_file = parquet_file_to_data_file(table.io, table.metadata, path)
    data_file.upper_bounds[2] = b"\x02"
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)
    return big


def test_a_binary_max_java_shortened_is_not_taken_for_exact(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    big = _with_java_cut_max(wh, tmp_path)
    location = wh.location("t")

    meta = str(tmp_path / "meta")
    cli("analyze", location, "--state-dir", meta, "--no-sketches", "-q")
    metadata_only = json.loads(cli("show", location, "--state-dir", meta, "--json"))
    sketched = analyzed_stats(location, tmp_path / "sketched")

    assert metadata_only["columns"]["b"]["min_max_exact"] is False
    assert _shown(sketched, "b") == (b"\x01", big)
