"""The Delta tables written by Spark, Databricks and delta-rs (``../shared/fixtures/delta``),
analyzed in place and checked against DuckDB's delta extension (an independent reader that
applies deletion vectors and column mapping) and deltalake's own query engine.

What is compared, for every fixture: the current version, the physical rows of the live
files (``record_count``), the live rows (``merged_record_count``: deletion vectors
applied) and every column's null count, min, max and NDV over the live rows (tiny tables:
theta sketches are exact).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_tables import (
    FIXTURE_ROWS,
    assert_describes_live_rows,
    duckdb_with_delta,
    fixture_path,
    live_rows,
    needs_fixtures,
)
from frequent_strings import assert_frequent_strings, duckdb_counts
from lakestats.cli import main
from lakestats.formats.registry import open_table
from lakestats.values import to_json

pytestmark = [needs_fixtures]

WITH_DELETION_VECTORS = {
    "delta-golden/dv-partitioned-with-checkpoint",
    "delta-rs/table-with-dv-small",
    "delta-rs/table_with_deletion_logs",
}


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    con = duckdb_with_delta()
    con.execute("SET TimeZone = 'UTC'")
    yield con
    con.close()


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(FIXTURE_ROWS))
def test_live_rows_from_the_log_equal_deltalake_and_duckdb(name: str, duck: Any) -> None:
    """Metadata only: live files' rows minus deletion vectors, from scratch and commit by
    commit, against two readers of the data."""
    path = fixture_path(name)
    table = open_table(path)
    current = table.current_snapshot_id()
    assert current is not None
    live = table.live_files(current)
    from_log = sum(f.record_count - sum(d.cardinality for d in f.deletes) for f in live)  # type: ignore[union-attr]

    replayed: dict[str, Any] = {}
    for commit in table.commits_since(None):
        for removed in commit.removed_files:
            replayed.pop(removed.path, None)
        replayed.update({f.path: f for f in commit.added_files})

    duck_rows = duck.execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchone()[0]  # noqa: S608
    assert from_log == live_rows(path).num_rows == duck_rows == FIXTURE_ROWS[name]
    assert {f.path for f in live} == set(replayed)


@pytest.mark.parametrize("name", sorted(FIXTURE_ROWS))
def test_each_commit_removes_the_rows_and_bytes_its_files_held(name: str, tmp_path: Path) -> None:
    """A commit's document says what its removed files held (Delta removes carry no row
    count, delta-rs's no size): for every commit, the rows, files and bytes before it plus
    what it added minus what it removed are the rows, files and bytes after it."""
    path, state = str(tmp_path / "table"), str(tmp_path / "stats")
    shutil.copytree(fixture_path(name), path)
    cli("analyze", path, "--state-dir", state, "--no-sketches", "-q")
    commits = json.loads(cli("commits", path, "--state-dir", state, "--json"))

    def totals(snapshot: int) -> tuple[int, int, int]:
        doc = json.loads(
            cli("show", path, "--state-dir", state, "--json", "--snapshot", str(snapshot))
        )
        return doc["record_count"], doc["file_count"], doc["total_size_bytes"]

    checked = 0
    for before, commit in pairwise(commits):
        added, removed = commit["added"], commit["removed"]
        rows, files, size = totals(before["snapshot_id"])
        assert totals(commit["snapshot_id"]) == (
            rows + added["record_count"] - removed["record_count"],
            files + added["data_files"] - removed["data_files"],
            size + added["file_size_bytes"] - removed["file_size_bytes"],
        ), commit["snapshot_id"]
        checked += bool(removed["data_files"])
    if name in {"delta-rs/simple_table", "delta-rs/delta-0.8.0", *WITH_DELETION_VECTORS} - {
        "delta-rs/table_with_deletion_logs"  # its removes are before the baseline (4)
    }:
        assert checked  # commits that remove files (a stats-less writer's; vectors')


def test_partition_columns_stay_exact_under_vectors_without_sketches(
    duck: Any, tmp_path: Path
) -> None:
    """A deletion vector makes a file's metadata describe deleted rows too, so without
    sketches its columns' counts and bounds are unknown, but a partition column holds its
    value in every live row: its null count and bounds stay exact (DuckDB's)."""
    name = "delta-golden/dv-partitioned-with-checkpoint"
    path, state = str(tmp_path / "table"), str(tmp_path / "stats")
    shutil.copytree(fixture_path(name), path)
    cli("analyze", path, "--state-dir", state, "--no-sketches", "-q")
    doc = json.loads(cli("show", path, "--state-dir", state, "--json"))
    assert doc["row_deletes"]["applied_files"] > 0
    ((lo, hi, nulls),) = duck.execute(
        f"SELECT min(part), max(part), count(*) - count(part) FROM delta_scan('{path}')"  # noqa: S608
    ).fetchall()
    part = doc["columns"]["part"]
    assert (part["min"], part["max"], part["null_count"], part["min_max_exact"]) == (
        lo,
        hi,
        nulls,
        True,
    )
    assert doc["columns"]["col1"]["null_count"] is None  # a data column: unknown, as before


@pytest.mark.spark
def test_show_and_estimate_count_live_rows_after_deletion_vectors(
    duck: Any, spark: Any, tmp_path: Path
) -> None:
    """A table with deletion vectors: the human ``show`` gives each most common value's
    share of the live rows its counts describe (it was of the physical rows: 8 live rows
    of 10, each value 1 of 8 shown as 10.0 %), and the distribution of a column of a few
    integers draws a bar at each value (buckets of one value hold their rows at it).
    ``estimate`` gives rows and selectivities of the live rows (``IS NOT NULL`` was 10
    rows, a share of the physical rows the column's null count does not describe)."""
    name = "delta-rs/table-with-dv-small"
    path, state = str(tmp_path / "table"), str(tmp_path / "stats")
    shutil.copytree(fixture_path(name), path)
    cli("analyze", path, "--state-dir", state, "-q")
    text = cli("show", path, "--state-dir", state)
    live = FIXTURE_ROWS[name]
    counts = dict(
        duck.execute(
            f"SELECT value, count(*) FROM delta_scan('{path}') GROUP BY value"  # noqa: S608
        ).fetchall()
    )
    assert sum(counts.values()) == live
    common = text[text.index("most common values") :].splitlines()[1]
    shown = [item.split() for item in common.split(maxsplit=1)[1].split(", ")]
    assert shown and all(share == f"{counts[int(v)] / live:.1%}" for v, share in shown), common
    bars = text[text.index("distribution") :].splitlines()[1][23:47]  # "  name<20 bars<24"
    assert bars.count("█") == len(counts) == live, text  # eight values, a row each

    predicates = ["value IS NOT NULL", "value < 5", "value = 3", "value IN (1, 2, 9)"]
    estimated = json.loads(cli("estimate", path, *predicates, "--state-dir", state, "--json"))
    assert estimated["table_rows"] == live
    for entry in estimated["estimates"]:
        where = entry["predicate"]
        (exact,) = duck.execute(
            f"SELECT count(*) FROM delta_scan('{path}') WHERE {where}"  # noqa: S608
        ).fetchone()
        # tiny: every sketch here is exact
        assert entry["rows"] == pytest.approx(exact), where
        assert entry["selectivity"] == pytest.approx(exact / live), where


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIXTURE_ROWS))
def test_fixture_stats_equal_duckdb(name: str, duck: Any, spark: Any, tmp_path: Path) -> None:
    # a copy: analyzing publishes a sidecar into the table (_delta_log/_lakestats/)
    path, state = str(tmp_path / "table"), str(tmp_path / "stats")
    shutil.copytree(fixture_path(name), path)
    cli("analyze", path, "--state-dir", state, "-q")
    doc = json.loads(cli("show", path, "--state-dir", state, "--json"))
    table = open_table(path)
    current = table.current_snapshot_id()
    assert current is not None
    files = table.live_files(current)

    assert doc["format"] == "delta"
    assert doc["snapshot_id"] == current
    assert doc["record_count"] == sum(f.record_count for f in files)
    assert doc["merged_record_count"] == FIXTURE_ROWS[name]
    if name in WITH_DELETION_VECTORS:
        vectors = sum(d.cardinality for f in files for d in f.deletes)  # type: ignore[union-attr]
        assert doc["record_count"] == FIXTURE_ROWS[name] + vectors
        assert doc["row_deletes"]["deleted_records"] == vectors
    else:
        assert doc["record_count"] == FIXTURE_ROWS[name]
    _assert_columns_equal_duckdb(doc, duck, path)
    _assert_partition_rows_equal_duckdb(doc, duck, path)
    if name == "delta-golden/dv-partitioned-with-checkpoint":
        # the human view says per partition what is left after the vectors, as --json does
        shown = cli("show", path, "--state-dir", state).splitlines()
        start = shown.index(next(line for line in shown if line.startswith("partition ")))
        assert shown[start].split() == ["partition", "rows", "after", "deletes", "files", "bytes"]
        rows = shown[start + 2 : shown.index("", start)]
        after = {line.split()[0]: int(line.split()[2]) for line in rows}
        assert after == {
            ", ".join(f"{k}={v}" for k, v in p["partition"].items()): p["merged_record_count"]
            for p in doc["partitions"]
        }


def _assert_partition_rows_equal_duckdb(doc: dict[str, Any], duck: Any, path: str) -> None:
    """Each partition's live rows (``merged_record_count``) against DuckDB's count."""
    keys = list(doc["partitions"][0]["partition"]) if doc["partitions"] else []
    if not keys:
        return
    names = ", ".join(f'"{k}"' for k in keys)
    counted = {
        tuple(to_json(row[k]) for k in keys): row["n"]
        for row in duck.execute(
            f"SELECT {names}, count(*) AS n FROM delta_scan('{path}') GROUP BY ALL"  # noqa: S608
        )
        .fetch_arrow_table()
        .to_pylist()
    }
    got = {
        tuple(p["partition"][k] for k in keys): p["merged_record_count"] for p in doc["partitions"]
    }
    assert got == counted


def _assert_columns_equal_duckdb(doc: dict[str, Any], duck: Any, path: str) -> None:
    for column, got in doc["columns"].items():
        quoted = ".".join('"' + part.replace('"', '""') + '"' for part in column.split("."))
        # through Arrow: DuckDB's own conversion of time zones to Python needs pytz
        ((nulls, lo, hi, ndv),) = [
            tuple(row.values())
            for row in duck.execute(
                f"SELECT count(*) - count({quoted}), min({quoted}), max({quoted}), "  # noqa: S608
                f"count(DISTINCT {quoted}) FROM delta_scan('{path}')"
            )
            .fetch_arrow_table()
            .to_pylist()
        ]
        assert got["null_count"] == nulls, column
        if got["ndv"] is not None:
            assert got["ndv"] == ndv, column
        if isinstance(lo, bytes | bytearray):
            continue  # binary bounds are not kept
        assert (got["min"], got["max"]) == (to_json(lo), to_json(hi)), column
        if got["type"] == "string":
            counted = duckdb_counts(duck, f"delta_scan('{path}')", quoted)
            assert_frequent_strings(got, counted, (path, column))


@pytest.mark.spark
def test_a_delta_rs_append_to_a_databricks_column_mapped_table(
    duck: Any, spark: Any, tmp_path: Path
) -> None:
    """Two writers on one table: Databricks wrote ``table_with_column_mapping`` (mode
    ``name``: physical column names, Parquet field ids), then delta-rs appends to it, with
    a null, into two new partitions (one with spaces in its column's name). Analyzed before
    and after the append: equal to deltalake's and DuckDB's reads of the live rows."""
    from deltalake import write_deltalake

    path, state = str(tmp_path / "table"), str(tmp_path / "stats")
    shutil.copytree(fixture_path("delta-rs/table_with_column_mapping"), path)
    cli("analyze", path, "--state-dir", state, "-q")
    rows = pa.table({"Company Very Short": ["ZZ", "YY"], "Super Name": ["Zed", None]})
    write_deltalake(path, rows, mode="append")
    cli("analyze", path, "--state-dir", state, "-q")
    doc = json.loads(cli("show", path, "--state-dir", state, "--json"))
    live = live_rows(path)
    assert live.num_rows == FIXTURE_ROWS["delta-rs/table_with_column_mapping"] + 2
    assert_describes_live_rows(doc, live, ndv=True, partition="Company Very Short")
    _assert_columns_equal_duckdb(doc, duck, path)


SHARED_ID = (  # the delta-golden and delta-rs tables whose metaData.id is "testId"
    "delta-golden/data-skipping-basic-stats-all-types",
    "delta-golden/dv-partitioned-with-checkpoint",
    "delta-golden/multi-part-checkpoint",
    "delta-rs/table-with-dv-small",
)


def test_tables_sharing_a_table_id_keep_stats_of_their_own(tmp_path: Path) -> None:
    """Four fixtures carry the id "testId" (a copied table keeps its id too). Analyzed into
    one state dir they shared one store folder: each run took the others' commits for a
    rollback and started over, and every table showed the last one's stats. Each now
    has its own folder: its stats equal those it gets alone, and a second pass over all
    of them finds nothing to do."""
    state = str(tmp_path / "shared")
    paths = {}
    for name in SHARED_ID:
        paths[name] = str(tmp_path / name.replace("/", "_"))
        shutil.copytree(fixture_path(name), paths[name])
        assert open_table(paths[name]).table_id == "testId"
    for path in paths.values():
        cli("analyze", path, "--state-dir", state, "--no-sketches", "-q")

    for name, path in paths.items():
        alone = str(tmp_path / f"alone-{name.replace('/', '_')}")
        cli("analyze", path, "--state-dir", alone, "--no-sketches", "-q")
        shared_doc, alone_doc = (
            {
                k: v
                for k, v in json.loads(cli("show", path, "--state-dir", d, "--json")).items()
                if k not in ("computed_at_ms", "published")  # when, and the sidecar's state
            }
            for d in (state, alone)
        )
        assert shared_doc == alone_doc, name
        assert shared_doc["merged_record_count"] == FIXTURE_ROWS[name]
    folders = sorted(p.name for p in Path(state).iterdir())
    assert len(folders) == len(SHARED_ID) and "testId" in folders, folders

    for path in paths.values():
        again = cli("analyze", path, "--state-dir", state, "--no-sketches")
        assert "up to date" in again, again


def test_a_moved_table_is_analyzed_again_not_described_by_its_old_paths(tmp_path: Path) -> None:
    """A Delta table's files are stored under their full paths: moved to another
    directory, the stats of its old place would name files that are not there (and a
    remove would match none of them). The table at its new place is analyzed into a
    folder of its own; the old place keeps its stats."""
    name = "delta-rs/table-with-dv-small"
    old, new, state = tmp_path / "old", tmp_path / "new", str(tmp_path / "stats")
    shutil.copytree(fixture_path(name), old)
    cli("analyze", str(old), "--state-dir", state, "--no-sketches", "-q")
    old_doc = json.loads(cli("show", str(old), "--state-dir", state, "--json"))
    shutil.copytree(old, new)
    shutil.rmtree(old / "_delta_log" / "_lakestats")  # the sidecar describes the old place

    cli("analyze", str(new), "--state-dir", state, "--no-sketches", "-q")
    commits = json.loads(cli("commits", str(new), "--state-dir", state, "--json"))
    new_doc = json.loads(cli("show", str(new), "--state-dir", state, "--json"))
    assert len(commits) == len(open_table(str(new)).commits_since(None))  # all, again
    assert new_doc["merged_record_count"] == FIXTURE_ROWS[name] == old_doc["merged_record_count"]
    assert json.loads(cli("show", str(old), "--state-dir", state, "--json")) == old_doc
