"""A benchmark's own section of docs/benchmarks.md, replaced by its next run.

A section sits between ``<!-- bench:<key> begin -->`` and ``<!-- bench:<key> end -->``;
a run with the same key replaces it and leaves everything else alone. A new key goes
right after its ``anchor`` comment, or, without one, under a new ``heading`` at the end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path


def write_section(path: Path, key: str, lines: Sequence[str], *, anchor: str, heading: str) -> None:
    block = "\n".join([f"<!-- bench:{key} begin -->", *lines, f"<!-- bench:{key} end -->"])
    write_block(path, key, block, anchor=anchor, heading=heading)


def write_block(path: Path, key: str, block: str, *, anchor: str, heading: str | None) -> None:
    """``block`` holds its own markers (the begin marker may carry a note after
    ``begin``); without ``heading`` a new key goes at the end when the anchor is missing."""
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{anchor}\n"
    marker = re.escape(f"<!-- bench:{key} ")
    pattern = re.compile(marker + "begin.*?" + marker + "end -->", re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    elif anchor in text:
        text = text.replace(anchor, f"{anchor}\n\n{block}", 1)
    elif heading is None:
        text = f"{text.rstrip()}\n\n{block}\n"
    else:
        text = f"{text.rstrip()}\n\n{heading}\n\n{anchor}\n\n{block}\n"
    path.write_text(text)
