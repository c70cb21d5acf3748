"""Values as Java Paimon writes them in a statistics file's ``min``/``max`` strings.

``ColStats`` serialises bounds with ``InternalSerializers.create(type).serializeToString``:
strings as themselves, booleans ``true``/``false``, integers in decimal, FLOAT/DOUBLE as
Java's ``Float/Double.toString``, DECIMAL as ``BigDecimal.toPlainString``, DATE as the int
of days since the epoch and TIME as the int of milliseconds of the day (their internal
form, not ISO text), TIMESTAMP as ``DateTimeUtils.formatTimestamp(ts, precision)``. Binary
and complex types have no string form: their bounds are left out (``None``).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np

from lakestats.formats.paimon.types import PaimonType
from lakestats.values import at_scale

_EPOCH_DATE = dt.date(1970, 1, 1)
_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
_STRINGS = frozenset({"CHAR", "VARCHAR", "STRING"})


def to_paimon_string(value: Any, paimon_type: PaimonType) -> str | None:
    """``value`` (the model's Python value) as Paimon's ``serializeToString``; ``None``
    when the type has no string form or the value does not fit it."""
    root = paimon_type.root
    if value is None:
        return None
    if root in _STRINGS and isinstance(value, str):
        return value
    if root == "BOOLEAN" and isinstance(value, bool):
        return "true" if value else "false"
    if root in _INTEGERS and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if root == "DOUBLE" and isinstance(value, float | int):
        return java_double(float(value))
    if root == "FLOAT" and isinstance(value, float | int):
        return java_float(float(value))
    if root == "DECIMAL" and isinstance(value, Decimal | int):
        return format(at_scale(value, paimon_type.scale), "f")
    if root == "DATE" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return str((value - _EPOCH_DATE).days)
    if root == "TIME" and isinstance(value, dt.time):
        millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
        return str(millis + value.microsecond // 1000)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ") and isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return format_timestamp(value, paimon_type.precision)
    return None


def format_timestamp(value: dt.datetime, precision: int) -> str:
    """``DateTimeUtils.formatTimestamp``: trailing zeros of the 9-digit fraction are
    trimmed while it is longer than ``precision``."""
    fraction = f"{value.microsecond * 1000:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.year < 1000:
        text = f"{value.year:04d}" + text[text.index("-") :]
    return f"{text}.{fraction}" if fraction else text


def java_double(value: float) -> str:
    """Java's ``Double.toString``: the shortest digits that round-trip, in plain notation
    for 1e-3 <= |x| < 1e7 (at least one fraction digit), else ``d.dddE<n>``."""
    return _java_floating(value, repr(value))


def java_float(value: float) -> str:
    """Java's ``Float.toString`` (shortest float32 digits, same notation rules)."""
    return _java_floating(value, np.format_float_positional(np.float32(value), unique=True))


def _java_floating(value: float, shortest: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits = Decimal(shortest)
    sign = "-" if digits < 0 else ""
    digits = abs(digits)
    if Decimal("1e-3") <= digits < Decimal("1e7"):
        text = format(digits, "f")
        return sign + (text if "." in text else text + ".0")
    mantissa_digits = digits.as_tuple().digits
    stripped = "".join(str(d) for d in mantissa_digits).rstrip("0") or "0"
    exponent = digits.adjusted()
    mantissa = stripped[0] + "." + (stripped[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"
