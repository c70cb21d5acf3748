"""Publishers read the table stats the commit path merged once (``SnapshotStats.table``).

Each test hands a publisher a ``table`` aggregate that differs from what merging
``partitions`` again would give: the output follows ``table``, so nothing merged again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from publish_helpers import PySketcher, catalog_config
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.transforms import IdentityTransform

from lakestats.merge import aggregate_files, merge_partitions, whole_table
from lakestats.model import PartitionAggregate, SketchSettings
from lakestats.publish.base import SnapshotStats
from lakestats.publish.iceberg import IcebergPublisher
from lakestats.publish.native import stats_doc
from lakestats.tables import OpenedTable
from lakestats.testing import IcebergWarehouse

SETTINGS = SketchSettings()
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])


def _opened(tmp_path: Path) -> tuple[IcebergWarehouse, OpenedTable]:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA, partition_by=[("cat", IdentityTransform())])
    wh.append("t", {"id": list(range(50)), "cat": ["a", "b"] * 25})
    _, opened = catalog_config(wh, "t", tmp_path / "state")
    return wh, opened


def _sketched_partitions(opened: OpenedTable, snapshot_id: int) -> tuple[PartitionAggregate, ...]:
    schema = opened.table.schema()
    live = opened.table.live_files(snapshot_id)
    sketches = PySketcher()([f.path for f in live], schema)
    files = [replace(f, sketches=dict(sketches[f.path])) for f in live]
    types = {c.field_id: c.type for c in schema.columns}
    return merge_partitions(aggregate_files(files, types, SETTINGS), SETTINGS)


def test_theta_blobs_come_from_the_given_table_aggregate(tmp_path: Path) -> None:
    wh, opened = _opened(tmp_path)
    snapshot = wh.lineage("t")[-1]
    partitions = _sketched_partitions(opened, snapshot)
    schema = opened.table.schema()
    publisher = IcebergPublisher(opened.table)  # type: ignore[arg-type]

    # sketched partitions, but a table aggregate without columns: no Puffin file
    bare = PartitionAggregate(partition=whole_table(partitions, SETTINGS).partition)
    publisher.stage(SnapshotStats(snapshot, schema, partitions, bare, SETTINGS), {})
    publisher.flush({})
    assert wh.table("t").metadata.statistics == []

    # no partitions at all, but the merged table aggregate: one blob per sketched column
    table = whole_table(partitions, SETTINGS)
    publisher.stage(SnapshotStats(snapshot, schema, (), table, SETTINGS), {})
    publisher.flush({})
    (entry,) = wh.table("t").metadata.statistics
    with wh.table("t").io.new_input(entry.statistics_path).open() as stream:
        blobs = PuffinFile(stream.read()).footer.blobs
    assert sorted(b.fields[0] for b in blobs) == sorted(c.field_id for c in schema.columns)
    assert {b.properties["ndv"] for b in blobs if b.fields == [1]} == {"50"}


def test_the_native_document_takes_the_given_table_aggregate(tmp_path: Path) -> None:
    wh, opened = _opened(tmp_path)
    snapshot = wh.lineage("t")[-1]
    partitions = _sketched_partitions(opened, snapshot)
    table = whole_table(partitions, SETTINGS)
    schema = opened.table.schema()
    stats = SnapshotStats(snapshot, schema, partitions, table, SETTINGS)
    doc = stats_doc(stats, table_name="t", format_name="iceberg", commit={})
    assert doc["record_count"] == 50
    assert doc["columns"]["id"]["ndv"] == 50
    assert [p["partition"] for p in doc["partitions"]] == [{"cat": "a"}, {"cat": "b"}]

    marked = replace(table, record_count=12345)
    doc = stats_doc(replace(stats, table=marked), table_name="t", format_name="iceberg", commit={})
    assert doc["record_count"] == 12345  # the table aggregate given, not a new merge
    assert len(doc["partitions"]) == 2  # partitions still come from the partitions
