"""Location mapping: tables whose metadata names paths elsewhere are read in place.

The foreign fixtures (written on Impala's test cluster) name ``/test-warehouse/...`` and
``hdfs://localhost:20500/...``; a moved pyiceberg warehouse names its old ``file://`` root.
Nothing on disk is rewritten: the mapping decides only where bytes are read.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from foreign import fixture_path, location_map, map_args, needs_fixtures
from lakestats.cli import main
from lakestats.config import Config, load_config
from lakestats.exceptions import ConfigError, MetadataError
from lakestats.formats.registry import open_table as open_format
from lakestats.locations import LocationMap, parse_location_mapping
from lakestats.tables import open_table
from lakestats.testing import IcebergWarehouse


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def show_json(*args: str) -> dict[str, Any]:
    code, text = run_cli("show", *args, "--json")
    assert code == 0, text
    doc: dict[str, Any] = json.loads(text)
    return doc


def test_the_longest_prefix_wins_and_unmatched_paths_stay() -> None:
    mapping = LocationMap.of({"/a/": "/x/", "/a/b/": "/y/", "hdfs://nn/a/": "file:///z/"})
    assert mapping.apply("/a/b/c.parquet") == "/y/c.parquet"
    assert mapping.apply("/a/c.parquet") == "/x/c.parquet"
    assert mapping.apply("hdfs://nn/a/d") == "file:///z/d"
    assert mapping.apply("/elsewhere/e") == "/elsewhere/e"
    assert not LocationMap.of({})


def test_a_mapping_option_must_be_from_equals_to() -> None:
    assert parse_location_mapping("/a/=/b/") == ("/a/", "/b/")
    for bad in ("/a/", "=/b/", "/a/="):
        with pytest.raises(ValueError, match="FROM=TO"):
            parse_location_mapping(bad)


@needs_fixtures
def test_a_foreign_table_is_unreadable_without_the_mapping() -> None:
    with pytest.raises(MetadataError, match=r"manifest list /test-warehouse/.* does not exist"):
        open_format(fixture_path("iceberg_v2_delete_positional")).commits_since(None)


@needs_fixtures
def test_cli_map_location_opens_a_foreign_table_in_place(tmp_path: Path) -> None:
    table = fixture_path("iceberg_v2_delete_positional")
    state = str(tmp_path / "stats")
    code, text = run_cli("analyze", table, "--state-dir", state, "--no-sketches", "-q", *map_args())
    assert code == 0, text
    doc = show_json(table, "--state-dir", state, *map_args())
    assert doc["snapshot_id"] == 5725822353600261755
    assert doc["record_count"] == 3
    code, text = run_cli("commits", table, "--state-dir", state, "--json", *map_args())
    assert code == 0, text
    assert [c["snapshot_id"] for c in json.loads(text)] == [
        6816997371555012807,
        5725822353600261755,
    ]


def test_a_bad_map_location_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run_cli("show", str(tmp_path), "--map-location", "nonsense")
    err = capsys.readouterr().err
    assert code != 0
    assert "--map-location" in err and "FROM=TO" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_config_location_map_is_validated_and_relative_targets_follow_the_file(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[table]]\nname = "t"\nlocation = "/x"\nlocation_map = {"/a/" = ""}\n')
    with pytest.raises(ConfigError, match=r"table\[0\]\.location_map"):
        load_config(bad, env={})
    good = tmp_path / "good.toml"
    good.write_text(
        '[[table]]\nname = "t"\nlocation = "/x"\n'
        'location_map = {"hdfs://nn/w/" = "copy/w/", "/Mixed/Case/" = "s3://b/w/"}\n'
    )
    (entry,) = load_config(good, env={}).table
    assert entry.location_map == {
        "hdfs://nn/w/": str(tmp_path / "copy" / "w"),
        "/Mixed/Case/": "s3://b/w/",
    }


def test_a_moved_catalog_table_is_read_through_the_mapping(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1, 2, 3]})
    wh.append("t", {"id": [4]})
    old_root = (tmp_path / "wh" / "warehouse").as_uri()
    # the files move; the catalog keeps naming the old place (a restore from backup)
    shutil.move(tmp_path / "wh" / "warehouse", tmp_path / "restored")
    new_root = (tmp_path / "restored").as_uri()
    catalog = {wh.catalog_name: wh.catalog_properties}
    entry: dict[str, Any] = {"name": "t", "catalog": wh.catalog_name, "identifier": "db.t"}

    def config(mapping: dict[str, str]) -> Config:
        table = {**entry, "location_map": mapping} if mapping else entry
        return Config.model_validate(
            {"state_dir": str(tmp_path / "stats"), "catalog": catalog, "table": [table]}
        )

    with pytest.raises(MetadataError, match="does not exist"):
        open_table("t", config({}))
    opened = open_table("t", config({f"{old_root}/": f"{new_root}/"}))
    commits = opened.table.commits_since(None)
    assert [sum(f.record_count for f in c.added_files) for c in commits] == [3, 1]
    # the stats keep naming files as the metadata does
    assert commits[0].added_files[0].path.startswith(old_root)


@needs_fixtures
@pytest.mark.spark
def test_spark_reads_data_files_at_their_mapped_location(spark: Any, tmp_path: Path) -> None:
    # iceberg_v3_row_lineage names hdfs://localhost:20500/... for every file
    table = fixture_path("iceberg_v3_row_lineage")
    config = tmp_path / "lakestats.toml"
    mapping = ", ".join(f'"{k}" = "{v}"' for k, v in location_map().items())
    config.write_text(
        f'state_dir = "{tmp_path / "stats"}"\n[[table]]\nname = "v3"\n'
        f'location = "{table}"\nlocation_map = {{{mapping}}}\n'
    )
    code, text = run_cli("analyze", "v3", "--config", str(config), "-q")
    assert code == 0, text
    doc = show_json("v3", "--config", str(config))
    assert doc["record_count"] == 3
    column = doc["columns"]["i"]
    assert (column["min"], column["max"], column["null_count"]) == (1, 3, 0)
    assert column["ndv"] == 3 and column["sketch"]["sketched_files"] == column["sketch"]["files"]
