"""A Delta log cut back under a running daemon and written again up to the processed
version: the version exists again but names another commit. The daemon's cheap poll path
(processed == current) must not call the table up to date; the next run starts over, as
``analyze`` does (``lakestats.lineage``)."""

from __future__ import annotations

from pathlib import Path

from test_e2e import TOKEN, Runner, config_text, from_scratch, stable, stats_snapshot, wait_until

from delta_tables import DeltaWriter


def rows(first: int, count: int) -> dict[str, list[int]]:
    return {"id": list(range(first, first + count))}


def test_daemon_starts_over_when_the_processed_version_is_reused(
    tmp_path: Path, run_daemon: Runner
) -> None:
    writer = DeltaWriter(tmp_path / "t")
    writer.create([("id", "long")])
    writer.append(rows(0, 4))
    assert writer.append(rows(10, 4)) == 2
    daemon = run_daemon(config_text(tmp_path / "state", {"t": writer.path}, watch=False))
    wait_until(lambda: stats_snapshot(daemon) == 2, 30, "stats of version 2")

    writer.cut_log_after(1)  # Delta's rollback: the log cut back …
    assert writer.append(rows(100, 9)) == 2  # … and version 2 written again
    auth = {"Authorization": f"Bearer {TOKEN}"}
    resp = daemon.request("POST", "/v1/tables/t/commits?wait=true", headers=auth)
    assert resp.status == 200, (resp.status, resp.body, daemon.tail())
    assert resp.json()["last_snapshot_id"] == 2

    doc = daemon.get_json("/v1/tables/t/stats")
    assert doc["record_count"] == 4 + 9
    assert doc["columns"]["id"]["max"] == 108
    scratch = from_scratch(writer.path, tmp_path / "scratch", sketches=False)
    for published in (doc, scratch):
        published.pop("published")  # each store publishes its own sidecar copy
    assert stable(doc) == stable(scratch)
    table = next(t for t in daemon.get_json("/v1/tables")["tables"] if t["name"] == "t")
    assert table["healthy"] is True and table["freshness_lag_seconds"] == 0
