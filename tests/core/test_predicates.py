"""Reading predicates (``lakestats.predicates``): comparisons, and conjunctions cut at the
ANDs that join comparisons — never at a BETWEEN's, never inside quotes (a constant's or a
quoted column's); lists read strictly; a quoted column holds any characters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakestats.predicates import (
    Predicate,
    PredicateError,
    parse_conjunction,
    parse_predicate,
    split_conjunction,
)


def test_conjunctions_are_cut_at_the_ands_that_join_comparisons() -> None:
    assert parse_conjunction("a BETWEEN 1 AND 2 AND b = 3") == (
        Predicate("a", "between", (1, 2)),
        Predicate("b", "=", (3,)),
    )
    assert parse_conjunction("mode = 'SAND AND SEA' and x between 'a and b' and 'c'") == (
        Predicate("mode", "=", ("SAND AND SEA",)),
        Predicate("x", "between", ("a and b", "c")),
    )
    assert parse_conjunction("x IN (1) AND y IN (2, 3)") == (
        Predicate("x", "in", (1,)),
        Predicate("y", "in", (2, 3)),
    )
    assert parse_conjunction("band = 1 AND brand_and = 2") == (
        Predicate("band", "=", (1,)),
        Predicate("brand_and", "=", (2,)),
    )
    assert parse_conjunction("  price IS NOT NULL  ") == (Predicate("price", "is not null"),)


def test_sql_typed_literals_read_as_their_text() -> None:
    """DATE '…' and TIMESTAMP '…' (any case, with or without a space) are the quoted text:
    the column's type reads it, as a bare quoted constant."""
    assert parse_conjunction(
        "d = DATE '2024-01-31' AND t BETWEEN timestamp '2024-01-01 00:00:00' AND "
        "TIMESTAMP_NTZ'2024-02-01' AND d IN (date '2024-01-01', '2024-01-02')"
    ) == (
        Predicate("d", "=", ("2024-01-31",)),
        Predicate("t", "between", ("2024-01-01 00:00:00", "2024-02-01")),
        Predicate("d", "in", ("2024-01-01", "2024-01-02")),
    )
    for text in ("d = DATE 5", "d = DATE", "d = DAY '2024-01-01'"):
        with pytest.raises(PredicateError, match="cannot read predicate"):
            parse_predicate(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = 1 AND", "AND needs a comparison each side"),
        ("AND a = 1", "AND needs a comparison each side"),
        ("a = 1 AND AND b = 2", "AND needs a comparison each side"),
        ("x IN (1, abc)", "cannot read predicate"),  # was read as x IN (1)
        ("x IN ()", "cannot read predicate"),
        ("x IN (1,,2)", "cannot read predicate"),
        ("a = 1 OR b = 2", "cannot read predicate"),
        ("x = 1e999", "out of range"),
        ("my col < 5", 'quote a column named with spaces or a keyword as "my col"'),
        ('"" = 1', "cannot read predicate"),  # a quoted column has a name
        ('"my col < 5', "cannot read predicate"),  # and its closing quote
        ('"a"b" = 1', "cannot read predicate"),
        ("`a` b = 1", "cannot read predicate"),
        ("AND < 5", "AND needs a comparison each side"),  # a keyword, unquoted
    ],
)
def test_what_cannot_be_read_is_one_line_quoting_it(text: str, message: str) -> None:
    with pytest.raises(PredicateError, match=message) as caught:
        parse_conjunction(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"my col" < 5', [Predicate("my col", "<", (5,))]),
        ("`my col` < 5", [Predicate("my col", "<", (5,))]),
        ('"my col"<=5', [Predicate("my col", "<=", (5,))]),
        ('"AND" < 5', [Predicate("AND", "<", (5,))]),  # was cut at the AND: '"'
        ("`and` = 1 AND x = 2", [Predicate("and", "=", (1,)), Predicate("x", "=", (2,))]),
        (
            '"between" = 1 AND `x AND y` BETWEEN 1 AND 2',
            [Predicate("between", "=", (1,)), Predicate("x AND y", "between", (1, 2))],
        ),
        (
            '"q""uo\'te" IN (1, 2) AND `a``b` IS NULL AND " " IS NOT NULL',
            [
                Predicate("q\"uo'te", "in", (1, 2)),
                Predicate("a`b", "is null"),
                Predicate(" ", "is not null"),
            ],
        ),
        (
            "\"'\" = 'AND \"' AND `\"` = '`'",
            [Predicate("'", "=", ('AND "',)), Predicate('"', "=", ("`",))],
        ),
        # unquoted names read as before: any characters but spaces, a quote inside too
        (
            "a\"b = 1 AND ünï < 2 AND a.b = 's'",
            [
                Predicate('a"b', "=", (1,)),
                Predicate("ünï", "<", (2,)),
                Predicate("a.b", "=", ("s",)),
            ],
        ),
    ],
)
def test_a_quoted_column_holds_any_characters(text: str, expected: list[Predicate]) -> None:
    """Double quotes or backticks around a column (the quote doubled inside) let it hold
    spaces, quotes and the words AND and BETWEEN, none of which cuts the conjunction; they
    read as "cannot read predicate" before, or cut at a quoted AND."""
    assert parse_conjunction(text) == tuple(expected)


@given(
    st.lists(
        st.tuples(
            st.text(alphabet=" aAND\"`'<=(),.é", min_size=1, max_size=8),
            st.sampled_from('"`'),
            st.sampled_from(["=", "<=", "between", "in", "is not null"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_quoted_column_reads_back_as_written(terms: list[tuple[str, str, str]]) -> None:
    """Any column name, quoted in double quotes or backticks with that quote doubled, reads
    back as the name, in any comparison, joined by AND."""
    written, expected = [], []
    for column, quote, op in terms:
        name = quote + column.replace(quote, quote * 2) + quote
        if op == "between":
            written.append(f"{name} BETWEEN 1 AND 'x AND y'")
            expected.append(Predicate(column, "between", (1, "x AND y")))
        elif op == "in":
            written.append(f"{name} IN (1, 2.5)")
            expected.append(Predicate(column, "in", (1, 2.5)))
        elif op == "is not null":
            written.append(f"{name} IS NOT NULL")
            expected.append(Predicate(column, "is not null"))
        else:
            written.append(f"{name} {op} -3")
            expected.append(Predicate(column, op, (-3,)))  # type: ignore[arg-type]
    text = " AND ".join(written)
    assert split_conjunction(text) == written
    assert parse_conjunction(text) == tuple(expected)


@given(
    st.lists(
        st.tuples(
            # the words that join and bound comparisons are not column names
            st.from_regex(r"[a-z][a-z_]{0,6}", fullmatch=True).filter(
                lambda c: c not in ("and", "between")
            ),
            st.sampled_from(["=", "<", ">=", "between", "in", "is null"]),
            st.lists(st.text(alphabet="ab ANDnd'", max_size=6), min_size=2, max_size=3),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_conjunction_reads_back_as_written(
    terms: list[tuple[str, str, list[str]]],
) -> None:
    """Comparisons written out with quoted string constants (which may hold AND, BETWEEN
    and quotes) and joined by AND read back as the same predicates."""

    def quoted(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    written, expected = [], []
    for column, op, values in terms:
        if op == "between":
            written.append(f"{column} BETWEEN {quoted(values[0])} AND {quoted(values[1])}")
            expected.append(Predicate(column, "between", (values[0], values[1])))
        elif op == "in":
            written.append(f"{column} IN ({', '.join(quoted(v) for v in values)})")
            expected.append(Predicate(column, "in", tuple(values)))
        elif op == "is null":
            written.append(f"{column} IS NULL")
            expected.append(Predicate(column, "is null"))
        else:
            written.append(f"{column} {op} {quoted(values[0])}")
            expected.append(Predicate(column, op, (values[0],)))  # type: ignore[arg-type]
    text = " AND ".join(written)
    assert split_conjunction(text) == written
    assert parse_conjunction(text) == tuple(expected)
    assert parse_predicate(written[0]) == expected[0]
