"""Shared helpers of the publishing tests: catalog-opened tables and a Spark-free sketcher."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
from datasketches import update_theta_sketch

from lakestats.analyze import AnalyzeResult, Sketcher, analyze_table
from lakestats.config import Config, SketchConfig, TableConfig
from lakestats.merge import TABLE_KEY
from lakestats.model import ColumnSketch, PartitionAggregate, SketchSettings, TableSchema
from lakestats.publish.base import SnapshotStats
from lakestats.sketches.hashing import THETA_SEED
from lakestats.tables import OpenedTable, open_configured
from lakestats.testing import IcebergWarehouse


def local(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


class PySketcher:
    """Theta sketches in pure Python for ``long`` and ``string`` columns.

    ``datasketches``' ``update(int)`` hashes the 8 little-endian bytes of a long and
    ``update(str)`` the UTF-8 bytes: exactly Iceberg's single-value serialization of
    those two types, so these sketches are what a spec-following engine builds. Other
    types get no sketch (tests that need them use Spark).
    """

    def __init__(self, lg_k: int = 12) -> None:
        self.lg_k = lg_k
        self.calls = 0

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int] = ()
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        self.calls += 1
        out: dict[str, dict[int, ColumnSketch]] = {}
        for path in paths:
            data = pq.ParquetFile(local(path)).read()  # one file: no hive-partition inference
            by_id = {
                int(f.metadata[b"PARQUET:field_id"]): f.name
                for f in data.schema
                if f.metadata and b"PARQUET:field_id" in f.metadata
            }
            sketches: dict[int, ColumnSketch] = {}
            for column in schema.columns:
                if column.type not in ("long", "string") or column.field_id not in by_id:
                    continue
                values = data.column(by_id[column.field_id]).to_pylist()
                sketch = update_theta_sketch(self.lg_k, seed=THETA_SEED)
                for value in values:
                    if value is not None and value != "":
                        sketch.update(value)
                sketches[column.field_id] = ColumnSketch(
                    theta=bytes(sketch.compact().serialize()),
                    null_count=sum(v is None for v in values),
                )
            out[path] = sketches
        return out


def catalog_config(
    wh: IcebergWarehouse, name: str, state_dir: Path, **table: Any
) -> tuple[Config, OpenedTable]:
    config = Config(
        state_dir=str(state_dir),
        catalog={wh.catalog_name: dict(wh.catalog_properties)},
        table=(
            TableConfig(
                name=name, catalog=wh.catalog_name, identifier=wh.identifier(name), **table
            ),
        ),
        sketch=SketchConfig(),
    )
    return config, open_configured(config.table[0], config)


def run_analyze(
    config: Config, opened: OpenedTable, sketcher: Sketcher | None, **kwargs: Any
) -> AnalyzeResult:
    return analyze_table(opened, config=config, sketcher=sketcher, **kwargs)


def unsketched(opened: OpenedTable, snapshot_id: int) -> SnapshotStats:
    """Stats of a snapshot with no partitions and no sketches: nothing for a Puffin file,
    partition statistics from the snapshot's live files."""
    return SnapshotStats(
        snapshot_id=snapshot_id,
        schema=opened.table.schema(),
        partitions=(),
        table=PartitionAggregate(partition=TABLE_KEY),
        settings=SketchSettings(),
    )
