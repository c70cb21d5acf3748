"""Selectivity estimates from a stats document, the way a cost-based optimizer uses them.

``selectivity(doc, predicate)`` is pure: it reads one column of the ``show --json``
document (row and null counts, NDV, the equi-depth histogram) and returns the estimated
fraction of the table's rows that satisfy the predicate. ``lakestats.estimates`` builds on
it: a table's current stats read first, comparisons joined by AND.

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
  (``non-null rows / ndv`` per value; 0 outside a string column's exact [min, max]); a
  string column's frequent values count their own rows, the rest share the rows they do
  not hold (at most twice the sketch's maximum error each when the list is complete, so 0
  when every value was counted exactly); booleans from the true/false counts; ranges on it
  are a ``LakestatsError``.

Constants are given as Python values of the column's type or as their JSON form
(``"2024-01-31"`` for a date, ``"12.50"`` for a decimal), as ``show --json`` prints them;
on a number column (int, long, float, double, decimal) text is the number it writes, as the
same constant unquoted (``'10'`` is 10; on a float also ``'NaN'`` and ``'Infinity'``), and
text that writes none is a one-line error naming the column.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import re
from dataclasses import replace
from decimal import Decimal
from typing import Any

from lakestats.predicates import OPS, Op, Predicate, PredicateError, parse_predicate
from lakestats.render import column_names, described_rows
from lakestats.sketches.spec import decimal_precision_scale, no_histogram_reason, no_ndv_reason
from lakestats.values import from_json, holds_decimal, to_physical

__all__ = ["Op", "Predicate", "PredicateError", "order_key", "parse_predicate", "selectivity"]

_NUMERIC = ("int", "long", "float", "double", "date", "timestamp", "timestamptz")
# a number as text: digits with an optional sign, point and exponent ('10', '-1.5', '2e3')
_DIGITS = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[-+]?[0-9]+)?", re.I)
# a float's values that are no digits, as ``show --json`` prints them and Spark and DuckDB
# read them (any case)
_FLOAT_WORDS = {
    **dict.fromkeys(("infinity", "+infinity", "inf", "+inf"), math.inf),
    **dict.fromkeys(("-infinity", "-inf"), -math.inf),
    "nan": math.nan,
}


def selectivity(doc: dict[str, Any], predicate: Predicate) -> float:
    """Estimated fraction of the document's rows that satisfy ``predicate``, in [0, 1]."""
    column = doc["columns"].get(predicate.column)
    if column is None:
        known = column_names(list(doc["columns"]))
        raise PredicateError(f"no column {predicate.column!r} in the stats (columns: {known})")
    if predicate.op not in OPS:
        raise PredicateError(f"unknown operator {predicate.op!r}; one of {', '.join(OPS)}")
    predicate = _numbers_read(predicate, str(column.get("type")))
    total = float(described_rows(doc))  # what the column stats count: live rows
    if total <= 0:
        return 0.0
    if predicate.op in ("is null", "is not null") and column["null_count"] is None:
        raise PredicateError(
            f"column {predicate.column!r} has no null count (neither the table's metadata "
            "nor a sketch gave one): IS NULL and IS NOT NULL cannot be estimated"
        )
    nulls = float(column["null_count"] or 0)
    if predicate.op == "is null":
        return _clamp(nulls / total)
    if predicate.op == "is not null":
        return _clamp((total - nulls) / total)
    nans = float(column.get("nan_count") or 0)
    numbers, nan_rows = _apart_from_nan(predicate, str(column["type"]), nans)
    non_nan = total - nulls - nans
    if numbers is None or numbers is _EVERY_NUMBER:
        rows = 0.0 if numbers is None else non_nan
    else:
        rows = _rows(column, numbers, non_nan)
    return _clamp((rows + nan_rows) / total)


def _numbers_read(predicate: Predicate, type_str: str) -> Predicate:
    """A number column's constants given as text read as the numbers they write, as the
    same constants unquoted: ``price > '10'`` is ``price > 10`` (a float's ``'NaN'`` and
    ``'Infinity'`` too). Text that writes no number, or none the type has, is a one-line
    error naming the column and the text."""
    if not _holds_numbers(type_str):
        return predicate
    read: list[Any] = []
    for value in predicate.values:
        if not isinstance(value, str):
            read.append(value)
            continue
        where = f"column {predicate.column!r} is of type {type_str}"
        try:
            number = _number(value)
        except ValueError:
            raise PredicateError(f"{where}: {value!r} is not a number") from None
        if isinstance(number, float) and type_str not in ("float", "double"):
            raise PredicateError(f"{where}: {value!r} is a value of float and double columns only")
        if isinstance(number, Decimal) and not math.isfinite(float(number)):
            raise PredicateError(f"{where}: {value!r} is out of range")  # as 1e999 unquoted
        read.append(number)
    return replace(predicate, values=tuple(read))


def _holds_numbers(type_str: str) -> bool:
    return type_str in ("int", "long", "float", "double") or type_str.startswith("decimal")


def _number(text: str) -> Decimal | float:
    """The number ``text`` writes: digits exactly (``'10'``, ``'-1.5'``, ``'2e3'``, a
    decimal as ``show --json`` prints it) or a float's NaN and ±Infinity (``_FLOAT_WORDS``);
    ``ValueError`` for any other text."""
    written = text.strip().lower()
    if written in _FLOAT_WORDS:
        return _FLOAT_WORDS[written]
    if not _DIGITS.fullmatch(written):
        raise ValueError(f"{text!r} is not a number")
    return Decimal(written)


# what ``_apart_from_nan`` leaves of ``x < 'NaN'``: every value but NaN, known exactly
_EVERY_NUMBER = Predicate("", "is not null")


def _apart_from_nan(
    predicate: Predicate, type_str: str, nans: float
) -> tuple[Predicate | None, float]:
    """A float column's predicate as Spark evaluates it (so do DuckDB and PostgreSQL):
    NaN equals NaN and is above every other value. The comparison left for the non-NaN
    values (``None``: none of them match; ``_EVERY_NUMBER``: all) and the NaN rows that
    match."""
    if type_str not in ("float", "double"):
        return predicate, 0.0
    op, values = predicate.op, predicate.values
    is_nan = [_is_nan(v) for v in values]
    if not any(is_nan):
        return predicate, nans if op in (">", ">=") else 0.0
    if op in ("=", "in"):
        rest = tuple(v for v, nan in zip(values, is_nan, strict=True) if not nan)
        return (replace(predicate, values=rest) if rest else None), nans
    if op in ("<", "<="):  # every value is below NaN, NaN is at most itself
        return _EVERY_NUMBER, nans if op == "<=" else 0.0
    if op in (">", ">="):
        return None, nans if op == ">=" else 0.0
    low_nan, high_nan = is_nan  # between
    if low_nan:
        return None, nans if high_nan else 0.0
    return replace(predicate, op=">=", values=values[:1]), nans


def _is_nan(constant: Any) -> bool:
    if isinstance(constant, str):
        return constant.strip().lower() == "nan"
    return isinstance(constant, float | Decimal) and constant != constant  # noqa: PLR0124


def _rows(column: dict[str, Any], predicate: Predicate, non_null: float) -> float:
    type_str = str(column["type"])
    values = predicate.values
    expected = {"between": 2, "in": None}.get(predicate.op, 1)
    if expected is not None and len(values) != expected:
        raise PredicateError(f"{predicate.op} takes {expected} constant(s), got {len(values)}")
    if predicate.op in ("=", "in"):
        # 1.5 in an integer column, 0.125 in a decimal(10, 2): no row holds such a value
        values = tuple(v for v in values if _a_value_of(type_str, v))
        if not values:
            return 0.0
        predicate = replace(predicate, values=values)
    histogram = column.get("histogram")
    if not histogram:
        return _rows_without_histogram(column, predicate, non_null)
    frequent, lowers, unlisted_at_most = _frequent_values(column, type_str)
    buckets = _Buckets(
        type_str,
        histogram,
        frequent,
        unlisted_at_most,
        _frequent_counts_finer(column),
        frequent_lowers=lowers,
    )
    points = [_unit(type_str, v) for v in values]
    op = predicate.op
    if op in ("=", "in"):
        return buckets.equal_any(points)
    # ranges: rows <= x from the histogram, and the rows of x itself as that same
    # histogram counts them (not the frequent sketch's own count, which KLL's may differ
    # from by the two sketches' errors), so that < and <= differ by exactly x's rows
    if op == "<":
        return buckets.at_most(points[0]) - buckets.equal_within(points[0])
    if op == "<=":
        return buckets.at_most(points[0])
    if op == ">":
        return buckets.rows - buckets.at_most(points[0])
    if op == ">=":
        return buckets.rows - buckets.at_most(points[0]) + buckets.equal_within(points[0])
    low, high = points  # between, inclusive
    if low > high:
        return 0.0
    return buckets.at_most(high) - buckets.at_most(low) + buckets.equal_within(low)


def _rows_without_histogram(column: dict[str, Any], predicate: Predicate, non_null: float) -> float:
    if column.get("true_count") is not None and predicate.op in ("=", "in"):
        wanted = {_bool(v) for v in predicate.values}
        return sum(float(column["true_count" if v else "false_count"] or 0) for v in wanted)
    if predicate.op not in ("=", "in"):
        why = no_histogram_reason(str(column["type"]))
        # say what can be estimated on this column: = and IN need an NDV (or, for a
        # boolean, its true/false counts), as below
        equality = column.get("ndv") or column.get("true_count") is not None
        other = "=, IN and IS [NOT] NULL" if equality else "IS [NOT] NULL"
        raise PredicateError(
            f"column {predicate.column!r} has no histogram ({why}): only {other} can be estimated"
        )
    ndv = column.get("ndv")
    if non_null <= 0:
        return 0.0
    values = set(predicate.values)
    bounds = _exact_string_bounds(column)
    if bounds is not None:
        values = {v for v in values if not isinstance(v, str) or bounds[0] <= v <= bounds[1]}
        if not values:
            return 0.0  # every constant is outside [min, max]
    listed, unlisted_at_most = _frequent_strings(column, non_null)
    rows = sum(listed[v] for v in values if v in listed)
    unlisted = len([v for v in values if v not in listed])
    if not unlisted:
        return rows
    if unlisted_at_most == 0:
        return rows  # every value is listed with its exact count: these have no row
    if not ndv:  # every row would be a bound, not an estimate
        why = no_ndv_reason(str(column["type"]))
        raise PredicateError(
            f"column {predicate.column!r} has no NDV ({why}): = and IN cannot be estimated"
        )
    # no theta sketch counts the empty string or binary (Iceberg's convention: an empty
    # buffer is not hashed); an exact min of "" (a binary's hex too) or a listed "" says
    # the column holds one value more than its NDV
    empty_min = column.get("min_max_exact") and column.get("min") == ""
    holds_empty = bool(empty_min and column.get("type") in ("string", "binary")) or "" in listed
    distinct = float(ndv) + (1.0 if holds_empty else 0.0)
    # the rows no listed value holds, over the values not listed (the plain NDV estimate
    # without frequent values), each at most what an unlisted value can have
    rest_rows = max(0.0, non_null - sum(listed.values()))
    each = rest_rows / max(1.0, distinct - len(listed))
    if unlisted_at_most is not None:
        each = min(each, unlisted_at_most)
    return min(non_null, rows + min(rest_rows, each * unlisted))


def _frequent_strings(
    column: dict[str, Any], non_null: float
) -> tuple[dict[Any, float], float | None]:
    """A string column's frequent values (value → rows) and, when that list is complete,
    the most rows a value not on it can have (twice the sketch's maximum error); other
    columns without a histogram have none. Counts of a sketch that saw only some of the
    rows (files not sketched) are scaled up to all of them, with no cap."""
    if column.get("type") != "string":
        return {}, None
    info = (column.get("sketch") or {}).get("frequent_items") or {}
    listed = {f["value"]: float(f["count"]) for f in column.get("frequent_values") or []}
    seen = float(info.get("rows") or 0)
    if not listed or not seen:
        return {}, None
    if seen < non_null:
        return {value: count * non_null / seen for value, count in listed.items()}, None
    return listed, _unlisted_at_most(column)


def _exact_string_bounds(column: dict[str, Any]) -> tuple[str, str] | None:
    """A string column's min and max when they are exact (not cut by the writer): Python
    orders str by code point, as Spark and Iceberg order strings by their UTF-8 bytes."""
    low, high = column.get("min"), column.get("max")
    if column.get("type") != "string" or not column.get("min_max_exact"):
        return None
    if not isinstance(low, str) or not isinstance(high, str):
        return None
    return low, high


def _frequent_values(
    column: dict[str, Any], type_str: str
) -> tuple[dict[float, float], dict[float, float], float | None]:
    """The column's frequent values (KLL units → rows), the rows each surely has (its
    ``count_lower``) and, when that list is complete, the most rows a value not on it can
    have (twice the sketch's maximum error)."""
    listed = column.get("frequent_values") or []
    counts = {_unit(type_str, f["value"]): float(f["count"]) for f in listed}
    lowers = {
        _unit(type_str, f["value"]): float(f["count_lower"])
        for f in listed
        if f.get("count_lower") is not None
    }
    return counts, lowers, _unlisted_at_most(column)


def _unlisted_at_most(column: dict[str, Any]) -> float | None:
    """When the column's frequent list is complete, the most rows a value not on it can
    have: twice the sketch's maximum error."""
    info = (column.get("sketch") or {}).get("frequent_items") or {}
    return 2.0 * float(info["maximum_error"]) if info.get("complete") else None


def _frequent_counts_finer(column: dict[str, Any]) -> bool:
    """Whether the frequent values' counts are more precise than the histogram's bucket
    counts (their maximum error at most the KLL bucket-count error)."""
    frequent = (column.get("sketch") or {}).get("frequent_items") or {}
    quantiles = (column.get("sketch") or {}).get("quantiles") or {}
    if frequent.get("maximum_error") is None or quantiles.get("bucket_count_error") is None:
        return False
    return float(frequent["maximum_error"]) <= float(quantiles["bucket_count_error"])


class _Buckets:
    """A histogram in KLL units with its cumulative rows and the column's frequent values.

    A frequent value inside a bucket that holds more than one value is counted by its own
    count (within the frequent-items sketch's maximum error); the bucket's other rows
    (its count minus the listed counts) are spread over its other distinct values (its NDV
    minus the listed values), evenly spaced up to its upper bound. Without frequent values
    that is the plain histogram: rows / ndv per value. A bucket never holds fewer rows than
    its listed values surely have (``_lift_to_listed_lower_bounds``).
    """

    def __init__(
        self,
        type_str: str,
        histogram: list[dict[str, Any]],
        frequent: dict[float, float] | None = None,
        unlisted_at_most: float | None = None,
        frequent_counts_finer: bool = False,
        *,
        frequent_lowers: dict[float, float] | None = None,
    ) -> None:
        self.lowers = [_unit(type_str, b["lower"]) for b in histogram]
        self.uppers = [_unit(type_str, b["upper"]) for b in histogram]
        self.counts = [float(b["count"]) for b in histogram]
        self.ndvs = [None if b.get("ndv") is None else float(b["ndv"]) for b in histogram]
        self.cuts = [[_unit(type_str, c) for c in b.get("ndv_cuts") or ()] for b in histogram]
        self.count_cuts = [
            [_unit(type_str, c) for c in b.get("count_cuts") or ()] for b in histogram
        ]
        self.step = _step(type_str)
        self.frequent = frequent or {}
        if frequent_counts_finer:
            self._recount_hot_buckets()
        self._lift_to_listed_lower_bounds(frequent_lowers or {})
        self.rows = sum(self.counts)
        self.unlisted_at_most = unlisted_at_most
        # per bucket: the listed values inside it, ascending, with their counts scaled so
        # that they never add up to more than the bucket's count (KLL and the frequent
        # sketch count independently); what is left for the bucket's other values
        self.listed: list[list[tuple[float, float]]] = [[] for _ in histogram]
        for value, count in sorted(self.frequent.items()):
            j = self._bucket(value)
            if j is not None and self._distinct(j) > 1:
                self.listed[j].append((value, count))
        self.rest_rows = list(self.counts)
        self.rest_ndvs: list[float | None] = list(self.ndvs)
        for j, listed in enumerate(self.listed):
            if not listed:
                continue
            total = sum(c for _, c in listed)
            scale = min(1.0, self.counts[j] / total) if total > 0 else 1.0
            self.listed[j] = [(v, c * scale) for v, c in listed]
            self.rest_rows[j] = max(0.0, self.counts[j] - total * scale)
            self.rest_ndvs[j] = max(1.0, self._distinct(j) - len(listed))

    def _recount_hot_buckets(self) -> None:
        """Give each run of adjacent one-value buckets whose values are listed their
        frequent counts (finer than KLL's) and take the difference from the buckets on
        either side of the run: KLL's error in a hot bucket's count is the rank error at
        its two bounds, which moves rows between it and its neighbours."""
        hot = [
            self._distinct(j) <= 1 and self.uppers[j] in self.frequent
            for j in range(len(self.counts))
        ]
        j = 0
        while j < len(hot):
            if not hot[j]:
                j += 1
                continue
            end = j
            while end + 1 < len(hot) and hot[end + 1]:
                end += 1
            delta = 0.0
            for i in range(j, end + 1):
                delta += self.frequent[self.uppers[i]] - self.counts[i]
                self.counts[i] = self.frequent[self.uppers[i]]
            self._take_beside(j, end, delta)
            j = end + 1

    def _lift_to_listed_lower_bounds(self, lowers: dict[float, float]) -> None:
        """Give each bucket at least the rows its listed values surely have (their lower
        bounds: the frequent-items sketch guarantees them, KLL's count holds at ~99 %
        confidence), taking the difference from the buckets on either side, down to what
        their own listed values surely have: KLL's error moves rows across bounds."""
        floors = [0.0] * len(self.counts)
        for value, lower in lowers.items():
            j = self._bucket(value)
            if j is not None:
                floors[j] += lower
        for j, floor in enumerate(floors):
            if floor > self.counts[j]:
                delta, self.counts[j] = floor - self.counts[j], floor
                self._take_beside(j, j, delta, floors)

    def _take_beside(
        self, first: int, last: int, delta: float, floors: list[float] | None = None
    ) -> None:
        """Take ``delta`` rows given to buckets ``first`` … ``last`` from the buckets on
        either side, evenly, none below its floor (0 without ``floors``). A negative
        ``delta`` (the buckets held more than their values' counts) is given back in
        proportion to the sides' rows: KLL's rank error moved rows from where they are,
        not into a bucket that has none (a one-row minimum counted 0 beside a hot value
        would take half of that value's surplus)."""
        sides = [i for i in (first - 1, last + 1) if 0 <= i < len(self.counts)]
        if delta < 0 and sides:
            held = sum(self.counts[i] for i in sides)
            for i in sides:
                share = self.counts[i] / held if held > 0 else 1.0 / len(sides)
                self.counts[i] -= delta * share
            return
        for n, i in enumerate(sides):
            share = delta / (len(sides) - n)  # what is left, over the sides left
            taken = min(share, max(0.0, self.counts[i] - (floors[i] if floors else 0.0)))
            self.counts[i] -= taken
            delta -= taken

    def _holds(self, j: int, x: float) -> bool:
        if j == 0:
            return self.lowers[0] <= x <= self.uppers[0]
        return self.lowers[j] < x <= self.uppers[j]

    def _bucket(self, x: float) -> int | None:
        """The bucket holding ``x`` (bounds ascend: the first whose upper is >= x)."""
        j = bisect.bisect_left(self.uppers, x)
        return j if j < len(self.uppers) and self._holds(j, x) else None

    def _distinct(self, j: int) -> float:
        ndv = self.ndvs[j]
        return max(1.0, self._values(j) if ndv is None else ndv)

    def at_most(self, x: float) -> float:
        """Rows with a value <= x."""
        j = bisect.bisect_right(self.uppers, x)  # buckets 0 .. j-1 lie wholly at or below x
        rows = sum(self.counts[:j])
        if j < len(self.counts) and self._holds(j, x):
            # where the bucket's rows lie (listed ones included); the first bucket's
            # minimum itself is one of its values, counted as below
            if self.count_cuts[j] and x > self.lowers[j]:
                return rows + self._by_count_cuts(j, x)
            rows += sum(c for v, c in self.listed[j] if v <= x)
            rows += self.rest_rows[j] * self._share(j, x)
        return rows

    def _by_count_cuts(self, j: int, x: float) -> float:
        """Rows of bucket ``j`` at or below ``x`` by its KLL cuts (``count_cuts``), its
        listed values counted as the points they are. Linear between the cuts, a listed
        value's rows would be smeared over the piece holding it (a value holding 78 % of
        a bucket, just below it); so the cuts give the unlisted rows only — their rows at
        or below ``x`` minus the listed ones, never decreasing in ``x`` (the most reached
        just before each listed value) and within the bucket's unlisted rows."""
        lower, upper, cuts = self.lowers[j], self.uppers[j], self.count_cuts[j]
        listed = self.listed[j]
        if not listed:
            return self.counts[j] * _share_by(lower, upper, cuts, x)

        def unlisted(y: float, *, inclusive: bool = True) -> float:
            rows = self.counts[j] * _share_by(lower, upper, cuts, y, inclusive=inclusive)
            return rows - sum(c for v, c in listed if v < y or (inclusive and v == y))

        reached = max([unlisted(x), *(unlisted(v, inclusive=False) for v, _ in listed if v <= x)])
        below = sum(c for v, c in listed if v <= x)
        return below + min(self.rest_rows[j], max(0.0, reached))

    def _share(self, j: int, x: float) -> float:
        """The share of bucket ``j``'s unlisted rows whose value is <= x (lower < x <
        upper, or lower <= x for the first bucket). Its unlisted distinct values are taken
        as evenly spaced up to ``upper`` (a value that exists): a single-value bucket has
        none below its upper bound. Without an NDV, values spread evenly over the range."""
        lower, upper, first = self.lowers[j], self.uppers[j], j == 0
        if upper <= lower:
            return 1.0
        fraction = _share_by(lower, upper, self.cuts[j], x)
        ndv = self.rest_ndvs[j]
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
        """Rows with the value x: a frequent value's count, else its bucket's unlisted
        rows over its unlisted distinct values (at most what an unlisted value can have
        when the frequent list is complete); 0 outside the histogram."""
        if x in self.frequent:
            return self.frequent[x]
        j = self._bucket(x)
        if j is None:
            return 0.0
        guess = self._unlisted_each(j)
        return guess if self.unlisted_at_most is None else min(guess, self.unlisted_at_most)

    def equal_within(self, x: float) -> float:
        """Rows with the value x as ``at_most`` counts them: a listed value's (scaled)
        count, a one-value bucket's count, else the bucket's unlisted rows per unlisted
        value; never more than ``at_most(x)`` minus the rows of the buckets below."""
        j = self._bucket(x)
        if j is None:
            return 0.0
        each = next((count for value, count in self.listed[j] if value == x), None)
        if each is None:
            each = self._unlisted_each(j)
            if self.unlisted_at_most is not None and self._distinct(j) > 1:
                each = min(each, self.unlisted_at_most)
        return max(0.0, min(each, self.at_most(x) - sum(self.counts[:j])))

    def _unlisted_each(self, j: int) -> float:
        ndv = self.rest_ndvs[j]
        if ndv is None:
            ndv = max(1.0, self._values(j))
        return self.rest_rows[j] / max(ndv, 1.0)

    def equal_any(self, points: list[float]) -> float:
        """Rows with any of the values: the sum of ``equal`` over the distinct values, the
        unlisted ones of a bucket at most its unlisted rows."""
        rows = 0.0
        unlisted: dict[int, float] = {}
        for x in set(points):
            j = None if x in self.frequent else self._bucket(x)
            if j is None:
                rows += self.equal(x)
            else:
                unlisted[j] = unlisted.get(j, 0.0) + self.equal(x)
        return rows + sum(min(r, self.rest_rows[j]) for j, r in unlisted.items())

    def _values(self, j: int) -> float:
        if self.step is None:
            return self.counts[j]
        return (self.uppers[j] - self.lowers[j]) / self.step + (1 if j == 0 else 0)


def _share_by(
    lower: float, upper: float, cuts: list[float], x: float, *, inclusive: bool = True
) -> float:
    """The share of a bucket's distinct values (``ndv_cuts``) or rows (``count_cuts``)
    <= x (``inclusive``; else < x): linear between the cuts (``len(cuts) + 1`` equal
    parts), and over the whole range without them."""
    points = [lower, *cuts, upper]
    # points[piece] <= x < points[piece + 1]: equal cuts (a value holding more than one
    # part) all count as at or below x — or, not inclusive, all as above it
    where = bisect.bisect_right if inclusive else bisect.bisect_left
    piece = where(points, x, 1, len(points) - 1) - 1
    left, right = points[piece], points[piece + 1]
    within = (x - left) / (right - left) if right > left else 1.0
    return (piece + min(1.0, max(0.0, within))) / (len(points) - 1)


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
        if isinstance(value, str) and _holds_numbers(type_str):
            value = _number(value)  # a bound as show --json prints it, or a constant's text
        elif isinstance(value, str) or value is None:
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


def _a_value_of(type_str: str, constant: Any) -> bool:
    """Whether a column of ``type_str`` can hold ``constant``: False for a fraction in an
    integer column and for digits past a decimal's scale or precision; True for anything
    else, which ``_unit`` reads or refuses."""
    integer = type_str in ("int", "long")
    if not integer and not type_str.startswith("decimal"):
        return True
    try:
        number = Decimal(str(constant))
    except ArithmeticError:
        return True
    if not number.is_finite():
        return False
    if integer:
        return number == number.to_integral_value()
    return holds_decimal(number, *decimal_precision_scale(type_str))


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise PredicateError(f"{value!r} is not a boolean")


def _clamp(fraction: float) -> float:
    return min(1.0, max(0.0, fraction))


def order_key(type_str: str, value: Any) -> Any:
    """A constant as the column's type orders it: booleans as booleans; numbers, dates,
    decimals and timestamps on the KLL number line; strings as given."""
    if type_str == "boolean":
        return _bool(value)
    if type_str in _NUMERIC or type_str.startswith(("decimal", "timestamp")):
        return _unit(type_str, value)
    return value
