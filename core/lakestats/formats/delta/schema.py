"""A Delta ``schemaString`` → the model's ``TableSchema`` with stable field ids (pure).

Types map to Iceberg type strings (lakestats' canonical types): ``byte``/``short``/
``integer`` → ``int``, ``timestamp`` (UTC-adjusted) → ``timestamptz``, ``timestamp_ntz``
→ ``timestamp``. Leaf columns of structs get dotted names; arrays, maps and variants are
left out, as for Iceberg.

Field ids: with column mapping (``name`` or ``id`` mode) each field's
``delta.columnMapping.id``, so renames keep stats and drops forget them. Without column
mapping a column's name is its identity (Delta cannot rename without it): the id is a
stable 31-bit hash of the dotted name, the same in every run and after log cleanup.

A schema id is a hash of the schema's content (fields, partition columns, mapping mode):
Delta has no schema ids, and a content hash stays the same whether a run met the schema in
a commit or in a checkpoint.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakestats.exceptions import MetadataError
from lakestats.model import Column, TableSchema

MAPPING_MODE_KEY = "delta.columnMapping.mode"
MAPPING_ID_KEY = "delta.columnMapping.id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"

_SIMPLE_TYPES = {
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamptz",
    "timestamp_ntz": "timestamp",
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_ID_MASK = 0x7FFFFFFF


@dataclass(frozen=True)
class DeltaColumn:
    """A leaf column: its model column plus where the log and the files name it."""

    column: Column
    physical_path: tuple[str, ...]  # physical names from the top-level field down


@dataclass(frozen=True)
class DeltaSchema:
    """One ``metaData`` action's schema as lakestats reads it."""

    table_schema: TableSchema
    columns: tuple[DeltaColumn, ...]
    partition_columns: tuple[DeltaColumn, ...]  # in ``partitionColumns`` order
    mapping_mode: str  # "none", "name" or "id"

    @property
    def schema_id(self) -> int:
        return self.table_schema.schema_id


def iceberg_type(delta_type: Any) -> str | None:
    """The Iceberg type string of a primitive Delta type; ``None`` for nested types."""
    if not isinstance(delta_type, str):
        return None
    if delta_type in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[delta_type]
    match = _DECIMAL.match(delta_type)
    if match:
        return f"decimal({match.group(1)}, {match.group(2)})"
    return None


def name_field_id(dotted_name: str) -> int:
    """The stable id of a column of a table without column mapping (never 0)."""
    return (zlib.crc32(dotted_name.encode("utf-8")) & _ID_MASK) or 1


def parse_schema(
    schema_string: str,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    *,
    where: str,
) -> DeltaSchema:
    """The schema of a ``metaData`` action; ``MetadataError`` naming ``where`` if malformed."""
    mode = (configuration.get(MAPPING_MODE_KEY) or "none").strip().lower()
    try:
        struct = json.loads(schema_string)
        fields = struct["fields"]
    except (TypeError, ValueError, KeyError) as exc:
        raise MetadataError(f"{where}: the table schema is not valid JSON ({exc})") from None
    columns: list[DeltaColumn] = []
    seen: dict[int, tuple[str, ...]] = {}

    def walk(
        items: Sequence[Mapping[str, Any]],
        logical: tuple[str, ...],
        physical: tuple[str, ...],
        parents: tuple[int, ...],
    ) -> None:
        for item in items:
            name = str(item.get("name"))
            metadata = item.get("metadata") or {}
            physical_name = str(metadata.get(PHYSICAL_NAME_KEY, name)) if mode != "none" else name
            names = (*logical, name)
            dotted = ".".join(names)
            path = (*physical, physical_name)
            field_type = item.get("type")
            if isinstance(field_type, Mapping) and field_type.get("type") == "struct":
                # with column mapping the files carry the struct's id: a struct is found by
                # it, not by a logical name the files do not have
                ids = (*parents, _field_id(metadata, dotted, mode, where)) if mode != "none" else ()
                walk(field_type.get("fields") or (), names, path, ids)
                continue
            type_str = iceberg_type(field_type)
            if type_str is None:
                continue  # arrays, maps, variants: no column-level stats
            field_id = _field_id(metadata, dotted, mode, where)
            if field_id in seen:
                raise MetadataError(_same_id(where, seen[field_id], names, field_id, mode))
            seen[field_id] = names
            columns.append(DeltaColumn(Column(field_id, dotted, type_str, parents, names), path))

    walk(fields, (), (), ())
    by_name = {c.column.name: c for c in columns}
    partitions = []
    for name in partition_columns:
        column = by_name.get(name)
        if column is None:
            raise MetadataError(f"{where}: partition column {name!r} is not in the schema")
        partitions.append(column)
    schema_id = _content_id(columns, partition_columns, mode)
    return DeltaSchema(
        table_schema=TableSchema(schema_id, tuple(c.column for c in columns)),
        columns=tuple(columns),
        partition_columns=tuple(partitions),
        mapping_mode=mode,
    )


def _same_id(
    where: str, first: tuple[str, ...], second: tuple[str, ...], field_id: int, mode: str
) -> str:
    if mode == "none" and first != second and ".".join(first) == ".".join(second):
        # without column mapping a column is known by its dotted name alone
        return (
            f"{where}: columns {_described(first)} and {_described(second)} are both "
            f"{'.'.join(first)!r}, which lakestats cannot tell apart without column mapping "
            "(rename one, or enable delta.columnMapping.mode = name)"
        )
    return (
        f"{where}: columns {'.'.join(first)!r} and {'.'.join(second)!r} have the same id {field_id}"
    )


def _described(names: tuple[str, ...]) -> str:
    if len(names) == 1:
        return f"{names[0]!r}"
    return f"{names[-1]!r} of struct {'.'.join(names[:-1])!r}"


def _field_id(metadata: Mapping[str, Any], dotted: str, mode: str, where: str) -> int:
    if mode == "none":
        return name_field_id(dotted)
    raw = metadata.get(MAPPING_ID_KEY)
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        raise MetadataError(
            f"{where}: column {dotted!r} has no {MAPPING_ID_KEY} although column mapping "
            f"mode is {mode!r}"
        ) from None


def _content_id(columns: Sequence[DeltaColumn], partition_columns: Sequence[str], mode: str) -> int:
    # only what lakestats reads: field metadata such as an identity column's high-water
    # mark changes with every write and must not make a new schema
    described = [
        [c.column.field_id, c.column.name, c.column.type, list(c.physical_path)] for c in columns
    ]
    canonical = json.dumps([described, list(partition_columns), mode])
    return zlib.crc32(canonical.encode("utf-8")) & _ID_MASK
