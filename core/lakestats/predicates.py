"""Predicates as text: one column compared with constants, and conjunctions of them.

``parse_predicate("price BETWEEN 10 AND 20")`` reads one comparison;
``parse_conjunction("region = 'emea' AND price < 10")`` reads comparisons joined by ``AND``
(the ``AND`` of a ``BETWEEN`` and any inside quotes belong to their comparison). A column
is its name as written (no spaces, not starting with a quote: ``a.b``, ``ünï``) or, for
any other name (spaces, a word such as ``AND``), in double quotes or backticks with that
quote doubled inside, as SQL and Spark quote identifiers (``"my col"``, `` `AND` ``,
``"a""b"`` for a"b). Quoted constants are strings (dates, timestamps, decimals, text, as
``show --json`` prints them; SQL's ``DATE '…'`` and ``TIMESTAMP '…'`` too; the column's
type reads them, ``'10'`` on a number column as 10), others numbers or true/false. Every
reading failure is a one-line ``PredicateError`` that quotes the text; nothing is guessed
(an ``IN`` list is constants and commas, no more).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal, cast

from lakestats.exceptions import LakestatsError

Op = Literal["=", "<", "<=", ">", ">=", "between", "in", "is null", "is not null"]
OPS: tuple[str, ...] = ("=", "<", "<=", ">", ">=", "between", "in", "is null", "is not null")
RANGE_OPS = ("<", "<=", ">", ">=", "between")


class PredicateError(LakestatsError):
    """A predicate that cannot be estimated: unknown column, wrong constants, no histogram."""


@dataclass(frozen=True)
class Predicate:
    """``column op values``: one constant for comparisons, two for ``between`` (low, high,
    both inclusive), any number for ``in``, none for ``is null`` / ``is not null``."""

    column: str
    op: Op
    values: tuple[Any, ...] = ()


# SQL's typed literals (DATE '2024-01-31', TIMESTAMP '2024-01-31 10:00:00') read as their
# quoted text: the column's type decides what a constant is, as for a bare quoted one
_TYPED = r"(?:date|timestamp(?:_ntz|_ltz)?)\s*"
_LITERAL = rf"""(?:(?:{_TYPED})?'(?:[^']|'')*'|[-+]?[0-9.eE+-]+|true|false)"""
_LIST = re.compile(rf"^\s*{_LITERAL}\s*(?:,\s*{_LITERAL}\s*)*$", re.I)
# a quoted column: any characters between double quotes or backticks, that quote doubled
_QUOTED_COLUMN = r'"(?:[^"]|"")+"|`(?:[^`]|``)+`'
# a column as written: quoted, or a name without spaces that does not start with a quote
# (``\S*?`` for comparisons: ``price<=2.5``)
_COLUMN = rf"(?P<col>{_QUOTED_COLUMN}|[^\s\"`]\S*)"
_COLUMN_BEFORE_OP = rf"(?P<col>{_QUOTED_COLUMN}|[^\s\"`]\S*?)"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("is not null", re.compile(rf"^{_COLUMN}\s+is\s+not\s+null$", re.I)),
    ("is null", re.compile(rf"^{_COLUMN}\s+is\s+null$", re.I)),
    (
        "between",
        re.compile(rf"^{_COLUMN}\s+between\s+(?P<a>{_LITERAL})\s+and\s+(?P<b>{_LITERAL})$", re.I),
    ),
    ("in", re.compile(rf"^{_COLUMN}\s+in\s*\((?P<list>.*)\)$", re.I)),
    (
        "cmp",
        re.compile(rf"^{_COLUMN_BEFORE_OP}\s*(?P<op><=|>=|<|>|=)\s*(?P<a>{_LITERAL})$", re.I),
    ),
]
# what splitting a conjunction looks at: quoted strings and quoted columns (skipped whole;
# a column's quote opens only where a word starts, so ``a"b = 1`` stays a name), BETWEEN, AND
_CONJUNCTION_TOKENS = re.compile(
    rf"'(?:[^']|'')*'|(?<!\S)(?:{_QUOTED_COLUMN})|\bbetween\b|\band\b", re.I
)


def parse_predicate(text: str) -> Predicate:
    """``"col = 5"``, ``"col < 2.5"``, ``"day BETWEEN '2024-01-01' AND '2024-01-31'"``,
    ``"col IN (1, 2, 3)"``, ``"col IS NULL"``, ``"col IS NOT NULL"``."""
    stripped = text.strip()
    for kind, pattern in _PATTERNS:
        m = pattern.match(stripped)
        if m is None:
            continue
        column = _column(m.group("col"))
        if kind in ("is null", "is not null"):
            return Predicate(column, cast("Op", kind))
        if kind == "between":
            return Predicate(column, "between", (_literal(m.group("a")), _literal(m.group("b"))))
        if kind == "in":
            if not _LIST.match(m.group("list")):
                break
            items = re.findall(_LITERAL, m.group("list"), re.I)
            return Predicate(column, "in", tuple(_literal(i) for i in items))
        return Predicate(column, cast("Op", m.group("op")), (_literal(m.group("a")),))
    raise PredicateError(
        f"cannot read predicate {text!r}: use col = v, <, <=, >, >=, BETWEEN a AND b, "
        "IN (a, b), IS [NOT] NULL, joined by AND; quote a column named with spaces or a keyword "
        'as "my col"'
    )


def parse_conjunction(text: str) -> tuple[Predicate, ...]:
    """The comparisons of ``"a AND b AND …"``, in order (one for a single comparison)."""
    return tuple(parse_predicate(part) for part in split_conjunction(text))


def split_conjunction(text: str) -> list[str]:
    """``text`` cut at each ``AND`` that joins two comparisons: not a ``BETWEEN``'s, not
    one inside quotes (a string constant's or a quoted column's). An empty part (``"a AND"``)
    is an error."""
    parts: list[str] = []
    start, between_open = 0, False
    for token in _CONJUNCTION_TOKENS.finditer(text):
        word = token.group().lower()
        if word == "between":
            between_open = True
        elif word == "and":
            if between_open:
                between_open = False
            else:
                parts.append(text[start : token.start()])
                start = token.end()
    parts.append(text[start:])
    if any(not part.strip() for part in parts):
        raise PredicateError(f"cannot read predicate {text!r}: AND needs a comparison each side")
    return [part.strip() for part in parts]


def _column(written: str) -> str:
    """A column as written: a quoted one without its quotes, a doubled quote inside as one."""
    quote = written[0]
    if quote in '"`':
        return written[1:-1].replace(quote * 2, quote)
    return written


def _literal(token: str) -> Any:
    token = re.sub(rf"^{_TYPED}(?=')", "", token, flags=re.I)
    if token.startswith("'"):
        return token[1:-1].replace("''", "'")
    if token.lower() in ("true", "false"):
        return token.lower() == "true"
    try:
        return int(token)
    except ValueError:
        pass
    try:
        number = float(token)
    except ValueError:
        raise PredicateError(f"{token!r} is not a number") from None
    if not math.isfinite(number):  # 1e999: no column holds it, and JSON cannot carry it
        raise PredicateError(f"{token!r} is out of range")
    return number
