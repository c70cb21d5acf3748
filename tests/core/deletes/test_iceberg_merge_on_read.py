"""Merge-on-read deletes on a table written here, checked against DuckDB after every commit.

pyiceberg writes the data; ``formats/iceberg/testing_deletes`` commits the delete files
Spark or Flink would write (pyiceberg cannot): position deletes naming one file (equal
``file_path`` bounds), one position-delete file naming two files (its ``file_path`` column
must be read to know its targets), and an equality delete scoped to one partition with a
NULL key. After each commit the stats (analyzed incrementally) must equal DuckDB's
iceberg extension (it applies position and equality deletes) over the same snapshot, and
at the end equal a from-scratch run.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform

from foreign import duckdb_with_iceberg
from lakestats.analyze import CommitReport, analyze_table
from lakestats.cli import main
from lakestats.config import Config
from lakestats.formats.iceberg.testing_deletes import add_equality_deletes, add_position_deletes
from lakestats.testing import IcebergWarehouse
from lakestats.values import to_json

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("s", pa.string()),
        pa.field("v", pa.float64()),
        pa.field("d", pa.date32()),
        pa.field("flag", pa.bool_()),
        pa.field("p", pa.string()),
    ]
)


def _rows(start: int, n: int, p: str) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "s": [None if i % 9 == 0 else f"s{i % 5}" for i in ids],
            "v": [(i * 7 % 101) / 4 for i in ids],
            "d": [dt.date(2024, 1, 1) + dt.timedelta(days=i % 40) for i in ids],
            "flag": [i % 2 == 0 for i in ids],
            "p": [p] * n,
        },
        schema=SCHEMA,
    )


def _cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def _assert_equals_duckdb(doc: dict[str, Any], duck: Any, metadata: str) -> None:
    scan = f"iceberg_scan('{metadata}')"
    (live,) = duck.execute(f"SELECT count(*) FROM {scan}").fetchone()  # noqa: S608
    assert doc["merged_record_count"] == live
    for column, got in doc["columns"].items():
        quoted = f'"{column}"'
        nulls, lo, hi, ndv = duck.execute(
            f"SELECT count(*) - count({quoted}), min({quoted}), max({quoted}), "  # noqa: S608
            f"count(DISTINCT {quoted}) FROM {scan}"
        ).fetchone()
        assert got["null_count"] == nulls, column
        assert (got["min"], got["max"]) == (to_json(lo), to_json(hi)), column
        assert got["ndv"] == ndv, column  # < 4096 values: the theta sketch is exact
    for part in doc["partitions"]:
        (rows,) = duck.execute(
            f"SELECT count(*) FROM {scan} WHERE p = ?",  # noqa: S608
            [part["partition"]["p"]],
        ).fetchone()
        assert part["merged_record_count"] == rows, part["partition"]


def test_merge_on_read_deletes_equal_duckdb_after_every_commit(spark: Any, tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("p", IdentityTransform())])
    wh.append("t", _rows(0, 200, "a"))
    wh.append("t", _rows(200, 100, "a"))
    wh.append("t", _rows(300, 100, "b"))
    files = {
        task.file.record_count: task.file.file_path
        for task in wh.table("t").scan().plan_files()
        if task.file.partition[0] == "a"
    }
    a1, a2 = files[200], files[100]
    location, state = wh.location("t"), str(tmp_path / "stats")
    duck = duckdb_with_iceberg(threads=1)

    def analyze() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        reports: list[CommitReport] = []
        analyze_table(location, config=Config(state_dir=state), on_commit=reports.append)
        doc = json.loads(_cli("show", location, "--state-dir", state, "--json"))
        _assert_equals_duckdb(doc, duck, wh.table("t").metadata_location)
        return doc, [r.log_fields() for r in reports]

    doc, _ = analyze()
    assert doc["merged_record_count"] == 400

    add_position_deletes(wh.table("t"), {a1: [0, 5, 7]})  # one target: equal bounds
    doc, (commit,) = analyze()
    assert (commit["deletes_reread_files"], commit["deletes_reread_rows"]) == (1, 200)
    assert doc["merged_record_count"] == 397

    add_position_deletes(wh.table("t"), {a1: [9], a2: [1, 2]}, one_file=True)
    doc, (commit,) = analyze()
    assert (commit["deletes_reread_files"], commit["deletes_reread_rows"]) == (2, 300)
    assert doc["merged_record_count"] == 394

    # in partition a, keyed on the partition column too (as Flink writes them): DuckDB
    # applies equality deletes to every partition (see the scope test below)
    add_equality_deletes(wh.table("t"), ["s", "p"], [("s3", "a"), (None, "a")], partition_of=a1)
    doc, (commit,) = analyze()
    assert commit["deletes_reread_files"] == 2  # the older files of partition a

    wh.append("t", _rows(400, 50, "a"))  # newer than the equality delete: untouched
    doc, (commit,) = analyze()
    assert commit["deletes_reread_files"] == 0
    assert doc["row_deletes"]["unapplied_files"] == 0
    assert doc["row_deletes"]["applied_files"] == 2

    # the same snapshot from scratch (one baseline) gives the same stats
    fresh = str(tmp_path / "fresh")
    _cli("analyze", location, "--state-dir", fresh, "-q")
    scratch = json.loads(_cli("show", location, "--state-dir", fresh, "--json"))
    for key in ("merged_record_count", "record_count", "partitions", "row_deletes"):
        assert scratch[key] == doc[key], key
    for name, column in doc["columns"].items():
        for key in ("null_count", "min", "max", "ndv", "true_count", "false_count", "avg_len"):
            assert scratch["columns"][name][key] == column[key], (name, key)

    # metadata-only: position deletes still count exactly, equality deletes cannot
    meta = str(tmp_path / "meta")
    _cli("analyze", location, "--state-dir", meta, "--no-sketches", "-q")
    counted = json.loads(_cli("show", location, "--state-dir", meta, "--json"))
    assert counted["merged_record_count"] is None
    assert counted["row_deletes"]["unapplied_files"] == 2
    duck.close()


def test_an_equality_delete_applies_only_to_its_partition(spark: Any, tmp_path: Path) -> None:
    """Iceberg's rule: same spec and partition, or an unpartitioned delete spec. (DuckDB
    1.5.5 applies it to every partition and would count 2 rows here, so the expected
    values are derived by hand.)"""
    wh = IcebergWarehouse(tmp_path / "wh")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string()), SCHEMA.field("p")])
    wh.create_table("t", schema, partition_by=[("p", IdentityTransform())])
    wh.append("t", pa.table({"id": [1, 2], "s": ["x", "y"], "p": ["a", "a"]}, schema=schema))
    wh.append("t", pa.table({"id": [3, 4], "s": ["x", "y"], "p": ["b", "b"]}, schema=schema))
    (in_a,) = [
        task.file.file_path
        for task in wh.table("t").scan().plan_files()
        if task.file.partition[0] == "a"
    ]
    add_equality_deletes(wh.table("t"), ["s"], [("x",)], partition_of=in_a)
    location, state = wh.location("t"), str(tmp_path / "stats")
    _cli("analyze", location, "--state-dir", state, "-q")
    doc = json.loads(_cli("show", location, "--state-dir", state, "--json"))
    assert doc["merged_record_count"] == 3
    by_partition = {p["partition"]["p"]: p["merged_record_count"] for p in doc["partitions"]}
    assert by_partition == {"a": 1, "b": 2}
    assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["ndv"]) == (2, 3)


def test_approximate_equality_deletes_re_read_nothing_and_say_so(
    spark: Any, tmp_path: Path
) -> None:
    """``equality_deletes = "approximate"``: the commit adding an equality delete reads no
    data file; the touched files keep their earlier stats, and `show` says they are
    approximate (never silently)."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("p", IdentityTransform())])
    wh.append("t", _rows(0, 100, "a"))
    wh.append("t", _rows(100, 50, "b"))
    (in_a,) = [
        task.file.file_path
        for task in wh.table("t").scan().plan_files()
        if task.file.partition[0] == "a"
    ]
    config = tmp_path / "lakestats.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "stats"}"\n'
        f'[[table]]\nname = "t"\nlocation = "{wh.location("t")}"\n'
        'equality_deletes = "approximate"\n'
    )
    _cli("analyze", "t", "--config", str(config), "-q")
    before = json.loads(_cli("show", "t", "--config", str(config), "--json"))
    add_equality_deletes(wh.table("t"), ["s", "p"], [("s3", "a")], partition_of=in_a)

    reports: list[CommitReport] = []
    analyze_table("t", config=str(config), on_commit=reports.append)
    (report,) = reports
    assert (report.deletes_reread_files, report.sketched_files) == (0, 0)
    doc = json.loads(_cli("show", "t", "--config", str(config), "--json"))
    assert doc["merged_record_count"] is None
    assert doc["row_deletes"] == {
        "applied_files": 0,
        "deleted_records": 0,
        "unapplied_files": 1,
        "exact": False,
    }
    assert doc["columns"] == before["columns"]  # the earlier stats, kept
    assert "APPROX    deletes of 1 files not applied" in _cli("show", "t", "--config", str(config))
