"""The daemon's log stream: JSON lines, tracebacks without local variables (secrets)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from lakestatsd.logs import configure_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_tracebacks_are_json_without_local_variables(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info")
    token = "s3cr3t-token-value"
    try:
        raise RuntimeError(f"failed with a token of length {len(token)}")
    except RuntimeError:
        structlog.get_logger("lakestatsd.test").exception("table_run_failed", table="t")
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.strip()]
    event = json.loads(line)
    assert event["event"] == "table_run_failed"
    frames = event["exception"][0]["frames"]
    assert frames and all("locals" not in f or not f["locals"] for f in frames)
    assert token not in line
