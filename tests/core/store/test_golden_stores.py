"""Stats stores written by earlier lakestats releases, served and continued by this one.

``tests/data/stores/<commit>.tar.gz`` holds four tables (Delta and Iceberg partitioned,
Paimon append-only and primary-key; two appends and a delete each, written by delta-rs,
pyiceberg and pypaimon) and the stats store that commit's ``lakestats`` made of them with
sketches, with its ``show --json`` of each (``make_golden.py`` there says how). A store
names data files by full path and its folder by the table's location, so the tables go
back to where they were written, ``/tmp/lakestats-golden/<commit>/``.

Today's code must serve what the old store holds as it was, and continue it: one more
commit analyzed into the old store equals today's analysis of the table from scratch —
but for the per-file sketches the old release did not keep (frequent items, value
samples; string columns' frequent items before 47c3b90, whose store holds them), which
stay missing while a file sketched without them lives, as docs/configuration.md says, and
which ``show`` then names.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake

from lakestats.cli import main
from lakestats.testing import IcebergWarehouse
from paimon_tables import PaimonWarehouse

STORES = Path(__file__).resolve().parents[2] / "data" / "stores"
sys.path.insert(0, str(STORES))

from make_golden import ROOT, TABLES, rows  # noqa: E402

GOLDEN = sorted(STORES.glob("*.tar.gz"))
_NOT_COMPARED = ("computed_at_ms", "published", "table")
# what a column merges only when every live file kept it (an older release kept neither)
_PER_FILE_SKETCHES = ("frequent_items", "value_sample")
_BEFORE_STRING_FREQUENT_ITEMS = {"777e461", "efce2eb", "2f7007f"}


def cli(*args: str) -> str:
    out = io.StringIO()
    assert main(list(args), out=out) == 0, args
    return out.getvalue()


@pytest.fixture(params=GOLDEN, ids=lambda p: p.name.split(".")[0])
def golden(request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    """The release's tables and store back in place: (their folder, golden.json)."""
    commit = request.param.name.split(".")[0]
    shutil.rmtree(ROOT / commit, ignore_errors=True)
    with tarfile.open(request.param) as tar:
        tar.extractall(ROOT, filter="data")
    yield ROOT / commit, json.loads((ROOT / commit / "golden.json").read_text())
    shutil.rmtree(ROOT / commit, ignore_errors=True)


def test_every_release_stored_every_format() -> None:
    assert len(GOLDEN) >= 2
    for archive in GOLDEN:
        with tarfile.open(archive) as tar:
            doc = json.load(tar.extractfile(f"{archive.name.split('.')[0]}/golden.json"))  # type: ignore[arg-type]
        assert set(doc["shown"]) == set(TABLES)


def test_an_old_store_serves_what_its_release_wrote(golden: tuple[Path, dict[str, Any]]) -> None:
    root, doc = golden
    for name, location in doc["locations"].items():
        served = json.loads(cli("show", location, "--state-dir", str(root / "state"), "--json"))
        assert served == doc["shown"][name], name
        # and what reads it does not fail on its older shape
        estimate = json.loads(
            cli("estimate", location, "id < 100", "--state-dir", str(root / "state"), "--json")
        )
        [term] = estimate["estimates"]
        assert 0 <= term["rows"] <= estimate["table_rows"] == served["merged_record_count"]
        cli("advise", location, "--state-dir", str(root / "state"))


def _next_commit(root: Path) -> None:
    """One more commit to each table, by today's writers."""
    write_deltalake(root / "delta", rows(500, 100), partition_by=["region"], mode="append")
    IcebergWarehouse(root / "iceberg").append("t", rows(500, 100))
    paimon = PaimonWarehouse(root / "paimon")
    paimon.write("t", rows(500, 100).to_pydict())
    paimon.write("pk", rows(100, 50).to_pydict())  # keys written again: a merge


def _comparable(doc: dict[str, Any], kept: set[str], strings_kept: bool) -> dict[str, Any]:
    """``doc`` without what differs by design, and without what the per-file sketches
    ``kept`` by every live file decide where a column lacks one of them (string columns'
    frequent items: kept since 47c3b90)."""
    columns = {}
    for name, column in doc["columns"].items():
        sketch = dict(column.get("sketch") or {})
        compared = dict(column)
        if set(_PER_FILE_SKETCHES) - kept and "quantiles" in sketch:
            for key in _PER_FILE_SKETCHES:
                sketch.pop(key, None)
            del compared["frequent_values"]
            compared["histogram"] = [
                {k: bucket[k] for k in ("lower", "upper", "count")}
                for bucket in column["histogram"]
            ]
        if column["type"] == "string" and not strings_kept:
            sketch.pop("frequent_items", None)
            del compared["frequent_values"]
        columns[name] = {**compared, "sketch": sketch}
    return {k: v for k, v in doc.items() if k not in _NOT_COMPARED} | {"columns": columns}


def _live_rows(root: Path, name: str, location: str) -> int:
    if name == "delta":
        return DeltaTable(location).to_pyarrow_table().num_rows
    if name == "iceberg":
        return IcebergWarehouse(root / "iceberg").table("t").scan().to_arrow().num_rows
    return PaimonWarehouse(root / "paimon").read("t" if name == "paimon" else "pk").num_rows


@pytest.mark.spark
def test_an_old_store_continued_equals_a_rebuild(
    golden: tuple[Path, dict[str, Any]], spark: Any, tmp_path: Path
) -> None:
    """Half the tables' old stores are compacted first: today's compaction rewrites the
    old segments, and the commit after merges into what it wrote."""
    root, doc = golden
    for name in TABLES[::2]:
        cli("compact", doc["locations"][name], "--state-dir", str(root / "state"))
    _next_commit(root)
    for name, location in doc["locations"].items():
        old_sketch = next(iter(doc["shown"][name]["columns"].values()))  # "id": has quantiles
        kept = {k for k in _PER_FILE_SKETCHES if k in old_sketch["sketch"]}
        strings_kept = any(
            c["type"] == "string" and "frequent_items" in c["sketch"]
            for c in doc["shown"][name]["columns"].values()
        )
        cli("analyze", location, "--state-dir", str(root / "state"), "-q")
        cli("analyze", location, "--state-dir", str(tmp_path / name), "-q")
        continued = json.loads(cli("show", location, "--state-dir", str(root / "state"), "--json"))
        rebuilt = json.loads(cli("show", location, "--state-dir", str(tmp_path / name), "--json"))
        assert continued["snapshot_id"] != doc["shown"][name]["snapshot_id"]
        comparable = _comparable(continued, kept, strings_kept)
        assert comparable == _comparable(rebuilt, kept, strings_kept), name
        assert continued["merged_record_count"] == _live_rows(root, name, location), name
        lacks = any(
            "quantiles" in c["sketch"] and not set(_PER_FILE_SKETCHES) <= set(c["sketch"])
            for c in continued["columns"].values()
        )
        if name != "paimon_pk":  # a key merge sketches every file of its bucket again
            assert lacks == (kept != set(_PER_FILE_SKETCHES)), name
        # string columns' frequent values are newer than the stores before 47c3b90
        assert strings_kept == (doc["commit"] not in _BEFORE_STRING_FREQUENT_ITEMS), name
        strings_lack = any(
            c["type"] == "string" and "frequent_items" not in c["sketch"]
            for c in continued["columns"].values()
        )
        human = cli("show", location, "--state-dir", str(root / "state"))
        assert ("not kept:" in human) == (lacks or strings_lack), name
        assert "not kept:" not in cli("show", location, "--state-dir", str(tmp_path / name))
        # kept by no file on purpose: nothing to say
        off = tmp_path / "off.toml"
        off.write_text("[sketch]\nfrequent_items = 0\nvalue_samples = false\n")
        quiet = cli("show", location, "--state-dir", str(root / "state"), "--config", str(off))
        assert "not kept:" not in quiet
