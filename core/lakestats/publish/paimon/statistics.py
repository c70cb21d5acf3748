"""The Paimon statistics file's JSON, from a snapshot's merged stats (pure).

The shape Java Paimon reads (``org.apache.paimon.stats.Statistics`` / ``ColStats``):
``{"snapshotId", "schemaId", "mergedRecordCount"?, "mergedRecordSize"?, "colStats":
{<column name>: {"colId", "distinctCount"?, "min"?, "max"?, "nullCount"?, "avgLen"?,
"maxLen"?}}}`` — absent values are omitted, as Jackson's ``NON_NULL`` does. Only columns
of schema ``schemaId`` appear (Java looks each name up there and fails the commit of every
later writer otherwise); bounds are written only when exact (never a truncated string
bound) and only for types with a string form.
"""

from __future__ import annotations

from typing import Any

from lakestats.formats.paimon.types import PaimonSchema
from lakestats.model import ColumnAggregate, PartitionAggregate, SketchSettings
from lakestats.publish.native import column_doc
from lakestats.publish.paimon.serialize import to_paimon_string

_LENGTH_ROOTS = frozenset({"CHAR", "VARCHAR", "STRING", "BINARY", "VARBINARY", "BYTES"})


def statistics_document(
    *,
    snapshot_id: int,
    schema: PaimonSchema,
    table: PartitionAggregate,
    settings: SketchSettings,
    merged_record_count: int | None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"snapshotId": snapshot_id, "schemaId": schema.schema_id}
    if merged_record_count is not None:
        doc["mergedRecordCount"] = merged_record_count
        if table.record_count:
            doc["mergedRecordSize"] = (
                table.total_size_bytes * merged_record_count // table.record_count
            )
    doc["colStats"] = {
        f.name: col_stats(f.field_id, f.type.root, f.type.iceberg_type, table, settings)
        | _bounds(f, table.columns.get(f.field_id))
        for f in schema.fields
        if f.type.iceberg_type is not None
    }
    return doc


def col_stats(
    field_id: int,
    root: str,
    type_str: str | None,
    table: PartitionAggregate,
    settings: SketchSettings,
) -> dict[str, Any]:
    """One column's ``ColStats`` fields other than the bounds (see ``_bounds``): the
    same numbers ``show --json`` gives (``publish/native.column_doc``)."""
    stats: dict[str, Any] = {"colId": field_id}
    column = table.columns.get(field_id)
    native = column_doc(
        column, field_id, column.type if column else type_str or "", table.record_count, settings
    )
    ndv = native.get("ndv")
    if isinstance(ndv, int | float):
        stats["distinctCount"] = round(ndv)
    if native.get("null_count") is not None:
        stats["nullCount"] = native["null_count"]
    if root in _LENGTH_ROOTS:
        if native.get("avg_len") is not None:
            stats["avgLen"] = round(native["avg_len"])
        if native.get("max_len") is not None:
            stats["maxLen"] = native["max_len"]
    return stats


def _bounds(paimon_field: Any, column: ColumnAggregate | None) -> dict[str, str]:
    if column is None or not column.bounds_complete or column.bounds_may_be_truncated:
        return {}
    low = to_paimon_string(column.lower, paimon_field.type)
    high = to_paimon_string(column.upper, paimon_field.type)
    return {"min": low, "max": high} if low is not None and high is not None else {}
