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

import math
from typing import Any

from lakestats.formats.paimon.merged import UNKNOWN, KeyEstimate, merged_record_count
from lakestats.formats.paimon.serialize import to_paimon_string
from lakestats.formats.paimon.table import PaimonTable
from lakestats.formats.paimon.types import PaimonSchema
from lakestats.model import (
    KEY_SKETCH_ID,
    RETRACTED_KEY_SKETCH_ID,
    ColumnAggregate,
    PartitionAggregate,
    SketchSettings,
)
from lakestats.publish.native import column_doc
from lakestats.sketches.merge import theta_bounds, theta_difference, theta_estimate

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
        column,
        field_id,
        column.type if column else type_str or "",
        table.live_record_count,  # rows readers see (after deletion vectors or key merges)
        settings,
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
    if column.type != paimon_field.type.iceberg_type:
        return {}  # values of a later type than schema ``schemaId`` gives the column
    low = to_paimon_string(column.lower, paimon_field.type)
    high = to_paimon_string(column.upper, paimon_field.type)
    return {"min": low, "max": high} if low is not None and high is not None else {}


def paimon_terms(
    paimon: PaimonTable, snapshot_id: int, table: PartitionAggregate, settings: SketchSettings
) -> dict[str, Any]:
    """A snapshot's stats in Paimon's terms, for ``show --json`` (key ``"paimon"``) and the
    statistics file: ``mergedRecordCount`` with how it is known, and the file's document."""
    snapshot = paimon.snapshot(snapshot_id)
    schema = paimon.paimon_schema(snapshot.schema_id)
    merged = merged_record_count(
        paimon, snapshot_id, key_estimate(schema, table, settings), live=table
    )
    document = statistics_document(
        snapshot_id=snapshot_id,
        schema=schema,
        table=table,
        settings=settings,
        merged_record_count=merged.value,
    )
    shown = "unknown" if merged.value is None else str(merged.value)
    if merged.bounds is not None:
        shown += f" (~95 % within {merged.bounds[0]}-{merged.bounds[1]})"
    return {
        "merged_record_count": merged.value,
        "merged_record_count_is": merged.how,
        "merged_record_count_why": merged.why,
        "merged_record_count_bounds": list(merged.bounds) if merged.bounds else None,
        "statistics": document,
        # "unknown (unknown: why)" says it twice
        "summary": [
            f"mergedRecordCount unknown ({merged.why})"
            if merged.how == UNKNOWN
            else f"mergedRecordCount {shown} ({merged.how}: {merged.why})"
        ],
    }


def key_estimate(
    schema: PaimonSchema, table: PartitionAggregate, settings: SketchSettings
) -> KeyEstimate | None:
    """Distinct primary keys over the live files minus the keys retracted there (-U/-D
    rows), from the key's theta sketches (``KEY_SKETCH_ID`` minus
    ``RETRACTED_KEY_SKETCH_ID``, theta A-not-B) when every live file has them; else, for
    a one-column key, that column's distinct count (stores from before key sketches)."""
    keys = table.columns.get(KEY_SKETCH_ID)
    if keys is not None and keys.theta is not None and keys.sketched_files == table.file_count:
        retracted = table.columns.get(RETRACTED_KEY_SKETCH_ID)
        live = theta_difference(keys.theta, retracted.theta if retracted else None)
        low, high = theta_bounds(live)
        return KeyEstimate(
            round(theta_estimate(live)),
            "distinct primary keys over the live files minus retracted keys (theta sketch "
            f"of the key, lg_k {settings.theta_lg_k})",
            (math.floor(low), math.ceil(high)),
        )
    if len(schema.primary_keys) != 1:
        return None
    key = schema.by_name()[schema.primary_keys[0]]
    column = table.columns.get(key.field_id)
    if column is None:
        return None
    ndv = column_doc(column, key.field_id, column.type, table.live_record_count, settings).get(
        "ndv"
    )
    if not isinstance(ndv, int | float):
        return None
    return KeyEstimate(round(ndv), "distinct primary keys (theta sketch of the key column)")
