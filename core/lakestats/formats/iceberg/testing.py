"""Helpers for tests: real Iceberg tables in a temporary directory, and exact expected stats.

``IcebergWarehouse`` wraps a SQLite-backed pyiceberg ``SqlCatalog`` so a test writes tables
the way a real writer does (Parquet data files, manifests, metadata.json), then opens them
with lakestats by location or by catalog. ``exact_stats`` computes what statistics of the
live data must be, by reading all of it: the reference the integration tests compare with.

Writing day/month/year/hour/bucket/truncate partitions needs the ``pyiceberg-core`` package.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table import Table
from pyiceberg.transforms import Transform
from pyiceberg.types import IcebergType

from lakestats.formats.iceberg.files import leaf_columns
from lakestats.locations import local_path

CatalogArgs = tuple[str, dict[str, str], str]
"""``(catalog_name, catalog_properties, identifier)`` as ``open_table`` takes them."""

_FLOATING = frozenset({"float", "double"})
_FIRST_PARTITION_FIELD_ID = 1000  # where Iceberg starts partition field ids


class IcebergWarehouse:
    """A throw-away warehouse: ``<root>/catalog.db`` (SQLite) and ``<root>/warehouse``.

    Every table lives in one namespace; methods take the bare table name. Each writing
    method commits through pyiceberg exactly as an application would. ``warehouse`` puts
    the tables elsewhere (an ``s3://`` URI), with ``io_properties`` for pyiceberg's FileIO
    (``s3.endpoint`` …) kept in the catalog properties.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        catalog_name: str = "lakestats_test",
        namespace: str = "db",
        warehouse: str | None = None,
        io_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        if warehouse is None:
            (self.root / "warehouse").mkdir(parents=True, exist_ok=True)
        else:
            self.root.mkdir(parents=True, exist_ok=True)
        self.catalog_name = catalog_name
        self.namespace = namespace
        self.catalog_properties: dict[str, str] = {
            **(io_properties or {}),
            "type": "sql",
            "uri": f"sqlite:///{self.root / 'catalog.db'}",
            "warehouse": warehouse or (self.root / "warehouse").as_uri(),
        }
        self.catalog = SqlCatalog(catalog_name, **self.catalog_properties)
        self.catalog.create_namespace_if_not_exists(namespace)

    def identifier(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    def catalog_args(self, name: str) -> CatalogArgs:
        return self.catalog_name, dict(self.catalog_properties), self.identifier(name)

    def table(self, name: str) -> Table:
        """The table as the catalog has it now."""
        return self.catalog.load_table(self.identifier(name))

    def location(self, name: str) -> str:
        """The table's directory as a local path, or its URI when not local (what
        ``open_table(location)`` takes)."""
        return _local_path(self.table(name).metadata.location)

    def create_table(
        self,
        name: str,
        schema: pa.Schema | Schema,
        *,
        partition_by: Sequence[tuple[str, Transform[Any, Any]]] = (),
        partition_spec: PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Table:
        """Create a table; ``partition_by`` lists ``(source column, transform)`` pairs.

        Partition fields are named ``<column>_<transform>`` (``identity`` keeps the column
        name), as Spark names them.
        """
        iceberg_schema = _with_ids(schema)
        spec = partition_spec or _spec(iceberg_schema, partition_by)
        return self.catalog.create_table(
            self.identifier(name),
            iceberg_schema,
            partition_spec=spec,
            properties=dict(properties or {}),
        )

    def append(self, name: str, data: pa.Table | Mapping[str, Sequence[Any]]) -> int:
        """Append rows (a table, or columns by name in the current schema); the new snapshot."""
        table = self.table(name)
        table.append(_arrow(table, data))
        return _current(table)

    def overwrite(
        self,
        name: str,
        data: pa.Table | Mapping[str, Sequence[Any]],
        where: str | BooleanExpression | None = None,
    ) -> int:
        """Replace the rows matching ``where`` (all rows by default) with ``data``.

        pyiceberg commits a ``delete`` (or ``overwrite``) snapshot and then an ``append``.
        """
        table = self.table(name)
        table.overwrite(_arrow(table, data), overwrite_filter=where or AlwaysTrue())
        return _current(table)

    def delete(self, name: str, where: str | BooleanExpression) -> int | None:
        """Delete rows (copy-on-write); the current snapshot afterwards.

        Files wholly matched are dropped in a ``delete`` snapshot; files partly matched are
        rewritten in an ``overwrite`` snapshot.
        """
        table = self.table(name)
        table.delete(where)
        return table.metadata.current_snapshot_id

    def add_column(self, name: str, column: str, field_type: IcebergType) -> None:
        with self.table(name).update_schema() as update:
            update.add_column(column, field_type)

    def rename_column(self, name: str, old: str, new: str) -> None:
        with self.table(name).update_schema() as update:
            update.rename_column(old, new)

    def drop_column(self, name: str, column: str) -> None:
        with self.table(name).update_schema() as update:
            update.delete_column(column)

    def expire_snapshots(self, name: str, snapshot_ids: Iterable[int]) -> None:
        """Remove snapshots from the metadata (their files stay, as with a grace period)."""
        self.table(name).maintenance.expire_snapshots().by_ids(list(snapshot_ids)).commit()

    def rollback(self, name: str, snapshot_id: int) -> None:
        """Make an ancestor of the current snapshot current again."""
        self.table(name).manage_snapshots().rollback_to_snapshot(snapshot_id).commit()

    def lineage(self, name: str) -> list[int]:
        """Snapshot ids of the main branch, oldest first (only those still in metadata)."""
        metadata = self.table(name).metadata
        ids: list[int] = []
        snapshot = metadata.current_snapshot()
        while snapshot is not None:
            ids.append(snapshot.snapshot_id)
            parent = snapshot.parent_snapshot_id
            snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        return ids[::-1]


class ColumnExact(TypedDict):
    """Exact statistics of one column over the live rows."""

    null_count: int
    nan_count: int | None  # ``None`` for types other than float/double
    min: Any  # over non-null, non-NaN values; ``None`` when there are none
    max: Any


class ExactStats(TypedDict):
    record_count: int
    columns: dict[str, ColumnExact]  # by current (dotted) column name


def exact_stats(table: Table, snapshot_id: int | None = None) -> ExactStats:
    """Exact statistics of a snapshot's live rows (current by default), by a full scan.

    Values are Python values of the column type as ``lakestats.values`` decodes them
    (``date``, ``Decimal``, ``datetime``, ``UUID`` …). List and map columns are left out,
    as ``TableSchema`` leaves them out. Reads all the data: for tests only.
    """
    scan = table.scan(snapshot_id=snapshot_id) if snapshot_id is not None else table.scan()
    data = _flatten(scan.to_arrow())
    columns: dict[str, ColumnExact] = {}
    for column in leaf_columns(table.schema()):
        if column.name in data.column_names:
            columns[column.name] = _column_exact(data.column(column.name), column.type)
    return ExactStats(record_count=data.num_rows, columns=columns)


def _column_exact(values: pa.ChunkedArray, type_str: str) -> ColumnExact:
    nan_count: int | None = None
    present = values.drop_null()
    if isinstance(present.type, pa.BaseExtensionType):  # e.g. arrow.uuid: compute on storage
        storage = present.type.storage_type
        present = pa.chunked_array([chunk.storage for chunk in present.chunks], type=storage)
    if type_str in _FLOATING:
        is_nan = pc.is_nan(present)
        nan_count = int(pc.sum(is_nan).as_py() or 0)
        present = present.filter(pc.invert(is_nan))
    low: Any = None
    high: Any = None
    if len(present):
        bounds = pc.min_max(present)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if type_str == "uuid":
        low, high = (_as_uuid(v) for v in (low, high))
    return ColumnExact(null_count=values.null_count, nan_count=nan_count, min=low, max=high)


def _as_uuid(value: Any) -> Any:
    return uuid.UUID(bytes=bytes(value)) if isinstance(value, bytes | bytearray) else value


def _flatten(data: pa.Table) -> pa.Table:
    while any(pa.types.is_struct(f.type) for f in data.schema):
        data = data.flatten()
    return data


def _with_ids(schema: pa.Schema | Schema) -> Schema:
    if isinstance(schema, Schema):
        return schema
    # pyiceberg converts arrow schemas with ids of -1; fresh ids are needed to name
    # partition sources before the table exists.
    return assign_fresh_schema_ids(Catalog._convert_schema_if_needed(schema))


def _spec(schema: Schema, partition_by: Sequence[tuple[str, Transform[Any, Any]]]) -> PartitionSpec:
    fields = []
    for offset, (column, transform) in enumerate(partition_by):
        suffix = "" if str(transform) == "identity" else f"_{_transform_name(transform)}"
        fields.append(
            PartitionField(
                source_id=schema.find_field(column).field_id,
                field_id=_FIRST_PARTITION_FIELD_ID + offset,
                transform=transform,
                name=f"{column}{suffix}",
            )
        )
    return PartitionSpec(*fields)


def _transform_name(transform: Transform[Any, Any]) -> str:
    # "bucket[4]" → "bucket", "truncate[3]" → "trunc", as Spark names partition fields
    name = str(transform).split("[", 1)[0]
    return "trunc" if name == "truncate" else name


def _arrow(table: Table, data: pa.Table | Mapping[str, Sequence[Any]]) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    return pa.table(dict(data), schema=table.schema().as_arrow())


def _current(table: Table) -> int:
    snapshot_id = table.metadata.current_snapshot_id
    if snapshot_id is None:
        raise RuntimeError(f"table {table.name()} has no current snapshot after a write")
    return snapshot_id


def _local_path(uri: str) -> str:
    path = local_path(uri)
    return str(path) if path is not None else uri
