"""The column type strings the test table writers take (lakestats' names: ``long``,
``timestamptz``, ``decimal(10, 2)``…) as Arrow types, shared by ``delta_tables`` and
``paimon_tables``."""

from __future__ import annotations

import re

import pyarrow as pa

ARROW_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
}
DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def arrow_type(type_str: str) -> pa.DataType:
    match = DECIMAL.fullmatch(type_str)
    if match:
        return pa.decimal128(int(match[1]), int(match[2]))
    return ARROW_TYPES[type_str]
