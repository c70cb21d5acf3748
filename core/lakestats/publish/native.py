"""The native stats document: what ``lakestats show --json`` prints and the HTTP API serves.

Built once per processed snapshot from its ``SnapshotStats`` (merged once by the commit
path) and stored as JSON, so reading a table's stats is one small file whatever the number
of data files. Key names are a stable contract (snake_case); new keys may be added,
existing ones never change meaning. The commit document merges only the commit's own
added and removed files (``commit_doc``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any

from datasketches import kll_doubles_sketch

from lakestats.merge import whole_table
from lakestats.model import (
    ColumnAggregate,
    Commit,
    PartitionAggregate,
    SketchSettings,
    TableSchema,
)
from lakestats.publish.base import SnapshotStats
from lakestats.sketches.frequent import (
    FREQUENT_ITEMS_VERSION,
    frequent_values,
    kind_of,
)
from lakestats.sketches.histogram import equi_depth_histogram
from lakestats.sketches.merge import (
    kll_quantiles,
    theta_estimate,
)
from lakestats.sketches.spec import decimal_precision_scale
from lakestats.sketches.value_sample import value_sample_doc
from lakestats.values import kll_value, to_json

FLOAT_TYPES = frozenset({"float", "double"})
DOC_VERSION = 1


def _value_step(type_str: str) -> float | None:
    """The gap between adjacent values in KLL units, which caps a bucket's ndv."""
    if type_str in ("int", "long", "date", "timestamp", "timestamptz"):
        return 1.0
    if type_str.startswith("decimal"):
        return 10.0 ** -decimal_precision_scale(type_str)[1]
    return None


def _ndv(column: ColumnAggregate) -> int | None:
    """The theta estimate, never above the values the files hold: past 4,096 distinct
    values theta errs either way (±1.6 %), and a unique column of 17,502 rows read 17,525 —
    more distinct values than rows, which no planner should be told. The bound is the
    files' own counts (values written, deleted rows included: at least the live ones);
    NaN is one value in theta (Iceberg hashes it)."""
    if column.theta is None:
        return None
    estimate = round(theta_estimate(column.theta))
    if column.value_count is None or column.null_count is None or column.nan_count is None:
        return estimate
    values = column.value_count - column.null_count - column.nan_count
    if values < 0:
        return estimate  # counts that disagree bound nothing
    return min(estimate, values + (1 if column.nan_count else 0))


def _within_bounds(column: ColumnAggregate) -> Callable[[float], Any]:
    """A KLL double as JSON in the column's terms, kept within its exact min and max: a
    double rounds a long, a decimal or a timestamp past 2^53 units, which can land beyond
    them (a max of 9999-12-31 23:59:59.999 showed as a quantile of …59.999008)."""
    exact = (
        column.bounds_complete
        and not column.bounds_may_be_truncated
        and column.lower is not None
        and column.upper is not None
    )

    def shown(value: float) -> Any:
        converted = kll_value(column.type, value)
        if exact:
            with suppress(TypeError):  # never for a KLL type's own values; a doc anyway
                converted = min(max(converted, column.lower), column.upper)
        return to_json(converted)

    return shown


def _sketch_fields(
    column: ColumnAggregate, settings: SketchSettings, non_null: int | None
) -> dict[str, Any]:
    """ndv, quantiles, histogram, lengths and boolean counts of one column."""
    shown = _within_bounds(column)
    out: dict[str, Any] = {
        "ndv": _ndv(column),
        "quantiles": None,
        "histogram": None,
        "frequent_values": None,
        "avg_len": None,
        "max_len": column.len_max,
        "true_count": column.true_count,
        "false_count": column.false_count,
    }
    covered = column.files > 0 and column.sketched_files == column.files
    if column.len_sum is not None and covered and non_null:
        out["avg_len"] = column.len_sum / non_null
    elif column.len_sum is not None and covered:
        out["avg_len"] = 0.0 if non_null == 0 else None
    if column.kll is not None:
        quantiles = kll_quantiles(column.kll, settings.quantiles)
        out["quantiles"] = {_rank_key(q): shown(v) for q, v in quantiles.items()}
        buckets = equi_depth_histogram(
            column.kll,
            column.theta,
            settings.histogram_buckets,
            value_step=_value_step(column.type),
            value_sample=column.value_sample,
        )
        out["histogram"] = [
            {
                "lower": shown(b.lower),
                "upper": shown(b.upper),
                "count": round(b.count),  # whole rows; exact unless "approximate"
                "ndv": b.ndv,
                "approximate": b.approximate,
                # ndv shared out by row count (no value sample: an older store), not measured
                "ndv_apportioned": b.ndv_apportioned,
                # the value sample's bounds on the bucket's distinct count (2 standard
                # deviations); null without a sample
                "ndv_lower": None if b.ndv_bounds is None else b.ndv_bounds[0],
                "ndv_upper": None if b.ndv_bounds is None else b.ndv_bounds[1],
                # values that cut the bucket's distinct values into equal parts (quartiles,
                # from the value sample); [] without one or with too few entries
                "ndv_cuts": [shown(v) for v in b.ndv_cuts],
                # values that cut the bucket's rows into equal parts (KLL quartiles), where
                # the rows are surely not evenly spread over the range; else []
                "count_cuts": [shown(v) for v in b.count_cuts],
            }
            for b in buckets
        ]
    sketch: dict[str, Any] = {
        "files": column.files,
        "sketched_files": column.sketched_files,
        "coverage": (column.sketched_files / column.files) if column.files else None,
    }
    if column.theta is not None:
        sketch["ndv"] = {
            "kind": "theta",
            "lg_k": settings.theta_lg_k,
            "relative_standard_error": 1 / math.sqrt(2**settings.theta_lg_k),
            "approximate": True,
        }
    if column.kll is not None:
        sketch["quantiles"] = _kll_doc(column.kll, settings)
    if column.value_sample is not None:
        sketch["value_sample"] = value_sample_doc(column.value_sample, settings.theta_lg_k)
    kind = kind_of(column.type)
    if column.frequent_items is not None and kind is not None:
        found = frequent_values(column.frequent_items, settings.histogram_buckets, kind)
        out["frequent_values"] = [
            {
                "value": f.value if isinstance(f.value, str) else shown(f.value),
                "count": f.count,
                "count_lower": f.lower,
                "count_upper": f.upper,
            }
            for f in found.values
        ]
        sketch["frequent_items"] = {
            "kind": f"frequent_items_{kind}",
            "version": FREQUENT_ITEMS_VERSION,
            "max_items_tracked": settings.frequent_items,
            "epsilon": found.epsilon,
            # rows: every listed count is within this of the truth; a value not listed
            # has at most twice this many rows when "complete"
            "maximum_error": found.maximum_error,
            "complete": found.complete,
            # the rows the sketch counted (its stream length): fewer than the column's
            # non-null rows while some files are not sketched
            "rows": found.rows,
        }
    out["sketch"] = sketch
    return out


def _kll_doc(kll: bytes, settings: SketchSettings) -> dict[str, Any]:
    """The quantile sketch's parameters and the error bounds that hold for this column.

    Errors come from the merged sketch itself: files sketched with a smaller k (an older
    setting) keep the merge at their error until they are gone.
    """
    merged = kll_doubles_sketch.deserialize(kll)
    pmf_error = float(merged.normalized_rank_error(True))
    return {
        "kind": "kll_doubles",
        "k": settings.kll_k,
        "error_rate": settings.kll_error_rate,
        "normalized_rank_error": float(merged.normalized_rank_error(False)),
        "bucket_rank_error": pmf_error,
        # a bucket's row count is within this many rows of the truth (~99 % confidence)
        "bucket_count_error": math.ceil(pmf_error * merged.n) if merged.is_estimation_mode() else 0,
        "histogram_buckets": settings.histogram_buckets,
        "approximate": bool(merged.is_estimation_mode()),
    }


def _rank_key(q: float) -> str:
    return repr(float(q))


def column_doc(
    column: ColumnAggregate | None,
    field_id: int,
    type_str: str,
    record_count: int,
    settings: SketchSettings,
) -> dict[str, Any]:
    """One column's entry. Files without the column (added later) count as all-null."""
    if column is None:
        doc: dict[str, Any] = {
            "field_id": field_id,
            "type": type_str,
            "null_count": record_count,
            "nan_count": 0 if type_str in FLOAT_TYPES else None,
            "column_size_bytes": None,
            "min": None,
            "max": None,
            "min_max_exact": True,
        }
        doc.update(_sketch_fields(ColumnAggregate(field_id=field_id, type=type_str), settings, 0))
        return doc
    absent_records = record_count - column.records
    null_count = None if column.null_count is None else column.null_count + absent_records
    nan_count = column.nan_count if type_str in FLOAT_TYPES else None
    non_null = None
    if column.null_count is not None:
        non_null = column.records - column.null_count - (column.nan_count or 0)
    doc = {
        "field_id": field_id,
        "type": type_str,
        "null_count": null_count,
        "nan_count": nan_count,
        "column_size_bytes": column.column_size,
        "min": to_json(column.lower),
        "max": to_json(column.upper),
        "min_max_exact": column.bounds_complete and not column.bounds_may_be_truncated,
    }
    doc.update(_sketch_fields(column, settings, non_null))
    return doc


def merged_record_count(table: PartitionAggregate) -> int | None:
    """Rows after row-level deletes.

    Exact whenever the format attached its deletes to the data files and the sketch pass
    applied them (``docs/deletes.md``): the sum of the files' live rows. Unknown when some
    file's deletes were not applied. Without attached deletes (stores written before live
    rows existed): exact without delete files, an estimate with position deletes (each
    deleted position removes one row), unknown with equality deletes.
    """
    if table.deletes_unknown_files:
        return None
    if table.deletes_applied_files:
        return table.live_record_count
    if table.equality_delete_files:
        return None
    return max(0, table.record_count - table.position_delete_records)


def deletes_doc(table: PartitionAggregate) -> dict[str, Any]:
    """How row-level deletes entered the stats: files whose live rows were counted (their
    stats describe live rows only), the rows those deletes removed, and files whose
    deletes were not applied (their stats still include deleted rows: ``exact`` is then
    false, and so are the counts, bounds and sketches of those files' columns)."""
    return {
        "applied_files": table.deletes_applied_files,
        "deleted_records": table.deleted_records,
        "unapplied_files": table.deletes_unknown_files,
        "exact": table.deletes_unknown_files == 0,
    }


def columns_doc(
    schema: TableSchema, table: PartitionAggregate, settings: SketchSettings
) -> dict[str, Any]:
    return {
        col.name: column_doc(
            table.columns.get(col.field_id),
            col.field_id,
            col.type,
            table.live_record_count,
            settings,
        )
        for col in schema.columns
    }


def partitions_doc(parts: Sequence[PartitionAggregate]) -> list[dict[str, Any]]:
    return [
        {
            "partition": p.partition.as_dict(),
            "spec_id": p.partition.spec_id,
            "record_count": p.record_count,
            "file_count": p.file_count,
            "total_size_bytes": p.total_size_bytes,
            "position_delete_records": p.position_delete_records,
            "equality_delete_records": p.equality_delete_records,
            "merged_record_count": merged_record_count(p),
        }
        for p in parts
        if p.file_count or p.position_delete_files or p.equality_delete_files
    ]


def _side_doc(
    parts: Sequence[PartitionAggregate], names: Mapping[int, str], settings: SketchSettings
) -> dict[str, Any]:
    total = whole_table(parts, settings)
    return {
        "data_files": total.file_count,
        "delete_files": total.position_delete_files + total.equality_delete_files,
        "record_count": total.record_count,
        "file_size_bytes": total.total_size_bytes,
        "delete_record_count": total.position_delete_records + total.equality_delete_records,
        "columns": {
            names.get(fid, f"field_{fid}"): {
                "field_id": fid,
                "column_size_bytes": col.column_size,
                "null_count": col.null_count,
                "nan_count": col.nan_count if col.type in FLOAT_TYPES else None,
                "lower_bound": to_json(col.lower),
                "upper_bound": to_json(col.upper),
                "bounds_exact": col.bounds_complete and not col.bounds_may_be_truncated,
            }
            for fid, col in total.columns.items()
            if fid >= 0  # key sketches (``model.KeySketch``) are no column
        },
    }


def commit_doc(
    commit: Commit,
    added: Sequence[PartitionAggregate],
    removed: Sequence[PartitionAggregate],
    names: Mapping[int, str],
    settings: SketchSettings,
) -> dict[str, Any]:
    """Manifest-level aggregates of one commit: what it added and what it removed."""
    return {
        "snapshot_id": commit.snapshot_id,
        "parent_id": commit.parent_id,
        "sequence_number": commit.sequence_number,
        "timestamp_ms": commit.timestamp_ms,
        "operation": commit.operation,
        "schema_id": commit.schema_id,
        "added": _side_doc(added, names, settings),
        "removed": _side_doc(removed, names, settings),
    }


def stats_doc(
    stats: SnapshotStats, *, table_name: str, format_name: str, commit: dict[str, Any]
) -> dict[str, Any]:
    """The whole document for one snapshot, from its stats merged once (``stats.table``
    is the whole-table aggregate; nothing here merges again). ``commit`` is the commit's
    document (``commit_doc``)."""
    table = stats.table
    return {
        "table": table_name,
        "format": format_name,
        "snapshot_id": stats.snapshot_id,
        "schema_id": stats.schema.schema_id,
        "record_count": table.record_count,
        "file_count": table.file_count,
        "total_size_bytes": table.total_size_bytes,
        "merged_record_count": merged_record_count(table),
        "row_deletes": deletes_doc(table),
        "delete_file_count": table.position_delete_files + table.equality_delete_files,
        "columns": columns_doc(stats.schema, table, stats.settings),
        "partitions": partitions_doc(stats.partitions),
        "commit": commit,
        "doc_version": DOC_VERSION,
    }
