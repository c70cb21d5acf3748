"""A table deleted, or dropped and created again at its place, while the daemon runs: the
daemon's long-lived handles must not hide either (each format, metadata only, the
daemon's service run by hand).

* deleted: the next look fails with the table's error (a Paimon table without its folder
  is not an empty table), and stats a reader had already read are served flagged stale;
* created again: a new table (a new id, so a store folder of its own), analyzed into
  that folder — the stats equal a from-scratch run's — while the old folder is left as
  it was (``lakestats status`` lists it; ``forget`` deletes it).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from test_e2e import from_scratch, stable

from lakestats.exceptions import TableNotFoundError
from lakestats.testing import IcebergWarehouse
from lakestatsd.config import ServiceConfig
from lakestatsd.wiring import Service, core_fns
from paimon_tables import PaimonWarehouse

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
FIRST = {"id": [1, 2, 3], "name": ["a", None, "c"]}
AGAIN = {"id": [9], "name": ["z"]}
NEVER = lambda: False  # noqa: E731 - the queue's stop check: never asked to stop


class Fixture:
    """A table of one format: ``write`` commits rows, ``recreate`` drops the table and
    creates it again at the same place with ``rows``, ``location`` is where it lives."""

    def __init__(self, root: Path, fmt: str) -> None:
        self.fmt = fmt
        if fmt == "iceberg":
            self.iceberg = IcebergWarehouse(root / "wh")
            self.iceberg.create_table("t", SCHEMA)
            self.location = self.iceberg.location("t")
        elif fmt == "paimon":
            self.paimon = PaimonWarehouse(root / "wh")
            self.location = str(self.paimon.create("t", SCHEMA))
        else:
            self.location = str(root / "delta" / "t")

    def write(self, rows: dict[str, list[Any]]) -> None:
        if self.fmt == "iceberg":
            self.iceberg.append("t", rows)
        elif self.fmt == "paimon":
            self.paimon.write("t", rows)
        else:
            write_deltalake(self.location, pa.table(rows, schema=SCHEMA), mode="append")

    def delete(self) -> None:
        if self.fmt == "iceberg":
            self.iceberg.catalog.drop_table(self.iceberg.identifier("t"))
        elif self.fmt == "paimon":
            self.paimon.catalog.drop_table("db.t", False)
        shutil.rmtree(self.location, ignore_errors=True)

    def recreate(self, rows: dict[str, list[Any]]) -> None:
        self.delete()
        self.create_again(rows)

    def create_again(self, rows: dict[str, list[Any]]) -> None:
        if self.fmt == "iceberg":
            self.iceberg.create_table("t", SCHEMA)
            assert self.iceberg.location("t") == self.location
        elif self.fmt == "paimon":
            assert str(self.paimon.create("t", SCHEMA)) == self.location
        self.write(rows)


def service_for(tmp_path: Path, location: str) -> Service:
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "table": [{"name": "t", "location": location}],
        }
    )
    return Service(config, core_fns(config))


FORMATS = ["iceberg", "delta", "paimon"]


@pytest.fixture(params=FORMATS)
def analyzed(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Fixture, Service]:
    """A table with two commits, processed, its stats read once through the reader."""
    table = Fixture(tmp_path, request.param)
    table.write(FIRST)
    table.write(FIRST)
    service = service_for(tmp_path, table.location)
    assert service.runtime.process("t", NEVER)
    assert service.runtime.read_stats("t", None)["record_count"] == 6
    return table, service


def test_a_deleted_table_fails_its_run_and_its_stats_are_served_stale(
    analyzed: tuple[Fixture, Service],
) -> None:
    table, service = analyzed
    before = service.runtime.read_stats("t", None)
    assert "stale" not in before
    table.delete()
    with pytest.raises(TableNotFoundError):
        service.runtime.process("t", NEVER)
    doc = service.runtime.read_stats("t", None)
    assert doc["stale"] is True and doc["stale_reason"].startswith("TableNotFoundError: ")
    # the last good stats, but for what the flag adds and what cannot be known now
    assert without(doc, "stale", "stale_reason", "published") == without(before, "published")
    # written again: the next look reads it, and the flag goes
    table.create_again(FIRST)
    assert service.runtime.process("t", NEVER)
    doc = service.runtime.read_stats("t", None)
    assert "stale" not in doc and doc["record_count"] == 3


def test_a_table_created_again_in_its_place_gets_a_folder_of_its_own(
    analyzed: tuple[Fixture, Service], tmp_path: Path
) -> None:
    table, service = analyzed
    old_folder = service.runtime.store_folder("t")
    assert old_folder is not None
    old_files = tree(tmp_path / "state" / old_folder)
    table.recreate(AGAIN)
    assert service.runtime.process("t", NEVER)
    new_folder = service.runtime.store_folder("t")
    assert new_folder is not None and new_folder != old_folder
    served = service.runtime.read_stats("t", None)
    assert served["record_count"] == 1
    # each run publishes files of its own: their names differ
    fresh = from_scratch(table.location, tmp_path / "fresh", sketches=False)
    assert without(served, "published") == without(fresh, "published")
    # the old table's stats are as they were: its folder is the old table's alone
    assert tree(tmp_path / "state" / old_folder) == old_files
    # and a commit after that lands in the new folder
    table.write(AGAIN)
    assert service.runtime.process("t", NEVER)
    assert service.runtime.store_folder("t") == new_folder
    assert service.runtime.read_stats("t", None)["record_count"] == 2


def without(doc: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in stable(doc).items() if k not in keys}


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
