"""The 12 Iceberg tables Impala's test suite committed, analyzed in place and checked
against DuckDB's iceberg extension over a relocated copy (an independent reader).

lakestats opens each table where it lies, through the location mapping; DuckDB reads a copy
whose paths were rewritten (``tests/iceberg_relocate.py``). What is compared:

* every table: the current snapshot, the rows of the live data files (``record_count``),
  the exact live row count (``merged_record_count``: position and equality deletes
  applied by the sketch job, docs/deletes.md), and every column's null count, min, max and
  NDV over the live rows.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from foreign import FIXTURES, duckdb_with_iceberg, location_map, map_args, needs_fixtures
from frequent_strings import assert_frequent_strings, duckdb_counts
from iceberg_relocate import newest_metadata_file, relocate, without_delete_targets
from lakestats.cli import main
from lakestats.formats.registry import open_table
from lakestats.locations import LocationMap
from lakestats.model import PositionDeletes
from lakestats.values import to_json

pytestmark = [needs_fixtures, pytest.mark.spark, pytest.mark.slow]

LIVE_ROWS = {  # Impala's own expected results agree (docs/dev/research-deletes-delta-paimon.md)
    "iceberg_alltypes_part": 2,
    "iceberg_legacy_partition_schema_evolution": 2,
    "iceberg_timestamp_part": 6,
    "iceberg_v2_delete_both_eq_and_pos": 2,
    "iceberg_v2_delete_equality": 2,
    "iceberg_v2_delete_equality_nulls": 3,
    "iceberg_v2_delete_equality_partitioned": 6,
    "iceberg_v2_delete_positional": 2,
    "iceberg_v2_partitioned_position_deletes": 10,
    "iceberg_v2_positional_delete_all_rows": 0,
    "iceberg_v2_positional_not_all_data_files_have_delete_files": 6,
    "iceberg_v3_row_lineage": 3,
}
WITH_EQUALITY_DELETES = {
    "iceberg_v2_delete_both_eq_and_pos",
    "iceberg_v2_delete_equality",
    "iceberg_v2_delete_equality_nulls",
    "iceberg_v2_delete_equality_partitioned",
}
WITHOUT_DELETES = {
    "iceberg_alltypes_part",
    "iceberg_legacy_partition_schema_evolution",
    "iceberg_timestamp_part",
    "iceberg_v3_row_lineage",
}


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    con = duckdb_with_iceberg(threads=1)
    yield con
    con.close()


def _relocated(name: str, root: Path) -> Path:
    prefixes = [
        f"hdfs://localhost:20500/test-warehouse/iceberg_test/hadoop_catalog/ice/{name}",
        f"/test-warehouse/iceberg_test/hadoop_catalog/ice/{name}",
        f"hdfs://localhost:20500/test-warehouse/{name}",
    ]
    return newest_metadata_file(relocate(FIXTURES / name, root / name, prefixes))


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(LIVE_ROWS))
def test_foreign_table_stats_equal_duckdb(name: str, duck: Any, spark: Any, tmp_path: Path) -> None:
    metadata = _relocated(name, tmp_path / "copy")
    live = duck.execute(f"SELECT count(*) FROM iceberg_scan('{metadata}')").fetchone()[0]  # noqa: S608
    assert live == LIVE_ROWS[name]
    entries = duck.execute(f"SELECT * FROM iceberg_metadata('{metadata}')").fetchall()  # noqa: S608
    data_rows = sum(
        row[-1] for row in entries if row[2] == "DATA" and "DELETED" not in (row[3], row[4])
    )
    current = json.loads(metadata.read_text())["current-snapshot-id"]

    table, state = str(FIXTURES / name), str(tmp_path / "stats")
    cli("analyze", table, "--state-dir", state, "-q", *map_args())
    doc = json.loads(cli("show", table, "--state-dir", state, "--json", *map_args()))

    assert doc["snapshot_id"] == current
    assert doc["record_count"] == data_rows
    assert doc["merged_record_count"] == live
    _assert_columns_equal_duckdb(doc, duck, metadata, name)
    if name not in WITHOUT_DELETES:
        assert doc["row_deletes"]["applied_files"] > 0
        assert doc["row_deletes"]["unapplied_files"] == 0


def _assert_columns_equal_duckdb(doc: dict[str, Any], duck: Any, metadata: Path, name: str) -> None:
    for column, got in doc["columns"].items():
        quoted = '"' + column.replace('"', '""') + '"'
        nulls, lo, hi, ndv = duck.execute(
            f"SELECT count(*) - count({quoted}), min({quoted}), max({quoted}), "  # noqa: S608
            f"count(DISTINCT {quoted}) FROM iceberg_scan('{metadata}')"
        ).fetchone()
        assert got["null_count"] == nulls, column
        assert got["ndv"] == ndv, column  # tiny tables: theta sketches are exact
        assert (got["min"], got["max"]) == (to_json(lo), to_json(hi)), column
        if got["type"] == "string":
            counted = duckdb_counts(duck, f"iceberg_scan('{metadata}')", quoted)
            assert_frequent_strings(got, counted, (name, column))


# Flink's upserts (equality and position deletes together) and NULL keys; the other two
# equality-delete tables are applied by the Arrow engine in the DuckDB test above
@pytest.mark.parametrize(
    "name", ["iceberg_v2_delete_both_eq_and_pos", "iceberg_v2_delete_equality_nulls"]
)
def test_equality_deletes_are_applied_in_the_arrow_engine_as_by_the_sql_job(
    name: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flink's and NiFi's equality deletes (NULL keys, partitions, with position deletes):
    found as dead rows by the Arrow engine's first job (``arrow_sketch/equality.py``);
    every statistic equal to the SQL job's anti-join."""
    table = str(FIXTURES / name)

    def analyzed(state: str) -> dict[str, Any]:
        cli("analyze", table, "--state-dir", state, "-q", *map_args())
        doc = json.loads(cli("show", table, "--state-dir", state, "--json", *map_args()))
        return {k: v for k, v in doc.items() if k != "computed_at_ms"}

    with capture_logs() as logs:
        arrow = analyzed(str(tmp_path / "arrow"))
    monkeypatch.setenv("LAKESTATS_SKETCH__ENGINE", "sql")
    sql = analyzed(str(tmp_path / "sql"))

    events = [e for e in logs if e["event"].startswith("arrow_")]
    assert any(e["event"] == "arrow_engine_sketched" and e["deletes"] for e in events), events
    assert not [e for e in events if "declined" in e["event"] or "unsupported" in e["event"]]
    assert arrow == sql
    assert arrow["merged_record_count"] == LIVE_ROWS[name]


POSITION_DELETES_ONLY = sorted(set(LIVE_ROWS) - WITH_EQUALITY_DELETES - WITHOUT_DELETES)


@pytest.mark.parametrize("name", ["iceberg_v2_delete_positional", "iceberg_v3_row_lineage"])
def test_a_copied_table_read_unmapped_says_which_mapping_reads_it(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opened where it was copied to, without a mapping, a table's manifest list is
    "/test-warehouse/… does not exist" (or hdfs://… "unreadable (Unable to load libjvm)"):
    the error names the mapping from where its metadata places it to where it was opened,
    and that one mapping reads the table (its delete files' hdfs:// rows included)."""
    table, state = str(FIXTURES / name), str(tmp_path / "stats")
    assert main(["analyze", table, "--state-dir", state, "-q", "--no-sketches"]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("lakestats: error: snapshot "), error
    (mapping,) = re.findall(r"--map-location (\S+=\S+?)[,)]", error)
    assert mapping.endswith(f"={Path(table).resolve()}"), mapping  # where it was opened
    cli("analyze", table, "--state-dir", state, "-q", "--no-sketches", "--map-location", mapping)
    mapped = ["--map-location", mapping]
    doc = json.loads(cli("show", table, "--state-dir", state, "--json", *mapped))
    assert doc["merged_record_count"] == LIVE_ROWS[name]


@pytest.mark.parametrize("name", POSITION_DELETES_ONLY)
def test_delete_files_naming_no_one_file_match_paths_with_and_without_a_file_system(
    name: str, tmp_path: Path
) -> None:
    """A position-delete file the metadata ties to no one data file (no
    ``referenced_data_file``, no ``file_path`` bounds: a writer's delete file for several
    files) names them by its rows alone — Impala's say ``hdfs://localhost:20500/…`` where
    its manifests say ``/test-warehouse/…``, one file to Hadoop (a path without a file
    system is on the default one). Mapped for the manifests' spelling only, its deletes
    still apply; before, they applied to no file (no deleted row counted, "exact")."""
    copy = without_delete_targets(FIXTURES / name, tmp_path / name)
    table, state = str(copy), str(tmp_path / "stats")
    manifests_only = [
        "--map-location",
        f"/test-warehouse/iceberg_test/hadoop_catalog/ice/={tmp_path}/",
    ]
    opened = open_table(
        table, location_map=LocationMap.of(dict.fromkeys(location_map(), f"{tmp_path}/"))
    )
    added = [f for commit in opened.commits_since(None) for f in commit.added_files]
    deletes = [d for f in added for d in f.deletes if isinstance(d, PositionDeletes)]
    assert deletes and all(d.target is None for d in deletes)  # tied by their rows alone
    cli("analyze", table, "--state-dir", state, "-q", "--no-sketches", *manifests_only)
    doc = json.loads(cli("show", table, "--state-dir", state, "--json", *manifests_only))
    assert doc["merged_record_count"] == LIVE_ROWS[name]
    assert doc["row_deletes"]["deleted_records"] == doc["record_count"] - LIVE_ROWS[name] > 0


@pytest.mark.parametrize("name", POSITION_DELETES_ONLY)
def test_position_deletes_name_their_file_as_the_metadata_does(name: str, tmp_path: Path) -> None:
    """Impala's manifests name data files ``/test-warehouse/…`` and its position-delete
    files' rows ``hdfs://localhost:20500/test-warehouse/…``. Mapped for the manifests'
    spelling only, a delete file whose metadata ties it to one data file (equal file_path
    bounds) still deletes that file's rows: the live count without sketches (the delete
    files read on the driver) is DuckDB's, as with every spelling mapped. It was the whole
    file's rows (20 for 10 on the partitioned table): its rows were read as naming no file."""
    table, state = str(FIXTURES / name), str(tmp_path / "stats")
    manifests_only = [
        "--map-location",
        f"/test-warehouse/iceberg_test/hadoop_catalog/ice/={FIXTURES}/",
    ]
    cli("analyze", table, "--state-dir", state, "-q", "--no-sketches", *manifests_only)
    doc = json.loads(cli("show", table, "--state-dir", state, "--json", *manifests_only))
    assert doc["merged_record_count"] == LIVE_ROWS[name]
    assert doc["row_deletes"]["deleted_records"] == doc["record_count"] - LIVE_ROWS[name] > 0
