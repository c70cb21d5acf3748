"""The value codec: typed column values, Iceberg single-value (de)serialization, JSON.

Iceberg's types are lakestats' canonical type system: every format's columns are described
with Iceberg type strings (``"long"``, ``"decimal(10, 2)"``, ``"timestamptz"``) and their
values are the Python values this module encodes and decodes. That is why this module,
alone outside ``formats/iceberg/`` and ``publish/iceberg/``, imports pyiceberg: its type
parser and single-value conversions are the reference implementation of the spec.

Bounds travel as Python values of the column's type; the store keeps them as Iceberg's
single-value binary form (spec-exact, lossless for every type, unlike JSON for floats such
as ``inf``). Types are Iceberg type strings.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Context, Decimal
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter
from pyiceberg.conversions import from_bytes, to_bytes
from pyiceberg.types import IcebergType, PrimitiveType

from lakestats.model import JsonScalar
from lakestats.sketches.spec import decimal_precision_scale

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TYPE_ADAPTER: TypeAdapter[IcebergType] = TypeAdapter(IcebergType)

STRING_LIKE_TYPES = frozenset({"string", "binary"})


# Digits enough for any value of a decimal(38, s) and any double at any scale up to 38 (a
# double reaches 1.8e308): Python's default context holds 28, and a decimal(38, 18) of 10^10
# at its scale has 29 — quantize raised InvalidOperation, scaleb rounded silently
_WIDE = Context(prec=400)


def at_scale(value: Decimal | int | float | str, scale: int) -> Decimal:
    """``value`` as a decimal of ``scale`` digits after the point (rounded half-even), with
    every digit it has before it: a float by its shortest repr, as it prints."""
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    return number.quantize(Decimal(1).scaleb(-scale), context=_WIDE)


def holds_decimal(number: Decimal, precision: int, scale: int) -> bool:
    """Whether a ``decimal(precision, scale)`` column can hold ``number``: no non-zero
    digit past the scale, no more digits before the point than the precision leaves."""
    return at_scale(number, scale) == number and (
        not number or number.adjusted() < precision - scale
    )


def unscaled_decimal(unscaled: int, scale: int) -> Decimal:
    """The decimal a stored unscaled integer stands for, every digit kept."""
    return Decimal(unscaled).scaleb(-scale, context=_WIDE)


@lru_cache(maxsize=256)
def parse_type(type_str: str) -> PrimitiveType:
    """The pyiceberg type for an Iceberg type string; ``ValueError`` for non-primitives."""
    parsed = _TYPE_ADAPTER.validate_python(type_str)
    if not isinstance(parsed, PrimitiveType):
        raise ValueError(f"not a primitive Iceberg type: {type_str!r}")
    return parsed


def is_decimal(type_str: str) -> bool:
    return type_str.startswith("decimal")


def _from_physical(type_str: str, value: Any) -> Any:
    """pyiceberg's physical representation (days, micros, …) to the Python value."""
    if value is None:
        return None
    if type_str == "date":
        return _EPOCH_DATE + dt.timedelta(days=int(value))
    if type_str == "timestamp":
        return _EPOCH + dt.timedelta(microseconds=int(value))
    if type_str == "timestamptz":
        return _EPOCH_TZ + dt.timedelta(microseconds=int(value))
    if type_str == "timestamp_ns":
        return _EPOCH + dt.timedelta(microseconds=int(value) // 1000)
    if type_str == "timestamptz_ns":
        return _EPOCH_TZ + dt.timedelta(microseconds=int(value) // 1000)
    if type_str == "time":
        micros = int(value)
        return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
    if type_str == "uuid":
        return value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value))
    return value


def _to_physical(type_str: str, value: Any) -> Any:
    if type_str == "date" and isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if type_str in ("timestamp", "timestamp_ns") and isinstance(value, dt.datetime):
        micros = (value.replace(tzinfo=None) - _EPOCH) // dt.timedelta(microseconds=1)
        return micros * 1000 if type_str == "timestamp_ns" else micros
    if type_str in ("timestamptz", "timestamptz_ns") and isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        micros = (aware - _EPOCH_TZ) // dt.timedelta(microseconds=1)
        return micros * 1000 if type_str == "timestamptz_ns" else micros
    if type_str == "time" and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + (
            value.microsecond
        )
    if isinstance(value, Decimal) and is_decimal(type_str):
        # a bound read under the type a column was widened from (decimal(5, 2) →
        # decimal(10, 4)): the same number at the new scale; a number it cannot hold
        # exactly is left for the encoder to refuse
        _, scale = decimal_precision_scale(type_str)
        rescaled = at_scale(value, scale)
        return rescaled if rescaled == value else value
    return value


def decode_bound(type_str: str, raw: bytes | None) -> Any:
    """Iceberg single-value binary → Python value of the type (``bound_from_physical``)."""
    if raw is None:
        return None
    return bound_from_physical(type_str, from_bytes(parse_type(type_str), raw))


def bound_from_physical(type_str: str, value: Any) -> Any:
    """A bound's Python value; ``None`` (unknown, as if the writer kept no bound) where
    Python cannot hold it: a date or timestamp before year 1 or past 9999, which Parquet,
    Spark and Iceberg can."""
    try:
        return _from_physical(type_str, value)
    except OverflowError:
        return None


# The physical range Python's dates and datetimes hold (days, microseconds since the epoch)
_DAYS = ((dt.date.min - _EPOCH_DATE).days, (dt.date.max - _EPOCH_DATE).days)
_MICROS = (
    (dt.datetime.min - _EPOCH) // dt.timedelta(microseconds=1),
    (dt.datetime.max - _EPOCH) // dt.timedelta(microseconds=1),
)


def clamp_physical(type_str: str, value: int) -> int:
    """A date's days or a timestamp's microseconds moved into the range Python holds. For
    values a sketch keeps as doubles: 9999-12-31 23:59:59.999999 rounds to a double of
    year 10000."""
    low, high = _DAYS if type_str == "date" else _MICROS
    return min(max(value, low), high)


def kll_value(type_str: str, value: float) -> Any:
    """A KLL item (a double) back in the column's own terms, for display.

    KLL sketches hold numbers: dates as days and timestamps as microseconds since the
    epoch, decimals as doubles (see docs/sketches.md).
    """
    if not math.isfinite(value):
        return value
    if type_str in ("int", "long"):
        return round(value)
    if is_decimal(type_str):
        _, scale = decimal_precision_scale(type_str)
        return at_scale(value, scale)
    if type_str in ("date", "timestamp", "timestamptz"):
        return from_physical(type_str, clamp_physical(type_str, round(value)))
    return value


def encode_bound(type_str: str, value: Any) -> bytes | None:
    """Python value of the type → Iceberg single-value binary."""
    if value is None:
        return None
    return to_bytes(parse_type(type_str), _to_physical(type_str, value))


def from_physical(type_str: str, value: Any) -> Any:
    """Public form of the physical → Python conversion (partition values, scan results)."""
    return _from_physical(type_str, value)


def to_physical(type_str: str, value: Any) -> Any:
    """Public form of the Python → physical conversion (days, microseconds since epoch)."""
    return _to_physical(type_str, value)


def to_json(value: Any) -> JsonScalar:
    """Render a Python column value as the ``show --json`` contract says.

    Numbers stay numbers (non-finite floats become the strings ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"``, since JSON has no such numbers); decimals are strings; date, time and
    timestamps are ISO-8601; binary is hex; UUIDs are their canonical string.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        return format(value, "f")  # plain digits: str() writes 0E-20 and 1E-7
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def from_json(type_str: str, value: JsonScalar) -> Any:
    """The inverse of ``to_json`` for a value of an Iceberg type (partition values in the
    store are kept in their JSON rendering)."""
    if value is None:
        return None
    t = type_str.strip().lower()
    if t in ("float", "double"):
        specials = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if isinstance(value, str) and value in specials:
            return specials[value]
        return float(value)  # other text: a number's digits, or ValueError
    if t.startswith("decimal"):
        return Decimal(str(value))
    if t == "date":
        return dt.date.fromisoformat(str(value))
    if t.startswith("timestamp"):
        parsed = dt.datetime.fromisoformat(str(value))
        return parsed if t.startswith("timestamptz") else parsed.replace(tzinfo=None)
    if t == "time":
        return dt.time.fromisoformat(str(value))
    if t == "binary" or t.startswith("fixed"):
        return bytes.fromhex(str(value))
    if t == "uuid":
        return uuid.UUID(str(value))
    if t in ("int", "long"):
        return int(value)
    return value
