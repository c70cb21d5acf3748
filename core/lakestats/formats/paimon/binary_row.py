"""Paimon's ``BinaryRow`` bytes → Python values (partitions, keys, min/max stats).

Manifests store rows as ``SerializationUtils.serializeBinaryRow`` writes them: a big-endian
int32 arity, then the row. The row is a null bit set (one header byte for the row kind,
then one bit per field, LSB first, padded to 8-byte words), one 8-byte little-endian slot
per field, and a variable part that slots point into. Fixed-size values live in their
slot; strings and bytes of up to 7 bytes are inlined (high bit of the slot's last byte
set, length in its low 7 bits), longer ones are ``offset << 32 | length`` relative to the
row start; non-compact decimals (precision > 18) and timestamps of precision > 3 keep
their extra bytes in the variable part too.

Decoded here to the values lakestats' model uses for the column's type (spelled as
``types.iceberg_type`` spells it): ``int``, ``float``, ``str``, ``bytes``, ``bool``,
``Decimal``, ``date``, ``time``, naive ``datetime`` (``timestamp``) and UTC ``datetime``
(``timestamptz``). Types without a scalar value (arrays, maps, rows) decode to ``None``.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from lakestats.formats.paimon.types import PaimonType
from lakestats.values import unscaled_decimal

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_HEADER_BITS = 8  # the row-kind byte before the null bits
_COMPACT_DECIMAL_PRECISION = 18
_COMPACT_TIMESTAMP_PRECISION = 3


class BinaryRowError(ValueError):
    """The bytes are not a BinaryRow of the expected arity."""


def null_bits_width(arity: int) -> int:
    """Bytes of the header and null bit set of a row with ``arity`` fields."""
    return ((arity + 63 + _HEADER_BITS) // 64) * 8


def decode_row(data: bytes | None, types: Sequence[PaimonType]) -> tuple[Any, ...] | None:
    """The values of a serialized BinaryRow, one per type; ``None`` for empty bytes.

    A row of fewer fields than ``types`` (stats of a file written before columns were added)
    is padded with ``None``; extra fields are ignored.
    """
    if not data:
        return None
    if len(data) < 4:
        raise BinaryRowError(f"a BinaryRow needs 4 bytes of arity, got {len(data)}")
    (arity,) = struct.unpack_from(">i", data, 0)
    row = memoryview(data)[4:]
    header = null_bits_width(arity)
    if arity < 0 or len(row) < header + 8 * arity:
        raise BinaryRowError(f"a BinaryRow of {arity} fields cannot fit in {len(row)} bytes")
    values: list[Any] = []
    for index, paimon_type in enumerate(types):
        if index >= arity or _is_null(row, index):
            values.append(None)
            continue
        values.append(_read_field(row, header + 8 * index, paimon_type))
    return tuple(values)


def arity_of(data: bytes | None) -> int:
    """How many fields a serialized BinaryRow holds (0 for empty bytes)."""
    if not data or len(data) < 4:
        return 0
    (arity,) = struct.unpack_from(">i", data, 0)
    return int(arity)


def _is_null(row: memoryview, index: int) -> bool:
    bit = index + _HEADER_BITS
    return bool(row[bit // 8] & (1 << (bit % 8)))


def _read_field(row: memoryview, slot: int, paimon_type: PaimonType) -> Any:
    root = paimon_type.root
    if root == "BOOLEAN":
        return row[slot] != 0
    if root == "TINYINT":
        return struct.unpack_from("<b", row, slot)[0]
    if root == "SMALLINT":
        return struct.unpack_from("<h", row, slot)[0]
    if root == "INT":
        return struct.unpack_from("<i", row, slot)[0]
    if root == "DATE":
        return _EPOCH_DATE + dt.timedelta(days=struct.unpack_from("<i", row, slot)[0])
    if root == "TIME":
        millis = struct.unpack_from("<i", row, slot)[0]
        return (_EPOCH + dt.timedelta(milliseconds=millis)).time()
    if root == "BIGINT":
        return struct.unpack_from("<q", row, slot)[0]
    if root == "FLOAT":
        return struct.unpack_from("<f", row, slot)[0]
    if root == "DOUBLE":
        return struct.unpack_from("<d", row, slot)[0]
    if root in ("CHAR", "VARCHAR", "STRING"):
        return bytes(_var_bytes(row, slot)).decode("utf-8", errors="replace")
    if root in ("BINARY", "VARBINARY", "BYTES"):
        return bytes(_var_bytes(row, slot))
    if root == "DECIMAL":
        return _decimal(row, slot, paimon_type)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        value = _timestamp(row, slot, paimon_type.precision)
        return value.replace(tzinfo=dt.UTC) if root == "TIMESTAMP_LTZ" else value
    return None  # ARRAY, MAP, ROW, MULTISET, VARIANT: no scalar value


def _var_bytes(row: memoryview, slot: int) -> memoryview:
    mark = row[slot + 7]
    if mark & 0x80:  # inlined: up to 7 bytes in the slot itself
        return row[slot : slot + (mark & 0x7F)]
    (offset_and_length,) = struct.unpack_from("<q", row, slot)
    offset, length = offset_and_length >> 32, offset_and_length & 0xFFFFFFFF
    if offset + length > len(row):
        raise BinaryRowError("a variable-length field points past the end of its row")
    return row[offset : offset + length]


def _decimal(row: memoryview, slot: int, paimon_type: PaimonType) -> Decimal:
    scale = paimon_type.scale
    if paimon_type.precision <= _COMPACT_DECIMAL_PRECISION:
        (unscaled,) = struct.unpack_from("<q", row, slot)
    else:
        (offset_and_length,) = struct.unpack_from("<q", row, slot)
        offset, length = offset_and_length >> 32, offset_and_length & 0xFFFFFFFF
        unscaled = int.from_bytes(row[offset : offset + length], "big", signed=True)
    return unscaled_decimal(unscaled, scale)


def _timestamp(row: memoryview, slot: int, precision: int) -> dt.datetime:
    if precision <= _COMPACT_TIMESTAMP_PRECISION:
        (millis,) = struct.unpack_from("<q", row, slot)
        return _EPOCH + dt.timedelta(milliseconds=millis)
    (offset_and_nanos,) = struct.unpack_from("<q", row, slot)
    offset, nano_of_milli = offset_and_nanos >> 32, offset_and_nanos & 0xFFFFFFFF
    (millis,) = struct.unpack_from("<q", row, offset)
    # Python datetimes hold microseconds: nanoseconds below that are dropped (bounds of
    # TIMESTAMP(9) columns are rounded down; Java Paimon writes no stats for them anyway).
    return _EPOCH + dt.timedelta(milliseconds=millis, microseconds=nano_of_milli // 1000)
