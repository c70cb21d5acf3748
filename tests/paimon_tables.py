"""Real Paimon tables for the tests, written by pypaimon 2.1 (a filesystem catalog in tmp).

pypaimon cannot delete data files by predicate (nor compact, nor expire): ``delete_files``
commits a file-level delete with lakestats' own Paimon committer (``formats/paimon/commit``),
the same protocol the statistics publisher uses, as Java's partition/file drops do.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasketches import update_theta_sketch
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import AtomicType
from pypaimon.schema.schema_change import SchemaChange

from lakestats.config import Config, SketchConfig, TableConfig
from lakestats.formats.paimon import PaimonTable, open_paimon_location
from lakestats.formats.paimon.commit import (
    PendingFiles,
    avro_records,
    commit_with_retry,
    list_entries,
    next_snapshot,
    table_root,
    write_avro,
)
from lakestats.formats.paimon.testing import write_arrow
from lakestats.formats.paimon.types import PaimonSchema, parse_schema
from lakestats.model import ColumnSketch, DataFile, TableSchema
from lakestats.sketches.hashing import THETA_SEED
from table_types import arrow_type

_PAIMON = {
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "STRING",
    "binary": "BYTES",
    "date": "DATE",
    "timestamp": "TIMESTAMP(6)",
}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
FULL_STATS = {"metadata.stats-mode": "full"}
# an append-only table whose rows pypaimon can delete (deletion vectors) and update in place
# (files of some columns for rows other files hold): pypaimon requires all three
DATA_EVOLUTION = {
    "data-evolution.enabled": "true",
    "row-tracking.enabled": "true",
    "deletion-vectors.enabled": "true",
}


def paimon_type(type_str: str) -> str:
    match = _DECIMAL.fullmatch(type_str)
    return f"DECIMAL({match[1]}, {match[2]})" if match else _PAIMON[type_str]


class PaimonWarehouse:
    """A pypaimon filesystem catalog under ``root`` with database ``db``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.catalog = CatalogFactory.create({"warehouse": str(root)})
        self.catalog.create_database("db", True)

    def location(self, name: str) -> Path:
        return self.root / "db.db" / name

    def create(
        self,
        name: str,
        columns: Sequence[tuple[str, str]] | pa.Schema,
        *,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
    ) -> Path:
        schema = (
            columns
            if isinstance(columns, pa.Schema)
            else pa.schema([(n, arrow_type(t)) for n, t in columns])
        )
        self.catalog.create_table(
            f"db.{name}",
            Schema.from_pyarrow_schema(
                schema,
                partition_keys=list(partition_keys),
                primary_keys=list(primary_keys),
                options=dict(FULL_STATS if options is None else options),
            ),
            False,
        )
        return self.location(name)

    def table(self, name: str) -> Any:
        return self.catalog.get_table(f"db.{name}")

    def arrow_schema(self, name: str) -> pa.Schema:
        from pypaimon.schema.data_types import PyarrowFieldParser

        return PyarrowFieldParser.from_paimon_schema(self.table(name).table_schema.fields)

    def write(
        self, name: str, rows: Mapping[str, Sequence[Any]], *, overwrite: bool = False
    ) -> int:
        """One batch commit of ``rows`` (columns the table lacks are dropped); the new id."""
        table = self.table(name)
        schema = self.arrow_schema(name)
        data = pa.table(
            {f.name: pa.array(rows.get(f.name, [None] * _length(rows)), f.type) for f in schema},
            schema=schema,
        )
        write_arrow(table, data, overwrite={} if overwrite else None)
        return self.current(name)

    def read(self, name: str) -> pa.Table:
        """The rows pypaimon's reader returns now (primary-key tables: merged by key)."""
        builder = self.table(name).new_read_builder()
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    def current(self, name: str) -> int:
        snapshot = self.table(name).snapshot_manager().get_latest_snapshot()
        assert snapshot is not None
        return int(snapshot.id)

    def alter(self, name: str, *changes: Any) -> None:
        self.catalog.alter_table(f"db.{name}", list(changes))

    def add_column(self, name: str, column: str, type_str: str) -> None:
        self.alter(name, SchemaChange.add_column(column, AtomicType(paimon_type(type_str))))

    def rename_column(self, name: str, old: str, new: str) -> None:
        self.alter(name, SchemaChange.rename_column(old, new))

    def drop_column(self, name: str, column: str) -> None:
        self.alter(name, SchemaChange.drop_column(column))

    def rollback(self, name: str, snapshot_id: int) -> None:
        self.table(name).rollback_to(snapshot_id)

    def row_ids(self, name: str, column: str) -> dict[Any, int]:
        """``column``'s value → its row's ``_ROW_ID`` (a row-tracking table, unique values)."""
        builder = self.table(name).new_read_builder().with_projection(["_ROW_ID", column])
        rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        return dict(zip(rows[column].to_pylist(), rows["_ROW_ID"].to_pylist(), strict=True))

    def delete_rows(self, name: str, row_ids: Collection[int]) -> int:
        """A row-level delete by pypaimon (``DATA_EVOLUTION`` tables): one commit of
        deletion vectors, the data files unchanged; the new id."""
        return self._commit_update(name, lambda update: update.delete_by_row_id(list(row_ids)))

    def delete_where(self, name: str, where: Callable[[Any], Any]) -> int:
        """``DELETE WHERE where(predicate builder)`` by pypaimon, as deletion vectors."""
        return self._commit_update(
            name, lambda update: update.delete_by_predicate(where(update.new_predicate_builder()))
        )

    def update_columns(self, name: str, data: pa.Table) -> int:
        """pypaimon's in-place update of ``data``'s columns for its ``_ROW_ID`` rows: files
        of those columns only (data evolution); the new id."""
        columns = [c for c in data.column_names if c != "_ROW_ID"]
        return self._commit_update(
            name,
            lambda update: update.with_update_type(columns).update_by_arrow_with_row_id(data),
        )

    def _commit_update(self, name: str, prepare: Callable[[Any], Any]) -> int:
        builder = self.table(name).new_batch_write_builder()
        messages = prepare(builder.new_update())
        commit = builder.new_commit()
        commit.commit(messages)
        commit.close()
        return self.current(name)

    def open(self, name: str) -> PaimonTable:
        return open_paimon_location(str(self.location(name)))

    def delete_files(self, name: str, doomed: Callable[[DataFile], bool]) -> int:
        """Commit an ``OVERWRITE`` snapshot deleting whole data files; the new id."""
        table = self.open(name)

        def attempt(table: PaimonTable, latest: int, pending: PendingFiles) -> dict[str, Any]:
            parent = table.files.snapshot(latest)
            live = {f.path: f for f in table.live_files(latest)}
            targets = {p.rsplit("/", 1)[-1] for p, f in live.items() if doomed(f)}
            manifest_schema: dict[str, Any] | None = None
            deletes: list[dict[str, Any]] = []
            template: dict[str, Any] | None = None
            for manifest, list_record in list_entries(table, parent):
                schema, records = avro_records(table, manifest)
                for record in records:
                    if record["_KIND"] == 0 and record["_FILE"]["_FILE_NAME"] in targets:
                        manifest_schema, template = schema, list_record
                        deletes.append({**record, "_KIND": 1})
            assert manifest_schema is not None and template is not None, "nothing to delete"
            root = table_root(table)
            manifest, size = write_avro(root, pending, "manifest", manifest_schema, deletes)
            rows = sum(int(r["_FILE"]["_ROW_COUNT"]) for r in deletes)
            delta = {
                **template,
                "_FILE_NAME": manifest,
                "_FILE_SIZE": size,
                "_NUM_ADDED_FILES": 0,
                "_NUM_DELETED_FILES": len(deletes),
            }
            document = next_snapshot(table, latest, pending, delta=[delta])
            document.update(
                commitKind="OVERWRITE",
                totalRecordCount=int(parent.get("totalRecordCount") or 0) - rows,
                deltaRecordCount=-rows,
            )
            return document

        committed = commit_with_retry(table, attempt)
        assert committed is not None
        return committed


def one_table_config(name: str, location: Path | str, state: Path, **table: Any) -> Config:
    """A config of the one table ``name`` at ``location`` (``table``: its other settings),
    its stats stored under ``state``, with the default sketches."""
    return Config(
        state_dir=str(state),
        table=(TableConfig(name=name, location=str(location), **table),),
        sketch=SketchConfig(),
    )


def parsed_schema(
    fields: Sequence[tuple[str, str]],
    *,
    primary_keys: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
) -> PaimonSchema:
    """The adapter's parse of a schema file: ``fields`` (name, Paimon SQL type) with ids 0,
    1, … in order, the ``primary_keys`` in key order and the table ``options``."""
    return parse_schema(
        {
            "id": 0,
            "fields": [{"id": i, "name": n, "type": t} for i, (n, t) in enumerate(fields)],
            "primaryKeys": list(primary_keys),
            "options": dict(options or {}),
        }
    )


def _length(rows: Mapping[str, Sequence[Any]]) -> int:
    return len(next(iter(rows.values())))


def day(n: int) -> dt.date:
    return dt.date(2024, 3, 1) + dt.timedelta(days=n)


class NameSketcher:
    """Theta sketches and string lengths for ``long``/``string`` columns, read by name."""

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int] = ()
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        out: dict[str, dict[int, ColumnSketch]] = {}
        for path in paths:
            data = pq.ParquetFile(path).read()
            sketches: dict[int, ColumnSketch] = {}
            for column in schema.columns:
                if column.type not in ("long", "string") or column.name not in data.column_names:
                    continue
                values = data.column(column.name).to_pylist()
                sketch = update_theta_sketch(12, seed=THETA_SEED)
                for value in values:
                    if value is not None:
                        sketch.update(value)
                present = [v for v in values if v is not None]
                strings = column.type == "string"
                sketches[column.field_id] = ColumnSketch(
                    theta=bytes(sketch.compact().serialize()),
                    null_count=len(values) - len(present),
                    min=min(present) if present else None,
                    max=max(present) if present else None,
                    len_sum=sum(len(v) for v in present) if strings else None,
                    len_max=max((len(v) for v in present), default=0) if strings else None,
                )
            out[path] = sketches
        return out


def compact_fully(warehouse: PaimonWarehouse, name: str) -> int:
    """Commit a ``COMPACT`` snapshot as Java's full compaction of a deduplicate table
    writes it; the new id. pypaimon has no compaction, so this is written here: per
    (partition, bucket), one file at the top level (4 of ``num-levels`` 5) holding each
    key's newest row, retractions (-U/-D) dropped; its manifest entry with the min/max
    keys and full value stats as BinaryRows (pypaimon's serializer); the old files'
    entries deleted. Data files are Parquet in the table's own file layout."""
    import copy
    import uuid

    from pypaimon.table.row.generic_row import GenericRow, GenericRowSerializer

    paimon_schema = warehouse.table(name).table_schema
    by_name = {f.name: f for f in paimon_schema.fields}
    key_names = list(paimon_schema.primary_keys)

    def row_bytes(names: Sequence[str], values: Sequence[Any]) -> bytes:
        fields = [by_name[n] for n in names]
        return bytes(GenericRowSerializer.to_bytes(GenericRow(list(values), fields)))

    def stats(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        lows, highs, nulls = [], [], []
        for n in names:
            present = [r[n] for r in rows if r[n] is not None]
            lows.append(min(present) if present else None)
            highs.append(max(present) if present else None)
            nulls.append(len(rows) - len(present))
        return {
            "_MIN_VALUES": row_bytes(names, lows),
            "_MAX_VALUES": row_bytes(names, highs),
            "_NULL_COUNTS": nulls,
        }

    def attempt(table: PaimonTable, latest: int, pending: PendingFiles) -> dict[str, Any]:
        parent = table.files.snapshot(latest)
        paths = {p.rsplit("/", 1)[-1]: p for p in (f.path for f in table.live_files(latest))}
        live: dict[tuple[bytes, int, str], dict[str, Any]] = {}
        manifest_schema: dict[str, Any] | None = None
        template: dict[str, Any] | None = None
        for manifest, list_record in list_entries(table, parent):
            schema, records = avro_records(table, manifest)
            manifest_schema, template = schema, list_record
            for record in records:
                ident = (record["_PARTITION"], record["_BUCKET"], record["_FILE"]["_FILE_NAME"])
                if record["_KIND"] == 0:
                    live[ident] = record
                else:
                    live.pop(ident, None)
        assert manifest_schema is not None and template is not None
        groups: dict[tuple[bytes, int], list[dict[str, Any]]] = {}
        for (partition, bucket, _), record in sorted(live.items()):
            groups.setdefault((partition, bucket), []).append(record)
        entries: list[dict[str, Any]] = []
        removed_rows = added_rows = 0
        for records in groups.values():
            files = [paths[r["_FILE"]["_FILE_NAME"]].removeprefix("file:") for r in records]
            data = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
            newest: dict[tuple[Any, ...], dict[str, Any]] = {}
            for row in sorted(data.to_pylist(), key=lambda r: r["_SEQUENCE_NUMBER"]):
                newest[tuple(row[k] for k in key_names)] = row
            kept = [newest[k] for k in sorted(newest) if newest[k]["_VALUE_KIND"] not in (1, 3)]
            directory = Path(files[0]).parent
            target = directory / f"data-{uuid.uuid4()}-0.parquet"
            pending.paths.append(target)
            pq.write_table(pa.Table.from_pylist(kept, schema=data.schema), target)
            value_names = [f.name for f in paimon_schema.fields]
            added = copy.deepcopy(records[0])
            added["_KIND"] = 0
            added["_FILE"].update(
                _FILE_NAME=target.name,
                _FILE_SIZE=target.stat().st_size,
                _ROW_COUNT=len(kept),
                _MIN_KEY=row_bytes(key_names, [kept[0][k] for k in key_names]),
                _MAX_KEY=row_bytes(key_names, [kept[-1][k] for k in key_names]),
                _KEY_STATS=stats(key_names, kept),
                _VALUE_STATS=stats(value_names, kept),
                _VALUE_STATS_COLS=None,
                _MIN_SEQUENCE_NUMBER=min(r["_SEQUENCE_NUMBER"] for r in kept),
                _MAX_SEQUENCE_NUMBER=max(r["_SEQUENCE_NUMBER"] for r in kept),
                _LEVEL=4,
                _DELETE_ROW_COUNT=0,
                _FILE_SOURCE=1,
                _CREATION_TIME=dt.datetime.now(dt.UTC),
            )
            entries.extend({**r, "_KIND": 1} for r in records)
            entries.append(added)
            removed_rows += sum(int(r["_FILE"]["_ROW_COUNT"]) for r in records)
            added_rows += len(kept)
        root = table_root(table)
        manifest, size = write_avro(root, pending, "manifest", manifest_schema, entries)
        delta = {
            **template,
            "_FILE_NAME": manifest,
            "_FILE_SIZE": size,
            "_NUM_ADDED_FILES": len(groups),
            "_NUM_DELETED_FILES": len(entries) - len(groups),
        }
        document = next_snapshot(table, latest, pending, delta=[delta])
        document.update(
            commitKind="COMPACT",
            totalRecordCount=int(parent.get("totalRecordCount") or 0) - removed_rows + added_rows,
            deltaRecordCount=added_rows - removed_rows,
        )
        return document

    committed = commit_with_retry(warehouse.open(name), attempt)
    assert committed is not None
    return committed
