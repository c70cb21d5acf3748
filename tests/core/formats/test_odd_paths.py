"""Tables in folders whose names hold characters that URIs give a meaning (``#``, ``?``,
``%20``, spaces, non-ASCII), written by their real writers and analyzed with sketches.

A Delta table at ``…/t#b`` published its stats into the ``_delta_log`` of the table at
``…/t`` (its ``file:`` URI read as ``…/t`` with a fragment), and one under ``d%20e`` into a
folder ``d e`` it created: each table's stats must stay its own and describe its rows.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake

from lakestats.cli import main

pytestmark = [pytest.mark.spark]


def cli(*args: str) -> str:
    out = io.StringIO()
    assert main(list(args), out=out) == 0, args
    return out.getvalue()


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "k": [f"k {i % 4}" for i in ids]})


def stats(location: Path, state: Path) -> dict[str, Any]:
    cli("analyze", str(location), "--state-dir", str(state), "-q")
    return json.loads(cli("show", str(location), "--state-dir", str(state), "--json"))


def test_delta_tables_under_odd_folder_names_keep_their_own_stats(
    tmp_path: Path, spark: Any
) -> None:
    plain = tmp_path / "t"
    odd = [tmp_path / "t#b", tmp_path / "q?x=1" / "t", tmp_path / "d%20e" / "t", tmp_path / "é 表"]
    write_deltalake(plain, rows(0, 3))
    for i, location in enumerate(odd):
        # partition values with a space: the writer escapes them in the file names.
        # Written elsewhere and moved in: delta-rs itself decodes a "%20" in its path
        staging = tmp_path / "staging"
        write_deltalake(staging, rows(100 * i, 40 + i), partition_by=["k"])
        location.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(location)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    state = tmp_path / "state"
    plain_doc = stats(plain, state)
    for i, location in enumerate(odd):
        doc = stats(location, state)
        live = rows(100 * i, 40 + i)
        assert doc["record_count"] == live.num_rows == 40 + i, location
        assert doc["columns"]["id"]["ndv"] == len(pc.unique(live["id"]))  # exact when small
        assert doc["columns"]["id"]["sketch"]["sketched_files"] == doc["file_count"]
        [published] = doc["published"]
        assert f"{location}/_delta_log/_lakestats/" in published, published
    # the first table's stats and sidecar are its own still
    assert stats(plain, state)["record_count"] == plain_doc["record_count"] == 3
    index = json.loads((plain / "_delta_log" / "_lakestats" / "index.json").read_text())
    [(_, name)] = index["versions"].items()
    sidecar = json.loads((plain / "_delta_log" / "_lakestats" / name).read_text())
    assert sidecar["record_count"] == 3
    # nothing was written outside the tables' own folders and the state dir
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert {p.parts[0] for p in set(after) - set(before)} <= {
        "state",
        *(p.relative_to(tmp_path).parts[0] for p in [plain, *odd]),
    }
    assert not (tmp_path / "d e").exists()
