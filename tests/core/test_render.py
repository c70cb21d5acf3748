"""The terminal output of ``show`` and ``advise`` over data and names that hold control
characters: a table's values are whatever its writers wrote, and printed raw a newline
breaks the table, ESC starts a terminal sequence (colours, a cleared screen, a window
title) and a right-to-left override reorders what follows. Written by delta-rs."""

from __future__ import annotations

import io
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakestats.cli import main
from lakestats.render import printable

ODD_NAME = "odd\u202ename\tx"  # a right-to-left override and a tab in a column's name
VALUES = ["a\nb", "\x1b[2J\x1b[31mred", "tab\there", "zz\r\x07", "ok", "ok", "café 日本"]


def _run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    old, sys.stderr = sys.stderr, err
    try:
        assert main(list(args), out=out) == 0, err.getvalue()
    finally:
        sys.stderr = old
    return out.getvalue()


def _raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on rather than show (a line's end aside)."""
    return [c for c in text if c != "\n" and not c.isprintable()]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, é 日本 😀", "plain text, é 日本 😀"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x1b[31mred\x07\x00\x7f", "\\x1b[31mred\\x07\\x00\\x7f"),
        ("\x85\u00a0\u200b\u202e\u2028", "\\x85\\xa0\\u200b\\u202e\\u2028"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_printable_escapes_what_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert not _raw_controls(printable(text))


def test_show_and_advise_print_values_and_names_escaped(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = 20 * VALUES
    write_deltalake(str(table), pa.table({ODD_NAME: rows, "n": list(range(len(rows)))}))
    state = str(tmp_path / "state")
    _run("analyze", str(table), "--state-dir", state, "-q")
    show = _run("show", str(table), "--state-dir", state)
    assert not _raw_controls(show), [unicodedata.name(c, hex(ord(c))) for c in _raw_controls(show)]
    column_line = next(line for line in show.splitlines() if line.startswith(printable(ODD_NAME)))
    # min and max: the bytes' order; each value on its line, as written, escaped
    assert column_line.split()[4:6] == ["\\x1b[2J\\x1b[31mred", "zz\\r\\x07"], column_line
    lines = show.splitlines()
    common = lines[next(i for i, line in enumerate(lines) if "most common" in line) + 1]
    for value in ("'a\\nb'", "'tab\\there'", "'ok'", "'café 日本'"):
        assert value in common, common
    advise = _run("advise", str(table), "--state-dir", state)
    assert not _raw_controls(advise)
    assert f"{printable(ODD_NAME)} (string)" in advise


def test_a_null_partition_value_prints_as_null(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = pa.table({"p": ["a", None, "a", "b\nc"], "n": [1, 2, 3, 4]})
    write_deltalake(str(table), rows, partition_by=["p"])
    state = str(tmp_path / "state")
    _run("analyze", str(table), "--state-dir", state, "-q", "--no-sketches")
    lines = _run("show", str(table), "--state-dir", state).splitlines()
    keys = {line.split()[0]: line.split()[1] for line in lines if line.startswith("p=")}
    assert keys == {"p=a": "2", "p=null": "1", "p=b\\nc": "1"}, lines
