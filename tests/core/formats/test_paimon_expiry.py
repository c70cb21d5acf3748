"""Paimon snapshot expiry: Paimon's rules, run by `lakestats expire` per policy, and
followed by the stats when the table expires snapshots itself."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lakestats.cli import main
from lakestats.exceptions import ExpiryError
from lakestats.formats.paimon import expire as paimon_expire
from lakestats.formats.paimon import open_paimon_location
from lakestats.formats.paimon.expire import duration_seconds, referenced_files, retention
from lakestats.formats.paimon.snapshots import PaimonSnapshot
from lakestats.formats.paimon.table import PaimonTable
from paimon_fixtures import copy_fixture, needs_paimon_fixtures, read_rows
from paimon_tables import PaimonWarehouse


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def write_config(tmp_path: Path, location: Path, policy: str) -> Path:
    config = tmp_path / "lakestats.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n\n[[table]]\nname = "t"\n'
        f'location = "{location}"\nsketches = false\n\n[table.expire]\n{policy}\n'
    )
    return config


def test_lakestats_expire_follows_paimon_rules_and_pypaimon_still_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("p", "string")], partition_keys=["p"])
    for i in range(5):
        warehouse.write("t", {"id": [i, i + 10], "p": ["a", f"b{i}"]})
    warehouse.write("t", {"id": [99], "p": ["a"]}, overwrite=True)  # 6: drops a's files
    config = write_config(tmp_path, location, "retain_last = 2")
    assert run("analyze", "t", "--config", str(config), "-q")[0] == 0
    table = open_paimon_location(str(location))
    doomed_files = set()
    for snapshot_id in (1, 2, 3, 4):
        doomed_files |= referenced_files(table, table.snapshot(snapshot_id))
    kept_files = referenced_files(table, table.snapshot(5)) | referenced_files(
        table, table.snapshot(6)
    )

    code, text = run("expire", "t", "--config", str(config))

    assert code == 0, text
    table.refresh()
    assert sorted(table.snapshot_ids()) == [5, 6]
    assert (location / "snapshot" / "EARLIEST").read_text() == "5"
    assert all((location / f).exists() for f in kept_files)
    assert not any((location / f).exists() for f in doomed_files - kept_files)
    read = warehouse.table("t").new_read_builder()
    assert read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows == 6
    # the stats follow: the expired snapshots' stats are gone, the current one stands
    code, text = run("show", "t", "--config", str(config), "--json")
    assert code == 0 and json.loads(text)["record_count"] == 6
    code, text = run("show", "t", "--config", str(config), "--snapshot", "2")
    assert (code != 0 and "expired" in text + "") or code != 0


@needs_paimon_fixtures
def test_a_java_written_dv_table_expires_to_its_current_snapshot(tmp_path: Path) -> None:
    location = copy_fixture("pk_table_scan_and_read_dv", tmp_path / "wh")
    table = open_paimon_location(str(location))
    before = {f.path for f in table.live_files(6)}
    assert table.expire_snapshots([1, 2, 3, 4, 5]) is None
    assert sorted(table.snapshot_ids()) == [6]
    assert all(Path(p).exists() for p in before)
    index = {p.name for p in (location / "index").iterdir()}
    assert len(index) == 2  # snapshot 6 still names both deletion-vector files
    assert read_rows("pk_table_scan_and_read_dv", tmp_path / "wh").num_rows == 8
    (baseline,) = table.commits_since(None)
    assert baseline.is_baseline and {f.path for f in baseline.added_files} == before


def test_the_current_snapshot_is_never_expired(tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long")])
    warehouse.write("t", {"id": [1]})
    from lakestats.exceptions import ExpiryError

    with pytest.raises(ExpiryError, match="current snapshot 1 cannot be expired"):
        open_paimon_location(str(location)).expire_snapshots([1])


def _six_snapshots(tmp_path: Path) -> tuple[PaimonWarehouse, Path]:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("p", "string")], partition_keys=["p"])
    for i in range(6):
        warehouse.write("t", {"id": [i, i + 10], "p": ["a", f"b{i}"]})
    return warehouse, location


def _race(
    monkeypatch: pytest.MonkeyPatch, at_call: int, *, after: bool, other: Callable[[], object]
) -> None:
    """Run ``other`` (a second process's expiry) at the ``at_call``-th look of an expiry
    at a snapshot's files: before that read, or just after it."""
    calls = [0]

    def racing(table: PaimonTable, snapshot: PaimonSnapshot) -> set[Path]:
        calls[0] += 1
        if calls[0] == at_call and not after:
            other()
        found = referenced_files(table, snapshot)
        if calls[0] == at_call and after:
            other()
        return found

    monkeypatch.setattr(paimon_expire, "referenced_files", racing)


def _assert_whole(warehouse: PaimonWarehouse, location: Path, snapshots: list[int]) -> None:
    table = open_paimon_location(str(location))
    assert sorted(table.snapshot_ids()) == snapshots
    assert (location / "snapshot" / "EARLIEST").read_text() == str(snapshots[0])
    for snapshot_id in snapshots:
        assert all(
            (location / f).exists() for f in referenced_files(table, table.snapshot(snapshot_id))
        )
    assert warehouse.read("t").num_rows == 12


def test_an_expiry_whose_files_another_expiry_deletes_plans_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two expiries at once (`lakestats expire` beside the daemon's schedule, or a writer
    expiring as it commits): the other deletes snapshots 1–4 and their files while this one
    reads what its plan keeps. It plans again on the table as it now is (1 and 2 are gone
    already: nothing left to do) instead of failing on a missing manifest list."""
    warehouse, location = _six_snapshots(tmp_path)
    other = open_paimon_location(str(location))
    _race(monkeypatch, 1, after=False, other=lambda: other.expire_snapshots([1, 2, 3, 4]))

    assert paimon_expire.expire(open_paimon_location(str(location)), [1, 2]) == []

    _assert_whole(warehouse, location, [5, 6])


def test_an_expiry_never_moves_the_earliest_hint_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other expiry goes further (1–4) after this one has read everything it needs to
    expire 1 and 2: EARLIEST stays at 5, not 3 (a snapshot that no longer exists)."""
    warehouse, location = _six_snapshots(tmp_path)
    other = open_paimon_location(str(location))
    # the plan reads the kept snapshots 3–6, then the expired 1 and 2: the sixth look is last
    _race(monkeypatch, 6, after=True, other=lambda: other.expire_snapshots([1, 2, 3, 4]))

    assert paimon_expire.expire(open_paimon_location(str(location)), [1, 2]) == [1, 2]

    _assert_whole(warehouse, location, [5, 6])


class TestPaimonRetentionRules:
    HOUR = 3_600_000

    def test_defaults_keep_ten_and_an_hour(self) -> None:
        now = 100 * self.HOUR
        snapshots = [(i, now - (20 - i) * self.HOUR) for i in range(1, 21)]
        # min 10 retained: 1..10 may go; each is older than 1 h
        assert retention(snapshots, {}, now) == list(range(1, 11))
        young = [(i, now - 60_000) for i in range(1, 21)]
        assert retention(young, {}, now) == []

    def test_max_retained_and_the_expire_limit(self) -> None:
        now = 100 * self.HOUR
        young = [(i, now) for i in range(1, 31)]
        options = {"snapshot.num-retained.max": "5", "snapshot.num-retained.min": "1"}
        assert retention(young, options, now) == list(range(1, 26))
        assert retention(young, {**options, "snapshot.expire.limit": "3"}, now) == [1, 2, 3]

    def test_durations_as_paimon_writes_them(self) -> None:
        assert [duration_seconds(t) for t in ("1 h", "30 min", "10s", "500 ms", "2 d")] == [
            3600,
            1800,
            10,
            0.5,
            172800,
        ]


def test_changelog_files_expire_with_their_snapshots(tmp_path: Path) -> None:
    """``changelog-producer = input`` (pypaimon writes changelog files): an expired
    snapshot's changelog files, manifests and manifest list go with it, as in Java; the
    retained snapshots' stay, and pypaimon still reads the table."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    options = {"changelog-producer": "input", "bucket": "1", "metadata.stats-mode": "full"}
    location = warehouse.create(
        "c", [("k", "long"), ("v", "string")], primary_keys=["k"], options=options
    )
    for i in range(4):
        warehouse.write("c", {"k": [i, i + 1], "v": [f"x{i}", "y"]})
    table = open_paimon_location(str(location))
    changelog = {
        i: {f for f in referenced_files(table, table.snapshot(i)) if "changelog" in f.name}
        for i in (1, 2, 3, 4)
    }
    # each snapshot: its manifest list, one manifest, one changelog data file
    assert all(len(files) == 3 for files in changelog.values()), changelog
    assert all((location / f).exists() for files in changelog.values() for f in files)

    table.expire_snapshots([1, 2])

    assert not any((location / f).exists() for i in (1, 2) for f in changelog[i])
    assert all((location / f).exists() for i in (3, 4) for f in changelog[i])
    read = warehouse.table("c").new_read_builder()
    assert read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows == 5


def test_a_table_whose_changelog_outlives_its_snapshots_is_refused(tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    options = {"changelog-producer": "input", "changelog.num-retained.max": "100"}
    location = warehouse.create("d", [("k", "long")], primary_keys=["k"], options=options)
    warehouse.write("d", {"k": [1]})
    warehouse.write("d", {"k": [2]})
    table = open_paimon_location(str(location))
    with pytest.raises(ExpiryError, match=r"changelog\.num-retained\.max") as raised:
        table.expire_snapshots([1])
    assert "\n" not in str(raised.value)
    assert sorted(table.snapshot_ids()) == [1, 2]  # nothing was touched


def test_a_baseline_of_files_written_before_a_column_was_dropped(tmp_path: Path) -> None:
    """After expiry a run from scratch starts at a baseline whose files were written with
    a column dropped since (their manifest entries carry its stats): the run succeeds (it
    used to fail encoding that column's bounds) and its stats equal pypaimon's rows."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("name", "string"), ("extra", "long")])
    warehouse.write("t", {"id": [1, 2, 3], "name": ["a", None, "c"], "extra": [5, 6, None]})
    warehouse.drop_column("t", "name")
    warehouse.add_column("t", "later", "long")
    warehouse.write("t", {"id": [4], "extra": [7], "later": [8]})
    table = open_paimon_location(str(location))
    table.expire_snapshots(sorted(table.snapshot_ids() - {table.current_snapshot_id()}))

    code, text = run("analyze", str(location), "--state-dir", str(tmp_path / "s"), "--no-sketches")
    assert code == 0, text
    code, text = run("show", str(location), "--state-dir", str(tmp_path / "s"), "--json")
    doc = json.loads(text)
    rows = warehouse.read("t")
    assert doc["record_count"] == rows.num_rows == 4
    assert set(doc["columns"]) == set(rows.column_names) == {"id", "extra", "later"}
    for name, column in doc["columns"].items():
        assert column["null_count"] == rows.column(name).null_count, name
