"""A position delete whose data file is gone applies to nothing (issue 10).

Compactions (Spark's rewrite_data_files, or any copy-on-write rewrite) replace a data file
and leave the position delete file that named it live but dangling: every engine counts
the new file's rows in full. The case is built from a real Impala table with a position
delete (a relocated copy, registered in a SQLite catalog) whose data file pyiceberg then
rewrites; DuckDB's iceberg extension is the independent count.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from foreign import FIXTURES, duckdb_with_iceberg, needs_fixtures
from iceberg_relocate import newest_metadata_file, relocate
from lakestats.cli import main
from lakestats.formats.registry import open_table
from lakestats.model import FileContent

pytestmark = needs_fixtures

NAME = "iceberg_v2_delete_positional"


@pytest.fixture
def duck() -> Iterator[Any]:
    con = duckdb_with_iceberg(threads=1)
    yield con
    con.close()


def cli(*args: str) -> dict[str, Any] | None:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    text = out.getvalue()
    return json.loads(text) if text.lstrip().startswith("{") else None


def live_rows(duck: Any, metadata_location: str) -> int:
    query = f"SELECT count(*) FROM iceberg_scan('{metadata_location}')"  # noqa: S608
    return int(duck.execute(query).fetchone()[0])


def test_a_rewrite_leaves_the_delete_dangling_and_stats_count_every_row(
    tmp_path: Path, duck: Any
) -> None:
    copy = relocate(
        FIXTURES / NAME,
        tmp_path / NAME,
        [
            f"hdfs://localhost:20500/test-warehouse/iceberg_test/hadoop_catalog/ice/{NAME}",
            f"/test-warehouse/iceberg_test/hadoop_catalog/ice/{NAME}",
        ],
    )
    catalog = SqlCatalog(
        "c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri()
    )
    catalog.create_namespace("db")
    table = catalog.register_table("db.t", str(newest_metadata_file(copy)))
    config = tmp_path / "lakestats.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "stats"}"\n'
        f'[catalog.c]\ntype = "sql"\nuri = "sqlite:///{tmp_path / "c.db"}"\n'
        f'warehouse = "{(tmp_path / "wh").as_uri()}"\n'
        '[[table]]\nname = "t"\ncatalog = "c"\nidentifier = "db.t"\npublish = false\n'
    )
    base = ["--config", str(config)]

    cli("analyze", "t", *base, "--no-sketches", "-q")
    doc = cli("show", "t", *base, "--json")
    assert doc is not None
    assert doc["merged_record_count"] == live_rows(duck, table.metadata_location) == 2

    # copy-on-write: the data file with the deleted position is rewritten without it; the
    # position delete file stays live, naming a file that is gone
    with pytest.warns(UserWarning, match="copy-on-write"):
        table.delete("id = 3")
    table = catalog.load_table("db.t")
    opened = open_table(catalog="c", catalog_properties=catalog.properties, identifier="db.t")
    commits = opened.commits_since(table.current_snapshot().parent_snapshot_id)  # type: ignore[union-attr]
    (rewrite,) = commits
    assert [f.content for f in rewrite.removed_delete_files] == [FileContent.POSITION_DELETES]
    assert rewrite.added_delete_files == ()

    cli("analyze", "t", *base, "--no-sketches", "-q")
    doc = cli("show", "t", *base, "--json")
    assert doc is not None
    expected = live_rows(duck, table.metadata_location)
    assert expected == 1
    assert doc["record_count"] == doc["merged_record_count"] == expected

    # the same from scratch: the baseline of the whole history agrees
    cli("analyze", "t", *base, "--state-dir", str(tmp_path / "fresh"), "--no-sketches", "-q")
    fresh = cli("show", "t", *base, "--state-dir", str(tmp_path / "fresh"), "--json")
    assert fresh is not None and fresh["merged_record_count"] == expected

    # a later commit on top keeps counting right
    table.append(table.scan().to_arrow())
    cli("analyze", "t", *base, "--no-sketches", "-q")
    doc = cli("show", "t", *base, "--json")
    assert doc is not None
    assert (
        doc["merged_record_count"]
        == live_rows(duck, catalog.load_table("db.t").metadata_location)
        == 2
    )
