"""A table catching up on a long backlog shares the daemon's workers: past
``watch.run_slice_s`` its run gives the worker back at a batch boundary when another table
waits for one, and goes on after it (a real daemon, Delta tables, one worker)."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from lakestatsd_harness import DaemonProcess, daemon_env, fast_config_text

SCHEMA = pa.schema([("id", pa.int64())])


def commit(location: Path, i: int) -> None:
    write_deltalake(str(location), pa.table({"id": [i]}, schema=SCHEMA), mode="append")


def test_a_backlog_gives_way_to_a_fresh_commit_of_another_table(tmp_path: Path) -> None:
    big, small = tmp_path / "delta" / "big", tmp_path / "delta" / "small"
    commit(small, 0)
    commit(big, 0)
    tables = "".join(f'[[table]]\nname = "{p.name}"\nlocation = "{p}"\n' for p in (small, big))
    config = tmp_path / "lakestatsd.toml"
    config.write_text(
        fast_config_text(
            tmp_path / "state", tables, watch="max_concurrent_tables = 1\nrun_slice_s = 0.2"
        )
    )
    daemon = DaemonProcess(config, tmp_path / "daemon.log", daemon_env()).start()
    try:
        for name in ("small", "big"):
            daemon.wait_until(
                lambda n=name: daemon.request("GET", f"/v1/tables/{n}/stats").status == 200
            )
        daemon.proc.send_signal(signal.SIGSTOP)  # the backlog lands while the daemon sleeps
        try:
            for i in range(1, 200):
                commit(big, i)
        finally:
            daemon.proc.send_signal(signal.SIGCONT)
        daemon.wait_event("commit_processed", count=4)  # big's run is under way
        commit(small, 1)
        daemon.wait_until(
            lambda: daemon.get_json("/v1/tables/big/stats")["record_count"] == 200, timeout_s=120
        )
        processed = [(e["table"], e["snapshot_id"]) for e in daemon.events("commit_processed")]
        assert ("small", 1) in processed
        # the fresh commit of the small table was processed before the backlog was done
        assert processed.index(("small", 1)) < processed.index(("big", 199))
        assert daemon.events("table_run_gave_way")
        # each turn after giving way goes on at the batch size the run had reached: its
        # first batch is never a single commit again
        events = daemon.events()
        big = [(i, e) for i, e in enumerate(events) if e.get("table") == "big"]
        turns = [
            next(e for j, e in big if j > i and e.get("event") == "commit_processed")
            for i, e in big
            if e.get("event") == "table_run_gave_way"
        ]
        assert turns and all(e["batch_commits"] > 1 for e in turns)
        assert daemon.get_json("/v1/tables/small/stats")["record_count"] == 2
    finally:
        assert daemon.terminate() == 0
        daemon.close()
