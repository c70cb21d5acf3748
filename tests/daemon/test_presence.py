"""Two daemons keeping one table say so (``lakestatsd.presence``): each announces itself
under ``<state_dir>/.lakestatsd/`` with a lock held for its life.

In-process ``Presence`` objects for what one daemon sees of others, and real
``lakestatsd`` processes for the warning, the file's removal on shutdown and the file a
killed daemon leaves.
"""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from lakestatsd_harness import DaemonProcess, daemon_env, fast_config_text

from lakestats.cli import main as lakestats_main
from lakestats.config import Config
from lakestatsd.presence import FOLDER, Presence, table_key

SCHEMA = pa.schema([("id", pa.int64())])


def delta_tables(root: Path, names: list[str]) -> dict[str, Path]:
    found = {}
    for name in names:
        location = root / "delta" / name
        write_deltalake(str(location), pa.table({"id": [1, 2]}, schema=SCHEMA))
        found[name] = location
    return found


def config_of(state: Path, tables: dict[str, Path]) -> Config:
    return Config.model_validate(
        {
            "state_dir": str(state),
            "table": [{"name": n, "location": str(p)} for n, p in tables.items()],
        }
    )


def test_a_daemon_sees_the_live_daemons_that_keep_its_tables(tmp_path: Path) -> None:
    tables = delta_tables(tmp_path, ["a", "b", "c"])
    state = tmp_path / "state"
    first = Presence(state, config_of(state, {"a": tables["a"], "b": tables["b"]}))
    # the same tables under other names, and one the first does not keep
    second = Presence(state, config_of(state, {"b2": tables["b"], "c": tables["c"]}))
    apart = Presence(state, config_of(state, {"c": tables["c"]}))
    first.announce()
    second.announce()
    apart.announce()

    [seen_by_first] = first.others()
    assert seen_by_first.pid == os.getpid() and seen_by_first.shared == ("b",)
    assert sorted(o.shared for o in second.others()) == [("b2",), ("c",)]  # its own names
    assert [o.shared for o in apart.others()] == [("c",)]

    second.withdraw()
    assert first.others() == [] and apart.others() == []
    assert len(list((state / FOLDER).iterdir())) == 2  # first's and apart's, no temp file


def test_files_nobody_holds_are_a_gone_daemons_and_are_dropped(tmp_path: Path) -> None:
    tables = delta_tables(tmp_path, ["a"])
    state = tmp_path / "state"
    folder = state / FOLDER
    folder.mkdir(parents=True)
    # what a killed daemon leaves: its file, its lock gone with its process
    left = folder / "host-1-deadbeef.json"
    key = table_key(config_of(state, tables).table[0], config_of(state, tables))
    left.write_text(json.dumps({"host": "host", "pid": 1, "tables": [key]}))
    garbage = folder / "host-2-00000000.json"
    garbage.write_bytes(b"\x00not json")
    mine = Presence(state, config_of(state, tables))
    mine.announce()

    assert mine.others() == []
    assert not left.exists() and not garbage.exists()


def test_a_second_daemon_on_the_same_tables_warns_and_each_withdraws_on_shutdown(
    tmp_path: Path,
) -> None:
    tables = delta_tables(tmp_path, ["a", "b"])
    state = tmp_path / "state"
    text = "".join(f'[[table]]\nname = "{n}"\nlocation = "{p}"\n' for n, p in tables.items())
    config = tmp_path / "lakestatsd.toml"
    config.write_text(fast_config_text(state, text))
    first = DaemonProcess(config, tmp_path / "first.log", daemon_env()).start()
    try:
        second = DaemonProcess(config, tmp_path / "second.log", daemon_env()).start()
        try:
            [warning] = second.wait_event("tables_kept_by_another_daemon")
            assert warning["other_pid"] == first.proc.pid
            assert warning["tables"] == ["a", "b"] and warning["level"] == "warning"
            assert first.events("tables_kept_by_another_daemon") == []  # it looks every 10 min
            # the state dir's folders stay the tables' own: status lists no stray folder
            out = io.StringIO()
            assert lakestats_main(["status", "--config", str(config), "--json"], out=out) == 0
            assert json.loads(out.getvalue())["unclaimed_folders"] == []
        finally:
            assert second.terminate() == 0
        assert len(list((state / FOLDER).glob("*.json"))) == 1  # the second's went with it
    finally:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        first.close()
    # the first, killed, left its file; the next daemon drops it and warns of nobody
    third = DaemonProcess(config, tmp_path / "third.log", daemon_env()).start()
    try:
        third.wait_until(lambda: len(list((state / FOLDER).glob("*.json"))) == 1)
        assert third.events("tables_kept_by_another_daemon") == []
    finally:
        assert third.terminate() == 0
    assert list((state / FOLDER).glob("*.json")) == []


def test_catalog_tables_are_matched_without_writing_the_catalog_uri(tmp_path: Path) -> None:
    """A catalog URI may hold a password: the announcement keeps a hash of where each
    table is, which still matches the same table in another daemon's config."""
    state = tmp_path / "state"

    def catalog_config(name: str) -> Config:
        return Config.model_validate(
            {
                "state_dir": str(state),
                "catalog": {
                    name: {"type": "sql", "uri": "postgresql://stats:hunter2@db:5432/iceberg"}
                },
                "table": [{"name": "orders", "catalog": name, "identifier": "sales.orders"}],
            }
        )

    first = Presence(state, catalog_config("main"))
    second = Presence(state, catalog_config("other_name_same_catalog"))
    first.announce()
    second.announce()
    texts = [p.read_text() for p in (state / FOLDER).glob("*.json")]
    assert len(texts) == 2 and not any("hunter2" in t or "db:5432" in t for t in texts)
    assert [o.shared for o in second.others()] == [("orders",)]
