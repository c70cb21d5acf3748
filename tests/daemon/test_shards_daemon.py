"""Two real ``lakestatsd`` replicas sharing one config's tables out ([shards]).

Each replica listens on its own loopback address (127.0.0.10, 127.0.0.11: the
``lakestatsd-{i}.<service>`` DNS names of a StatefulSet, as the address ``http.url``'s
``{shard}`` resolves to) and takes its index from a pod name, as in
deploy/kubernetes/sharded. The state directory is shared, as on a shared volume.
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakestatsd_harness import DaemonProcess, daemon_env, fast_config_text

from lakestats.analyze import analyze_table, read_stats
from lakestats.cli import main as lakestats_main
from lakestats.config import Config, TableConfig, load_config
from lakestats.notify import DaemonUnavailableError, notify
from lakestats.shards import shard_of
from lakestats.tables import open_configured
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
TOKEN = "shard-token"


def rows(i: int) -> dict[str, list[Any]]:
    return {"id": [i * 10 + k for k in range(10)], "name": [f"n{k % 3}" for k in range(10)]}


def two_each(count: int = 2) -> list[str]:
    """Table names, two kept by each replica (found by the hash, not assumed)."""
    names: list[str] = []
    per = [0] * count
    for i in range(1000):
        name = f"table_{i}"
        shard = shard_of(name, count)
        if per[shard] < 2:
            per[shard] += 1
            names.append(name)
        if all(n == 2 for n in per):
            return names
    raise AssertionError("no split found")


def common_port(hosts: list[str]) -> int:
    """A port free on every host (the replicas share it, as pods do)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((hosts[0], 0))
            port = int(probe.getsockname()[1])
        try:
            for host in hosts:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        return port
    raise AssertionError("no common free port")


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    started: list[DaemonProcess] = []
    config = tmp_path / "lakestatsd.toml"

    def start(index: int, port: int, **env_extra: str) -> DaemonProcess:
        log = tmp_path / f"replica-{index}.log"
        env = daemon_env(
            LAKESTATS_SHARDS__INDEX=f"lakestatsd-{index}",  # as the downward API gives it
            LAKESTATS_HTTP__LISTEN=f"127.0.0.1{index}:{port}",  # its pod's address
            **env_extra,
        )
        daemon = DaemonProcess(config, log, env)
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.close()


def config_text(state_dir: Path, tables: dict[str, str], port: int) -> str:
    sections = "".join(
        f'\n[[table]]\nname = "{name}"\nlocation = "{loc}"\n' for name, loc in tables.items()
    )
    http = f'url = "http://127.0.0.1{{shard}}:{port}"\ntoken = "{TOKEN}"\nwait_timeout_s = 30'
    return fast_config_text(state_dir, "[shards]\ncount = 2\n" + sections, http=http)


def test_two_replicas_keep_each_table_once_and_route_notifications(
    tmp_path: Path, replicas: Callable[..., DaemonProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    names = two_each()
    wh = IcebergWarehouse(tmp_path / "wh")
    current: dict[str, int] = {}
    for name in names:
        wh.create_table(name, SCHEMA)
        current[name] = wh.append(name, rows(0))
    port = common_port(["127.0.0.10", "127.0.0.11"])
    text = config_text(tmp_path / "state", {n: wh.location(n) for n in names}, port)
    (tmp_path / "lakestatsd.toml").write_text(text)
    daemons = [replicas(0, port), replicas(1, port)]
    assert [d.host for d in daemons] == ["127.0.0.10", "127.0.0.11"]
    owner = {name: shard_of(name, 2) for name in names}

    def stats_snapshot(name: str) -> int | None:
        resp = daemons[owner[name]].request("GET", f"/v1/tables/{name}/stats")
        return int(resp.json()["snapshot_id"]) if resp.status == 200 else None

    for name in names:
        daemons[owner[name]].wait_until(lambda n=name: stats_snapshot(n) == current[n])

    for index, daemon in enumerate(daemons):
        listed = daemon.get_json("/v1/tables")
        assert listed["shard"] == {"index": index, "count": 2}
        assert [t["name"] for t in listed["tables"]] == [n for n in names if owner[n] == index]
        assert daemon.events("shard_tables")[0]["tables"] == [t["name"] for t in listed["tables"]]
        # another replica's table: 421 naming its keeper, never processed here
        for name in (n for n in names if owner[n] != index):
            resp = daemon.request("GET", f"/v1/tables/{name}/stats")
            assert resp.status == 421
            assert resp.json()["shard"] == owner[name]
        assert daemon.request("GET", "/v1/tables/nope/stats").status == 404
        processed_here = {e["table"] for e in daemon.events("commit_processed")}
        assert processed_here == {n for n in names if owner[n] == index}

    # a writer's hook reaches the replica keeping its table through http.url's {shard}
    writer = load_config(tmp_path / "lakestatsd.toml", env={})
    for i, name in enumerate(names, start=1):
        newest = wh.append(name, rows(i))
        result = notify(writer, name, wait=True, timeout_s=20)
        assert result.waited and result.last_snapshot_id == newest

    # one address for every replica is a misconfiguration: said in one line
    single = writer.model_copy(
        update={"http": writer.http.model_copy(update={"url": f"http://127.0.0.10:{port}"})}
    )
    elsewhere = next(n for n in names if owner[n] == 1)
    with pytest.raises(DaemonUnavailableError, match=r"does not keep table .*\{shard\}"):
        notify(single, elsewhere, wait=False, timeout_s=5)

    # `lakestats status` asks each replica for its tables' errors
    out = io.StringIO()
    code = lakestats_main(["status", "--json", "--config", str(tmp_path / "lakestatsd.toml")], out)
    status = json.loads(out.getvalue())
    assert code == 0 and status["daemon_reachable"] is True
    assert {t["name"]: t["up_to_date"] for t in status["tables"]} == dict.fromkeys(names, True)
    # each replica names the folder holding each of its tables' stats: the ones status
    # finds by opening the tables itself
    listed = {
        t["name"]: t["store_folder"] for d in daemons for t in d.get_json("/v1/tables")["tables"]
    }
    assert listed == {t["name"]: t["store_folder"] for t in status["tables"]}
    assert status["unclaimed_folders"] == []
    # a config naming none of the tables, with the replicas' address: their folders are
    # theirs still, however old
    bare = tmp_path / "bare.toml"
    bare.write_text(config_text(tmp_path / "state", {}, port))
    then = time.time() - 60
    for path in (tmp_path / "state").rglob("*"):
        os.utime(path, (then, then))
    out = io.StringIO()
    assert lakestats_main(["status", "--json", "--config", str(bare)], out) == 0
    assert json.loads(out.getvalue())["unclaimed_folders"] == []
    for name, folder in listed.items():
        capsys.readouterr()
        assert lakestats_main(["forget", folder, "--config", str(bare)], io.StringIO()) == 1
        keeper = f"http://127.0.0.1{owner[name]}:{port}"
        assert f"holds the stats of table {name} of the lakestatsd at {keeper}" in (
            capsys.readouterr().err
        )
        assert (tmp_path / "state" / folder / "log").is_dir()

    # replicas keep disjoint tables: neither takes the other for a second daemon on its own
    assert not any(d.events("tables_kept_by_another_daemon") for d in daemons)
    # both replicas stop cleanly; the tables each kept are in the shared state dir once
    assert [d.terminate(timeout_s=15) for d in daemons] == [0, 0]
    stored = {p.name for p in (tmp_path / "state").iterdir() if p.is_dir()}
    assert len(stored) == len(names)


def test_a_replica_with_no_tables_runs_and_says_so(tmp_path: Path, run_daemon: Any) -> None:
    name = "only"
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table(name, SCHEMA)
    wh.append(name, rows(0))
    idle = 1 - shard_of(name, 2)
    text = config_text(tmp_path / "state", {name: wh.location(name)}, 8765)
    daemon = run_daemon(text, LAKESTATS_SHARDS__INDEX=str(idle))
    warning = daemon.wait_event("shard_has_no_tables")[0]
    assert (warning["index"], warning["count"], warning["configured"]) == (idle, 2, 1)
    assert daemon.get_json("/v1/tables") == {"tables": [], "shard": {"index": idle, "count": 2}}
    assert daemon.request("GET", f"/v1/tables/{name}/stats").status == 421


def test_replicas_disagreeing_on_the_count_keep_one_table_correctly(
    tmp_path: Path, replicas: Callable[..., DaemonProcess]
) -> None:
    """While a count change rolls out, an old replica (count 1: every table) and a new one
    (count 2) both keep a table, against a writer committing all along: the shared store
    stays whole and both serve what a from-scratch run computes."""
    name = next(n for n in (f"table_{i}" for i in range(100)) if shard_of(n, 2) == 1)
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table(name, SCHEMA)
    wh.append(name, rows(0))
    port = common_port(["127.0.0.10", "127.0.0.11"])
    text = config_text(tmp_path / "state", {name: wh.location(name)}, port)
    (tmp_path / "lakestatsd.toml").write_text(text)
    old = replicas(0, port, LAKESTATS_SHARDS__COUNT="1")
    new = replicas(1, port)
    newest = 0
    for i in range(1, 16):
        newest = wh.append(name, rows(i))
        time.sleep(0.05)
    for daemon in (old, new):
        daemon.wait_until(
            lambda d=daemon: (
                d.request("GET", f"/v1/tables/{name}/stats").json().get("snapshot_id") == newest
            )
        )
    expected = from_scratch(name, wh.location(name), tmp_path / "scratch")
    for daemon in (old, new):
        served = daemon.get_json(f"/v1/tables/{name}/stats")
        assert {k: v for k, v in served.items() if k not in VOLATILE} == expected
    both = [{e["snapshot_id"] for e in d.events("commit_processed")} for d in (old, new)]
    assert both[0] | both[1] >= {newest}  # every commit processed once, by one or the other
    assert not (both[0] & both[1]), "a commit's state version was created twice"
    # a metadata file pyiceberg is still writing, met by a reader, is contention
    assert not old.events("table_run_failed") and not new.events("table_run_failed")
    # while the rollout lasts the later replica says another keeps its table
    [warning] = new.events("tables_kept_by_another_daemon")
    assert warning["other_pid"] == old.proc.pid and warning["tables"] == [name]


VOLATILE = {"computed_at_ms"}


def from_scratch(name: str, location: str, state_dir: Path) -> dict[str, Any]:
    config = Config.model_validate({"state_dir": str(state_dir), "sketch": {"enabled": False}})
    opened = open_configured(TableConfig(name=name, location=location), config)
    analyze_table(opened, config=config)
    return {k: v for k, v in read_stats(opened).items() if k not in VOLATILE}
