"""Delta ``add`` actions → ``lakestats.model.DataFile`` (pure; the log is read elsewhere).

What the log says per file, and how exact it is:

* ``numRecords`` (physical rows; a deletion vector's rows are subtracted by the core),
  ``nullCount`` and ``minValues``/``maxValues``, keyed by *physical* column names (column
  mapping) and nested like the schema. Columns past ``delta.dataSkippingNumIndexedCols`` or
  outside ``delta.dataSkippingStatsColumns`` have no entry: their metrics are "not
  recorded", so the sketch scan computes them, as for Iceberg files without bounds.
* Bounds that may not be exact are flagged (``bounds_may_be_truncated``) so the scan
  computes them: strings of 32 characters or more (Spark keeps a 32-character prefix),
  every timestamp (Spark truncates to milliseconds, so a max can be below the true max),
  and every bound of a file whose ``tightBounds`` is false (after a deletion vector).
* Partition values are strings in the log (``""`` and null are null) and fill their
  column for every row of the file (``DataFile.constants``), like Iceberg identity
  partitions; the files do not store them.
* Stats come as a JSON string (``stats``) or, in checkpoints, as typed structs
  (``stats_parsed``); decimals are parsed exactly from the JSON text.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from lakestats.exceptions import MetadataError
from lakestats.formats.delta.schema import DeltaColumn, DeltaSchema
from lakestats.model import (
    ColumnMetrics,
    DataFile,
    DeletionVector,
    FileContent,
    PartitionField,
    PartitionKey,
    constant_metrics,
)
from lakestats.sketches.spec import decimal_precision_scale
from lakestats.values import at_scale, holds_decimal

# Spark's delta.dataSkippingStringPrefixLength: longer strings are cut to this prefix
STRING_PREFIX_LENGTH = 32
PARTITION_SPEC_ID = 0  # Delta has one partitioning per schema; keys are named by column


@dataclass(frozen=True)
class FileStats:
    """A file's ``stats`` as the log holds them, parsed (JSON or ``stats_parsed``)."""

    num_records: int | None
    min_values: Mapping[str, Any]
    max_values: Mapping[str, Any]
    null_count: Mapping[str, Any]
    tight_bounds: bool = True

    @classmethod
    def parse(cls, raw: Any, *, where: str) -> FileStats | None:
        """From the JSON string of ``add.stats`` or the ``stats_parsed`` mapping."""
        if raw is None or raw == "":
            return None
        if isinstance(raw, str):
            try:
                raw = json.loads(raw, parse_float=Decimal)
            except ValueError as exc:
                raise MetadataError(f"{where}: file stats are not valid JSON ({exc})") from None
        if not isinstance(raw, Mapping):
            raise MetadataError(f"{where}: file stats are not a JSON object")
        records = raw.get("numRecords")
        tight = raw.get("tightBounds")
        return cls(
            num_records=int(records) if records is not None else None,
            min_values=raw.get("minValues") or {},
            max_values=raw.get("maxValues") or {},
            null_count=raw.get("nullCount") or {},
            tight_bounds=tight is not False,
        )


def _lookup(values: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return None if isinstance(node, Mapping) else node


def stat_value(type_str: str, raw: Any) -> Any:
    """A bound from the log (JSON scalar or typed checkpoint value) as a model value."""
    if raw is None:
        return None
    try:
        if type_str in ("int", "long"):
            return int(raw)
        if type_str in ("float", "double"):
            value = float(raw)
            return None if math.isnan(value) else value
        if type_str.startswith("decimal"):
            return _decimal_bound(type_str, raw)
        if type_str == "string":
            return str(raw)
        if type_str == "boolean":
            return bool(raw) if not isinstance(raw, str) else raw.lower() == "true"
        if type_str == "date":
            return raw if isinstance(raw, dt.date) else dt.date.fromisoformat(str(raw)[:10])
        if type_str in ("timestamptz", "timestamp"):
            return _timestamp(type_str, raw)
    except (TypeError, ValueError, InvalidOperation, OverflowError):
        return None  # an unreadable bound is an unknown bound: the scan computes it
    return None  # binary and others: Delta keeps no bounds for them


def partition_value(type_str: str, raw: str | None) -> Any:
    """A partition value string of the log as a model value (``""``/null → ``None``)."""
    if raw is None or raw == "":
        return None
    if type_str in ("timestamptz", "timestamp"):
        return _timestamp(type_str, raw)
    if type_str == "binary":
        return raw.encode("utf-8")
    if type_str in ("float", "double"):
        return float(raw)
    if type_str.startswith("decimal"):  # written as text: exact, however many digits
        try:
            return at_scale(raw, decimal_precision_scale(type_str)[1])
        except InvalidOperation:
            return None
    return stat_value(type_str, raw)


# delta-rs writes a decimal bound through an int64 (scale 0) or a double: past 18 digits
# the first is clamped to int64's limits, past 15 the second rounded (1.6.6: 10^20 as
# 9223372036854775807, 0.0999 of a decimal(38, 38) as 0.09989999999999999)
_INT64_LIMITS = frozenset({Decimal(-(1 << 63)), Decimal((1 << 63) - 1)})
_DOUBLE_DIGITS = 15


def _decimal_bound(type_str: str, raw: Any) -> Decimal | None:
    """A decimal bound, or ``None`` (unknown: the scan computes it) where it cannot be the
    column's value as written: digits past the scale, past the precision, or what
    delta-rs' int64 clamp or double rounding leaves (``_INT64_LIMITS``)."""
    precision, scale = decimal_precision_scale(type_str)
    written = raw if isinstance(raw, Decimal) else Decimal(str(raw))
    if not holds_decimal(written, precision, scale):
        return None
    value = at_scale(written, scale)
    if precision > 18 and value in _INT64_LIMITS:
        return None
    digits = len(written.normalize().as_tuple().digits)
    if digits > _DOUBLE_DIGITS and Decimal(repr(float(written))) == written:
        return None
    return value


def _timestamp(type_str: str, raw: Any) -> dt.datetime:
    if isinstance(raw, dt.datetime):
        value = raw
    else:
        text = str(raw).strip().replace(" ", "T", 1)
        value = dt.datetime.fromisoformat(text)
    if hasattr(value, "to_pydatetime"):  # pandas.Timestamp from a checkpoint struct
        value = value.to_pydatetime()
    if type_str == "timestamptz":
        return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return value.replace(tzinfo=None)


def _column_metrics(column: DeltaColumn, stats: FileStats | None) -> ColumnMetrics | None:
    if stats is None:
        return None
    path, type_str = column.physical_path, column.column.type
    nulls = _lookup(stats.null_count, path)
    lower = stat_value(type_str, _lookup(stats.min_values, path))
    upper = stat_value(type_str, _lookup(stats.max_values, path))
    if nulls is None and lower is None and upper is None:
        return None  # not indexed: nothing recorded
    return ColumnMetrics(
        value_count=stats.num_records if nulls is not None else None,
        null_count=int(nulls) if nulls is not None else None,
        lower=lower,
        upper=upper,
        bounds_may_be_truncated=_may_be_inexact(type_str, lower, upper, stats.tight_bounds),
    )


def _may_be_inexact(type_str: str, lower: Any, upper: Any, tight: bool) -> bool:
    if lower is None and upper is None:
        return False
    if not tight or type_str in ("timestamptz", "timestamp"):
        return True
    if type_str == "string":
        return any(isinstance(v, str) and len(v) >= STRING_PREFIX_LENGTH for v in (lower, upper))
    return False


def partition_key(
    schema: DeltaSchema,
    partition_values: Mapping[str, str | None],
    *,
    where: str,
    names: Mapping[int, str] | None = None,
) -> tuple[PartitionKey, dict[int, Any]]:
    """The file's partition key and its partition columns' values by field id; ``names``
    (field id → name) names the key's columns where the schema that lists the file names
    them otherwise than the one that wrote it (a partition column renamed since)."""
    values: list[tuple[str, Any]] = []
    fields: list[PartitionField] = []
    constants: dict[int, Any] = {}
    for column in schema.partition_columns:
        key = column.physical_path[0]
        raw = partition_values.get(key, partition_values.get(column.column.name))
        try:
            value = partition_value(column.column.type, raw)
        except (ValueError, InvalidOperation) as exc:
            raise MetadataError(
                f"{where}: partition value {raw!r} of column {column.column.name!r} is not a "
                f"{column.column.type} ({exc})"
            ) from None
        values.append(((names or {}).get(column.column.field_id, column.column.name), value))
        fields.append(PartitionField(column.column.field_id, column.column.type))
        constants[column.column.field_id] = value
    return PartitionKey(PARTITION_SPEC_ID, tuple(values), tuple(fields)), constants


def data_file(
    *,
    path: str,
    size: int,
    schema: DeltaSchema,
    stats: FileStats | None,
    record_count: int,
    partition_values: Mapping[str, str | None],
    deletion_vector: DeletionVector | None,
    where: str,
    partition_names: Mapping[int, str] | None = None,
) -> DataFile:
    """One ``add`` action as a ``DataFile`` of the schema in force when it was committed.

    ``record_count`` is ``numRecords`` or, for writers that keep no stats, the row count of
    the file's Parquet footer (read by the caller). ``partition_names``: as
    ``partition_key``'s ``names``.
    """
    key, constants = partition_key(schema, partition_values, where=where, names=partition_names)
    metrics: dict[int, ColumnMetrics] = {}
    for column in schema.columns:
        field_id = column.column.field_id
        if field_id in constants:
            metrics[field_id] = constant_metrics(constants[field_id], record_count)
            continue
        found = _column_metrics(column, stats)
        if found is not None:
            metrics[field_id] = found
    return DataFile(
        path=path,
        content=FileContent.DATA,
        file_format="PARQUET",
        record_count=record_count,
        file_size_bytes=size,
        partition=key,
        columns=metrics,
        field_ids=frozenset(c.column.field_id for c in schema.columns),
        constants=constants,
        deletes=(deletion_vector,) if deletion_vector is not None else (),
    )
