"""Selectivity estimates from a stats document, the way a cost-based optimizer uses them.

``selectivity(doc, predicate)`` is pure: it reads one column of the ``show --json``
document (row and null counts, NDV, the equi-depth histogram) and returns the estimated
fraction of the table's rows that satisfy the predicate. ``estimate(table, predicate)``
reads the current stats first (``lakestats.read_stats``).

The model (docs/sketches.md, "Selectivity"):

* ``IS NULL`` / ``IS NOT NULL``: the null count (exact).
* ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``: whole buckets below the constant plus the
  containing bucket's rows in proportion to where the constant lies in its value range
  (bucket ``j`` covers ``(lower, upper]``, the first ``[lower, upper]``). A value with a
  bucket of its own (hotter than a bucket) is counted whole.
* ``=``: a frequent value (the column's ``frequent_values``, from a frequent-items sketch)
  its own count; else the containing bucket's rows divided by its NDV (a single-value
  bucket: all its rows), at most twice the sketch's maximum error when the frequent list
  is complete; 0 outside [min, max]. ``IN``: the sum over its distinct values.
* A column without a histogram (strings, binary, booleans): ``=``/``IN`` from the NDV
  (``non-null rows / ndv`` per value), booleans from the true/false counts; ranges on it
  are a ``LakestatsError``.

Constants are given as Python values of the column's type or as their JSON form
(``"2024-01-31"`` for a date, ``"12.50"`` for a decimal), as ``show --json`` prints them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, cast

from lakestats.exceptions import LakestatsError
from lakestats.tables import ConfigLike, TableLike
from lakestats.values import from_json, to_physical

Op = Literal["=", "<", "<=", ">", ">=", "between", "in", "is null", "is not null"]
_OPS: tuple[str, ...] = ("=", "<", "<=", ">", ">=", "between", "in", "is null", "is not null")
_NUMERIC = ("int", "long", "float", "double", "date", "timestamp", "timestamptz")


class PredicateError(LakestatsError):
    """A predicate that cannot be estimated: unknown column, wrong constants, no histogram."""


@dataclass(frozen=True)
class Predicate:
    """``column op values``: one constant for comparisons, two for ``between`` (low, high,
    both inclusive), any number for ``in``, none for ``is null`` / ``is not null``."""

    column: str
    op: Op
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Estimate:
    rows: float  # estimated rows satisfying the predicate
    selectivity: float  # rows / the table's rows
    table_rows: int


def estimate(
    table: TableLike,
    predicate: Predicate | str,
    *,
    config: ConfigLike = None,
    snapshot_id: int | None = None,
) -> Estimate:
    """Estimated rows of ``table`` satisfying ``predicate`` (a ``Predicate`` or text such as
    ``"price BETWEEN 10 AND 20"``), from its current (or ``snapshot_id``'s) stats."""
    from lakestats.read import read_stats  # noqa: PLC0415 - keeps this module pure to import

    doc = read_stats(table, config=config, snapshot_id=snapshot_id)
    parsed = parse_predicate(predicate) if isinstance(predicate, str) else predicate
    fraction = selectivity(doc, parsed)
    rows = int(doc["record_count"])
    return Estimate(rows=fraction * rows, selectivity=fraction, table_rows=rows)


def selectivity(doc: dict[str, Any], predicate: Predicate) -> float:
    """Estimated fraction of the document's rows that satisfy ``predicate``, in [0, 1]."""
    column = doc["columns"].get(predicate.column)
    if column is None:
        raise PredicateError(f"no column {predicate.column!r} in the stats")
    if predicate.op not in _OPS:
        raise PredicateError(f"unknown operator {predicate.op!r}; one of {', '.join(_OPS)}")
    total = float(doc["record_count"])
    if total <= 0:
        return 0.0
    nulls = float(column["null_count"] or 0)
    if predicate.op == "is null":
        return _clamp(nulls / total)
    if predicate.op == "is not null":
        return _clamp((total - nulls) / total)
    rows = _rows(column, predicate, total - nulls - float(column.get("nan_count") or 0))
    return _clamp(rows / total)


def _rows(column: dict[str, Any], predicate: Predicate, non_null: float) -> float:
    type_str = str(column["type"])
    values = predicate.values
    expected = {"between": 2, "in": None}.get(predicate.op, 1)
    if expected is not None and len(values) != expected:
        raise PredicateError(f"{predicate.op} takes {expected} constant(s), got {len(values)}")
    histogram = column.get("histogram")
    if not histogram:
        return _rows_without_histogram(column, predicate, non_null)
    buckets = _Buckets(type_str, histogram)
    points = [_unit(type_str, v) for v in values]
    op = predicate.op
    if op in ("=", "in"):
        frequent, unlisted_at_most = _frequent_values(column, type_str)

        def equal(x: float) -> float:
            if x in frequent:
                return frequent[x]
            guess = buckets.equal(x)
            return guess if unlisted_at_most is None else min(guess, unlisted_at_most)

        return sum(equal(p) for p in set(points))
    if op == "<":
        return buckets.at_most(points[0]) - buckets.equal(points[0])
    if op == "<=":
        return buckets.at_most(points[0])
    if op == ">":
        return buckets.rows - buckets.at_most(points[0])
    if op == ">=":
        return buckets.rows - buckets.at_most(points[0]) + buckets.equal(points[0])
    low, high = points  # between, inclusive
    if low > high:
        return 0.0
    return buckets.at_most(high) - buckets.at_most(low) + buckets.equal(low)


def _rows_without_histogram(column: dict[str, Any], predicate: Predicate, non_null: float) -> float:
    if column.get("true_count") is not None and predicate.op in ("=", "in"):
        wanted = {_bool(v) for v in predicate.values}
        return sum(float(column["true_count" if v else "false_count"] or 0) for v in wanted)
    if predicate.op not in ("=", "in"):
        raise PredicateError(
            f"column of type {column['type']} has no histogram: only =, IN and IS [NOT] NULL "
            "can be estimated"
        )
    ndv = column.get("ndv")
    if not ndv:
        return 0.0 if non_null <= 0 else non_null
    return min(non_null, non_null / float(ndv) * len(set(predicate.values)))


def _frequent_values(
    column: dict[str, Any], type_str: str
) -> tuple[dict[float, float], float | None]:
    """The column's frequent values (KLL units → rows) and, when that list is complete, the
    most rows a value not on it can have (twice the sketch's maximum error)."""
    listed = column.get("frequent_values") or []
    counts = {_unit(type_str, f["value"]): float(f["count"]) for f in listed}
    info = (column.get("sketch") or {}).get("frequent_items") or {}
    cap = 2.0 * float(info["maximum_error"]) if info.get("complete") else None
    return counts, cap


class _Buckets:
    """A histogram in KLL units with its cumulative rows."""

    def __init__(self, type_str: str, histogram: list[dict[str, Any]]) -> None:
        self.lowers = [_unit(type_str, b["lower"]) for b in histogram]
        self.uppers = [_unit(type_str, b["upper"]) for b in histogram]
        self.counts = [float(b["count"]) for b in histogram]
        self.ndvs = [None if b.get("ndv") is None else float(b["ndv"]) for b in histogram]
        self.step = _step(type_str)
        self.rows = sum(self.counts)

    def _holds(self, j: int, x: float) -> bool:
        if j == 0:
            return self.lowers[0] <= x <= self.uppers[0]
        return self.lowers[j] < x <= self.uppers[j]

    def at_most(self, x: float) -> float:
        """Rows with a value <= x."""
        rows = 0.0
        for j, count in enumerate(self.counts):
            if self.uppers[j] <= x:
                rows += count
            elif self._holds(j, x):
                rows += count * self._share(j, x)
            else:
                break
        return rows

    def _share(self, j: int, x: float) -> float:
        """The share of bucket ``j``'s rows whose value is <= x (lower < x < upper, or
        lower <= x for the first bucket). Its ``ndv`` distinct values are taken as evenly
        spaced up to ``upper`` (a value that exists): a single-value bucket has none below
        its upper bound. Without an NDV, values spread evenly over the range."""
        lower, upper, first = self.lowers[j], self.uppers[j], j == 0
        if upper <= lower:
            return 1.0
        fraction = (x - lower) / (upper - lower)
        ndv = self.ndvs[j]
        if ndv is None and self.step is not None:
            ndv = self._values(j)
        if ndv is None or ndv < 1:
            return fraction
        values = max(1, round(ndv))
        if first:  # [lower, upper]: values at lower, …, upper
            below = math.floor(fraction * (values - 1) + 1e-9) + 1 if values > 1 else 0
        else:  # (lower, upper]: values at the top of each of ndv equal steps
            below = math.floor(fraction * values + 1e-9)
        return min(1.0, below / values)

    def equal(self, x: float) -> float:
        """Rows with the value x."""
        for j, count in enumerate(self.counts):
            if self._holds(j, x):
                ndv = self.ndvs[j]
                if ndv is None:
                    ndv = max(1.0, self._values(j))
                return count / max(ndv, 1.0)
        return 0.0

    def _values(self, j: int) -> float:
        if self.step is None:
            return self.counts[j]
        return (self.uppers[j] - self.lowers[j]) / self.step + (1 if j == 0 else 0)


def _step(type_str: str) -> float | None:
    if type_str in ("int", "long", "date", "timestamp", "timestamptz"):
        return 1.0
    if type_str.startswith("decimal"):
        scale = int(type_str.rstrip(")").split(",")[1])
        return 10.0**-scale
    return None


def _unit(type_str: str, value: Any) -> float:
    """A constant or histogram bound in KLL units (numbers; days / micros since epoch)."""
    try:
        if isinstance(value, str) or value is None:
            value = from_json(type_str, value)
        if value is None:
            raise PredicateError("compare with NULL using IS NULL")
        if type_str in ("date", "timestamp", "timestamptz") or type_str.startswith("timestamp"):
            if type_str == "date" and isinstance(value, dt.datetime):
                value = value.date()
            return float(to_physical(type_str, value))
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise PredicateError(f"{value!r} is not a value of type {type_str}")
        return float(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise PredicateError(f"{value!r} is not a value of type {type_str}: {exc}") from None


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise PredicateError(f"{value!r} is not a boolean")


def _clamp(fraction: float) -> float:
    return min(1.0, max(0.0, fraction))


_LITERAL = r"""(?:'(?:[^']|'')*'|[-+]?[0-9.eE+-]+|true|false)"""
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("is not null", re.compile(r"^(?P<col>\S+)\s+is\s+not\s+null$", re.I)),
    ("is null", re.compile(r"^(?P<col>\S+)\s+is\s+null$", re.I)),
    (
        "between",
        re.compile(
            rf"^(?P<col>\S+)\s+between\s+(?P<a>{_LITERAL})\s+and\s+(?P<b>{_LITERAL})$", re.I
        ),
    ),
    ("in", re.compile(r"^(?P<col>\S+)\s+in\s*\((?P<list>.*)\)$", re.I)),
    ("cmp", re.compile(rf"^(?P<col>\S+?)\s*(?P<op><=|>=|<|>|=)\s*(?P<a>{_LITERAL})$", re.I)),
]


def parse_predicate(text: str) -> Predicate:
    """``"col = 5"``, ``"col < 2.5"``, ``"day BETWEEN '2024-01-01' AND '2024-01-31'"``,
    ``"col IN (1, 2, 3)"``, ``"col IS NULL"``, ``"col IS NOT NULL"``: quoted constants are
    strings (dates, timestamps, decimals, text), others numbers or true/false."""
    stripped = text.strip()
    for kind, pattern in _PATTERNS:
        m = pattern.match(stripped)
        if m is None:
            continue
        column = m.group("col").strip('`"')
        if kind in ("is null", "is not null"):
            return Predicate(column, cast("Op", kind))
        if kind == "between":
            return Predicate(column, "between", (_literal(m.group("a")), _literal(m.group("b"))))
        if kind == "in":
            items = re.findall(_LITERAL, m.group("list"), re.I)
            if not items:
                break
            return Predicate(column, "in", tuple(_literal(i) for i in items))
        return Predicate(column, cast("Op", m.group("op")), (_literal(m.group("a")),))
    raise PredicateError(
        f"cannot read predicate {text!r}: use col = v, <, <=, >, >=, BETWEEN a AND b, "
        "IN (a, b), IS [NOT] NULL"
    )


def _literal(token: str) -> Any:
    if token.startswith("'"):
        return token[1:-1].replace("''", "'")
    if token.lower() in ("true", "false"):
        return token.lower() == "true"
    try:
        return int(token)
    except ValueError:
        pass
    try:
        return float(token)
    except ValueError:
        raise PredicateError(f"{token!r} is not a number") from None
