"""Aggregate files: a segment's live files merged per partition (``PartitionAggregate``).

One Parquet row per (partition, column); the partition's totals repeat on each of its rows
and a partition without columns gets one row whose ``field_id`` is null. Bounds use the
Iceberg single-value encoding of the column aggregate's own ``type``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakestats.model import ColumnAggregate, PartitionAggregate
from lakestats.store import atomic
from lakestats.store._codec import (
    check_table,
    decode_value,
    decoding,
    encode_table,
    encode_value,
    frequent_cells,
    frequent_column,
    partition_from_json,
    partition_json,
    read_table,
    schema_with_kind,
)

KIND = "aggregate"

_PARTITION_FIELDS = [
    pa.field("part_ordinal", pa.int32(), nullable=False),
    pa.field("spec_id", pa.int32(), nullable=False),
    pa.field("partition", pa.string(), nullable=False),
    pa.field("record_count", pa.int64(), nullable=False),
    pa.field("file_count", pa.int64(), nullable=False),
    pa.field("total_size_bytes", pa.int64(), nullable=False),
    pa.field("position_delete_files", pa.int64(), nullable=False),
    pa.field("position_delete_records", pa.int64(), nullable=False),
    pa.field("equality_delete_files", pa.int64(), nullable=False),
    pa.field("equality_delete_records", pa.int64(), nullable=False),
]
# added in a minor revision for row-level deletes; files without them read as 0
_DELETE_FIELDS = [
    pa.field("deleted_records", pa.int64()),
    pa.field("deletes_applied_files", pa.int64()),
    pa.field("deletes_unknown_files", pa.int64()),
]
_COLUMN_FIELDS = [
    pa.field("field_id", pa.int32()),
    pa.field("type", pa.string()),
    pa.field("files", pa.int64()),
    pa.field("records", pa.int64()),
    pa.field("value_count", pa.int64()),
    pa.field("null_count", pa.int64()),
    pa.field("nan_count", pa.int64()),
    pa.field("column_size", pa.int64()),
    pa.field("lower_bound", pa.binary()),
    pa.field("upper_bound", pa.binary()),
    pa.field("bounds_complete", pa.bool_()),
    pa.field("bounds_may_be_truncated", pa.bool_()),
    pa.field("sketched_files", pa.int64()),
    pa.field("theta", pa.binary()),
    pa.field("kll", pa.binary()),
    pa.field("len_sum", pa.int64()),
    pa.field("len_max", pa.int64()),
    pa.field("true_count", pa.int64()),
    pa.field("false_count", pa.int64()),
    # added in a minor revision (issue 14); files without it read as None. The suffix is
    # the stored form's version (sketches/value_sample.py)
    pa.field("value_sample_v1", pa.binary()),
    pa.field("frequent_items_v1", pa.binary()),  # likewise (sketches/frequent.py)
    pa.field("frequent_strings_v1", pa.binary()),  # a string column's (_codec.frequent_column)
]
SCHEMA = schema_with_kind(_PARTITION_FIELDS + _DELETE_FIELDS + _COLUMN_FIELDS, KIND)
_DELETE_TOTALS = [f.name for f in _DELETE_FIELDS]
# No ``partition_fields`` (segments have it): partition values read back as the stored
# JSON scalars, which ``PartitionKey`` compares equal to the typed keys of new files. A
# reader before that listed the column as optional without knowing its type, and fails on
# a file that has it: aggregates stay without it.
OPTIONAL_COLUMNS = [
    *_DELETE_TOTALS,
    "value_sample_v1",
    "frequent_items_v1",
    "frequent_strings_v1",
]
COLUMNS = [name for name in SCHEMA.names if name not in OPTIONAL_COLUMNS]
_PARTITION_TOTALS = [f.name for f in _PARTITION_FIELDS[3:]]
_NO_COLUMN: dict[str, Any] = {f.name: None for f in _COLUMN_FIELDS}


def _column_cells(part: PartitionAggregate, key: int, agg: ColumnAggregate) -> dict[str, Any]:
    if key != agg.field_id:
        raise ValueError(f"column aggregate keyed {key} has field_id {agg.field_id}")

    def where() -> str:
        return f"partition {part.partition.values!r} field {agg.field_id}"

    return {
        "field_id": agg.field_id,
        "type": agg.type,
        "files": agg.files,
        "records": agg.records,
        "value_count": agg.value_count,
        "null_count": agg.null_count,
        "nan_count": agg.nan_count,
        "column_size": agg.column_size,
        "lower_bound": encode_value(agg.type, agg.lower, where),
        "upper_bound": encode_value(agg.type, agg.upper, where),
        "bounds_complete": agg.bounds_complete,
        "bounds_may_be_truncated": agg.bounds_may_be_truncated,
        "sketched_files": agg.sketched_files,
        "theta": agg.theta,
        "kll": agg.kll,
        "len_sum": agg.len_sum,
        "len_max": agg.len_max,
        "true_count": agg.true_count,
        "false_count": agg.false_count,
        "value_sample_v1": agg.value_sample,
        **frequent_cells(agg.type, agg.frequent_items),
    }


def encode_aggregate(parts: Sequence[PartitionAggregate]) -> bytes:
    """The aggregate's Parquet bytes. ``ValueError`` if a bound cannot be encoded."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for ordinal, part in enumerate(parts):
        part_cells: dict[str, Any] = {
            "part_ordinal": ordinal,
            "spec_id": part.partition.spec_id,
            "partition": partition_json(part.partition),
        }
        part_cells.update({name: getattr(part, name) for name in _PARTITION_TOTALS})
        part_cells.update({name: getattr(part, name) for name in _DELETE_TOTALS})
        rows = [
            {**part_cells, **_column_cells(part, key, part.columns[key])}
            for key in sorted(part.columns)
        ] or [{**part_cells, **_NO_COLUMN}]
        for row in rows:
            for name in SCHEMA.names:
                columns[name].append(row[name])
    return encode_table(columns, SCHEMA)


def write_aggregate(path: atomic.PathLike, parts: Sequence[PartitionAggregate]) -> None:
    """Write ``parts`` durably to ``path`` (replacing it atomically if it exists)."""
    atomic.atomic_write(path, encode_aggregate(parts))


def check_aggregate(path: atomic.PathLike) -> None:
    """``StoreError`` naming ``path`` if it is missing or its footer is not an aggregate's
    (its rows are not read: a big segment's aggregate costs its footer alone)."""
    check_table(path, KIND, SCHEMA, COLUMNS, OPTIONAL_COLUMNS)


def read_aggregate(path: atomic.PathLike) -> tuple[PartitionAggregate, ...]:
    """The partitions in the order written. ``StoreError`` naming ``path`` if unreadable."""
    table = read_table(path, KIND, SCHEMA, COLUMNS, OPTIONAL_COLUMNS)
    data = table.to_pydict()
    with decoding(path, KIND):
        groups: dict[int, list[int]] = {}
        for row, ordinal in enumerate(data["part_ordinal"]):
            groups.setdefault(ordinal, []).append(row)
        parts: list[PartitionAggregate] = []
        for ordinal in sorted(groups):
            rows = groups[ordinal]
            first = rows[0]
            columns: dict[int, ColumnAggregate] = {}
            for row in rows:
                field_id = data["field_id"][row]
                if field_id is None:
                    continue
                type_str = data["type"][row]
                columns[field_id] = ColumnAggregate(
                    field_id=field_id,
                    type=type_str,
                    files=data["files"][row],
                    records=data["records"][row],
                    value_count=data["value_count"][row],
                    null_count=data["null_count"][row],
                    nan_count=data["nan_count"][row],
                    column_size=data["column_size"][row],
                    lower=decode_value(type_str, data["lower_bound"][row]),
                    upper=decode_value(type_str, data["upper_bound"][row]),
                    bounds_complete=data["bounds_complete"][row],
                    bounds_may_be_truncated=data["bounds_may_be_truncated"][row],
                    sketched_files=data["sketched_files"][row],
                    theta=data["theta"][row],
                    kll=data["kll"][row],
                    len_sum=data["len_sum"][row],
                    len_max=data["len_max"][row],
                    true_count=data["true_count"][row],
                    false_count=data["false_count"][row],
                    value_sample=_optional(data, "value_sample_v1", row),
                    frequent_items=_optional(data, frequent_column(type_str), row),
                )
            totals = {name: data[name][first] for name in _PARTITION_TOTALS}
            totals.update(
                {name: (data[name][first] or 0) for name in _DELETE_TOTALS if name in data}
            )
            parts.append(
                PartitionAggregate(
                    partition=partition_from_json(data["spec_id"][first], data["partition"][first]),
                    columns=columns,
                    **totals,
                )
            )
    return tuple(parts)


def _optional(data: dict[str, list[Any]], name: str, row: int) -> Any:
    """A cell of a column added by a minor revision (``None`` in files without it)."""
    values = data.get(name)
    return None if values is None else values[row]
