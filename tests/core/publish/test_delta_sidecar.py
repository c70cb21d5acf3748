"""The Delta sidecar (``_delta_log/_lakestats/``) through ``lakestats analyze``, and what
deltalake's VACUUM and log cleanup do to it: they leave it alone, and versions that expire
from the log lose their documents at the next publish."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from delta_tables import NO_LOG_RETENTION, DeltaWriter
from lakestats.cli import main
from lakestats.publish.delta import INDEX_NAME


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, capsys.readouterr().err
    return out.getvalue()


def sidecar(writer: DeltaWriter) -> Path:
    return writer.log / "_lakestats"


def index(writer: DeltaWriter) -> dict[str, str]:
    return dict(json.loads((sidecar(writer) / INDEX_NAME).read_text())["versions"])


def test_documents_survive_vacuum_and_cleanup_and_follow_expiry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create([("id", "long"), ("name", "string")], configuration=NO_LOG_RETENTION)
    state = str(tmp_path / "state")
    versions = []
    for start in (0, 10, 20):
        versions.append(writer.append({"id": [start, start + 1], "name": ["a", None]}))
        cli(capsys, "analyze", writer.path, "--state-dir", state, "--no-sketches", "-q")
    last = writer.delete("id < 10")  # leaves a data file for VACUUM to delete
    cli(capsys, "analyze", writer.path, "--state-dir", state, "--no-sketches", "-q")
    listed = index(writer)
    assert set(listed) == {str(v) for v in [*versions, last]}
    doc: dict[str, Any] = json.loads((sidecar(writer) / listed[str(versions[-1])]).read_text())
    assert doc["format"] == "delta" and doc["snapshot_id"] == versions[-1]
    assert doc["record_count"] == 6 and doc["columns"]["name"]["null_count"] == 3
    before = {p.name for p in sidecar(writer).iterdir()}

    removed = writer.vacuum()
    writer.table().vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
    )
    writer.cleanup()  # checkpoint + cleanup_metadata: every older commit file goes

    assert removed  # VACUUM did delete data files
    assert {p.name for p in sidecar(writer).iterdir()} == before  # and nothing of ours
    cli(capsys, "analyze", writer.path, "--state-dir", state, "--no-sketches", "-q")
    after = index(writer)
    # delta-rs' VACUUM wrote commits after `last`, the checkpoint is at the newest one, and
    # `last`'s commit file is gone: the stats start over from that checkpoint
    assert writer.version() > last
    assert set(after) == {str(writer.version())}
    rebuilt = json.loads((sidecar(writer) / after[str(writer.version())]).read_text())
    assert rebuilt["record_count"] == 4 and rebuilt["columns"]["name"]["null_count"] == 2
    assert {p.name for p in sidecar(writer).iterdir()} == {INDEX_NAME, *after.values()}
    shown = cli(capsys, "show", writer.path, "--state-dir", state)
    assert "_lakestats" in shown
