"""Pieces shared by the segment and aggregate Parquet codecs."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.exceptions import StoreError
from lakestats.model import JsonScalar, PartitionField, PartitionKey
from lakestats.store import atomic
from lakestats.values import decode_bound, encode_bound, from_json, to_json

KIND_KEY = b"lakestats.kind"
FORMAT_VERSION_KEY = b"lakestats.format_version"
FORMAT_VERSION = 1
# a field's frequent-items sketch: of its KLL double, or (another stored form, under its own
# name so that a reader that knows only the first never reads strings as doubles) of a
# string column's strings (sketches/frequent.py)
FREQUENT_ITEMS = "frequent_items_v1"
FREQUENT_STRINGS = "frequent_strings_v1"


def frequent_column(type_str: str | None) -> str:
    """The stored column that holds a field's frequent-items sketch."""
    return FREQUENT_STRINGS if type_str == "string" else FREQUENT_ITEMS


def frequent_cells(type_str: str | None, blob: bytes | None) -> dict[str, bytes | None]:
    return {FREQUENT_ITEMS: None, FREQUENT_STRINGS: None, frequent_column(type_str): blob}


def schema_with_kind(fields: Sequence[pa.Field], kind: str) -> pa.Schema:
    return pa.schema(
        fields,
        metadata={KIND_KEY: kind.encode(), FORMAT_VERSION_KEY: str(FORMAT_VERSION).encode()},
    )


def encode_table(
    columns: dict[str, list[Any]], schema: pa.Schema, *, row_group_bytes: int | None = None
) -> bytes:
    """Serialise to Parquet in memory, so the bytes go through ``atomic_write`` whole.
    ``row_group_bytes``: row groups of about that many bytes (in memory, before
    compression), which ``read_rows`` reads alone; else Parquet's default (one group for
    any file lakestats writes)."""
    table = pa.Table.from_pydict(columns, schema=schema)
    table.validate(full=True)  # catches nulls in required columns before they hit disk
    sink = io.BytesIO()
    rows_per_group = None
    if row_group_bytes is not None and table.num_rows:
        rows_per_group = max(1, table.num_rows * row_group_bytes // max(1, table.nbytes))
    pq.write_table(table, sink, compression="zstd", row_group_size=rows_per_group)
    return sink.getvalue()


def read_table(
    path: atomic.PathLike,
    kind: str,
    schema: pa.Schema,
    columns: list[str],
    optional: Sequence[str] = (),
) -> Any:
    """Read ``columns`` of a store Parquet file of ``kind``; ``StoreError`` naming the file.

    Extra columns (a later minor revision) are ignored; a missing or retyped column, or a
    file without our kind marker, is not ours. ``optional`` columns (added by a minor
    revision) are read when the file has them.
    """
    with _opened(path, kind) as parquet:
        return parquet.read(
            columns=_checked(parquet, path, kind, schema=schema, columns=columns, optional=optional)
        )


def read_rows(
    path: atomic.PathLike,
    kind: str,
    schema: pa.Schema,
    columns: list[str],
    optional: Sequence[str] = (),
    *,
    keys: list[str],
    wanted: Callable[[pa.Table], pa.Array | pa.ChunkedArray],
) -> Any:
    """The rows of ``read_table``'s table that ``wanted`` keeps: it is given the ``keys``
    columns of every row and returns a boolean mask. Only the row groups holding a kept
    row are read whole (a removal in a big segment reads its partitions' groups, not the
    file)."""
    with _opened(path, kind) as parquet:
        names = _checked(parquet, path, kind, schema=schema, columns=columns, optional=optional)
        mask = wanted(parquet.read(columns=keys))
        if isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        metadata = parquet.metadata
        pieces: list[tuple[int, pa.Array]] = []  # (row group, its rows' mask)
        start = 0
        for index in range(metadata.num_row_groups):
            rows = metadata.row_group(index).num_rows
            piece = mask.slice(start, rows)
            if pc.any(piece).as_py():
                pieces.append((index, piece))
            start += rows
        table = parquet.read_row_groups([index for index, _ in pieces], columns=names)
        return table.filter(pa.concat_arrays([p for _, p in pieces] or [pa.array([], pa.bool_())]))


def check_table(
    path: atomic.PathLike,
    kind: str,
    schema: pa.Schema,
    columns: list[str],
    optional: Sequence[str] = (),
) -> None:
    """What ``read_table`` checks, from the file's footer alone (its body is not read):
    ``StoreError`` naming the file if it is missing or not ours."""
    with _opened(path, kind) as parquet:
        _checked(parquet, path, kind, schema=schema, columns=columns, optional=optional)


@contextmanager
def _opened(path: atomic.PathLike, kind: str) -> Iterator[pq.ParquetFile]:
    try:
        with atomic.open_input(path) as source:
            yield pq.ParquetFile(source)
    except StoreError:
        raise
    except FileNotFoundError as exc:
        raise StoreError(f"{path}: {kind} file is missing") from exc
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(f"{path}: unreadable {kind} file: {exc}") from exc


def _checked(
    parquet: pq.ParquetFile,
    path: atomic.PathLike,
    kind: str,
    *,
    schema: pa.Schema,
    columns: list[str],
    optional: Sequence[str],
) -> list[str]:
    """The columns to read of a file whose schema is ours (``StoreError`` if not)."""
    file_schema = parquet.schema_arrow
    metadata = file_schema.metadata or {}
    if metadata.get(KIND_KEY) != kind.encode():
        raise StoreError(f"{path}: not a lakestats {kind} file")
    version = metadata.get(FORMAT_VERSION_KEY, b"?").decode(errors="replace")
    if version != str(FORMAT_VERSION):
        raise StoreError(f"{path}: unsupported {kind} format_version {version!r}")
    present = [n for n in optional if file_schema.get_field_index(n) >= 0]
    for name in [*columns, *present]:
        expected = schema.field(name)
        index = file_schema.get_field_index(name)
        if index < 0:
            raise StoreError(f"{path}: column {name!r} is missing")
        if not file_schema.field(index).type.equals(expected.type):
            raise StoreError(
                f"{path}: column {name!r} has type {file_schema.field(index).type}, "
                f"expected {expected.type}"
            )
    return [*columns, *present]


@contextmanager
def decoding(path: atomic.PathLike, kind: str) -> Iterator[None]:
    """Turn any surprise while rebuilding model objects into a ``StoreError`` for ``path``."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"{path}: corrupt {kind} file: {exc!r}") from exc


def partition_json(key: PartitionKey) -> str:
    """The partition's ``[[name, value], ...]`` list (values rendered by ``to_json``): keeps
    spec order and int/float/bool."""
    return json.dumps(
        [[name, to_json(value)] for name, value in key.values],
        allow_nan=False,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def partition_fields_json(key: PartitionKey) -> str | None:
    """The partition's ``[[field_id, type], ...]`` list, ``None`` when the key has none."""
    if not key.fields:
        return None
    return json.dumps([[f.field_id, f.type] for f in key.fields], separators=(",", ":"))


def partition_from_json(spec_id: int, text: str, fields_text: str | None = None) -> PartitionKey:
    """A key from its stored ``partition`` (and, when present, ``partition_fields``) cells:
    with field types the values come back typed, without them as the stored JSON scalars."""
    raw = json.loads(text)
    if not isinstance(raw, list):
        raise ValueError(f"partition is not a JSON list: {text!r}")
    values: list[tuple[str, JsonScalar]] = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise ValueError(f"partition entry is not a [name, value] pair: {item!r}")
        name, value = item
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ValueError(f"partition value is not a JSON scalar: {value!r}")
        values.append((name, value))
    if fields_text is None:
        return PartitionKey(spec_id=spec_id, values=tuple(values))
    raw_fields = json.loads(fields_text)
    if not isinstance(raw_fields, list) or len(raw_fields) != len(values):
        raise ValueError(f"partition_fields does not match the partition: {fields_text!r}")
    fields: list[PartitionField] = []
    for item in raw_fields:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], int)
            and isinstance(item[1], str)
        ):
            raise ValueError(f"partition field is not a [field_id, type] pair: {item!r}")
        fields.append(PartitionField(field_id=item[0], type=item[1]))
    typed = tuple(
        (name, from_json(f.type, value)) for (name, value), f in zip(values, fields, strict=True)
    )
    return PartitionKey(spec_id=spec_id, values=typed, fields=tuple(fields))


def encode_value(type_str: str | None, value: Any, where: Callable[[], str]) -> bytes | None:
    """A bound as Iceberg single-value bytes; ``ValueError`` saying where when impossible."""
    if value is None:
        return None
    if type_str is None:
        raise ValueError(f"{where()}: has a bound but no type to encode it with")
    try:
        return encode_bound(type_str, value)
    except Exception as exc:
        raise ValueError(f"{where()}: cannot encode {value!r} as {type_str}: {exc}") from exc


def decode_value(type_str: str | None, raw: bytes | None) -> Any:
    if raw is None:
        return None
    if type_str is None:
        raise ValueError("a bound is stored without a type")
    return decode_bound(type_str, raw)
