"""Paimon manifest entries: parsed into ``ManifestEntry`` and converted to ``DataFile``.

An entry is ADD (``_KIND`` 0) or DELETE (1) of one data file of a (partition, bucket).
``_FILE`` is a ``DataFileMeta``: row count, size, LSM level, the schema it was written with,
and ``_VALUE_STATS`` — min/max as BinaryRows and null counts — over the columns
``_VALUE_STATS_COLS`` names (null or absent: every field of the file's schema, or those
``_WRITE_COLS`` names when the file writes some columns only; empty: none).
Fields are looked up by name and tolerated when missing (Paimon 0.9 manifests).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lakestats.exceptions import MetadataError
from lakestats.formats.paimon.binary_row import BinaryRowError, decode_row
from lakestats.formats.paimon.types import PaimonField, PaimonSchema
from lakestats.model import (
    UNPARTITIONED,
    ColumnMetrics,
    DataFile,
    FileContent,
    PartitionField,
    PartitionKey,
    constant_metrics,
)
from lakestats.sketches.spec import decimal_precision_scale
from lakestats.values import at_scale

ADD = 0
DELETE = 1
DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"
_FORMATS = {"parquet": "PARQUET", "orc": "ORC", "avro": "AVRO"}
_TRUNCATE = re.compile(r"^\s*truncate\(\s*\d+\s*\)\s*$", re.IGNORECASE)
_DEFAULT_STATS_MODE = "truncate(16)"
_STRING_ROOTS = frozenset({"CHAR", "VARCHAR", "STRING", "BINARY", "VARBINARY", "BYTES"})
_NANO_ROOTS = frozenset({"TIMESTAMP", "TIMESTAMP_LTZ"})
# Hive's (and Paimon's) escaping of partition values in directory names
_EPOCH_DATE = dt.date(1970, 1, 1)
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^")


@dataclass(frozen=True)
class ValueStats:
    min_values: bytes | None = None
    max_values: bytes | None = None
    null_counts: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class ManifestEntry:
    """One ADD or DELETE of a data file, as a manifest holds it."""

    kind: int
    partition: bytes
    bucket: int
    file_name: str
    file_size: int
    row_count: int
    level: int
    schema_id: int
    value_stats: ValueStats = field(default_factory=ValueStats)
    value_stats_cols: tuple[str, ...] | None = None  # None: every field of the schema
    delete_row_count: int | None = None
    external_path: str | None = None
    min_sequence_number: int = 0
    max_sequence_number: int = 0
    # data evolution (Paimon 1.1+): the file's first row id, and the columns it writes
    # (None: every column; fewer: an update of those columns of rows another file holds)
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None

    @property
    def identifier(self) -> tuple[bytes, int, str]:
        """(partition, bucket, file name): a data file, whatever its level."""
        return (self.partition, self.bucket, self.file_name)


def parse_entry(record: Mapping[str, Any], manifest: str) -> ManifestEntry:
    """A manifest record as a ``ManifestEntry``; ``MetadataError`` naming the manifest."""
    try:
        meta = record["_FILE"]
        stats = meta.get("_VALUE_STATS") or {}
        cols = meta.get("_VALUE_STATS_COLS")
        first_row_id = meta.get("_FIRST_ROW_ID")
        write_cols = meta.get("_WRITE_COLS")
        return ManifestEntry(
            kind=int(record["_KIND"]),
            partition=bytes(record.get("_PARTITION") or b""),
            bucket=int(record.get("_BUCKET") or 0),
            file_name=str(meta["_FILE_NAME"]),
            file_size=int(meta.get("_FILE_SIZE") or 0),
            row_count=int(meta["_ROW_COUNT"]),
            level=int(meta.get("_LEVEL") or 0),
            schema_id=int(meta.get("_SCHEMA_ID") or 0),
            value_stats=ValueStats(
                min_values=stats.get("_MIN_VALUES"),
                max_values=stats.get("_MAX_VALUES"),
                null_counts=tuple(stats.get("_NULL_COUNTS") or ()),
            ),
            value_stats_cols=None if cols is None else tuple(str(c) for c in cols),
            delete_row_count=meta.get("_DELETE_ROW_COUNT"),
            external_path=meta.get("_EXTERNAL_PATH"),
            min_sequence_number=int(meta.get("_MIN_SEQUENCE_NUMBER") or 0),
            max_sequence_number=int(meta.get("_MAX_SEQUENCE_NUMBER") or 0),
            first_row_id=None if first_row_id is None else int(first_row_id),
            write_cols=None if write_cols is None else tuple(str(c) for c in write_cols),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MetadataError(f"{manifest}: malformed manifest entry ({exc!r})") from exc


class EntryConverter:
    """Manifest entries → ``DataFile`` s, given the table's schemas and location.

    ``schema_of`` returns the ``PaimonSchema`` of a schema id; ``locate`` turns a relative
    data file path (``<partition dirs>/bucket-<n>/<file>``) into the path lakestats lists.
    """

    def __init__(
        self,
        schema_of: Callable[[int], PaimonSchema],
        locate: Callable[[str, str], str],
        options: Mapping[str, str],
        current: Callable[[], PaimonSchema] | None = None,
    ) -> None:
        self._schema_of = schema_of
        self._locate = locate
        self._options = options
        self._current = current

    def _partition(self, entry: ManifestEntry) -> tuple[list[PaimonField], tuple[Any, ...]]:
        schema = self._schema_of(entry.schema_id)
        if not schema.partition_keys:
            return [], ()
        fields = _fields(schema, schema.partition_keys, "partition key")
        return fields, _decode(entry.partition, fields, "partition")

    def _relative_path(
        self, entry: ManifestEntry, fields: Sequence[PaimonField], values: Sequence[Any]
    ) -> str:
        parts = []
        if fields:
            legacy = self._options.get("partition.legacy-name", "true").lower() == "true"
            default = self._options.get("partition.default-name", DEFAULT_PARTITION_NAME)
            parts = [
                f"{_escape(f.name)}={_partition_text(v, f, legacy=legacy, default=default)}"
                for f, v in zip(fields, values, strict=True)
            ]
        return "/".join([*parts, f"bucket-{entry.bucket}", entry.file_name])

    def data_file(self, entry: ManifestEntry) -> DataFile:
        schema = self._schema_of(entry.schema_id)
        fields, values = self._partition(entry)
        relative = self._relative_path(entry, fields, values)
        path = entry.external_path or self._locate(relative, entry.file_name)
        constants = _constants(fields, values)
        metrics = self._metrics(entry, schema)
        for field_id, value in constants.items():
            metrics[field_id] = constant_metrics(value, entry.row_count)
        return DataFile(
            path=path,
            content=FileContent.DATA,
            file_format=_file_format(entry.file_name, self._options),
            record_count=entry.row_count,
            file_size_bytes=entry.file_size,
            partition=_partition_key(fields, values),
            columns=metrics,
            field_ids=frozenset(c.field_id for c in schema.table_schema.columns),
            constants=constants,
        )

    def _metrics(self, entry: ManifestEntry, schema: PaimonSchema) -> dict[int, ColumnMetrics]:
        # null: the columns the file writes (all of its schema's but for a data-evolution
        # file of some columns), as Java's ``SimpleStatsEvolutions`` reads them
        names = entry.value_stats_cols
        if names is None:
            names = entry.write_cols or tuple(f.name for f in schema.fields)
        if not names:
            return {}
        by_name = schema.by_name()
        fields = [by_name.get(n) for n in names]
        types = [f.type if f is not None else None for f in fields]
        stats = entry.value_stats
        decodable = [t for t in types if t is not None]
        if len(decodable) != len(types):
            return {}  # a stats column the schema does not know: trust none of them
        lowers = _decode(stats.min_values, fields, "min value")  # type: ignore[arg-type]
        uppers = _decode(stats.max_values, fields, "max value")  # type: ignore[arg-type]
        now = (
            {f.field_id: f.type.iceberg_type for f in self._current().fields}
            if self._current
            else {}
        )
        metrics: dict[int, ColumnMetrics] = {}
        for index, paimon_field in enumerate(fields):
            assert paimon_field is not None
            if paimon_field.type.iceberg_type is None:
                continue
            nulls = stats.null_counts[index] if index < len(stats.null_counts) else None
            lower = lowers[index] if lowers else None
            upper = uppers[index] if uppers else None
            written, current = paimon_field.type.iceberg_type, now.get(paimon_field.field_id)
            if not _same_values(written, current):
                lower = upper = None  # a value of the written type, not of the current one
            elif current is not None and current != written and current.startswith("decimal"):
                lower, upper = _at_scale(lower, current), _at_scale(upper, current)
            metrics[paimon_field.field_id] = ColumnMetrics(
                value_count=entry.row_count,
                null_count=None if nulls is None else int(nulls),
                lower=lower,
                upper=upper,
                bounds_may_be_truncated=self._may_truncate(paimon_field, upper),
            )
        return metrics

    def _may_truncate(self, paimon_field: PaimonField, upper: Any) -> bool:
        root = paimon_field.type.root
        if root in _NANO_ROOTS and paimon_field.type.precision > 6:
            return upper is not None  # nanoseconds below microseconds are cut off
        if root not in _STRING_ROOTS:
            return False
        mode = self._options.get(
            f"fields.{paimon_field.name}.stats-mode",
            self._options.get("metadata.stats-mode", _DEFAULT_STATS_MODE),
        )
        return bool(_TRUNCATE.match(mode))


def _partition_key(fields: Sequence[PaimonField], values: Sequence[Any]) -> PartitionKey:
    if not fields:
        return UNPARTITIONED
    return PartitionKey(
        spec_id=0,
        values=tuple((f.name, v) for f, v in zip(fields, values, strict=True)),
        fields=tuple(PartitionField(f.field_id, f.type.iceberg_type or "") for f in fields),
    )


def _constants(fields: Sequence[PaimonField], values: Sequence[Any]) -> dict[int, Any]:
    """Field id → the value every row of the file holds in that partition column.

    Paimon's readers fill partition columns from the entry's partition row, not the file
    (Java's ``PartitionInfo``), so the stats take them from it too, exact whatever rows are
    deleted. Left out: a type lakestats does not keep, and nanosecond timestamps (decoded
    to microseconds)."""
    return {
        f.field_id: v
        for f, v in zip(fields, values, strict=True)
        if f.type.iceberg_type is not None
        and not (f.type.root in _NANO_ROOTS and f.type.precision > 6)
    }


_WIDENINGS = frozenset({("int", "long"), ("float", "double")})


def _same_values(written: str, current: str | None) -> bool:
    """Whether a bound of the written type is a value of the current type too (same type,
    or widened without a change of Python value: int → long, float → double, a decimal's
    precision or scale)."""
    if current is None or current == written or (written, current) in _WIDENINGS:
        return True
    if not (written.startswith("decimal") and current.startswith("decimal")):
        return False
    return decimal_precision_scale(current)[1] >= decimal_precision_scale(written)[1]


def _at_scale(value: Any, decimal_type: str) -> Any:
    """A decimal bound written at a smaller scale, at the column's current one (the same
    number, shown as the column's other values are)."""
    if not isinstance(value, Decimal):
        return value
    return at_scale(value, decimal_precision_scale(decimal_type)[1])


def _fields(schema: PaimonSchema, names: Sequence[str], what: str) -> list[PaimonField]:
    by_name = schema.by_name()
    missing = [n for n in names if n not in by_name]
    if missing:
        raise MetadataError(f"schema {schema.schema_id} has no {what} column {missing[0]!r}")
    return [by_name[n] for n in names]


def _decode(raw: bytes | None, fields: Sequence[PaimonField], what: str) -> tuple[Any, ...]:
    try:
        values = decode_row(raw, [f.type for f in fields])
    except (BinaryRowError, ValueError, OverflowError) as exc:
        raise MetadataError(f"cannot decode a {what} row: {exc}") from exc
    return values if values is not None else tuple(None for _ in fields)


def _file_format(file_name: str, options: Mapping[str, str]) -> str:
    suffix = file_name.rsplit(".", 1)[-1].lower() if "." in file_name else ""
    return _FORMATS.get(suffix) or options.get("file.format", "parquet").upper()


def _partition_text(value: Any, paimon_field: PaimonField, *, legacy: bool, default: str) -> str:
    """A partition value as Paimon names its directory (``partition.legacy-name``)."""
    if value is None or value == "":
        return default
    root = paimon_field.type.root
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif root == "DATE":
        text = str((value - _EPOCH_DATE).days) if legacy else value.isoformat()
    else:
        text = str(value)
    return _escape(text)


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in text)
