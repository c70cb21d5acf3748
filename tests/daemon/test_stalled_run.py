"""A table whose run hangs in a read (a FIFO where the Delta log's ``_last_checkpoint``
hint is: opening it blocks until someone writes, as a read from a dead NFS mount blocks)
against a real ``lakestatsd``: the other table goes on, ``/healthz`` fails once the run
is silent past ``watch.stall_timeout_s`` (the supervisor would restart the process), and
recovers when the read returns."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from lakestatsd_harness import DaemonProcess, fast_config_text

from delta_tables import DeltaWriter


def new_table(path: Path) -> DeltaWriter:
    writer = DeltaWriter(path)
    writer.create([("id", "long"), ("cat", "string")])
    writer.append({"id": [0], "cat": ["c0"]})
    return writer


def stats_version(daemon: DaemonProcess, name: str) -> int | None:
    resp = daemon.request("GET", f"/v1/tables/{name}/stats")
    return int(resp.json()["snapshot_id"]) if resp.status == 200 else None


def stalls_of(daemon: DaemonProcess, name: str) -> list[dict[str, Any]]:
    return [e for e in daemon.events("table_run_stalled") if e.get("table") == name]


def test_a_hung_read_stalls_its_table_only_and_fails_liveness(
    tmp_path: Path, run_daemon: Any
) -> None:
    hangs, fine = new_table(tmp_path / "hangs"), new_table(tmp_path / "fine")
    tables = "".join(
        f'[[table]]\nname = "{w.path.rsplit("/", 1)[1]}"\nlocation = "{w.path}"\n'
        for w in (hangs, fine)
    )
    daemon: DaemonProcess = run_daemon(
        fast_config_text(tmp_path / "state", tables, watch="stall_timeout_s = 1")
    )
    for name, writer in (("hangs", hangs), ("fine", fine)):
        daemon.wait_until(lambda n=name, w=writer: stats_version(daemon, n) == w.version())
    assert daemon.request("GET", "/healthz").status == 200

    # a run slower than the 1 s timeout before the hang (a loaded machine) logs a stall of
    # its own: wait for one more, the hang's
    before = len(stalls_of(daemon, "hangs"))
    hint = hangs.log / "_last_checkpoint"
    os.mkfifo(hint)  # the next poll's listing reads the hint: it blocks there
    daemon.wait_until(lambda: len(stalls_of(daemon, "hangs")) > before)
    health = daemon.request("GET", "/healthz")
    assert health.status == 503
    assert "hangs" in health.json()["stalled"]
    # only the hang stays stalled (a slow poll of the other may pass 1 s for a moment)
    daemon.wait_until(lambda: set(daemon.request("GET", "/healthz").json()["stalled"]) == {"hangs"})
    assert daemon.metric("lakestats_tables_stalled") == 1
    # one stalled table holds one worker; the other table is still processed
    newer = fine.append({"id": [1], "cat": ["c1"]})
    daemon.wait_until(lambda: stats_version(daemon, "fine") == newer)

    # the read returns (a writer opens the FIFO: it only can while the daemon waits in it)
    try:
        writer_end = os.open(hint, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:  # ENXIO: nobody reads it, the daemon is not blocked there
        raise AssertionError(
            f"the daemon is not reading the hint: {errno.errorcode[exc.errno]}"
        ) from None
    hint.unlink()  # the next listing finds no hint
    # the reader's open returned with ours; it may have read an empty hint already
    with contextlib.suppress(BrokenPipeError):
        os.write(writer_end, b'{"version": 0}')
    os.close(writer_end)
    newest = hangs.append({"id": [2], "cat": ["c2"]})
    daemon.wait_until(lambda: stats_version(daemon, "hangs") == newest)
    daemon.wait_until(lambda: daemon.request("GET", "/healthz").status == 200)
    assert daemon.metric("lakestats_tables_stalled") == 0
