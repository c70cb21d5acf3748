"""A catalog that takes the connection and never answers (pyiceberg's REST client waits
without a timeout): the table behind it hangs its own run, and nothing else — the daemon
starts and serves its API, the poll tick goes on hinting every table, the other tables stay
fresh and watched, SIGTERM ends it. Before, the daemon opened every table on its event loop
at start (no /healthz, no SIGTERM) and again in each poll tick (polling stopped for every
table); then one look thread went through the tables in order (none after the hung one
was watched).

The hung catalog is a real socket on 127.0.0.1 that accepts and then stays silent.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from lakestatsd_harness import DaemonProcess, daemon_env, fast_config_text

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers them."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_hung_catalog_hangs_only_its_own_table(tmp_path: Path, silent_server: int) -> None:
    good = tmp_path / "delta" / "good"
    write_deltalake(str(good), pa.table({"id": [1, 2]}, schema=SCHEMA))
    tables = f"""
[catalog.hung]
type = "rest"
uri = "http://127.0.0.1:{silent_server}"

[[table]]
name = "stuck"
catalog = "hung"
identifier = "db.stuck"

[[table]]
name = "good"
location = "{good}"
"""
    config = tmp_path / "lakestatsd.toml"
    config.write_text(fast_config_text(tmp_path / "state", tables))
    daemon = DaemonProcess(config, tmp_path / "daemon.log", daemon_env()).start(timeout_s=60)
    try:
        assert daemon.request("GET", "/healthz", timeout_s=5).status == 200
        daemon.wait_until(lambda: daemon.request("GET", "/v1/tables/good/stats").status == 200)

        # the table listed after the hung one is watched all the same
        def watched(name: str) -> bool:
            tables = daemon.get_json("/v1/tables")["tables"]
            return bool(next(t for t in tables if t["name"] == name)["watched"])

        daemon.wait_until(lambda: watched("good"), timeout_s=30)
        assert not watched("stuck")

        # the poll tick goes on: it hints both tables twice a second
        before = daemon.metric("lakestats_hints_total", source="poll") or 0
        time.sleep(2)
        after = daemon.metric("lakestats_hints_total", source="poll") or 0
        assert after >= before + 2

        # and the table that can be read stays fresh
        write_deltalake(str(good), pa.table({"id": [3]}, schema=SCHEMA), mode="append")
        daemon.wait_until(
            lambda: daemon.get_json("/v1/tables/good/stats")["record_count"] == 3, timeout_s=30
        )
        assert daemon.request("GET", "/v1/tables", timeout_s=5).status == 200
    finally:
        assert daemon.terminate(timeout_s=30) == 0
        daemon.close()
