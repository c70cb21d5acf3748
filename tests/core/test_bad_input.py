"""Bad input: one clear line naming the file and the problem, and the store left as it was."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakestats.cli import main
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def snapshot_dir(root: Path) -> dict[str, str]:
    """Every file under root with a hash of its bytes."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args), out=io.StringIO())
    err = capsys.readouterr().err
    return code, err


@pytest.fixture
def analyzed(tmp_path: Path) -> tuple[IcebergWarehouse, str, Path]:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", pa.table({"id": [1, 2, 3], "name": ["a", "b", None]}, schema=SCHEMA))
    loc = wh.location("t")
    state = tmp_path / "state"
    assert main(["analyze", loc, "--state-dir", str(state), "--no-sketches", "-q"]) == 0
    wh.append("t", pa.table({"id": [4], "name": ["d"]}, schema=SCHEMA))
    return wh, loc, state


def assert_one_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("lakestats: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def assert_analyze_refused(
    capsys: pytest.CaptureFixture[str], loc: str, state: Path, *needles: str
) -> None:
    """``analyze`` fails with one line naming ``needles`` and leaves the store as it was."""
    before = snapshot_dir(state)
    code, err = run(capsys, "analyze", loc, "--state-dir", str(state), "--no-sketches")
    assert code == 1
    assert_one_line(err, *needles)
    assert snapshot_dir(state) == before


def test_path_that_is_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "not-a-table"
    empty.mkdir()
    state = tmp_path / "state"
    code, err = run(capsys, "analyze", str(empty), "--state-dir", str(state), "--no-sketches")
    assert code == 1
    assert_one_line(err, str(empty))
    assert not state.exists()
    code, err = run(capsys, "show", str(tmp_path / "missing"), "--state-dir", str(state))
    assert code == 1
    assert_one_line(err, "missing")


def test_truncated_metadata_json(
    analyzed: tuple[IcebergWarehouse, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, loc, state = analyzed
    newest = max((Path(loc) / "metadata").glob("*.metadata.json"))
    newest.write_bytes(newest.read_bytes()[:200])
    assert_analyze_refused(capsys, loc, state, newest.name)


def test_corrupt_manifest(
    analyzed: tuple[IcebergWarehouse, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    wh, loc, state = analyzed
    snapshot = wh.table("t").current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(wh.table("t").io)
    newest = Path(manifests[0].manifest_path.removeprefix("file://"))
    newest.write_bytes(b"Obj\x01garbage")
    assert_analyze_refused(capsys, loc, state, newest.name)


def test_missing_manifest_list(
    analyzed: tuple[IcebergWarehouse, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    wh, loc, state = analyzed
    snapshot = wh.table("t").current_snapshot()
    assert snapshot is not None
    manifest_list = Path(snapshot.manifest_list.removeprefix("file://"))
    manifest_list.unlink()
    assert_analyze_refused(capsys, loc, state, manifest_list.name)


def test_the_commits_before_an_unreadable_one_are_processed(
    analyzed: tuple[IcebergWarehouse, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """One unreadable commit stops the walk there, not before: the stats reach the commit
    before it, the error is one line naming the commit and the file, and a run after it
    changes nothing until the commit can be read."""
    wh, loc, state = analyzed
    second = wh.table("t").current_snapshot()
    assert second is not None
    wh.append("t", pa.table({"id": [5, 6], "name": ["e", None]}, schema=SCHEMA))
    table = wh.table("t")
    third = table.current_snapshot()
    assert third is not None
    (new,) = [m for m in third.manifests(table.io) if m.added_snapshot_id == third.snapshot_id]
    broken = Path(new.manifest_path.removeprefix("file://"))
    good = broken.read_bytes()
    broken.write_bytes(b"Obj\x01garbage")
    args = ["analyze", loc, "--state-dir", str(state), "--no-sketches", "-q"]
    code = main(args, out=(out := io.StringIO()))
    assert code == 1
    assert_one_line(capsys.readouterr().err, broken.name, f"snapshot {third.snapshot_id}:")
    # what the run did before it stopped is said, as a run that did not stop says it
    assert out.getvalue().splitlines() == [
        f"t: analyzed 1 commit(s); stats are at snapshot {second.snapshot_id}"
    ]
    code = main(["show", loc, "--state-dir", str(state), "--json"], out=(out := io.StringIO()))
    shown = json.loads(out.getvalue())
    assert (code, shown["snapshot_id"], shown["record_count"]) == (0, second.snapshot_id, 4)
    assert_analyze_refused(capsys, loc, state, broken.name)
    broken.write_bytes(good)
    assert main(["analyze", loc, "--state-dir", str(state), "--no-sketches", "-q"]) == 0
    code = main(["show", loc, "--state-dir", str(state), "--json"], out=(out := io.StringIO()))
    shown = json.loads(out.getvalue())
    assert (shown["snapshot_id"], shown["record_count"]) == (third.snapshot_id, 6)


def test_bad_config_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[sketch]\nkll_k = 1\n", encoding="utf-8")
    code, err = run(capsys, "show", "x", "--config", str(config))
    assert code == 2
    assert_one_line(err, "sketch.kll_k")


def test_unknown_table_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, "show", "sales", "--state-dir", str(tmp_path))
    assert code == 1
    assert_one_line(err, "'sales' is neither a configured table name")


def test_corrupt_state_version(
    analyzed: tuple[IcebergWarehouse, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, loc, state = analyzed
    (log,) = list(state.rglob("log/*.json"))
    log.write_text("{not json", encoding="utf-8")
    code, err = run(capsys, "show", loc, "--state-dir", str(state))
    assert code == 1
    assert_one_line(err, log.name)
