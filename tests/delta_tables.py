"""Delta tables for tests: written by delta-rs (``deltalake``), read back by DuckDB.

``DeltaWriter`` commits the way an application does (``write_deltalake``, ``delete``,
``update``, ``create_checkpoint``, ``cleanup_metadata``, ``vacuum``). delta-rs 1.6 cannot
add, rename or drop columns of a column-mapping table; for those ``DeltaWriter`` writes
the one ``metaData`` commit Spark's ``ALTER TABLE`` writes (the only hand-made log
entries in the tests). The fixtures written by Spark and Databricks are in
``../shared/fixtures/delta`` (set ``LAKESTATS_DELTA_FIXTURES`` elsewhere).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakestats.values import to_json
from table_types import arrow_type

_DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "delta"
FIXTURES = Path(os.environ.get("LAKESTATS_DELTA_FIXTURES", _DEFAULT))

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"Delta fixtures not found at {FIXTURES}"
)

# every fixture and its live rows (deltalake's query engine and DuckDB agree)
FIXTURE_ROWS = {
    "delta-golden/data-skipping-basic-stats-all-types": 1,
    "delta-golden/dv-partitioned-with-checkpoint": 35,
    "delta-golden/multi-part-checkpoint": 31,
    "delta-rs/checkpoint-v2-table": 44,
    "delta-rs/delta-0.8.0": 4,
    "delta-rs/delta-1.2.1-only-struct-stats": 12,
    "delta-rs/simple_table": 3,
    "delta-rs/table-with-dv-small": 8,
    "delta-rs/table_with_column_mapping": 5,
    "delta-rs/table_with_deletion_logs": 98,
    "delta-rs/table_with_edge_timestamps": 2,
    "delta-rs/table_with_liquid_clustering": 10,
}

_DELTA_TYPES = {
    "int": "integer",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
}


# table properties under which cleanup_metadata removes every commit before a checkpoint
NO_LOG_RETENTION = {"delta.logRetentionDuration": "interval 0 seconds"}

# an id, a nullable name and the partition: the table most Delta tests write (``id_name_part``)
ID_NAME_PART = (("id", "long"), ("name", "string"), ("part", "string"))


def fixture_path(name: str) -> str:
    return str(FIXTURES / name)


def delta_type(type_str: str) -> str:
    return type_str.replace(", ", ",") if type_str.startswith("decimal") else _DELTA_TYPES[type_str]


class DeltaWriter:
    """One Delta table at ``path``, written through delta-rs."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)

    @property
    def log(self) -> Path:
        return Path(self.path) / "_delta_log"

    def table(self) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self.path)

    def version(self) -> int:
        return int(self.table().version())

    def create(
        self,
        columns: Sequence[tuple[str, str | pa.DataType]],
        *,
        column_mapping: bool = False,
        partition_by: Sequence[str] = (),
        configuration: Mapping[str, str] | None = None,
    ) -> None:
        """An empty table (version 0: the creation, no file)."""
        from deltalake import DeltaTable, TableFeatures

        config = {"delta.checkpointInterval": "1000", **(configuration or {})}
        if column_mapping:
            # table features (3/7), so that timestamp_ntz columns can join column mapping
            config.update(
                {
                    "delta.columnMapping.mode": "name",
                    "delta.minReaderVersion": "3",
                    "delta.minWriterVersion": "7",
                }
            )
        schema = pa.schema(
            [(name, arrow_type(t) if isinstance(t, str) else t) for name, t in columns]
        )
        table = DeltaTable.create(
            self.path, schema, partition_by=list(partition_by) or None, configuration=config
        )
        if column_mapping:
            table.alter.add_feature(
                TableFeatures.ColumnMapping, allow_protocol_versions_increase=True
            )

    def arrow_schema(self) -> pa.Schema:
        return pa.schema(self.table().schema().to_arrow())

    def append(self, rows: Mapping[str, Sequence[Any]], *, mode: str = "append") -> int:
        from deltalake import write_deltalake

        schema = self.arrow_schema()
        data = pa.table({f.name: pa.array(rows[f.name], f.type) for f in schema}, schema=schema)
        write_deltalake(self.path, data, mode=mode)  # type: ignore[arg-type]
        return self.version()

    def delete(self, predicate: str) -> int:
        self.table().delete(predicate)
        return self.version()

    def update(self, updates: Mapping[str, str], predicate: str) -> int:
        self.table().update(updates=dict(updates), predicate=predicate)
        return self.version()

    def checkpoint(self) -> None:
        self.table().create_checkpoint()

    def cleanup(self) -> None:
        """A checkpoint of the current version, then delta-rs' log cleanup: with the
        ``NO_LOG_RETENTION`` the table was created with, every commit before it goes."""
        self.checkpoint()
        self.table().cleanup_metadata()

    def vacuum(self) -> list[str]:
        removed: list[str] = self.table().vacuum(
            retention_hours=0, enforce_retention_duration=False, dry_run=False
        )
        return removed

    # --- schema changes delta-rs cannot write on column-mapping tables ---------------------

    def add_column(self, name: str, type_str: str) -> int:
        def change(fields: list[dict[str, Any]], config: dict[str, str]) -> None:
            next_id = int(config.get("delta.columnMapping.maxColumnId", "0")) + 1
            config["delta.columnMapping.maxColumnId"] = str(next_id)
            metadata: dict[str, Any] = {}
            if config.get("delta.columnMapping.mode", "none") != "none":
                metadata = {
                    "delta.columnMapping.id": next_id,
                    "delta.columnMapping.physicalName": f"col-{uuid.uuid4()}",
                }
            fields.append(
                {"name": name, "type": delta_type(type_str), "nullable": True, "metadata": metadata}
            )

        return self._alter("ADD COLUMNS", change)

    def rename_column(self, old: str, new: str) -> int:
        """A rename; of a partition column too, in ``partitionColumns`` (as Spark's)."""

        def change(fields: list[dict[str, Any]], config: dict[str, str]) -> None:
            next(f for f in fields if f["name"] == old)["name"] = new

        def partitions(names: list[str]) -> list[str]:
            return [new if n == old else n for n in names]

        return self._alter("RENAME COLUMN", change, partitions)

    def drop_column(self, name: str) -> int:
        def change(fields: list[dict[str, Any]], config: dict[str, str]) -> None:
            fields.remove(next(f for f in fields if f["name"] == name))

        return self._alter("DROP COLUMNS", change)

    def widen_column(self, name: str, type_str: str) -> int:
        """Delta type widening (``ALTER COLUMN … TYPE``, Spark 4's ``typeWidening``): the
        field's new type and its ``delta.typeChanges``. The table property only, not the
        protocol feature, which delta-rs would refuse to write under."""

        def change(fields: list[dict[str, Any]], config: dict[str, str]) -> None:
            field = next(f for f in fields if f["name"] == name)
            new = delta_type(type_str)
            field["metadata"]["delta.typeChanges"] = [{"fromType": field["type"], "toType": new}]
            field["type"] = new
            config["delta.enableTypeWidening"] = "true"

        return self._alter("CHANGE COLUMN", change)

    def _alter(
        self,
        operation: str,
        change: Any,
        partitions: Callable[[list[str]], list[str]] | None = None,
    ) -> int:
        version = self.version()
        metadata = None
        for line in (self.log / f"{version:020d}.json").read_text().splitlines():
            metadata = json.loads(line).get("metaData", metadata)
        if metadata is None:  # the newest metaData is older: ask delta-rs for it
            current = self.table().metadata()
            metadata = {
                "id": current.id,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": self.table().schema().to_json(),
                "partitionColumns": list(current.partition_columns),
                "configuration": dict(current.configuration),
                "createdTime": current.created_time,
            }
        schema = json.loads(metadata["schemaString"])
        config = dict(metadata.get("configuration") or {})
        change(schema["fields"], config)
        metadata = {**metadata, "schemaString": json.dumps(schema), "configuration": config}
        if partitions is not None:
            metadata["partitionColumns"] = partitions(list(metadata.get("partitionColumns") or []))
        info = {"timestamp": int(time.time() * 1000), "operation": operation}
        lines = [json.dumps({"commitInfo": info}), json.dumps({"metaData": metadata})]
        target = self.log / f"{version + 1:020d}.json"
        with target.open("x") as out:  # create-if-absent, as a Delta commit is
            out.write("\n".join(lines) + "\n")
        return version + 1

    def cut_log_after(self, version: int) -> None:
        """Remove every log file after ``version``: the table is back at it."""
        for entry in self.log.iterdir():
            head = entry.name.split(".")[0]
            if entry.is_file() and head.isdigit() and int(head) > version:
                entry.unlink()


def live_rows(path: str) -> pa.Table:
    """Every live row (deletion vectors applied) by deltalake's own query engine."""
    from deltalake import DeltaTable, QueryBuilder

    reader = QueryBuilder().register("t", DeltaTable(path)).execute("select * from t")
    data = pa.RecordBatchReader.from_stream(reader).read_all()
    # DataFusion hands over view types, which pyarrow.compute does not cover everywhere
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return data.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in data.schema]))


def id_name_part(
    ids: range, part: str, *, null_every: int, names: str, distinct: int
) -> dict[str, list[Any]]:
    """Rows of ``ID_NAME_PART`` in partition ``part``: each id in ``ids``, its name null
    when ``id % null_every == 0``, else ``names`` formatted with ``id % distinct``."""
    return {
        "id": list(ids),
        "name": [None if i % null_every == 0 else names.format(i % distinct) for i in ids],
        "part": [part] * len(ids),
    }


def assert_describes_live_rows(
    doc: Mapping[str, Any],
    data: pa.Table,
    *,
    ndv: bool,
    partition: str | None = None,
    table_format: str = "delta",
) -> None:
    """``doc`` (``show --json``) holds the statistics of ``data`` (the live rows): its
    record counts, every column's null count, min and max exactly; with ``ndv`` each NDV
    within three of its theta sketch's standard errors; with ``partition`` (the one
    partition column) each partition's record count."""
    assert doc["format"] == table_format
    assert doc["record_count"] == doc["merged_record_count"] == data.num_rows
    assert set(doc["columns"]) == set(data.column_names)
    for name, got in doc["columns"].items():
        column = data.column(name)
        bounds = pc.min_max(column)  # nulls skipped
        assert got["null_count"] == column.null_count, name
        assert (got["min"], got["max"]) == (
            to_json(bounds["min"].as_py()),
            to_json(bounds["max"].as_py()),
        ), name
        if ndv:
            distinct = len(pc.unique(column.drop_null()))
            error = got["sketch"]["ndv"]["relative_standard_error"]
            assert abs(got["ndv"] - distinct) <= 3 * error * distinct + 1, name
    if partition is not None:
        parts = {tuple(p["partition"].values()): p["record_count"] for p in doc["partitions"]}
        expected = pc.value_counts(data.column(partition)).to_pylist()
        assert parts == {(e["values"],): e["counts"] for e in expected}


def duckdb_with_delta() -> Any:
    """A DuckDB connection with the delta extension loaded from its PyPI package."""
    import duckdb
    import duckdb_extension_delta

    con = duckdb.connect()
    (binary,) = Path(duckdb_extension_delta.__file__).parent.rglob("*.duckdb_extension")
    con.execute(f"LOAD '{binary}'")
    return con
