"""Naming tables: configured entries choose their format; errors name the key."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakestats.config import Config, load_config
from lakestats.exceptions import ConfigError
from lakestats.tables import open_table, resolve_table
from lakestats.testing import IcebergWarehouse


def test_a_table_entry_may_name_its_format(tmp_path: Path) -> None:
    warehouse = IcebergWarehouse(tmp_path / "wh")
    warehouse.create_table("t", pa.schema([("id", pa.int64())]))
    warehouse.append("t", {"id": [1]})
    catalog = warehouse.catalog_name
    config = Config.model_validate(
        {
            "state_dir": str(tmp_path / "stats"),
            "catalog": {catalog: warehouse.catalog_properties},
            "table": [
                {"name": "a", "location": warehouse.location("t"), "format": "ICEBERG"},
                {"name": "b", "catalog": catalog, "identifier": "db.t", "format": "iceberg"},
                {"name": "c", "catalog": catalog, "identifier": "db.t", "format": "delta"},
            ],
        }
    )
    assert open_table("a", config).table.format_name == "iceberg"
    assert open_table("b", config).table.format_name == "iceberg"
    # catalog tables are no longer sent to Iceberg whatever they are
    with pytest.raises(ConfigError, match=r"[Dd]elta"):
        open_table("c", config)


def test_an_unknown_format_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[[table]]\nname = "t"\nlocation = "/x"\nformat = "hudi"\n')
    with pytest.raises(ConfigError, match=r"table\[0\]\.format: unknown table format 'hudi'"):
        load_config(path, env={})


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("sales", "sales"),
        ("données 2024", "donn_es_2024"),
        ("表", "t_"),
        ("#b", "t_b"),
        ("x" * 300, "x" * 128),
    ],
)
def test_a_table_opened_by_path_is_named_by_its_folder_as_a_config_would_allow(
    tmp_path: Path, folder: str, name: str
) -> None:
    """A name the config's rule refuses (non-ASCII letters, over 128 characters) was a
    validation traceback for the whole command."""
    assert resolve_table(str(tmp_path / folder), Config()).name == name
