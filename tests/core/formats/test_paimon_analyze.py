"""`analyze` + `show --json` over Paimon tables, end to end with the real Spark pipeline.

The Java-written fixtures and pypaimon-written tables analyze to live counts and
per-column stats equal to what pypaimon's reader (or, where it cannot read, the data files
and the README operations) gives; NDV within the sketch's bound; incremental equals a
from-scratch run.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pypaimon import CatalogFactory
from pypaimon.schema.data_types import PyarrowFieldParser

from frequent_strings import assert_frequent_strings
from lakestats.analyze import analyze_table
from lakestats.config import Config
from lakestats.formats.paimon.testing import write_arrow
from lakestats.read import read_stats
from lakestats.render import render_stats
from lakestats.sketching import SparkSketcher
from lakestats.tables import open_configured
from lakestats.values import to_json
from paimon_fixtures import copy_fixture, fixture, needs_paimon_fixtures, read_rows
from paimon_tables import DATA_EVOLUTION, NameSketcher, PaimonWarehouse, one_table_config

pytestmark = [pytest.mark.spark, needs_paimon_fixtures]

SKETCHED = (
    "append_10",
    "append_table_with_alter_table",
    "append_with_multiple_ts_precision_and_timezone",
    "pk_table_scan_and_read_dv",
)
# merge-on-read tables analyzed from metadata here (their sketched key merge, type
# changes included: test_paimon_key_merge.py)
METADATA_ONLY = ("pk_table_partial_update", "pk_table_with_mor")
THETA_RSE = 1 / 64  # lg_k 12


def analyze(config: Config, *, sketches: bool = True, spark: bool = True) -> dict[str, Any]:
    opened = open_configured(config.table[0], config)
    sketcher = (SparkSketcher(config) if spark else NameSketcher()) if sketches else None
    analyze_table(opened, config=config, sketcher=sketcher)
    return read_stats(config.table[0].name, config=config)


@pytest.fixture(scope="module")
def shown(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    state = tmp_path_factory.mktemp("state")
    docs = {}
    for name in (*SKETCHED, *METADATA_ONLY):
        config = one_table_config(name, fixture(name), state)
        docs[name] = analyze(config, sketches=name in SKETCHED)
    return docs


def oracle(name: str) -> pa.Table:
    if name == "append_10":  # ORC manifests: pypaimon cannot read it; its files can
        files = sorted(fixture(name).rglob("*.parquet"))
        return pa.concat_tables([pq.ParquetFile(f).read() for f in files])
    return read_rows(name)


@pytest.mark.parametrize("name", SKETCHED)
def test_fixtures_analyze_to_the_rows_and_columns_readers_see(
    shown: dict[str, dict[str, Any]], name: str
) -> None:
    assert_readers_see(shown[name], oracle(name), name)


def assert_readers_see(doc: dict[str, Any], rows: pa.Table, name: str) -> None:
    """``doc`` (``show --json``) describes ``rows`` (what readers return): exact live
    count, null counts, bounds and lengths; NDV within the theta bound."""
    assert doc["format"] == "paimon"
    assert doc["merged_record_count"] == rows.num_rows
    assert doc["paimon"]["merged_record_count"] == rows.num_rows
    assert doc["paimon"]["merged_record_count_is"] == "exact"
    for column, got in doc["columns"].items():
        values = rows.column(column)
        assert got["null_count"] == values.null_count, (name, column)
        present = values.drop_null()
        if len(present) == 0:
            assert got["min"] is None and got["max"] is None
            continue
        if got["type"].endswith("_ns"):  # nanoseconds: the model holds microseconds
            continue
        low, high = pc.min_max(present).values()
        assert got["min"] == _json(low.as_py(), got["type"]), (name, column)
        assert got["max"] == _json(high.as_py(), got["type"]), (name, column)
        assert got["min_max_exact"] is True, (name, column)
        distinct = len(pc.unique(present))
        assert abs(got["ndv"] - distinct) <= max(1, 3 * THETA_RSE * distinct), (name, column)
        if got["type"] == "string":
            lengths = pc.utf8_length(present)
            assert got["max_len"] == pc.max(lengths).as_py()
            assert got["avg_len"] == pytest.approx(pc.mean(lengths).as_py())
            counted = {c["values"]: c["counts"] for c in pc.value_counts(present).to_pylist()}
            assert_frequent_strings(got, counted, (name, column))


def _shifted(value: Any) -> Any:
    """A value no row of the fixtures has: ints + 1000, floats + 0.5, strings suffixed."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value + 1000
    if isinstance(value, float):
        return value + 0.5
    return f"{value}-py" if isinstance(value, str) else value


@pytest.mark.parametrize("name", ["append_table_with_alter_table", "pk_table_scan_and_read_dv"])
def test_a_pypaimon_commit_on_a_java_written_table(spark: Any, tmp_path: Path, name: str) -> None:
    """Java Paimon's files carry Parquet field ids, pypaimon's none: a table written by
    both (renamed columns on the append table; deletion vectors on the keyed one, where a
    new level-0 file is not visible until compacted) analyzes to what readers see."""
    location = copy_fixture(name, tmp_path / "wh")
    table = CatalogFactory.create({"warehouse": str(tmp_path / "wh")}).get_table(f"{name}.{name}")
    before = read_rows(name, tmp_path / "wh")
    schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
    new = [{k: _shifted(v) for k, v in row.items()} for row in before.slice(0, 2).to_pylist()]
    write_arrow(table, pa.Table.from_pylist(new, schema=schema))
    newest = max(location.rglob("*.parquet"), key=lambda p: p.stat().st_mtime_ns)
    assert all(not (f.metadata or {}) for f in pq.read_schema(newest))  # no field ids
    rows = read_rows(name, tmp_path / "wh")
    doc = analyze(one_table_config(name, location, tmp_path / "state"))
    assert_readers_see(doc, rows, name)
    if name == "pk_table_scan_and_read_dv":  # level 0: not read until compacted
        assert rows.num_rows == before.num_rows
    else:
        assert rows.num_rows == doc["record_count"] == before.num_rows + 2


def test_dv_table_counts_live_rows_with_vectors_applied(shown: dict[str, dict[str, Any]]) -> None:
    doc = shown["pk_table_scan_and_read_dv"]
    # the files' system columns (_KEY_f0, _SEQUENCE_NUMBER, _VALUE_KIND …) are no columns
    assert set(doc["columns"]) == {"f0", "f1", "f2", "f3"}
    # 10 rows in compacted files, 2 deleted by vectors: 8 (level-0 files are invisible)
    assert (doc["record_count"], doc["merged_record_count"]) == (10, 8)
    assert doc["row_deletes"]["deleted_records"] == 2
    assert "mergedRecordCount 8 (exact: deletion vectors" in render_stats(doc)


@pytest.mark.parametrize("name", METADATA_ONLY)
def test_merge_on_read_tables_say_merged_count_is_unknown(
    shown: dict[str, dict[str, Any]], name: str
) -> None:
    doc = shown[name]
    # file rows (every version of a key), as the README operations write them
    assert doc["record_count"] == {"pk_table_partial_update": 8, "pk_table_with_mor": 13}[name]
    terms = doc["paimon"]
    assert terms["merged_record_count"] is None
    assert terms["merged_record_count_is"] == "unknown"
    assert "composite key" in terms["merged_record_count_why"]
    line = next(x for x in render_stats(doc).splitlines() if "mergedRecordCount" in x)
    assert line == f"paimon    mergedRecordCount unknown ({terms['merged_record_count_why']})"


def test_incremental_equals_from_scratch_on_a_pypaimon_table(spark: Any, tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create(
        "t", [("id", "long"), ("p", "string"), ("v", "double")], partition_keys=["p"]
    )
    incremental = one_table_config("t", location, tmp_path / "inc")
    for start in (0, 100):
        ids = list(range(start, start + 50))
        warehouse.write(
            "t", {"id": ids, "p": [f"p{i % 3}" for i in ids], "v": [i / 7 for i in ids]}
        )
        analyze(incremental, spark=False)
    warehouse.write("t", {"id": [999], "p": ["p0"], "v": [None]}, overwrite=True)
    warehouse.add_column("t", "note", "string")
    warehouse.write("t", {"id": [1000], "p": ["p9"], "v": [1.0], "note": ["x"]})
    step = analyze(incremental, spark=False)
    assert_from_scratch(step, location, tmp_path, spark=False)
    read = warehouse.table("t").new_read_builder()
    rows = read.new_read().to_arrow(read.new_scan().plan().splits())
    # the overwrite replaced partition p0 only (dynamic): 34 + 33 rows in p1, p2; p0, p9 1
    assert step["record_count"] == rows.num_rows == 69
    assert step["columns"]["note"]["null_count"] == rows.num_rows - 1


def test_row_deletes_on_an_append_table_analyze_to_what_readers_see(
    spark: Any, tmp_path: Path
) -> None:
    """pypaimon's DELETE on an append-only table writes deletion vectors and leaves the
    data files be: each delete re-sketches the files it touched and no other, and the stats
    after every step equal what pypaimon reads, and a from-scratch run."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    columns = [("id", "long"), ("s", "string"), ("v", "double")]
    location = warehouse.create("t", columns, options=DATA_EVOLUTION)

    def rows(start: int) -> dict[str, list[Any]]:
        ids = list(range(start, start + 100))
        return {
            "id": ids,
            "s": [f"s{i % 13}" * (1 + i % 3) if i % 11 else None for i in ids],
            "v": [i / 7 for i in ids],
        }

    incremental = one_table_config("t", location, tmp_path / "inc")
    for start in (0, 100, 200):
        warehouse.write("t", rows(start))
    analyze(incremental)
    row_ids = warehouse.row_ids("t", "id")
    # the table's max (the third file's) and rows of the second; then its min and a null
    steps: list[Any] = [
        lambda: warehouse.delete_rows("t", [row_ids[i] for i in (299, 150, 160)]),
        lambda: warehouse.delete_where("t", lambda where: where.less_than("id", 12)),
        lambda: warehouse.write("t", rows(300)),
        lambda: warehouse.delete_rows("t", [row_ids[i] for i in (151, 152)]),  # a vector grows
    ]
    touched = [2, 1, 0, 1]
    for step, files in zip(steps, touched, strict=True):
        step()
        doc = analyze(incremental)
        assert_readers_see(doc, warehouse.read("t"), "t")
        changed = doc["commit"]
        assert changed["removed"]["data_files"] == files
        assert changed["added"]["data_files"] == files + (1 if files == 0 else 0)
    assert doc["record_count"] == 400 and doc["merged_record_count"] == 400 - 3 - 12 - 2
    assert doc["paimon"]["merged_record_count_why"].endswith("minus deletion-vector rows")
    assert_from_scratch(doc, location, tmp_path)


def test_column_updates_in_place_analyze_to_what_readers_see(spark: Any, tmp_path: Path) -> None:
    """Data evolution as pypaimon writes it: rows appended, a column updated in place, a
    column added and filled for rows written before it, rows deleted from an updated row
    group, the same column updated again (the newest file wins). After every step the
    stats equal what pypaimon reads; each update re-sketches its row group only; the end
    equals a from-scratch run."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("s", "string")], options=DATA_EVOLUTION)

    def rows(start: int) -> dict[str, list[Any]]:
        ids = list(range(start, start + 50))
        return {"id": ids, "s": [f"s{i % 9}" if i % 7 else None for i in ids]}

    def updated(column: str, ids: list[int], values: list[Any], arrow: pa.DataType) -> Any:
        row_ids = warehouse.row_ids("t", "id")
        data = {"_ROW_ID": pa.array([row_ids[i] for i in ids], pa.int64())}
        return lambda: warehouse.update_columns(
            "t", pa.table({**data, column: pa.array(values, arrow)})
        )

    incremental = one_table_config("t", location, tmp_path / "inc")
    for start in (0, 50, 100):
        warehouse.write("t", rows(start))
    analyze(incremental)

    def add_score() -> None:
        warehouse.add_column("t", "score", "double")

    def where(update: Any) -> Any:  # pypaimon's UPDATE … WHERE id < 3
        return update.update_by_predicate(
            update.new_predicate_builder().less_than("id", 3), {"s": "w"}
        )

    upsert = pa.table(
        {
            "id": pa.array([60, 152], pa.int64()),
            "s": ["up", "new"],
            "score": pa.array([None, 2.5], pa.float64()),
        }
    )
    # each step with the files its commit removes and adds: an update lists its row group
    # again; an upsert by key writes whole columns of the rows it updates, and new rows
    steps: list[tuple[Any, tuple[int, int] | None]] = [
        (updated("s", [3, 4, 40], ["zz", None, "a"], pa.string()), (1, 1)),
        (add_score, None),
        (updated("score", list(range(50, 100)), [i / 3 for i in range(50)], pa.float64()), (1, 1)),
        (
            lambda: warehouse.delete_rows("t", [warehouse.row_ids("t", "id")[i] for i in (4, 5)]),
            (1, 1),
        ),
        (updated("s", [3, 10], ["yy", "x"], pa.string()), (1, 1)),
        (
            lambda: warehouse.write(
                "t", {"id": [150, 151], "s": ["q", None], "score": [1.5, None]}
            ),
            (0, 1),
        ),
        (lambda: warehouse._commit_update("t", where), (1, 1)),
        (
            lambda: warehouse._commit_update(
                "t", lambda u: u.upsert_by_arrow_with_key(upsert, ["id"])
            ),
            (1, 2),
        ),
    ]
    for step, files in steps:
        step()
        doc = analyze(incremental)
        assert_readers_see(doc, warehouse.read("t"), "t")
        if files is not None:
            changed = doc["commit"]
            assert (changed["removed"]["data_files"], changed["added"]["data_files"]) == files
    read = warehouse.read("t")
    assert doc["merged_record_count"] == read.num_rows == 151
    # filled for ids 50..99 (60 upserted to null), 150 and 152: 0..49 (less the 2
    # deleted), 100..149 and 151 are null
    assert doc["columns"]["score"]["null_count"] == 48 + 1 + 50 + 1
    assert_from_scratch(doc, location, tmp_path)


def assert_from_scratch(doc: dict[str, Any], location: Path, tmp_path: Path, **how: Any) -> None:
    """``doc`` (an incremental run's) equals a from-scratch run's, but for when it was
    computed and its last commit."""
    scratch = analyze(one_table_config("t", location, tmp_path / "scratch"), **how)
    volatile = ("computed_at_ms", "commit")
    assert {k: v for k, v in doc.items() if k not in volatile} == {
        k: v for k, v in scratch.items() if k not in volatile
    }


def _json(value: Any, type_str: str) -> Any:
    if type_str.startswith("timestamptz") and isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC)
    return to_json(value)
