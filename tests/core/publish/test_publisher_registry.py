"""Which publisher a table gets (``publish/registry.py``), and the null publisher's lines."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from publish_helpers import catalog_config, unsketched
from pyiceberg.transforms import IdentityTransform
from structlog.testing import capture_logs

from lakestats.config import Config, TableConfig
from lakestats.formats.base import TableFormat
from lakestats.model import Commit, DataFile, TableSchema
from lakestats.publish.iceberg import IcebergPublisher
from lakestats.publish.null import NullPublisher
from lakestats.publish.registry import publisher_for
from lakestats.store import StatsStore
from lakestats.tables import OpenedTable, open_configured
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])


def _table(wh: IcebergWarehouse) -> None:
    wh.create_table("t", SCHEMA, partition_by=[("cat", IdentityTransform())])
    wh.append("t", {"id": [1, 2], "cat": ["a", "b"]})


def _not_published_warnings(logs: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in logs if e["event"] == "stats_not_published"]


class _UnpublishedFormat:
    """A table of a format no publisher is registered for (only its name matters here)."""

    format_name = "hudi"  # Delta has its publisher now (issue 11)
    table_id = "hudi-table-0001"
    location = "file:///nowhere/hudi"

    def refresh(self) -> None:
        return None

    def current_snapshot_id(self) -> int | None:
        return None

    def snapshot_ids(self) -> frozenset[int]:
        return frozenset()

    def schema(self, schema_id: int | None = None) -> TableSchema:
        return TableSchema(schema_id=0, columns=())

    def commits_since(self, after_snapshot_id: int | None) -> Sequence[Commit]:
        return ()

    def live_files(self, snapshot_id: int) -> Sequence[DataFile]:
        return ()


def test_a_catalog_table_gets_its_formats_publisher(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    _table(wh)
    _, opened = catalog_config(wh, "t", tmp_path / "state")
    publisher = publisher_for(opened)
    assert isinstance(publisher, IcebergPublisher)
    assert publisher.key == "iceberg"
    assert publisher.describe(1, {}) == [
        "not in table metadata yet (registered by the next analyze)"
    ]


def test_publishing_off_says_so_and_warns_nobody(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    _table(wh)
    _, opened = catalog_config(wh, "t", tmp_path / "state", publish=False)
    publisher = publisher_for(opened)
    assert isinstance(publisher, NullPublisher)
    assert publisher.describe(1, {}) == [
        "not in table metadata: publishing is off for this table (publish = false)"
    ]
    snapshot = wh.lineage("t")[-1]
    location = wh.table("t").metadata_location
    with capture_logs() as logs:
        assert publisher.is_published(snapshot, {})  # nothing to stage, ever
        publisher.stage(unsketched(opened, snapshot), {})
        assert publisher.flush({"x": 1}) == {"x": 1}
    assert _not_published_warnings(logs) == []
    assert wh.table("t").metadata_location == location


def test_a_location_opened_table_is_logged_once_and_described(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    _table(wh)
    config = Config(state_dir=str(tmp_path / "state"), table=())
    opened = open_configured(TableConfig(name="t", location=wh.location("t")), config)
    with capture_logs() as logs:
        for _ in range(2):  # two runs in one process
            publisher = publisher_for(opened)
            assert isinstance(publisher, NullPublisher)
            assert publisher.flush({}) == {}
    warnings = _not_published_warnings(logs)
    assert len(warnings) == 1
    assert warnings[0]["table"] == "t"
    (line,) = publisher.describe(wh.lineage("t")[-1], {})
    assert line.startswith("not in table metadata: the table was opened by location")


def test_a_format_without_publisher_is_described(tmp_path: Path) -> None:
    fmt: TableFormat = _UnpublishedFormat()
    assert isinstance(fmt, TableFormat)
    opened = OpenedTable(
        config=TableConfig(name="d", location="/nowhere/hudi"),
        table=fmt,
        store=StatsStore(str(tmp_path / "state"), fmt.table_id),
    )
    with capture_logs() as logs:
        publisher = publisher_for(opened)
        publisher.flush({})
    assert publisher.describe(1, {}) == [
        "not in table metadata: no metadata publisher for hudi tables"
    ]
    assert len(_not_published_warnings(logs)) == 1


def test_publishers_load_only_when_a_table_needs_one() -> None:
    code = (
        "import sys, lakestats.publish.registry, lakestats.analyze\n"
        "assert 'lakestats.publish.iceberg' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
