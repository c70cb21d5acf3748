"""Paimon primary-key tables without deletion vectors: per-column stats of the MERGED rows.

Each touched bucket's live files are merged by key in the one Spark job (``model.KeyMerge``,
``deletes/key_merge.py``); the oracle is what readers return: pypaimon's merge read, and
for the Java fixture pypaimon cannot read (``pk_table_partial_update``: partial-update with
ignore-delete) a merge computed here with pyarrow from the data files, equal to its README.
Counts, null counts, min and max exact; NDV within the theta bound; incremental equals
from scratch; ``mergedRecordCount`` exact.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pypaimon import CatalogFactory
from pypaimon.schema.data_types import PyarrowFieldParser
from structlog.testing import capture_logs

from lakestats.analyze import analyze_table
from lakestats.config import Config, SketchConfig
from lakestats.exceptions import DataFileError
from lakestats.formats.paimon import open_paimon_location
from lakestats.formats.paimon.key_merge import merge_rules
from lakestats.formats.paimon.testing import write_arrow
from lakestats.formats.paimon.types import PaimonSchema
from lakestats.model import KeyMerge
from lakestats.read import read_stats
from lakestats.sketching import SparkSketcher
from lakestats.tables import open_configured
from lakestats.values import to_json
from paimon_fixtures import copy_fixture, fixture, needs_paimon_fixtures, read_rows
from paimon_tables import PaimonWarehouse, compact_fully, one_table_config, parsed_schema

pytestmark = pytest.mark.spark

THETA_RSE = 1 / 64  # lg_k 12


def analyze(config: Config) -> dict[str, Any]:
    analyze_table(
        open_configured(config.table[0], config), config=config, sketcher=SparkSketcher(config)
    )
    return read_stats(config.table[0].name, config=config)


def assert_describes(doc: dict[str, Any], rows: pa.Table, names: dict[int, str]) -> None:
    """``doc``'s columns (by field id) against ``rows`` (by ``names``: field id → column)."""
    assert doc["merged_record_count"] == rows.num_rows
    terms = doc["paimon"]
    assert (terms["merged_record_count"], terms["merged_record_count_is"]) == (
        rows.num_rows,
        "exact",
    )
    assert terms["statistics"]["mergedRecordCount"] == rows.num_rows
    assert doc["row_deletes"]["exact"] is True
    checked = 0
    for column, got in doc["columns"].items():
        if got["field_id"] not in names:
            continue
        values = rows.column(names[got["field_id"]])
        checked += 1
        assert got["null_count"] == values.null_count, column
        present = values.drop_null()
        if len(present) == 0:
            assert (got["min"], got["max"]) == (None, None), column
            continue
        low, high = pc.min_max(present).values()
        assert got["min"] == to_json(low.as_py()), column
        assert got["max"] == to_json(high.as_py()), column
        assert got["min_max_exact"] is True, column
        distinct = len(pc.unique(present))
        assert abs(got["ndv"] - distinct) <= max(1, 3 * THETA_RSE * distinct), column
    assert checked == len(names)


# -- the Java-written fixtures ------------------------------------------------------------


def merge_partial_update_ignoring_deletes(location: Path) -> pa.Table:
    """Readers' rows of a partial-update table with ignore-delete, merged with pyarrow
    from its (one bucket's) data files: per key, each column's last non-null value by
    ``_SEQUENCE_NUMBER``; -U/-D rows ignored."""
    files = sorted(location.rglob("bucket-*/*.parquet"))
    data = pa.concat_tables(pq.read_table(f) for f in files)
    data = data.filter(pc.is_in(data["_VALUE_KIND"], pa.array([0, 2], pa.int8())))
    data = data.sort_by("_SEQUENCE_NUMBER")
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    values = ["k0", "k1", "v0", "v1", "v2"]
    for row in data.select([*values]).to_pylist():
        current = merged.setdefault((row["k0"], row["k1"]), dict.fromkeys(values))
        current.update({k: v for k, v in row.items() if v is not None})
    return pa.Table.from_pylist(list(merged.values()), schema=data.select(values).schema)


@pytest.fixture(scope="module")
def fixtures(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    state = tmp_path_factory.mktemp("state")
    return {
        name: analyze(one_table_config(name, fixture(name), state))
        for name in ("pk_table_partial_update", "pk_table_with_mor")
    }


@needs_paimon_fixtures
def test_partial_update_fixture_describes_the_merged_rows(fixtures: dict[str, Any]) -> None:
    rows = merge_partial_update_ignoring_deletes(fixture("pk_table_partial_update"))
    # the README's recall at snapshot 2
    assert sorted(rows.to_pylist(), key=lambda r: (r["k0"], r["k1"])) == [
        {"k0": 0, "k1": 1, "v0": 100.0, "v1": True, "v2": "new_apple"},
        {"k0": 1, "k1": 0, "v0": 2.0, "v1": False, "v2": None},
        {"k0": 1, "k1": 1, "v0": 133.3, "v1": False, "v2": "banana"},
        {"k0": 2, "k1": 1, "v0": 144.4, "v1": True, "v2": "orange"},
    ]
    doc = fixtures["pk_table_partial_update"]
    assert doc["record_count"] == 8  # the files' rows; live rows after the merge: 4
    assert doc["row_deletes"]["deleted_records"] == 4
    assert_describes(doc, rows, {0: "k0", 1: "k1", 2: "v0", 3: "v1", 4: "v2"})


@needs_paimon_fixtures
def test_merge_on_read_fixture_with_sequence_fields_and_type_changes(
    fixtures: dict[str, Any],
) -> None:
    """``pk_table_with_mor``: ``sequence.field = s0,s1`` decides which version of a key
    wins (not the commit order); files written as DOUBLE/BOOLEAN/STRING are cast to the
    current INT/STRING/BYTES as Paimon does (pypaimon's read: the oracle)."""
    rows = read_rows("pk_table_with_mor")
    current = open_paimon_location(str(fixture("pk_table_with_mor"))).paimon_schema()
    names = {f.field_id: f.name for f in current.fields if f.name in rows.column_names}
    names = {i: n for i, n in names.items() if rows.column(n).null_count < rows.num_rows}
    doc = fixtures["pk_table_with_mor"]
    assert doc["record_count"] == 13
    # v0 (DOUBLE -> INT) truncates: 11.1 -> 11; the sequence field keeps "banana"/"you"
    assert sorted(rows.column("v0").to_pylist()) == [11, 12, 13, 13, 110, 120, 130, 140]
    assert_describes(doc, rows, names)


@needs_paimon_fixtures
def test_a_bucket_written_by_java_paimon_and_pypaimon_merges_across_both(
    spark: Any, tmp_path: Path
) -> None:
    """Java Paimon's files carry Parquet field ids, pypaimon's none: one bucket holding both
    (a Flink writer and a Python job on one table) is merged across them, each file read
    its own way; pypaimon's read is the oracle. The pypaimon commit replaces one key (a
    higher ``s0`` wins under ``sequence.field = s0,s1``), loses to a Java-written version
    of another (a lower ``s0``) and adds one; analyzed after the Java commits, then again."""
    location = copy_fixture("pk_table_with_mor", tmp_path / "wh")
    incremental = one_table_config("mixed", location, tmp_path / "inc")
    assert analyze(incremental)["merged_record_count"] == 8
    table = CatalogFactory.create({"warehouse": str(tmp_path / "wh")}).get_table(
        "pk_table_with_mor.pk_table_with_mor"
    )
    schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
    written = {
        "k1": [0, 1, 5],
        "k0": [0, 0, 5],
        "p0": [0, 0, 0],
        "p1": [0, 0, 0],
        "s1": ["apple2", "car2", "new"],
        "s0": [b"zzz", b"aaa", b"a"],  # k (0, 0) wins, k (1, 0) loses to b"later"
        "v0": [999, -1, 7],
        "v1": ["x", "y", None],
        "v2": [1, 2, 3],
    }
    write_arrow(table, pa.table({f.name: written[f.name] for f in schema}, schema=schema))
    newest = max(location.rglob("*.parquet"), key=lambda p: p.stat().st_mtime_ns)
    assert all(not (f.metadata or {}) for f in pq.read_schema(newest))  # no field ids

    rows = read_rows("pk_table_with_mor", tmp_path / "wh")
    assert rows.num_rows == 9
    by_key = {(r["k0"], r["k1"], r["p0"], r["p1"]): r for r in rows.to_pylist()}
    assert by_key[(0, 0, 0, 0)]["v0"] == 999 and by_key[(0, 1, 0, 0)]["v0"] == 12
    current = open_paimon_location(str(location)).paimon_schema()
    names = {f.field_id: f.name for f in current.fields}
    names = {i: n for i, n in names.items() if rows.column(n).null_count < rows.num_rows}
    step = analyze(incremental)
    assert_describes(step, rows, names)
    scratch = analyze(one_table_config("mixed", location, tmp_path / "scratch"))
    assert_describes(scratch, rows, names)
    assert step["columns"] == scratch["columns"]


# -- pypaimon-written tables, one per merge engine ----------------------------------------


def first_rows(location: Path) -> pa.Table:
    """first-row's readers' rows, with pyarrow (pypaimon 2.1 reads such a table empty):
    per key, the +I row of the lowest ``_SEQUENCE_NUMBER`` (bucket-local, keys are too)."""
    data = pa.concat_tables(pq.read_table(f) for f in sorted(location.rglob("*.parquet")))
    data = data.filter(pc.equal(data["_VALUE_KIND"], 0)).sort_by("_SEQUENCE_NUMBER")
    names = [n for n, _ in COLUMNS]
    first: dict[Any, dict[str, Any]] = {}
    for row in data.select(names).to_pylist():
        first.setdefault(row["k"], row)
    return pa.Table.from_pylist(list(first.values()), schema=data.select(names).schema)


COLUMNS = [("k", "long"), ("s", "string"), ("v", "double"), ("n", "long"), ("op", "string")]
# partial-update: the Java fixture above (each column's last non-null value, as here)
ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {"rowkind.field": "op"},
    "first-row": {"merge-engine": "first-row"},
    "aggregation": {
        "merge-engine": "aggregation",
        "fields.v.aggregate-function": "sum",
        "fields.n.aggregate-function": "max",
        "fields.s.aggregate-function": "last_non_null_value",
    },
}


def batch(keys: range, op: str, step: int) -> dict[str, list[Any]]:
    return {
        "k": list(keys),
        "s": [None if (k + step) % 4 == 0 else f"s{k % 7}-{step}" for k in keys],
        "v": [None if (k * step) % 5 == 1 else k / 4 + step for k in keys],
        "n": [(k * 7 + step * 3) % 11 for k in keys],
        "op": [op] * len(keys),
    }


@pytest.fixture(scope="module")
def engines(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A table per engine: inserts, then updates of some keys plus new keys, then (deduplicate)
    deletes; deduplicate analyzed after each commit and once from scratch."""
    root = tmp_path_factory.mktemp("engines")
    warehouse = PaimonWarehouse(root / "wh")
    out: dict[str, Any] = {"warehouse": warehouse}
    for engine, options in ENGINES.items():
        location = warehouse.create(
            engine,
            COLUMNS,
            primary_keys=["k"],
            options={"metadata.stats-mode": "full", "bucket": "2", **options},
        )
        steps = []
        incremental = one_table_config(engine, location, root / f"inc-{engine}")
        warehouse.write(engine, batch(range(40), "+I", 1))
        if engine == "deduplicate":
            steps.append(analyze(incremental))
        warehouse.write(engine, batch(range(20, 60), "+U", 2))
        if engine == "deduplicate":
            warehouse.write(engine, batch(range(30, 45), "-D", 3))
        steps.append(analyze(incremental))
        out[engine] = {
            "steps": steps,
            "rows": first_rows(location) if engine == "first-row" else warehouse.read(engine),
            "location": location,
        }
        if engine == "deduplicate":
            out[engine]["scratch"] = analyze(one_table_config(engine, location, root / "scratch"))
    return out


@pytest.mark.parametrize("engine", list(ENGINES))
def test_each_merge_engine_describes_what_pypaimon_reads(
    engines: dict[str, Any], engine: str
) -> None:
    rows = engines[engine]["rows"]
    expected = {"deduplicate": 60 - 15, "first-row": 60, "aggregation": 60}
    assert rows.num_rows == expected[engine]
    doc = engines[engine]["steps"][-1]
    assert_describes(doc, rows, {0: "k", 1: "s", 2: "v", 3: "n", 4: "op"})
    assert doc["record_count"] > rows.num_rows  # the files hold every version


def test_sum_and_max_aggregate_across_versions(engines: dict[str, Any]) -> None:
    rows = {r["k"]: r for r in engines["aggregation"]["rows"].to_pylist()}
    first, second = batch(range(40), "+I", 1), batch(range(20, 60), "+U", 2)
    # key 25 was written twice: v sums the non-null values, n keeps the max
    v = [x for x in (first["v"][25], second["v"][5]) if x is not None]
    assert rows[25]["v"] == pytest.approx(sum(v))
    assert rows[25]["n"] == max(first["n"][25], second["n"][5])


def test_incremental_equals_from_scratch(engines: dict[str, Any]) -> None:
    step, scratch = engines["deduplicate"]["steps"][-1], engines["deduplicate"]["scratch"]
    assert step["columns"] == scratch["columns"]
    for key in ("merged_record_count", "record_count", "row_deletes"):
        assert step[key] == scratch[key], key
    assert step["paimon"]["statistics"] == scratch["paimon"]["statistics"]
    # the first step described its own merged rows: 40 keys, one version each
    assert engines["deduplicate"]["steps"][0]["merged_record_count"] == 40


def test_a_commit_relists_every_live_file_of_the_buckets_it_touched(
    engines: dict[str, Any],
) -> None:
    table = open_paimon_location(str(engines["deduplicate"]["location"]))
    first, second, third = table.commits_since(None)
    # one level-0 file per bucket: merged alone (it may hold retractions)
    assert all(len(f.deletes) == 1 for f in first.added_files)
    assert all(isinstance(f.deletes[0], KeyMerge) for f in first.added_files)
    # the second commit's new files change which rows of the first's win: both listed
    assert {f.path for f in second.removed_files} == {f.path for f in first.added_files}
    assert len(second.added_files) == 4
    merge = second.added_files[0].deletes[0]
    assert isinstance(merge, KeyMerge) and merge.engine == "deduplicate"
    assert len(merge.inputs) == 2 and merge.key_field_ids == (0,)
    assert len(third.added_files) == 6


# -- planning, without Spark --------------------------------------------------------------


def test_a_fully_compacted_bucket_needs_no_merge(tmp_path: Path) -> None:
    """One sorted run above level 0 without retractions holds unique live keys: its file
    is listed as stored (read no more than before); a later write merges the bucket again."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    warehouse.create("c", COLUMNS, primary_keys=["k"], options={"bucket": "1"})
    warehouse.write("c", batch(range(10), "+I", 1))
    warehouse.write("c", batch(range(5, 15), "+I", 2))
    compact_fully(warehouse, "c")
    compacted = warehouse.open("c").commits_since(2)[0]
    assert len(compacted.removed_files) == 2 and len(compacted.added_files) == 1
    assert compacted.added_files[0].deletes == ()
    assert compacted.added_files[0].record_count == 15
    warehouse.write("c", batch(range(3), "+I", 3))
    after = warehouse.open("c").commits_since(3)[0]
    assert {f.path for f in after.removed_files} == {compacted.added_files[0].path}
    assert len(after.added_files) == 2
    assert all(isinstance(f.deletes[0], KeyMerge) for f in after.added_files)


def _keyed_schema(options: dict[str, str]) -> PaimonSchema:
    """Key ``k``, a string ``s`` and a double ``v``, with the table ``options``."""
    fields = [("k", "INT NOT NULL"), ("s", "STRING"), ("v", "DOUBLE")]
    return parsed_schema(fields, primary_keys=["k"], options=options)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "product"},
            "aggregate function 'product' of column 'v' is not supported",
        ),
        ({"merge-engine": "partial-update", "fields.v.sequence-group": "s"}, "sequence groups"),
        ({"sequence.field": "s", "sequence.field.sort-order": "descending"}, "descending"),
        ({"merge-engine": "lookup"}, "merge engine 'lookup' is not supported"),
    ],
)
def test_merges_it_cannot_reproduce_are_refused_in_one_line(
    options: dict[str, str], said: str
) -> None:
    schema = _keyed_schema(options)
    refused = merge_rules(schema)
    assert isinstance(refused, str) and said in refused and "\n" not in refused


def test_merge_rules_follow_the_table_options() -> None:
    schema = _keyed_schema(
        {
            "merge-engine": "aggregation",
            "fields.default-aggregate-function": "max",
            "fields.v.aggregate-function": "sum",
            "sequence.field": "s",
            "aggregation.remove-record-on-delete": "true",
        }
    )
    rules = merge_rules(schema)
    assert isinstance(rules, KeyMerge)
    assert (rules.engine, rules.key_field_ids, rules.sequence_field_ids) == (
        "aggregation",
        (0,),
        (1,),
    )
    assert rules.functions == ((1, "max"), (2, "sum"))
    assert rules.remove_record_on_delete and not rules.ignore_delete


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
def test_the_arrow_engine_merges_keys_as_the_sql_job_does(
    engines: dict[str, Any], engine: str, tmp_path: Path
) -> None:
    """deduplicate and first-row keep one physical row per key: the Arrow engine finds the
    winners in its tasks (``arrow_sketch/key_winners.py``) and sketches the files with the
    others dropped; the SQL job merges in Spark. Same stats, from scratch."""
    location = engines[engine]["location"]
    with capture_logs() as logs:
        arrow = analyze(one_table_config(engine, location, tmp_path / "arrow"))
    sql_config = one_table_config(engine, location, tmp_path / "sql")
    sql = analyze(sql_config.model_copy(update={"sketch": SketchConfig(engine="sql")}))

    events = [e["event"] for e in logs]
    assert "arrow_engine_sketched" in events
    assert not {"arrow_key_merge_unsupported", "arrow_deletes_declined"} & set(events)
    assert all(e["deletes"] for e in logs if e["event"] == "arrow_engine_sketched")
    for key in ("merged_record_count", "record_count", "row_deletes"):
        assert arrow[key] == sql[key], key
    # KLL merges depend on their order and the engines' per-file order differs
    for name, column in arrow["columns"].items():
        other = sql["columns"][name]
        for stat in ("null_count", "min", "max", "ndv", "avg_len", "max_len", "frequent_values"):
            assert column.get(stat) == other.get(stat), (name, stat)
    assert arrow["paimon"]["statistics"] == sql["paimon"]["statistics"]
    assert_describes(arrow, engines[engine]["rows"], {0: "k", 1: "s", 2: "v", 3: "n", 4: "op"})


def test_a_missing_merge_input_is_a_data_file_error_naming_it(spark: Any, tmp_path: Path) -> None:
    """The Arrow engine's merge reads every live file of a touched bucket: one that is gone
    fails the commit with the error naming it (as the SQL job's read does), not a
    traceback and not a silently smaller merge."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create(
        "t", COLUMNS, primary_keys=["k"], options={"metadata.stats-mode": "full", "bucket": "1"}
    )
    config = one_table_config("t", location, tmp_path / "state")
    warehouse.write("t", batch(range(20), "+I", 1))
    analyze(config)
    (older,) = location.rglob("*.parquet")
    warehouse.write("t", batch(range(10, 30), "+U", 2))  # the bucket's merge reads `older`
    older.unlink()

    with pytest.raises(DataFileError, match=re.escape(older.name)):
        analyze(config)
