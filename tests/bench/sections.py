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
    begin, end = f"<!-- bench:{key} begin -->", f"<!-- bench:{key} end -->"
    section = "\n".join([begin, *lines, end])
    text = path.read_text()
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    elif anchor in text:
        text = text.replace(anchor, f"{anchor}\n\n{section}", 1)
    else:
        text = f"{text.rstrip()}\n\n{heading}\n\n{anchor}\n\n{section}\n"
    path.write_text(text)
