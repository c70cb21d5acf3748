"""Stats folders no configured table uses: listed by `lakestats status`, deleted by
`lakestats forget` — on Delta tables written by delta-rs, moved as an operator would."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from test_cli_ops import run

from lakestats.config import load_config
from lakestats.store.folders import StoreFolder
from lakestats.unclaimed import Claims, forget_folder, forget_refusal

GRACE_S = 60


def write_config(tmp_path: Path, location: Path, name: str = "sales") -> Path:
    path = tmp_path / "lakestats.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f"[maintenance]\ngrace_period = {GRACE_S}\n"
        f'[[table]]\nname = "{name}"\nformat = "delta"\nlocation = "{location}"\n'
    )
    return path


def tree(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()
    }


def age(folder: Path, seconds: float) -> None:
    """Make every file of ``folder`` ``seconds`` old, as time passing would."""
    then = time.time() - seconds
    for p in folder.rglob("*"):
        os.utime(p, (then, then))


@pytest.fixture
def moved(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A Delta table analyzed at one place, moved, and analyzed at the new one: (config,
    the old folder, the new folder)."""
    old, new = tmp_path / "old" / "sales", tmp_path / "new" / "sales"
    write_deltalake(old, pa.table({"id": list(range(100)), "s": [f"v{i}" for i in range(100)]}))
    write_deltalake(old, pa.table({"id": list(range(100, 150)), "s": ["w"] * 50}), mode="append")
    config = write_config(tmp_path, old)
    assert run("analyze", "sales", "--config", str(config), "--no-sketches", "-q")[0] == 0
    new.parent.mkdir()
    shutil.move(old, new)
    config = write_config(tmp_path, new)
    assert run("analyze", "sales", "--config", str(config), "--no-sketches", "-q")[0] == 0
    folders = sorted((tmp_path / "state").iterdir())
    assert len(folders) == 2
    # the first location keeps the id; the new one gets the id and its location's hash
    first, second = folders if "@" in folders[1].name else folders[::-1]
    return config, first, second


def test_status_lists_the_folder_a_moved_table_left(moved: tuple[Path, Path, Path]) -> None:
    config, old_folder, new_folder = moved
    code, out, _ = run("status", "--config", str(config), "--json")
    assert code == 0
    doc = json.loads(out)
    assert [t["store_folder"] for t in doc["tables"]] == [new_folder.name]
    [left] = doc["unclaimed_folders"]
    files = tree(old_folder)
    assert left["name"] == old_folder.name
    assert left["table"] == "sales" and left["format"] == "delta"
    assert left["location"].endswith("/old/sales")
    assert left["last_snapshot_id"] == 1  # the table's second version, as analyzed there
    assert (left["files"], left["bytes"]) == (len(files), sum(files.values()))
    assert left["unreadable"] is None

    code, out, _ = run("status", "--config", str(config))
    assert code == 0
    assert "no configured table uses" in out and "lakestats forget FOLDER" in out
    assert old_folder.name in out and new_folder.name not in out.split("no configured")[1]


def test_forget_deletes_the_old_folder_and_nothing_else(moved: tuple[Path, Path, Path]) -> None:
    config, old_folder, new_folder = moved
    before_new = tree(new_folder)
    shown = run("show", "sales", "--config", str(config), "--json")[1]
    age(old_folder, GRACE_S + 5)

    code, out, _ = run("forget", old_folder.name, "--config", str(config), "--dry-run")
    assert code == 0
    listed = [line.split("would delete ", 1)[1] for line in out.splitlines() if "  would" in line]
    assert sorted(listed) == sorted(tree(old_folder))
    assert listed[0].startswith("log/")  # state versions first
    assert old_folder.is_dir()

    code, out, _ = run("forget", old_folder.name, "--config", str(config))
    assert code == 0, out
    assert f"deleted {len(listed)} file(s)" in out and "old/sales" in out
    assert not old_folder.exists()
    assert tree(new_folder) == before_new
    assert run("show", "sales", "--config", str(config), "--json")[1] == shown
    assert (
        json.loads(run("status", "--config", str(config), "--json")[1])["unclaimed_folders"] == []
    )


def test_forget_refuses_a_folder_written_within_the_grace_period(
    moved: tuple[Path, Path, Path],
) -> None:
    config, old_folder, _ = moved
    before = tree(old_folder)
    age(old_folder, GRACE_S + 5)
    os.utime(next(old_folder.rglob("*.parquet")))  # one file written just now
    code, out, err = run("forget", old_folder.name, "--config", str(config))
    assert code == 1 and out == ""
    assert "within the grace period (60 s)" in err and "Traceback" not in err
    assert tree(old_folder) == before


def test_forget_refuses_the_folder_a_configured_table_uses(
    moved: tuple[Path, Path, Path],
) -> None:
    config, _, new_folder = moved
    before = tree(new_folder)
    age(new_folder, GRACE_S + 5)
    code, _, err = run("forget", new_folder.name, "--config", str(config))
    assert code == 1
    assert err.strip() == (
        f"lakestats: error: {new_folder.name} holds the stats of configured table sales: "
        "take the table out of the config first"
    )
    assert tree(new_folder) == before


def test_forget_refuses_stats_of_a_configured_table_that_cannot_be_opened(
    moved: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Its folder is unknown while its metadata cannot be read: a folder whose stats name
    it may be its own."""
    config, old_folder, new_folder = moved
    log = tmp_path / "new" / "sales" / "_delta_log"
    shutil.move(log, tmp_path / "log-away")
    age(old_folder, GRACE_S + 5)
    age(new_folder, GRACE_S + 5)
    doc = json.loads(run("status", "--config", str(config), "--json")[1])
    assert doc["tables"][0]["store_folder"] is None and doc["tables"][0]["last_error"]
    # both folders are listed: neither is known to be the table's
    assert {f["name"] for f in doc["unclaimed_folders"]} == {old_folder.name, new_folder.name}
    # … each marked as possibly the table's, in the text too: forget refuses them
    assert {f["may_be_stats_of"] for f in doc["unclaimed_folders"]} == {"sales"}
    text = run("status", "--config", str(config))[1]
    for folder in (old_folder, new_folder):
        assert f"{folder.name} may hold the current stats of configured table sales" in text
    for folder in (old_folder, new_folder):
        code, _, err = run("forget", folder.name, "--config", str(config))
        assert code == 1
        assert "configured table sales, which cannot be opened now" in err
        assert folder.is_dir()


@pytest.mark.parametrize("name", ["../state", "a/b", ".hidden", "", "missing"])
def test_forget_refuses_what_is_not_a_folder_of_the_state_dir(
    moved: tuple[Path, Path, Path], name: str
) -> None:
    config, old_folder, new_folder = moved
    before = (tree(old_folder), tree(new_folder))
    code, out, err = run("forget", name, "--config", str(config))
    assert code == 1 and out == ""
    assert err.startswith("lakestats: error: ") and err.count("\n") == 1
    assert "not a stats folder name" in err or "there is no stats folder" in err
    assert (tree(old_folder), tree(new_folder)) == before


def test_a_table_taken_out_of_the_config_leaves_a_folder_forget_deletes(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": [1, 2, 3]}))
    config = write_config(tmp_path, table)
    assert run("analyze", "sales", "--config", str(config), "--no-sketches", "-q")[0] == 0
    [folder] = (tmp_path / "state").iterdir()
    (tmp_path / "lakestats.toml").write_text(f'state_dir = "{tmp_path / "state"}"\n')
    code, out, _ = run("status", "--config", str(config))
    assert code == 0 and "no tables configured" in out and folder.name in out
    # without a table in the config, nothing claims a folder: by-path use lists them all
    assert "no table is configured: tables analyzed by path are listed too" in out
    code, out, _ = run(
        "analyze", str(table), "--state-dir", str(tmp_path / "state"), "--no-sketches"
    )
    assert code == 0 and [folder] == list((tmp_path / "state").iterdir())
    # the library call, at a time past the grace period rather than files made old
    report = forget_folder(
        load_config(config), folder.name, now_ms=int(time.time() * 1000) + 3_600_001
    )
    assert not report.dry_run and report.folder.table == "sales"
    assert not folder.exists()


def test_forget_refusal_at_the_grace_boundary() -> None:
    folder = StoreFolder(name="f", files=3, bytes=10, newest_file_ms=1_000_000)
    claims = Claims()
    assert forget_refusal(folder, claims, now_ms=1_000_000 + 59_999, grace_ms=60_000)
    assert forget_refusal(folder, claims, now_ms=1_060_000, grace_ms=60_000) is None
    assert forget_refusal(folder, Claims({"f": "t"}), now_ms=9_999_999, grace_ms=60_000)
    named = StoreFolder(name="f", files=3, bytes=10, newest_file_ms=0, table="t")
    assert forget_refusal(named, Claims(unopened={"t": "gone"}), now_ms=10**9, grace_ms=1)
    assert forget_refusal(named, Claims(unopened={"u": "gone"}), now_ms=10**9, grace_ms=1) is None


def test_an_empty_folder_is_listed_and_forgotten(moved: tuple[Path, Path, Path]) -> None:
    """What a forget stopped after its last file (or a hand-made folder) leaves."""
    config, _, _ = moved
    empty = config.parent / "state" / "left-over"
    (empty / "log").mkdir(parents=True)
    age(empty, GRACE_S + 5)
    doc = json.loads(run("status", "--config", str(config), "--json")[1])
    listed = {f["name"]: f for f in doc["unclaimed_folders"]}
    assert listed["left-over"]["files"] == 0 and listed["left-over"]["table_id"] is None
    code, out, _ = run("forget", "left-over", "--config", str(config))
    assert code == 0 and "left-over (no state): deleted 0 file(s)" in out
    assert not empty.exists()


def test_forget_never_deletes_what_lakestats_did_not_write(
    moved: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A folder of the state dir holding other files (a state dir pointed at a shared
    folder), and a symbolic link to a folder elsewhere: neither is deleted, nor anything
    they hold, however old."""
    config, old_folder, _ = moved
    state = config.parent / "state"
    mixed = state / "mydata"
    (mixed / "stats").mkdir(parents=True)
    (mixed / "stats" / "x.json").write_text("{}")
    (mixed / "precious.txt").write_text("keep me")
    outside = tmp_path / "outside"
    (outside / "log").mkdir(parents=True)
    (outside / "log" / "a.txt").write_text("keep me too")
    (state / "link").symlink_to(outside, target_is_directory=True)
    (old_folder / "notes.md").write_text("mine")
    for folder in (mixed, outside, old_folder):
        age(folder, GRACE_S + 5)
    before = {f: tree(f) for f in (mixed, outside, old_folder)}

    doc = json.loads(run("status", "--config", str(config), "--json")[1])
    listed = {f["name"]: f for f in doc["unclaimed_folders"]}
    assert "link" not in listed
    assert (listed["mydata"]["foreign_files"], listed["mydata"]["foreign_example"]) == (
        1,
        "precious.txt",
    )
    assert listed[old_folder.name]["foreign_files"] == 1
    assert "mydata" in run("status", "--config", str(config))[1]
    assert "not a stats folder: 1 other file(s)" in run("status", "--config", str(config))[1]
    for name in ("mydata", old_folder.name):
        code, out, err = run("forget", name, "--config", str(config))
        assert code == 1 and out == "", out
        assert "lakestats does not write" in err and "Traceback" not in err
    code, _, err = run("forget", "link", "--config", str(config))
    assert code == 1 and "there is no stats folder link" in err
    assert {f: tree(f) for f in (mixed, outside, old_folder)} == before


def test_an_empty_or_unusable_state_dir_is_a_config_error(tmp_path: Path) -> None:
    """An empty state dir would be the config file's folder, whose other folders status
    and forget would take for stats folders; ``--state-dir`` is checked as the key is."""
    config = tmp_path / "lakestats.toml"
    config.write_text('state_dir = ""\n')
    code, _, err = run("status", "--config", str(config))
    assert code == 2 and "key state_dir: must name a directory" in err
    config.write_text("")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for value, why in [
        ("", "must name a directory"),
        ("gs://bucket/x", "cannot live on gs://"),
        ("s3://", "names no bucket"),
        (str(a_file / "state"), "is a file, not a directory"),
    ]:
        code, _, err = run("status", "--config", str(config), "--state-dir", value)
        assert code == 2, (value, err)
        assert err.startswith("lakestats: error: --state-dir: ") and why in err, err
        assert "Traceback" not in err
