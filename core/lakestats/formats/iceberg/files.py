"""Iceberg manifest entries → ``lakestats.model.DataFile``: metrics, bounds and partitions.

Everything here is metadata only. Field types come from the schema a file was written with,
because bounds are serialized in that type (an ``int`` column later promoted to ``long``
still has 4-byte bounds in its old files).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pyiceberg.manifest import DATA_FILE_TYPE, DataFileContent
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import NestedField, PrimitiveType, StructType

from lakestats.exceptions import MetadataError
from lakestats.model import (
    Column,
    ColumnMetrics,
    DataFile,
    FileContent,
    PartitionField,
    PartitionKey,
    TableSchema,
    constant_metrics,
)
from lakestats.values import (
    STRING_LIKE_TYPES,
    decode_bound,
    from_physical,
    is_decimal,
    parse_type,
)
from lakestats.written_types import WrittenAs

_CONTENT = {
    DataFileContent.DATA: FileContent.DATA,
    DataFileContent.POSITION_DELETES: FileContent.POSITION_DELETES,
    DataFileContent.EQUALITY_DELETES: FileContent.EQUALITY_DELETES,
}
# Iceberg's reserved field id of the file_path column of position delete files
_DELETE_FILE_PATH_FIELD_ID = 2147483546
_METRICS_DEFAULT_KEY = "write.metadata.metrics.default"
_NAME_MAPPING = "schema.name-mapping.default"
_METRICS_COLUMN_KEY = "write.metadata.metrics.column."
_DEFAULT_TRUNCATE = 16  # Iceberg's default metrics mode is truncate(16)
_TRUNCATE_MODE = re.compile(r"^\s*truncate\(\s*(\d+)\s*\)\s*$", re.IGNORECASE)
# Bounds of files written before a type promotion keep the narrower encoding.
_PROMOTED_FROM = {("long", 4): "int", ("double", 4): "float"}


def leaf_columns(schema: Schema) -> tuple[Column, ...]:
    """Primitive columns of a schema in order; struct children get dotted names.

    Elements of lists and keys/values of maps are left out: their metrics describe the
    flattened elements, not the rows, so they do not fit column-level table statistics.
    """
    columns: list[Column] = []

    def walk(
        fields: Iterable[NestedField], path: tuple[str, ...], parents: tuple[int, ...]
    ) -> None:
        for nested in fields:
            here = (*path, nested.name)
            if isinstance(nested.field_type, StructType):
                walk(nested.field_type.fields, here, (*parents, nested.field_id))
            elif isinstance(nested.field_type, PrimitiveType):
                type_str = str(nested.field_type)
                columns.append(Column(nested.field_id, ".".join(here), type_str, parents, here))

    walk(schema.fields, (), ())
    return tuple(columns)


def table_schema(schema: Schema) -> TableSchema:
    return TableSchema(schema_id=schema.schema_id, columns=leaf_columns(schema))


@dataclass(frozen=True)
class _SchemaView:
    columns: Mapping[int, Column]
    field_ids: frozenset[int]
    # columns the schema names otherwise than the current one (``DataFile.written_as``)
    renamed: WrittenAs = ()


class FileConverter:
    """Converts the manifest entries of one table's metadata version.

    Build one per ``TableMetadata``: it caches per-schema lookups.
    """

    def __init__(self, metadata: TableMetadata) -> None:
        self._metadata = metadata
        self._views: dict[int, _SchemaView] = {}

    @cached_property
    def _newest_first(self) -> tuple[Schema, ...]:
        return tuple(sorted(self._metadata.schemas, key=lambda s: s.schema_id, reverse=True))

    @cached_property
    def _specs(self) -> dict[int, PartitionSpec]:
        return self._metadata.specs()

    @cached_property
    def _schema_by_sequence(self) -> dict[int, int]:
        """Snapshot sequence number → schema id, to find the writer of a removed file."""
        return {
            s.sequence_number: s.schema_id
            for s in self._metadata.snapshots
            if s.sequence_number and s.schema_id is not None
        }

    def schema_id_for(self, snapshot_id: int | None) -> int:
        """The schema a snapshot was written with; the current one when unknown."""
        if snapshot_id is not None:
            snapshot = self._metadata.snapshot_by_id(snapshot_id)
            if snapshot is not None and snapshot.schema_id is not None:
                return snapshot.schema_id
        return self._metadata.current_schema_id

    def writer_schema_id(
        self, added_by: int | None, file_sequence_number: int | None, default: int
    ) -> int:
        """Best knowledge of the schema a file was written with.

        The adding snapshot tells it while that snapshot exists; a removed entry names the
        removing snapshot instead, but its file sequence number still names the adder.
        """
        if added_by is not None:
            snapshot = self._metadata.snapshot_by_id(added_by)
            if snapshot is not None and snapshot.schema_id is not None:
                return snapshot.schema_id
        if file_sequence_number:
            return self._schema_by_sequence.get(file_sequence_number, default)
        return default

    def knows_schema(self, schema_id: int) -> bool:
        """Whether the table metadata holds schema ``schema_id``."""
        return self._metadata.schema_by_id(schema_id) is not None

    def _view(self, schema_id: int) -> _SchemaView:
        view = self._views.get(schema_id)
        if view is None:
            schema = self._metadata.schema_by_id(schema_id)
            columns = {c.field_id: c for c in leaf_columns(schema)} if schema else {}
            view = _SchemaView(columns, frozenset(columns), self._renamed(columns, schema_id))
            self._views[schema_id] = view
        return view

    def _renamed(self, columns: Mapping[int, Column], schema_id: int) -> WrittenAs:
        """The columns of a writer schema renamed since: a file without field ids (added or
        migrated from Hive, found through the table's name mapping) knows them by their
        old names only. Files with ids are found by them (``pipeline._as_read``, a footer
        read each), so only a table with a name mapping — the only kind readers read
        id-less files of — says so."""
        current_id = self._metadata.current_schema_id
        if schema_id == current_id or _NAME_MAPPING not in self._metadata.properties:
            return ()
        current = self._view(current_id).columns
        return tuple(
            (field_id, column.name, column.type)
            for field_id, column in columns.items()
            if field_id in current and current[field_id].name != column.name
        )

    def _column(self, field_id: int, schema_id: int) -> Column | None:
        column = self._view(schema_id).columns.get(field_id)
        if column is not None:
            return column
        for schema in self._newest_first:
            column = self._view(schema.schema_id).columns.get(field_id)
            if column is not None:
                return column
        return None

    def convert(self, data_file: IcebergDataFile, schema_id: int) -> DataFile:
        """One manifest entry's file, its metrics decoded with the types of ``schema_id``."""
        content = _CONTENT[data_file.content]
        metrics = self._metrics(data_file, schema_id)
        constants = (
            self.identity_constants(data_file, schema_id) if content is FileContent.DATA else {}
        )
        for field_id, value in constants.items():
            known = metrics.get(field_id)
            metrics[field_id] = constant_metrics(
                value, data_file.record_count, known.column_size if known is not None else None
            )
        return DataFile(
            path=data_file.file_path,
            content=content,
            file_format=str(data_file.file_format.value).upper(),
            record_count=data_file.record_count,
            file_size_bytes=data_file.file_size_in_bytes,
            partition=self.partition_key(data_file, schema_id),
            columns=metrics,
            field_ids=self._view(schema_id).field_ids | frozenset(constants),
            constants=constants,
            written_as=self._view(schema_id).renamed if content is FileContent.DATA else (),
            referenced_path=(
                referenced_data_file(data_file) if content is FileContent.POSITION_DELETES else None
            ),
        )

    def identity_constants(self, data_file: IcebergDataFile, schema_id: int) -> dict[int, Any]:
        """Source field id → value of each identity partition field of the file's spec.

        Iceberg readers fill these columns from the partition tuple whatever the file holds
        (tables migrated from Hive do not store them at all). The value is converted to the
        column's type in ``schema_id``: a partition written before a type promotion keeps
        the narrower value (a float partition value of a now-double column).
        """
        spec = self._specs.get(data_file.spec_id or 0)
        if spec is None:
            return {}
        record = data_file.partition
        constants: dict[int, Any] = {}
        for index, partition_field in enumerate(spec.fields):
            if str(partition_field.transform) != "identity" or index >= len(record):
                continue
            column = self._column(partition_field.source_id, schema_id)
            if column is None or not (column.type in _CONSTANT_TYPES or is_decimal(column.type)):
                continue
            value = from_physical(column.type, record[index])
            if column.type == "double" and value is not None:
                value = float(value)
            constants[partition_field.source_id] = value
        return constants

    def partition_key(self, data_file: IcebergDataFile, schema_id: int) -> PartitionKey:
        spec_id = data_file.spec_id or 0
        spec = self._specs.get(spec_id)
        if spec is None or not spec.fields:
            return PartitionKey(spec_id=spec_id)
        record = data_file.partition
        values: list[tuple[str, Any]] = []
        fields: list[PartitionField] = []
        for index, partition_field in enumerate(spec.fields):
            raw = record[index] if index < len(record) else None
            source = self._column(partition_field.source_id, schema_id)
            if source is None:
                raise MetadataError(
                    f"partition field {partition_field.name!r} of spec {spec_id}: source "
                    f"column {partition_field.source_id} is in no schema of the table"
                )
            result_type = str(partition_field.transform.result_type(parse_type(source.type)))
            values.append((partition_field.name, from_physical(result_type, raw)))
            fields.append(PartitionField(partition_field.field_id, result_type))
        return PartitionKey(spec_id=spec_id, values=tuple(values), fields=tuple(fields))

    def _metrics(self, data_file: IcebergDataFile, schema_id: int) -> dict[int, ColumnMetrics]:
        sizes = _as_dict(data_file.column_sizes)
        values = _as_dict(data_file.value_counts)
        nulls = _as_dict(data_file.null_value_counts)
        nans = _as_dict(data_file.nan_value_counts)
        lowers = _as_dict(data_file.lower_bounds)
        uppers = _as_dict(data_file.upper_bounds)
        metrics: dict[int, ColumnMetrics] = {}
        for field_id in sorted({*sizes, *values, *nulls, *nans, *lowers, *uppers}):
            column = self._column(field_id, schema_id)
            if column is None:
                continue
            lower = _decode(column.type, lowers.get(field_id))
            upper = _decode(column.type, uppers.get(field_id))
            metrics[field_id] = ColumnMetrics(
                column_size=sizes.get(field_id),
                value_count=values.get(field_id),
                null_count=nulls.get(field_id),
                nan_count=nans.get(field_id),
                lower=lower,
                upper=upper,
                bounds_may_be_truncated=self._maybe_truncated(column, lower, upper),
            )
        return metrics

    def _maybe_truncated(self, column: Column, lower: Any, upper: Any) -> bool:
        if column.type not in STRING_LIKE_TYPES:
            return False
        limit = self._truncate_length(column.name)
        if limit is None:
            return False
        if column.type == "binary" and upper is not None:
            # Java's cut binary max (BinaryUtil.truncateBinaryMax) ends at the last byte
            # below 0xff, incremented: shorter than the limit when 0xff bytes followed it
            return True
        return any(b is not None and len(b) >= limit for b in (lower, upper))

    def _truncate_length(self, column_name: str) -> int | None:
        """The truncation in force for a column; ``None`` for ``full`` (never truncated)."""
        props = self._metadata.properties
        mode = props.get(f"{_METRICS_COLUMN_KEY}{column_name}") or props.get(
            _METRICS_DEFAULT_KEY, f"truncate({_DEFAULT_TRUNCATE})"
        )
        if mode.strip().lower() == "full":
            return None
        match = _TRUNCATE_MODE.match(mode)
        # "none"/"counts" write no bounds; a bound present anyway came from other settings,
        # so assume the default truncation rather than claim exactness.
        return int(match.group(1)) if match else _DEFAULT_TRUNCATE


# Types whose partition value is the column value as is (nested and binary-like types
# cannot be identity partition sources of a Hive migration; keep to what decodes cleanly).
_CONSTANT_TYPES = frozenset(
    {"boolean", "int", "long", "float", "double", "date", "timestamp", "timestamptz", "string"}
)


def referenced_data_file(data_file: IcebergDataFile) -> str | None:
    """The one data file a position delete file applies to, if its metadata says so:
    ``referenced_data_file`` (v3), else equal lower/upper bounds of its ``file_path``."""
    referenced = v3_field(data_file, "referenced_data_file")
    if referenced:
        return str(referenced)
    lower = _as_dict(data_file.lower_bounds).get(_DELETE_FILE_PATH_FIELD_ID)
    upper = _as_dict(data_file.upper_bounds).get(_DELETE_FILE_PATH_FIELD_ID)
    if lower is None or lower != upper:
        return None
    try:
        return bytes(lower).decode("utf-8")
    except UnicodeDecodeError:
        return None


def v3_field(data_file: IcebergDataFile, name: str) -> Any:
    """A field of a v3 manifest's data file (``referenced_data_file``, ``content_offset``,
    ``content_size_in_bytes``): pyiceberg 0.12 reads them but has no property for them."""
    value = getattr(data_file, name, None)
    if value is not None:
        return value
    index = _V3_FIELD_INDEX.get(name)
    values = getattr(data_file, "_data", ())
    return values[index] if index is not None and index < len(values) else None


_V3_FIELD_INDEX = {f.name: i for i, f in enumerate(DATA_FILE_TYPE[3].fields)}


def _as_dict(value: Mapping[int, Any] | None) -> dict[int, Any]:
    return dict(value.items()) if value else {}


def _decode(type_str: str, raw: bytes | None) -> Any:
    if raw is None:
        return None
    decode_as = _PROMOTED_FROM.get((type_str, len(raw)), type_str)
    try:
        value = decode_bound(decode_as, raw)
    except (ValueError, struct.error, TypeError, OverflowError):
        # A bound we cannot read is a bound we do not have: the merge then reports the
        # column's bounds as incomplete instead of failing the whole commit.
        return None
    if decode_as != type_str and isinstance(value, int | float):
        return float(value) if type_str == "double" else int(value)
    return value
