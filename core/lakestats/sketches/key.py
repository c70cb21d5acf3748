"""A primary key of one or more columns as one binary value per row, for its theta sketch.

``model.KeySketch`` names the key's columns. Each column's part is its hash input
(``hashing.theta_input_sql``) as bytes — BINARY inputs as they are, BIGINT as 8 and
ARRAY<INT> as 4 big-endian bytes (Spark's cast of an integer to BINARY) — prefixed by its
length as 4 big-endian bytes; a null part is the 4 bytes ``FF FF FF FF`` (length -1). The
parts are concatenated in key order. The prefixes keep ``("ab", "c")`` and ``("a", "bc")``
apart, so distinct keys are distinct values, and the value is never empty (theta sketches
skip empty inputs). ``key_bytes`` builds the same value in Python (tests, docs).

The SQL goes in the sketch job's projection, like every hash input (``pipeline``): Spark
casts integers to BINARY only with ANSI mode off, which the job's session sets.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakestats.sketches.hashing import theta_input_sql
from lakestats.sketches.spec import type_spec

_NULL_PART = "X'FFFFFFFF'"
_INT_INPUTS = frozenset({"int", "float", "date"})  # ARRAY<INT> hash inputs
_LONG_INPUTS = frozenset({"long", "double", "timestamp", "timestamptz"})  # BIGINT


def key_part_sql(type_str: str, value_sql: str) -> str | None:
    """One key column's length-prefixed part (never NULL); ``None`` if the type has no
    hash input."""
    hashed = theta_input_sql(type_str, value_sql)
    spec = type_spec(type_str)
    if hashed is None or spec is None:
        return None
    if spec.type in _INT_INPUTS:
        as_bytes = f"CAST(({hashed})[0] AS BINARY)"
    elif spec.type in _LONG_INPUTS:
        as_bytes = f"CAST({hashed} AS BINARY)"
    else:
        as_bytes = f"({hashed})"
    return f"coalesce(concat(CAST(length({as_bytes}) AS BINARY), {as_bytes}), {_NULL_PART})"


def key_sql(columns: Sequence[tuple[str, str]]) -> str | None:
    """The key of ``(type, value SQL)`` columns as one BINARY; ``None`` if any column has
    no hash input (then the key gets no sketch)."""
    parts = [key_part_sql(type_str, value_sql) for type_str, value_sql in columns]
    if not parts or any(p is None for p in parts):
        return None
    return parts[0] if len(parts) == 1 else f"concat({', '.join(str(p) for p in parts)})"


def key_bytes(parts: Sequence[bytes | None]) -> bytes:
    """The value ``key_sql`` builds, from each column's part bytes (as described above)."""
    out = bytearray()
    for part in parts:
        if part is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += len(part).to_bytes(4, "big") + part
    return bytes(out)
