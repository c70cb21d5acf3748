"""Estimated rows of a table's predicates, from its stats document (``lakestats.estimate``).

A predicate is one column compared with constants, or several joined by ``AND``
(``lakestats.predicates``). One comparison is estimated by the model of
``lakestats.selectivity``. Comparisons on one column are combined as that model counts one
range or one set of values: the tightest lower and upper bounds (``x > 5 AND x <= 9``: the
rows between them, as BETWEEN counts them), the constants every comparison admits (``x IN
(1, 5) AND x > 2`` is ``x = 5``), nothing for IS NULL and a comparison. Comparisons on
different columns are taken as independent and their fractions multiplied, as cost-based
optimizers do without column-group statistics; the answer says when it did
(``independent_columns``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakestats.predicates import RANGE_OPS, Predicate, PredicateError, parse_conjunction
from lakestats.render import described_rows
from lakestats.selectivity import order_key, selectivity
from lakestats.tables import ConfigLike, TableLike


@dataclass(frozen=True)
class Estimate:
    rows: float  # estimated rows satisfying the predicate
    selectivity: float  # rows / the table's rows
    table_rows: int  # after row-level deletes where known (``render.described_rows``)


def estimate(
    table: TableLike,
    predicate: Predicate | Sequence[Predicate] | str,
    *,
    config: ConfigLike = None,
    snapshot_id: int | None = None,
) -> Estimate:
    """Estimated rows of ``table`` satisfying ``predicate`` (a ``Predicate``, several joined
    by AND, or text such as ``"price BETWEEN 10 AND 20 AND region = 'emea'"``), from its
    current (or ``snapshot_id``'s) stats."""
    from lakestats.read import read_stats  # noqa: PLC0415 - keeps this module pure to import

    doc = read_stats(table, config=config, snapshot_id=snapshot_id)
    return estimate_from(doc, predicate)


def estimate_from(
    doc: dict[str, Any], predicate: Predicate | Sequence[Predicate] | str
) -> Estimate:
    """``estimate`` over a stats document already read (pure)."""
    if isinstance(predicate, str):
        predicates = parse_conjunction(predicate)
    elif isinstance(predicate, Predicate):
        predicates = (predicate,)
    else:
        predicates = tuple(predicate)
    fraction = conjunction_selectivity(doc, predicates)
    rows = described_rows(doc)
    return Estimate(rows=fraction * rows, selectivity=fraction, table_rows=rows)


def estimate_json(doc: dict[str, Any], predicate: str) -> dict[str, Any]:
    """One predicate's estimate as ``lakestats estimate --json`` and ``GET
    /v1/tables/{name}/estimate`` print it: the text as given, its comparisons as read
    (``terms``, each with its own selectivity), whether columns were taken as independent,
    the rows and the fraction of the table's rows. A ``PredicateError`` names the text."""
    try:
        terms = parse_conjunction(predicate)
        each = [selectivity(doc, term) for term in terms]
        fraction = _combine(doc, terms, each)
    except PredicateError as exc:
        message = str(exc)
        raise PredicateError(
            message if repr(predicate) in message else f"{predicate!r}: {message}"
        ) from None
    return {
        "predicate": predicate,
        "terms": [
            {"column": t.column, "op": t.op, "values": list(t.values), "selectivity": f}
            for t, f in zip(terms, each, strict=True)
        ],
        "independent_columns": len({t.column for t in terms}) > 1,
        "rows": fraction * described_rows(doc),
        "selectivity": fraction,
    }


def conjunction_selectivity(doc: dict[str, Any], predicates: Sequence[Predicate]) -> float:
    """The fraction of rows satisfying every predicate. The predicates on one column are
    combined as the model counts one range or one value set (the tightest bounds, the
    constants every predicate admits); different columns are taken as independent, their
    fractions multiplied, as cost-based optimizers do without column-group statistics."""
    if not predicates:
        raise PredicateError("no predicate given")
    # each one alone must be valid (the same errors), and its fraction serves below
    return _combine(doc, predicates, [selectivity(doc, p) for p in predicates])


def _combine(doc: dict[str, Any], predicates: Sequence[Predicate], alone: list[float]) -> float:
    """``conjunction_selectivity`` given each predicate's fraction ``alone`` (in order)."""
    by_column: dict[str, list[tuple[Predicate, float]]] = {}
    for predicate, fraction in zip(predicates, alone, strict=True):
        by_column.setdefault(predicate.column, []).append((predicate, fraction))
    combined = 1.0
    for same in by_column.values():
        combined *= _one_column(doc, same)
    return min(1.0, max(0.0, combined))


def _one_column(doc: dict[str, Any], measured: list[tuple[Predicate, float]]) -> float:
    """Predicates on one column, ANDed: a null satisfies only IS NULL; IS NOT NULL adds
    nothing to a comparison; constants (=, IN) are kept where every other predicate admits
    them; ranges meet in their tightest lower and upper bound."""
    column = measured[0][0].column
    ops = {p.op for p, _ in measured}
    if "is null" in ops:
        return measured[0][1] if ops == {"is null"} else 0.0
    kept = [(p, f) for p, f in measured if p.op != "is not null"]
    if not kept:
        return measured[0][1]
    if len(kept) == 1:
        return kept[0][1]
    compared = [p for p, _ in kept]
    type_str = str(doc["columns"][column]["type"])
    points = [p for p in compared if p.op in ("=", "in")]
    ranges = [p for p in compared if p.op in RANGE_OPS]
    lower, upper = _tightest(type_str, ranges)
    if points:
        admitted = _admitted(type_str, points, lower, upper)
        return selectivity(doc, Predicate(column, "in", admitted)) if admitted else 0.0
    if lower is None or upper is None:
        bound = lower or upper
        assert bound is not None  # ranges holds two or more
        return selectivity(doc, bound)
    low, high = order_key(type_str, lower.values[0]), order_key(type_str, upper.values[0])
    if low > high or (low == high and (lower.op == ">" or upper.op == "<")):
        return 0.0
    # (x >= a) less (x > b), which (x >= a) holds whole when a <= b: in the histogram's
    # terms exactly what BETWEEN a AND b counts
    beyond = Predicate(column, ">=" if upper.op == "<" else ">", upper.values)
    return max(0.0, selectivity(doc, lower) - selectivity(doc, beyond))


def _admitted(
    type_str: str, points: list[Predicate], lower: Predicate | None, upper: Predicate | None
) -> tuple[Any, ...]:
    """The constants of the first ``=``/``IN`` that every other one lists and the bounds
    admit (the first spelling of each kept, in order)."""
    keyed = {order_key(type_str, v): v for v in points[0].values}
    for other in points[1:]:
        keys = {order_key(type_str, v) for v in other.values}
        keyed = {k: v for k, v in keyed.items() if k in keys}
    kept = []
    for key, value in keyed.items():
        if lower is not None and not _above(key, order_key(type_str, lower.values[0]), lower.op):
            continue
        if upper is not None and not _below(key, order_key(type_str, upper.values[0]), upper.op):
            continue
        kept.append(value)
    return tuple(kept)


def _tightest(type_str: str, ranges: list[Predicate]) -> tuple[Predicate | None, Predicate | None]:
    """The tightest lower bound (``>``/``>=``) and upper bound (``<``/``<=``) of ``ranges``,
    a BETWEEN counting as both (inclusive); at equal constants the strict one."""
    lowers: list[Predicate] = []
    uppers: list[Predicate] = []
    for p in ranges:
        if p.op == "between":
            lowers.append(Predicate(p.column, ">=", p.values[:1]))
            uppers.append(Predicate(p.column, "<=", p.values[1:]))
        elif p.op in (">", ">="):
            lowers.append(p)
        else:
            uppers.append(p)
    lower = max(lowers, key=lambda p: (order_key(type_str, p.values[0]), p.op == ">"), default=None)
    upper = min(
        uppers, key=lambda p: (order_key(type_str, p.values[0]), p.op == "<="), default=None
    )
    return lower, upper


def _above(key: Any, bound: Any, op: str) -> bool:
    return bool(key > bound if op == ">" else key >= bound)


def _below(key: Any, bound: Any, op: str) -> bool:
    return bool(key < bound if op == "<" else key <= bound)
