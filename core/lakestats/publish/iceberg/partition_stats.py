"""Iceberg partition statistics: the row model, the unified partition type, the Parquet codec.

One row per (spec id, partition) with the spec's counts (format/spec.md, "Partition
Statistics"). Rows are computed incrementally (the parent snapshot's rows plus a commit's
added and removed files) or in full from a snapshot's live files, and written as a Parquet
file with the spec's schema and field ids, sorted by partition with nulls first.

Partition values are typed Python values matched by partition field id all the way: the
format adapter hands them over typed (``PartitionKey.fields``) and they go to Parquet as
they are. The one exception is documented on ``UnifiedPartitionType.values``.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import IntegerType, LongType, NestedField, StructType

from lakestats.exceptions import PublishError
from lakestats.model import Commit, DataFile, FileContent, PartitionKey
from lakestats.values import from_json

_V3 = 3  # format version that adds dv_count and makes the delete counts required


@dataclass(frozen=True)
class PartitionStatsRow:
    """One row of a partition statistics file (counts per the Iceberg spec)."""

    spec_id: int
    partition: tuple[Any, ...]  # values in unified-partition-type order (field id order)
    data_record_count: int = 0
    data_file_count: int = 0
    total_data_file_size_in_bytes: int = 0
    position_delete_record_count: int = 0
    position_delete_file_count: int = 0  # position delete files, not deletion vectors
    dv_count: int = 0
    equality_delete_record_count: int = 0
    equality_delete_file_count: int = 0
    last_updated_at: int | None = None
    last_updated_snapshot_id: int | None = None

    @property
    def total_record_count(self) -> int | None:
        """Exact rows after deletes, or ``None`` where that needs a data read (spec)."""
        if self.equality_delete_file_count or self.position_delete_file_count:
            return None
        return self.data_record_count - self.position_delete_record_count  # DVs are exact

    @property
    def is_empty(self) -> bool:
        return not (
            self.data_file_count
            or self.position_delete_file_count
            or self.dv_count
            or self.equality_delete_file_count
        )

    @property
    def is_consistent(self) -> bool:
        return all(
            v >= 0
            for v in (
                self.data_record_count,
                self.data_file_count,
                self.total_data_file_size_in_bytes,
                self.position_delete_record_count,
                self.position_delete_file_count,
                self.dv_count,
                self.equality_delete_record_count,
                self.equality_delete_file_count,
            )
        )


RowKey = tuple[int, tuple[Any, ...]]  # (spec id, unified partition tuple)
Rows = Mapping[RowKey, PartitionStatsRow]


@dataclass(frozen=True)
class UnifiedPartitionType:
    """Every partition field any spec of the table ever had, by ascending field id."""

    fields: tuple[NestedField, ...]
    by_spec_name: Mapping[tuple[int, str], int]  # (spec id, partition field name) → field id

    @property
    def is_partitioned(self) -> bool:
        return bool(self.fields)

    def index(self) -> dict[int, int]:
        return {f.field_id: i for i, f in enumerate(self.fields)}

    def values(self, key: PartitionKey) -> tuple[Any, ...]:
        """A file's partition as a unified tuple, matched by partition field id.

        Legacy fallback, the only place partition values are parsed from JSON: keys read
        from stores written before lakestats kept field ids carry JSON-rendered values
        only; those are matched by (spec id, field name) and parsed back with the unified
        field's type.
        """
        out: list[Any] = [None] * len(self.fields)
        position = self.index()
        field_ids = key.field_ids
        for i, (name, raw) in enumerate(key.values):
            if field_ids is not None:
                field_id: int | None = field_ids[i]
            else:
                field_id = self.by_spec_name.get((key.spec_id, name))
            if field_id is None or field_id not in position:
                raise PublishError(f"partition field {name!r} is not in spec {key.spec_id}")
            at = position[field_id]
            value = (
                raw if field_ids is not None else from_json(str(self.fields[at].field_type), raw)
            )
            # pyarrow writes Iceberg's uuid type as 16 fixed bytes
            out[at] = value.bytes if isinstance(value, uuid.UUID) else value
        return tuple(out)


def unified_partition_type(metadata: TableMetadata) -> UnifiedPartitionType:
    schemas = [metadata.schema(), *reversed(metadata.schemas)]
    fields: dict[int, NestedField] = {}
    by_name: dict[tuple[int, str], int] = {}
    for spec in sorted(metadata.partition_specs, key=lambda s: s.spec_id):
        for pf in spec.fields:
            by_name[(spec.spec_id, pf.name)] = pf.field_id
            source = None
            for schema in schemas:
                try:
                    source = schema.find_field(pf.source_id)
                    break
                except ValueError:
                    continue
            if source is None:
                raise PublishError(
                    f"partition field {pf.name!r}: source column {pf.source_id} is in no schema"
                )
            result = pf.transform.result_type(source.field_type)
            # a later spec's name wins (renames); types never change for a field id
            fields[pf.field_id] = NestedField(pf.field_id, pf.name, result, required=False)
    ordered = tuple(fields[i] for i in sorted(fields))
    return UnifiedPartitionType(ordered, by_name)


def partition_stats_schema(unified: UnifiedPartitionType, format_version: int) -> Schema:
    """The spec's partition statistics schema (field ids 1–13) for this table."""
    v3 = format_version >= _V3
    fields = [
        NestedField(1, "partition", StructType(*unified.fields), required=True),
        NestedField(2, "spec_id", IntegerType(), required=True),
        NestedField(3, "data_record_count", LongType(), required=True),
        NestedField(4, "data_file_count", IntegerType(), required=True),
        NestedField(5, "total_data_file_size_in_bytes", LongType(), required=True),
        NestedField(6, "position_delete_record_count", LongType(), required=v3),
        NestedField(7, "position_delete_file_count", IntegerType(), required=v3),
    ]
    if v3:
        fields.append(NestedField(13, "dv_count", IntegerType(), required=True))
    fields += [
        NestedField(8, "equality_delete_record_count", LongType(), required=v3),
        NestedField(9, "equality_delete_file_count", IntegerType(), required=v3),
        NestedField(10, "total_record_count", LongType(), required=False),
        NestedField(11, "last_updated_at", LongType(), required=False),
        NestedField(12, "last_updated_snapshot_id", LongType(), required=False),
    ]
    return Schema(*fields)


# --- computing rows -----------------------------------------------------------------------


def _null_first(value: Any) -> tuple[int, Any]:
    return (0, 0) if value is None else (1, value)


def sort_rows(rows: Iterable[PartitionStatsRow]) -> list[PartitionStatsRow]:
    """Ascending by ``partition`` (field by field, NULL first), as the spec requires."""
    return sorted(rows, key=lambda r: (tuple(_null_first(v) for v in r.partition), r.spec_id))


def apply_files(
    rows: Rows,
    unified: UnifiedPartitionType,
    files: Iterable[DataFile],
    sign: int,
    touched: set[RowKey],
) -> dict[RowKey, PartitionStatsRow]:
    """Add (``sign`` 1) or subtract (-1) files' counts; records the keys they touch."""
    out = dict(rows)
    for f in files:
        key = (f.partition.spec_id, unified.values(f.partition))
        row = out.get(key) or PartitionStatsRow(spec_id=key[0], partition=key[1])
        n, records = sign, sign * f.record_count
        if f.content == FileContent.DATA:
            row = replace(
                row,
                data_record_count=row.data_record_count + records,
                data_file_count=row.data_file_count + n,
                total_data_file_size_in_bytes=row.total_data_file_size_in_bytes
                + sign * f.file_size_bytes,
            )
        elif f.content == FileContent.POSITION_DELETES:
            is_dv = f.file_format.upper() == "PUFFIN"
            row = replace(
                row,
                position_delete_record_count=row.position_delete_record_count + records,
                position_delete_file_count=row.position_delete_file_count + (0 if is_dv else n),
                dv_count=row.dv_count + (n if is_dv else 0),
            )
        else:
            row = replace(
                row,
                equality_delete_record_count=row.equality_delete_record_count + records,
                equality_delete_file_count=row.equality_delete_file_count + n,
            )
        out[key] = row
        touched.add(key)
    return out


def _changed_files(commit: Commit) -> tuple[list[DataFile], list[DataFile]]:
    added = [*commit.added_files, *commit.added_delete_files]
    removed = [*commit.removed_files, *commit.removed_delete_files]
    return added, removed


def _stamp(rows: dict[RowKey, PartitionStatsRow], keys: Iterable[RowKey], commit: Commit) -> None:
    """Mark the partitions a commit touched as last updated by it."""
    for key in keys:
        rows[key] = replace(
            rows[key],
            last_updated_at=commit.timestamp_ms,
            last_updated_snapshot_id=commit.snapshot_id,
        )


def full_rows(
    unified: UnifiedPartitionType, live: Iterable[DataFile], commit: Commit | None = None
) -> dict[RowKey, PartitionStatsRow]:
    """Partition stats of a snapshot from all its live files.

    Update times are known only for the partitions ``commit`` (the commit that produced
    the snapshot, if known) touched; elsewhere they stay ``null`` rather than guessed.
    """
    rows = apply_files({}, unified, live, 1, set())
    if commit is not None and not commit.is_baseline:
        touched: set[RowKey] = set()
        added, removed = _changed_files(commit)
        apply_files({}, unified, [*added, *removed], 1, touched)
        _stamp(rows, touched & rows.keys(), commit)
    return rows


def incremental_rows(
    previous: Rows, unified: UnifiedPartitionType, commit: Commit
) -> dict[RowKey, PartitionStatsRow] | None:
    """The parent's rows plus the commit's changes; ``None`` if they do not add up (then
    the caller recomputes from the live files)."""
    touched: set[RowKey] = set()
    added, removed = _changed_files(commit)
    rows = apply_files(previous, unified, added, 1, touched)
    rows = apply_files(rows, unified, removed, -1, touched)
    _stamp(rows, touched, commit)
    if not all(r.is_consistent for r in rows.values()):
        return None
    return {k: r for k, r in rows.items() if not r.is_empty}


# --- the Parquet codec --------------------------------------------------------------------


def rows_to_parquet(
    rows: Iterable[PartitionStatsRow], unified: UnifiedPartitionType, format_version: int
) -> bytes:
    schema = schema_to_pyarrow(partition_stats_schema(unified, format_version))
    names = [f.name for f in unified.fields]
    records = []
    for r in sort_rows(rows):
        record: dict[str, Any] = {
            "partition": dict(zip(names, r.partition, strict=True)),
            "spec_id": r.spec_id,
            "data_record_count": r.data_record_count,
            "data_file_count": r.data_file_count,
            "total_data_file_size_in_bytes": r.total_data_file_size_in_bytes,
            "position_delete_record_count": r.position_delete_record_count,
            "position_delete_file_count": r.position_delete_file_count,
            "equality_delete_record_count": r.equality_delete_record_count,
            "equality_delete_file_count": r.equality_delete_file_count,
            "total_record_count": r.total_record_count,
            "last_updated_at": r.last_updated_at,
            "last_updated_snapshot_id": r.last_updated_snapshot_id,
        }
        if format_version >= _V3:
            record["dv_count"] = r.dv_count
        records.append(record)
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(records, schema=schema), buffer)
    return buffer.getvalue()


def rows_from_parquet(
    data: bytes, unified: UnifiedPartitionType
) -> dict[RowKey, PartitionStatsRow]:
    """Read a partition statistics file; partition values are matched by field id."""
    table = pq.read_table(io.BytesIO(data))
    partition_type = table.schema.field("partition").type
    ids = [
        int(partition_type.field(i).metadata[b"PARQUET:field_id"])
        for i in range(partition_type.num_fields)
    ]
    names = [partition_type.field(i).name for i in range(partition_type.num_fields)]
    position = unified.index()
    rows: dict[RowKey, PartitionStatsRow] = {}
    for raw in table.to_pylist():
        values: list[Any] = [None] * len(unified.fields)
        for field_id, name in zip(ids, names, strict=True):
            if field_id in position:
                values[position[field_id]] = raw["partition"][name]
        key = (int(raw["spec_id"]), tuple(values))
        rows[key] = PartitionStatsRow(
            spec_id=key[0],
            partition=key[1],
            data_record_count=raw["data_record_count"],
            data_file_count=raw["data_file_count"],
            total_data_file_size_in_bytes=raw["total_data_file_size_in_bytes"],
            position_delete_record_count=raw.get("position_delete_record_count") or 0,
            position_delete_file_count=raw.get("position_delete_file_count") or 0,
            dv_count=raw.get("dv_count") or 0,
            equality_delete_record_count=raw.get("equality_delete_record_count") or 0,
            equality_delete_file_count=raw.get("equality_delete_file_count") or 0,
            last_updated_at=raw.get("last_updated_at"),
            last_updated_snapshot_id=raw.get("last_updated_snapshot_id"),
        )
    return rows
