"""The CLI run in this process (it shares the test session's SparkSession): its output,
and a table's stats after an ``analyze`` into a state dir."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from lakestats.cli import main


def cli(*args: str) -> str:
    """``lakestats ARGS``' standard output; the command must succeed."""
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def analyzed_stats(location: str, state: Path) -> dict[str, Any]:
    """``analyze`` the table into ``state`` (incrementally, when it holds stats), then its
    ``show --json`` document."""
    cli("analyze", location, "--state-dir", str(state), "-q")
    doc: dict[str, Any] = json.loads(cli("show", location, "--state-dir", str(state), "--json"))
    return doc
