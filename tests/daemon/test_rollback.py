"""A table rolled back under a running daemon: the daemon recovers as ``analyze`` does.

The daemon walks the table's lineage once per run, inside core's rollback fallback (the
freshness lag comes from that same walk), so a rollback past the processed snapshot starts
the table over from its lineage instead of failing it on every run.
"""

from __future__ import annotations

from pathlib import Path

from test_e2e import (
    SCHEMA,
    TOKEN,
    Runner,
    config_text,
    from_scratch,
    rows,
    stable,
    stats_snapshot,
    wait_until,
)

from lakestats.testing import IcebergWarehouse


def test_daemon_recovers_after_a_rollback(tmp_path: Path, run_daemon: Runner) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    first = wh.append("t", rows(0))
    wh.append("t", rows(1))
    last = wh.append("t", rows(2))
    location = wh.location("t")
    daemon = run_daemon(config_text(tmp_path / "state", {"t": location}, watch=False))
    wait_until(lambda: stats_snapshot(daemon) == last, 30, "stats of the last commit")

    wh.rollback("t", first)  # the processed snapshot is no longer in the lineage
    newest = wh.append("t", rows(3))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    resp = daemon.request("POST", "/v1/tables/t/commits?wait=true", headers=auth)
    assert resp.status == 200, (resp.status, resp.body, daemon.tail())
    assert resp.json()["last_snapshot_id"] == newest

    table = next(t for t in daemon.get_json("/v1/tables")["tables"] if t["name"] == "t")
    assert table["healthy"] is True and table["last_error"] is None
    assert table["freshness_lag_seconds"] == 0
    assert daemon.metric("lakestats_table_healthy", table="t") == 1
    assert stable(daemon.get_json("/v1/tables/t/stats")) == stable(
        from_scratch(location, tmp_path / "scratch", sketches=False)
    )


def test_after_a_rollback_the_daemon_reads_only_the_new_file(
    tmp_path: Path, run_daemon: Runner
) -> None:
    """With sketches on: the walk after the rollback takes the stored sketches of the file
    the kept snapshot lists (``lakestats_files_reused_total``) and reads only the file
    committed since (``lakestats_files_sketched_total``)."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    first = wh.append("t", rows(0))
    wh.append("t", rows(1))
    last = wh.append("t", rows(2))
    location = wh.location("t")
    text = config_text(tmp_path / "state", {"t": location}, sketches=True, watch=False)
    daemon = run_daemon(text)
    wait_until(lambda: stats_snapshot(daemon) == last, 120, "stats of the last commit")
    assert daemon.metric("lakestats_files_sketched_total", table="t") == 3

    wh.rollback("t", first)
    newest = wh.append("t", rows(3))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    resp = daemon.request("POST", "/v1/tables/t/commits?wait=true", headers=auth)
    assert resp.status == 200, (resp.status, resp.body, daemon.tail())
    assert resp.json()["last_snapshot_id"] == newest
    assert daemon.metric("lakestats_files_sketched_total", table="t") == 3 + 1
    assert daemon.metric("lakestats_files_reused_total", table="t") == 1
    doc = daemon.get_json("/v1/tables/t/stats")
    assert doc["record_count"] == sum(len(rows(i)["id"]) for i in (0, 3))
