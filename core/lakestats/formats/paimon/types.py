"""Paimon schema files (``schema/schema-N``) → lakestats' ``TableSchema`` and type names.

Paimon spells atomic types as SQL strings (``"DECIMAL(10, 2) NOT NULL"``,
``"TIMESTAMP(3) WITH LOCAL TIME ZONE"``) and complex ones as JSON objects. lakestats'
model spells types as Iceberg does, so each Paimon type maps to the Iceberg type whose
values it holds: ``INT``/``SMALLINT``/``TINYINT`` → ``int``, ``TIMESTAMP(p)`` →
``timestamp`` (``timestamp_ns`` above microseconds), ``... WITH LOCAL TIME ZONE`` →
``timestamptz``. Complex types have no column statistics and are left out of the schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakestats.model import Column, KeySketch, TableSchema

_ATOMIC = re.compile(
    r"^\s*(?P<root>[A-Z_]+(?:\s+[A-Z_]+)*?)\s*(?:\((?P<args>[^)]*)\))?"
    r"(?P<ltz>\s+WITH\s+LOCAL\s+TIME\s+ZONE)?(?P<notnull>\s+NOT\s+NULL)?\s*$",
    re.IGNORECASE,
)
_ALIASES = {
    "INTEGER": "INT",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "TIMESTAMP_LTZ": "TIMESTAMP_LTZ",
    "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
    "DOUBLE PRECISION": "DOUBLE",
}
# Paimon's system column of a primary-key table's data files: each row's RowKind byte
# (+I 0, -U 1, +U 2, -D 3), Java's ``SpecialFields.VALUE_KIND`` id (Integer.MAX_VALUE - 2).
VALUE_KIND_COLUMN = "_VALUE_KIND"
VALUE_KIND_FIELD_ID = 2_147_483_645
UPDATE_BEFORE, DELETE = 1, 3


def retract_kinds(options: Mapping[str, str]) -> tuple[int, ...]:
    """Row kinds whose row removes its key from what readers see, by merge engine (Java
    Paimon's merge functions): deduplicate drops a key whose newest row is -U or -D;
    partial-update and aggregation only on -D, and only with their
    ``*.remove-record-on-delete`` (otherwise a -D retracts field values or fails);
    first-row ignores retractions; ``ignore-delete`` ignores them everywhere."""

    def enabled(key: str) -> bool:
        return options.get(key, "false").strip().lower() == "true"

    engine = options.get("merge-engine", "deduplicate").strip().lower()
    if enabled("ignore-delete") or enabled(f"{engine}.ignore-delete"):  # and its old name
        return ()
    if engine == "deduplicate":
        return (UPDATE_BEFORE, DELETE)
    if engine in ("partial-update", "aggregation") and enabled(f"{engine}.remove-record-on-delete"):
        return (DELETE,)
    return ()


_DEFAULT_PRECISION = {"TIMESTAMP": 6, "TIMESTAMP_LTZ": 6, "TIME": 0, "DECIMAL": 10}
_ICEBERG = {
    "BOOLEAN": "boolean",
    "TINYINT": "int",
    "SMALLINT": "int",
    "INT": "int",
    "BIGINT": "long",
    "FLOAT": "float",
    "DOUBLE": "double",
    "CHAR": "string",
    "VARCHAR": "string",
    "STRING": "string",
    "BINARY": "binary",
    "VARBINARY": "binary",
    "BYTES": "binary",
    "DATE": "date",
    "TIME": "time",
}
_MICROS = 6


@dataclass(frozen=True)
class PaimonType:
    """One Paimon type: its root name, precision/scale where it has them, nullability."""

    root: str  # "INT", "DECIMAL", "TIMESTAMP", "TIMESTAMP_LTZ", "ARRAY", ...
    precision: int = 0
    scale: int = 0
    nullable: bool = True

    @property
    def iceberg_type(self) -> str | None:
        """The Iceberg type string of lakestats' model, ``None`` for complex types."""
        if self.root == "DECIMAL":
            return f"decimal({self.precision}, {self.scale})"
        if self.root == "TIMESTAMP":
            return "timestamp_ns" if self.precision > _MICROS else "timestamp"
        if self.root == "TIMESTAMP_LTZ":
            return "timestamptz_ns" if self.precision > _MICROS else "timestamptz"
        return _ICEBERG.get(self.root)


def parse_type(spec: Any) -> PaimonType:
    """A Paimon type as a schema file spells it (a string, or an object for complex types)."""
    if isinstance(spec, Mapping):
        root = str(spec.get("type", "")).split("<")[0].split()[0].upper() or "UNKNOWN"
        return PaimonType(root=root)
    if not isinstance(spec, str):
        raise ValueError(f"not a Paimon type: {spec!r}")
    if "<" in spec:  # ARRAY<INT>, MAP<...>, ROW<...> written as strings
        return PaimonType(root=spec.split("<")[0].strip().upper())
    match = _ATOMIC.match(spec)
    if match is None:
        raise ValueError(f"not a Paimon type: {spec!r}")
    root = " ".join(match["root"].upper().split())
    root = _ALIASES.get(root, root)
    if match["ltz"]:
        root = "TIMESTAMP_LTZ" if root == "TIMESTAMP" else root
    args = [int(a) for a in (match["args"] or "").replace(" ", "").split(",") if a]
    precision = args[0] if args else _DEFAULT_PRECISION.get(root, 0)
    scale = args[1] if len(args) > 1 else 0
    return PaimonType(root=root, precision=precision, scale=scale, nullable=not match["notnull"])


@dataclass(frozen=True)
class PaimonField:
    field_id: int
    name: str
    type: PaimonType


@dataclass(frozen=True)
class PaimonSchema:
    """One ``schema/schema-N`` file, as much of it as lakestats uses."""

    schema_id: int
    fields: tuple[PaimonField, ...]
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    time_millis: int = 0

    def by_name(self) -> dict[str, PaimonField]:
        return {f.name: f for f in self.fields}

    def fields_named(self, names: Sequence[str]) -> tuple[PaimonField, ...]:
        by_name = self.by_name()
        return tuple(by_name[n] for n in names)

    @property
    def table_schema(self) -> TableSchema:
        """Leaf columns lakestats keeps stats for: every field of an atomic type; a primary
        key is sketched as one value per row, and its retractions apart (``KeySketch``)."""
        key = None
        by_name = self.by_name()
        if self.primary_keys and all(k in by_name for k in self.primary_keys):
            key = KeySketch(
                field_ids=tuple(by_name[k].field_id for k in self.primary_keys),
                row_kind_column=VALUE_KIND_COLUMN,
                row_kind_field_id=VALUE_KIND_FIELD_ID,
                non_add_kinds=(UPDATE_BEFORE, DELETE),
                retract_kinds=retract_kinds(self.options),
            )
        return TableSchema(
            schema_id=self.schema_id,
            columns=tuple(
                Column(f.field_id, f.name, iceberg, path=(f.name,))
                for f in self.fields
                if (iceberg := f.type.iceberg_type) is not None
            ),
            key=key,
        )


def parse_schema(document: Mapping[str, Any]) -> PaimonSchema:
    """A parsed ``schema-N`` JSON document (``ValueError``/``KeyError`` when malformed)."""
    fields = tuple(
        PaimonField(int(f["id"]), str(f["name"]), parse_type(f["type"])) for f in document["fields"]
    )
    options = document.get("options") or {}
    return PaimonSchema(
        schema_id=int(document["id"]),
        fields=fields,
        partition_keys=tuple(document.get("partitionKeys") or ()),
        primary_keys=tuple(document.get("primaryKeys") or ()),
        options={str(k): str(v) for k, v in options.items()},
        time_millis=int(document.get("timeMillis") or 0),
    )
