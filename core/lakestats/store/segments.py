"""Segment files: the data files one commit added, with their metrics and block sketches.

One Parquet row per (data file, field id) for every field id in
``field_ids ∪ columns ∪ sketches``; a file with no field at all gets one row whose
``field_id`` is null. File-level columns repeat on each of the file's rows. Presence flags
(``in_field_ids``, ``has_metrics``, ``has_sketch``) keep "recorded as all-null" apart from
"not recorded", so a ``DataFile`` round-trips exactly. ``docs/store-format.md`` lists every
column.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakestats.model import ColumnMetrics, ColumnSketch, DataFile, FileContent, HeldFile
from lakestats.store import atomic
from lakestats.store._codec import (
    decode_value,
    decoding,
    encode_table,
    encode_value,
    frequent_cells,
    frequent_column,
    partition_fields_json,
    partition_from_json,
    partition_json,
    read_rows,
    read_table,
    schema_with_kind,
)

KIND = "segment"
# Row groups of about this many bytes (in memory): a removal reads the groups holding its
# partitions' rows, not the whole segment (a baseline of every partition's per-file
# sketches can be hundreds of MB). Files are written in order, so a partition's files are
# near each other when the commit wrote them so.
SEGMENT_ROW_GROUP_BYTES = 4 * 2**20

_FILE_FIELDS = [
    pa.field("file_ordinal", pa.int32(), nullable=False),
    pa.field("file_path", pa.string(), nullable=False),
    pa.field("content", pa.string(), nullable=False),
    pa.field("file_format", pa.string(), nullable=False),
    pa.field("record_count", pa.int64(), nullable=False),
    pa.field("file_size_bytes", pa.int64(), nullable=False),
    pa.field("spec_id", pa.int32(), nullable=False),
    pa.field("partition", pa.string(), nullable=False),
    # added in a minor revision (files without it read as before): [[field_id, type], ...]
    pa.field("partition_fields", pa.string()),
    # added in a minor revision for row-level deletes (files without them: no deletes)
    pa.field("live_record_count", pa.int64()),
    pa.field("live_rows_unknown", pa.bool_()),
]
_FIELD_FIELDS = [
    pa.field("field_id", pa.int32()),
    pa.field("field_type", pa.string()),
    pa.field("in_field_ids", pa.bool_()),
]
_METRIC_FIELDS = [
    pa.field("has_metrics", pa.bool_()),
    pa.field("column_size", pa.int64()),
    pa.field("value_count", pa.int64()),
    pa.field("null_count", pa.int64()),
    pa.field("nan_count", pa.int64()),
    pa.field("lower_bound", pa.binary()),
    pa.field("upper_bound", pa.binary()),
    pa.field("bounds_may_be_truncated", pa.bool_()),
]
_SKETCH_FIELDS = [
    pa.field("has_sketch", pa.bool_()),
    pa.field("theta", pa.binary()),
    pa.field("kll", pa.binary()),
    pa.field("sketch_null_count", pa.int64()),
    pa.field("sketch_nan_count", pa.int64()),
    pa.field("sketch_min", pa.binary()),
    pa.field("sketch_max", pa.binary()),
    pa.field("len_sum", pa.int64()),
    pa.field("len_max", pa.int64()),
    pa.field("true_count", pa.int64()),
    pa.field("false_count", pa.int64()),
    # added in a minor revision (issue 14; files without it: no value samples). The
    # suffix is the stored form's version (sketches/value_sample.py)
    pa.field("value_sample_v1", pa.binary()),
    pa.field("frequent_items_v1", pa.binary()),  # likewise (sketches/frequent.py)
    pa.field("frequent_strings_v1", pa.binary()),  # a string column's (_codec.frequent_column)
]
SCHEMA = schema_with_kind(_FILE_FIELDS + _FIELD_FIELDS + _METRIC_FIELDS + _SKETCH_FIELDS, KIND)
_VALUE_SAMPLE = "value_sample_v1"
OPTIONAL_COLUMNS = [
    "partition_fields",
    "live_record_count",
    "live_rows_unknown",
    "value_sample_v1",
    "frequent_items_v1",
    "frequent_strings_v1",
]
COLUMNS = [name for name in SCHEMA.names if name not in OPTIONAL_COLUMNS]

_EMPTY_METRICS: dict[str, Any] = {f.name: None for f in _METRIC_FIELDS}
_EMPTY_SKETCH: dict[str, Any] = {f.name: None for f in _SKETCH_FIELDS}


def _metric_cells(
    metrics: ColumnMetrics | None, type_str: str | None, where: str
) -> dict[str, Any]:
    if metrics is None:
        return {**_EMPTY_METRICS, "has_metrics": False}
    return {
        "has_metrics": True,
        "column_size": metrics.column_size,
        "value_count": metrics.value_count,
        "null_count": metrics.null_count,
        "nan_count": metrics.nan_count,
        "lower_bound": encode_value(type_str, metrics.lower, lambda: f"{where} lower bound"),
        "upper_bound": encode_value(type_str, metrics.upper, lambda: f"{where} upper bound"),
        "bounds_may_be_truncated": metrics.bounds_may_be_truncated,
    }


def _sketch_cells(sketch: ColumnSketch | None, type_str: str | None, where: str) -> dict[str, Any]:
    if sketch is None:
        return {**_EMPTY_SKETCH, "has_sketch": False}
    return {
        "has_sketch": True,
        "theta": sketch.theta,
        "kll": sketch.kll,
        "sketch_null_count": sketch.null_count,
        "sketch_nan_count": sketch.nan_count,
        "sketch_min": encode_value(type_str, sketch.min, lambda: f"{where} sketch min"),
        "sketch_max": encode_value(type_str, sketch.max, lambda: f"{where} sketch max"),
        "len_sum": sketch.len_sum,
        "len_max": sketch.len_max,
        "true_count": sketch.true_count,
        "false_count": sketch.false_count,
        "value_sample_v1": sketch.value_sample,
        **frequent_cells(type_str, sketch.frequent_items),
    }


def encode_segment(files: Sequence[DataFile], types: Mapping[int, str]) -> bytes:
    """The segment's Parquet bytes. ``ValueError`` if a bound has no type or cannot encode."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}

    def emit(row: dict[str, Any]) -> None:
        for name in SCHEMA.names:
            columns[name].append(row[name])

    for ordinal, data_file in enumerate(files):
        file_cells = {
            "file_ordinal": ordinal,
            "file_path": data_file.path,
            "content": FileContent(data_file.content).value,
            "file_format": data_file.file_format,
            "record_count": data_file.record_count,
            "file_size_bytes": data_file.file_size_bytes,
            "spec_id": data_file.partition.spec_id,
            "partition": partition_json(data_file.partition),
            "partition_fields": partition_fields_json(data_file.partition),
            "live_record_count": data_file.live_record_count,
            "live_rows_unknown": data_file.deletes_unknown,
        }
        field_ids = sorted(
            set(data_file.field_ids) | set(data_file.columns) | set(data_file.sketches)
        )
        if not field_ids:
            emit(
                {
                    **file_cells,
                    "field_id": None,
                    "field_type": None,
                    "in_field_ids": None,
                    **_EMPTY_METRICS,
                    **_EMPTY_SKETCH,
                }
            )
            continue
        for field_id in field_ids:
            type_str = types.get(field_id)
            where = f"{data_file.path} field {field_id}"
            emit(
                {
                    **file_cells,
                    "field_id": field_id,
                    "field_type": type_str,
                    "in_field_ids": field_id in data_file.field_ids,
                    **_metric_cells(data_file.columns.get(field_id), type_str, where),
                    **_sketch_cells(data_file.sketches.get(field_id), type_str, where),
                }
            )
    return encode_table(columns, SCHEMA, row_group_bytes=SEGMENT_ROW_GROUP_BYTES)


def write_segment(
    path: atomic.PathLike, files: Sequence[DataFile], types: Mapping[int, str]
) -> None:
    """Write ``files`` durably to ``path`` (replacing it atomically if it exists).

    ``types`` maps field id → Iceberg type string; a field with a bound (metrics or sketch
    min/max) must have one, a field without bounds may not.
    """
    atomic.atomic_write(path, encode_segment(files, types))


def _metrics(cells: Mapping[str, Any], type_str: str | None) -> ColumnMetrics:
    return ColumnMetrics(
        column_size=cells["column_size"],
        value_count=cells["value_count"],
        null_count=cells["null_count"],
        nan_count=cells["nan_count"],
        lower=decode_value(type_str, cells["lower_bound"]),
        upper=decode_value(type_str, cells["upper_bound"]),
        bounds_may_be_truncated=bool(cells["bounds_may_be_truncated"]),
    )


def _sketch(cells: Mapping[str, Any], type_str: str | None) -> ColumnSketch:
    return ColumnSketch(
        theta=cells["theta"],
        kll=cells["kll"],
        null_count=cells["sketch_null_count"],
        nan_count=cells["sketch_nan_count"],
        min=decode_value(type_str, cells["sketch_min"]),
        max=decode_value(type_str, cells["sketch_max"]),
        len_sum=cells["len_sum"],
        len_max=cells["len_max"],
        true_count=cells["true_count"],
        false_count=cells["false_count"],
        value_sample=cells.get(_VALUE_SAMPLE),
        frequent_items=cells.get(frequent_column(type_str)),
    )


def read_segment(
    path: atomic.PathLike,
    *,
    partitions_of: Collection[str] | None = None,
    only: Collection[str] | None = None,
    field_ids: Collection[int] | None = None,
    value_samples: bool = True,
) -> tuple[DataFile, ...]:
    """The segment's files, in the order written. ``StoreError`` naming ``path`` if unreadable.

    ``partitions_of`` (data file paths): only the files in the partitions those files are
    in — what a removal re-merges — decoding nothing else. ``only`` (data file paths):
    only those files. ``field_ids``: every file, with the metrics and sketches of those
    fields only (``field_ids`` of the files likewise), so a reader of a few columns of a
    wide table decodes those (``lakestats advise --column``). ``value_samples=False``:
    their sketches without value samples (``None``), which are not read (~40 % of a
    segment's bytes with the default settings; the advisor has no use for them)."""
    if field_ids is not None and (only is not None or partitions_of is not None):
        raise ValueError("field_ids does not combine with only / partitions_of")
    selection = _rows_wanted(only, partitions_of) if field_ids is None else _fields(field_ids)
    optional = [c for c in OPTIONAL_COLUMNS if value_samples or c != _VALUE_SAMPLE]
    if selection is None:
        table = read_table(path, KIND, SCHEMA, COLUMNS, optional)
    else:
        keys, wanted = selection
        table = read_rows(path, KIND, SCHEMA, COLUMNS, optional, keys=keys, wanted=wanted)
    data = table.to_pydict()
    with decoding(path, KIND):
        groups: dict[int, list[int]] = {}
        for row, ordinal in enumerate(data["file_ordinal"]):
            groups.setdefault(ordinal, []).append(row)
        files: list[DataFile] = []
        for ordinal in sorted(groups):
            rows = groups[ordinal]
            first = rows[0]
            columns: dict[int, ColumnMetrics] = {}
            sketches: dict[int, ColumnSketch] = {}
            recorded: set[int] = set()
            for row in rows:
                field_id = data["field_id"][row]
                if field_id is None or (field_ids is not None and field_id not in field_ids):
                    continue
                cells = {name: values[row] for name, values in data.items()}
                type_str = cells["field_type"]
                if cells["in_field_ids"]:
                    recorded.add(field_id)
                if cells["has_metrics"]:
                    columns[field_id] = _metrics(cells, type_str)
                if cells["has_sketch"]:
                    sketches[field_id] = _sketch(cells, type_str)
            files.append(
                DataFile(
                    path=data["file_path"][first],
                    content=FileContent(data["content"][first]),
                    file_format=data["file_format"][first],
                    record_count=data["record_count"][first],
                    file_size_bytes=data["file_size_bytes"][first],
                    partition=partition_from_json(
                        data["spec_id"][first],
                        data["partition"][first],
                        data.get("partition_fields", [None] * (first + 1))[first],
                    ),
                    columns=columns,
                    field_ids=frozenset(recorded),
                    sketches=sketches,
                    live_record_count=_optional(data, "live_record_count", first),
                    live_rows_unknown=bool(_optional(data, "live_rows_unknown", first)),
                )
            )
    return tuple(files)


def _in_partitions_of(table: pa.Table, paths: Collection[str]) -> pa.ChunkedArray:
    """Whether each row of ``table`` is in the partitions (spec id and stored rendering:
    one writer, one rendering per partition) of the files ``paths``."""
    of_paths = table.filter(pc.is_in(table["file_path"], pa.array(list(paths), pa.string())))
    return pc.is_in(_partition_ids(table), pc.unique(_partition_ids(of_paths)))


def _rows_wanted(
    only: Collection[str] | None, partitions_of: Collection[str] | None
) -> tuple[list[str], Callable[[pa.Table], Any]] | None:
    """The key columns ``read_segment`` selects rows by and the mask it keeps them with;
    ``None``: every row."""
    if only is not None:
        paths = pa.array(list(only), pa.string())
        return ["file_path"], lambda rows: pc.is_in(rows["file_path"], paths)
    if partitions_of is not None:
        keys = ["file_path", "spec_id", "partition"]
        return keys, lambda rows: _in_partitions_of(rows, partitions_of)
    return None


def _fields(field_ids: Collection[int]) -> tuple[list[str], Callable[[pa.Table], Any]]:
    """The rows of ``field_ids``, and each file's first row (its file-level columns: a file
    without any of the fields is still one of the segment's files)."""
    wanted = pa.array(sorted(field_ids), pa.int32())

    def mask(rows: pa.Table) -> pa.Array:
        ordinals = rows["file_ordinal"].combine_chunks()
        if not len(ordinals):
            return pa.array([], pa.bool_())
        later = pc.not_equal(ordinals.slice(1), ordinals.slice(0, len(ordinals) - 1))
        starts = pa.concat_arrays([pa.array([True]), later])
        return pc.or_(pc.is_in(rows["field_id"], wanted).combine_chunks(), starts)

    return ["file_ordinal", "field_id"], mask


def _partition_ids(table: pa.Table) -> pa.Array:
    spec = pc.cast(table["spec_id"], pa.string())
    return pc.binary_join_element_wise(spec, table["partition"], "\x00")


def _optional(data: Mapping[str, list[Any]], name: str, row: int) -> Any:
    """A cell of a column added by a minor revision (``None`` in files without it)."""
    values = data.get(name)
    return None if values is None else values[row]


def read_segment_paths(path: atomic.PathLike) -> list[str]:
    """The data file paths a segment holds, in order, reading only the path column."""
    table = read_table(path, KIND, SCHEMA, ["file_path"])
    with decoding(path, KIND):
        return list(dict.fromkeys(table.column("file_path").to_pylist()))


def read_segment_contents(path: atomic.PathLike) -> dict[str, HeldFile]:
    """Every file path the segment holds → what it is (``HeldFile``, without ``segment``):
    its content, rows, bytes, and whether its stats describe every row it holds. Files of
    segments written before the store recorded deletes (``live_record_count``) are not
    vouched for. A path listed twice (removed, then added again with deletes) keeps the
    entry that describes every row, if one does."""
    columns = ["file_path", "content", "record_count", "file_size_bytes"]
    optional = ["live_record_count", "live_rows_unknown"]
    table = read_table(path, KIND, SCHEMA, columns, optional)
    with decoding(path, KIND):
        data = table.to_pydict()
        recorded = all(name in data for name in optional)
        out: dict[str, HeldFile] = {}
        for row, file_path in enumerate(data["file_path"]):
            content = FileContent(data["content"][row])
            live = _optional(data, "live_record_count", row)
            held = HeldFile(
                content=content,
                record_count=data["record_count"][row],
                file_size_bytes=data["file_size_bytes"][row],
                whole=(
                    recorded
                    and content == FileContent.DATA
                    and not _optional(data, "live_rows_unknown", row)
                    and live in (None, data["record_count"][row])
                ),
            )
            if file_path not in out or not out[file_path].whole:
                out[file_path] = held
        return out


def read_segment_types(path: atomic.PathLike) -> dict[int, str]:
    """field id → the Iceberg type string the segment's bounds are encoded with."""
    table = read_table(path, KIND, SCHEMA, ["field_id", "field_type"])
    with decoding(path, KIND):
        types: dict[int, str] = {}
        for field_id, type_str in zip(
            table.column("field_id").to_pylist(),
            table.column("field_type").to_pylist(),
            strict=True,
        ):
            if field_id is not None and type_str is not None:
                types[field_id] = type_str
        return types
