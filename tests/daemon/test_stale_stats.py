"""Table metadata corrupted in place (same file name): noticed by the next run, and the
last good stats are still served — flagged stale — after a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakestatsd_harness import DaemonProcess

from lakestats.exceptions import LakestatsError, MetadataError, UnreadableCommitError
from lakestats.testing import IcebergWarehouse
from lakestatsd.config import ServiceConfig
from lakestatsd.wiring import Service, core_fns


def corrupt_in_place(location: str) -> None:
    metadata = sorted((Path(location) / "metadata").glob("*.metadata.json"))[-1]
    text = metadata.read_text()
    metadata.write_text(text[: len(text) // 2])  # same name, truncated


def make_table(tmp_path: Path) -> IcebergWarehouse:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1, 2]})
    wh.append("t", {"id": [3]})
    return wh


def in_process_service(tmp_path: Path, wh: IcebergWarehouse) -> Service:
    """The daemon's service around table ``t`` of ``wh``, metadata only, run by hand."""
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "table": [{"name": "t", "location": wh.location("t")}],
        }
    )
    return Service(config, core_fns(config))


def test_corruption_in_place_is_noticed_by_the_next_run(tmp_path: Path) -> None:
    wh = make_table(tmp_path)
    service = in_process_service(tmp_path, wh)
    assert service.runtime.process("t", lambda: False)
    assert service.runtime.process("t", lambda: False)  # nothing new: the cheap path
    corrupt_in_place(wh.location("t"))
    with pytest.raises(MetadataError, match="metadata"):
        service.runtime.process("t", lambda: False)


def test_a_commit_that_cannot_be_read_stops_the_daemon_after_the_ones_before_it(
    tmp_path: Path,
) -> None:
    """The daemon processes the commits before an unreadable one and reports it; the
    freshness lag does not say 0 while the stats are behind; once the file is readable
    again the next run catches up."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1, 2]})
    service = in_process_service(tmp_path, wh)
    assert service.runtime.process("t", lambda: False)
    assert service.freshness.lag_s("t") == 0
    second = wh.append("t", {"id": [3]})
    third = wh.append("t", {"id": [4, 5]})
    table = wh.table("t")
    snapshot = table.snapshot_by_id(third)
    assert snapshot is not None
    (new,) = [m for m in snapshot.manifests(table.io) if m.added_snapshot_id == third]
    broken = Path(new.manifest_path.removeprefix("file://"))
    good = broken.read_bytes()
    broken.write_bytes(b"Obj\x01garbage")
    with pytest.raises(UnreadableCommitError, match=f"snapshot {third}: .*{broken.name}"):
        service.runtime.process("t", lambda: False)
    assert service.runtime.read_stats("t", None)["snapshot_id"] == second
    lag = service.freshness.lag_s("t")
    assert lag is not None and lag >= 0
    assert service.freshness.snapshot_ids("t") == (second, third)
    time.sleep(0.05)
    with pytest.raises(UnreadableCommitError):  # nothing before it now: the same error
        service.runtime.process("t", lambda: False)
    again = service.freshness.lag_s("t")
    assert again is not None and again > lag  # counting, not reset to 0
    broken.write_bytes(good)
    assert service.runtime.process("t", lambda: False)
    assert service.runtime.read_stats("t", None)["snapshot_id"] == third
    assert service.freshness.lag_s("t") == 0


def test_after_a_restart_the_last_good_stats_are_served_flagged_stale(
    tmp_path: Path, run_daemon: Callable[..., DaemonProcess]
) -> None:
    wh = make_table(tmp_path)
    text = f"""
state_dir = "{tmp_path / "state"}"
[http]
listen = "127.0.0.1:0"
[sketch]
enabled = false
[watch]
poll_interval_s = 30
[[table]]
name = "t"
location = "{wh.location("t")}"
"""
    daemon = run_daemon(text)
    current = wh.table("t").metadata.current_snapshot_id

    def served() -> Any:
        resp = daemon.request("GET", "/v1/tables/t/stats")
        return resp.json() if resp.status == 200 else None

    # until the daemon has processed both commits
    daemon.wait_until(lambda: (served() or {}).get("snapshot_id") == current, timeout_s=30)
    good = served()
    assert good is not None and good["snapshot_id"] == current
    assert "stale" not in good
    assert daemon.terminate() == 0
    corrupt_in_place(wh.location("t"))

    restarted = run_daemon(text)
    resp = restarted.request("GET", "/v1/tables/t/stats")
    assert resp.status == 200, resp.body
    doc = resp.json()
    assert doc["stale"] is True and "MetadataError" in doc["stale_reason"]
    assert doc["snapshot_id"] == good["snapshot_id"]
    assert doc["record_count"] == good["record_count"] == 3
    assert doc["columns"] == good["columns"]
    estimate = restarted.get_json("/v1/tables/t/estimate?predicate=id%20IS%20NOT%20NULL")
    # the same error (its text may say how long ago the file was written)
    kind = doc["stale_reason"].split(":", 1)[0]
    assert estimate["stale"] is True and estimate["stale_reason"].startswith(f"{kind}: ")
    assert estimate["rows"] == 3 and estimate["snapshot_id"] == good["snapshot_id"]
    # a specific snapshot still needs the metadata: 503, as before
    other = restarted.request("GET", f"/v1/tables/t/stats?snapshot={good['snapshot_id']}")
    assert other.status == 503


def test_a_paimon_snapshot_corrupt_in_place_serves_the_stats_stale(tmp_path: Path) -> None:
    """The look at a Paimon table reads LATEST, which still names the snapshot; reading
    the snapshot file itself fails later in the run. The stats are served flagged stale
    all the same (as for Iceberg and Delta), and unflagged once the file is whole again."""
    from paimon_tables import PaimonWarehouse

    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("p", [("id", "long")])
    warehouse.write("p", {"id": [1, 2]})
    warehouse.write("p", {"id": [3]})
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "table": [{"name": "p", "location": str(location)}],
        }
    )
    service = Service(config, core_fns(config))
    assert service.runtime.process("p", lambda: False)
    assert "stale" not in service.runtime.read_stats("p", None)
    snapshot = location / "snapshot" / f"snapshot-{warehouse.current('p')}"
    whole = snapshot.read_bytes()
    snapshot.write_bytes(whole[: len(whole) // 2])  # same name, truncated

    with pytest.raises(MetadataError, match="not valid JSON"):
        service.runtime.process("p", lambda: False)
    doc = service.runtime.read_stats("p", None)
    assert doc["stale"] is True and snapshot.name in doc["stale_reason"]
    assert doc["record_count"] == 3  # the last good stats

    snapshot.write_bytes(whole)
    assert service.runtime.process("p", lambda: False)
    assert "stale" not in service.runtime.read_stats("p", None)


def test_a_table_never_opened_is_looked_for_in_the_state_dir_once_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stats of a table that cannot be opened are found by reading every folder of the
    state dir (its store folder is named by an id only its metadata holds). A request for
    one that has none does not read them all again for each request (anyone may ask)."""
    import lakestatsd.runtime as runtime_module

    wh = make_table(tmp_path)
    state = tmp_path / "state"
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(state),
            "sketch": {"enabled": False},
            "table": [
                {"name": "t", "location": wh.location("t")},
                {"name": "gone", "location": str(tmp_path / "nowhere")},
            ],
        }
    )
    service = Service(config, core_fns(config))
    assert service.runtime.process("t", lambda: False)  # one folder to look through
    searches: list[str] = []
    real = runtime_module.read_last_stats

    def counted(table: Any, *args: Any, **kwargs: Any) -> Any:
        searches.append(table.name)
        return real(table, *args, **kwargs)

    monkeypatch.setattr(runtime_module, "read_last_stats", counted)
    for _ in range(5):
        with pytest.raises(LakestatsError):
            service.runtime.read_stats("gone", None)
    assert searches == ["gone"]
    # a table whose stats the search finds is served from its folder from then on
    corrupt_in_place(wh.location("t"))
    fresh = Service(config, core_fns(config))
    for _ in range(3):
        assert fresh.runtime.read_stats("t", None)["stale"] is True
    assert searches == ["gone", "t", "t", "t"]  # named folder: no search, one read each


def test_a_failed_scheduled_expiry_does_not_flag_the_stats_stale(tmp_path: Path) -> None:
    """A MetadataError of a scheduled expiry (a manifest list that only an expiring
    snapshot names, corrupt) fails that job and leaves it pending, but the table's current
    metadata reads fine: the stats it serves are not stale."""
    import json

    from paimon_tables import PaimonWarehouse

    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("p", [("id", "long")])
    for i in range(4):
        warehouse.write("p", {"id": [i]})
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "maintenance": {"grace_period": "0s"},
            "table": [
                {
                    "name": "p",
                    "location": str(location),
                    "expire": {"retain_last": 2, "schedule": "0 0 1 1 *"},
                }
            ],
        }
    )
    service = Service(config, core_fns(config))
    assert service.runtime.process("p", lambda: False)
    first = json.loads((location / "snapshot" / "snapshot-1").read_text())
    delta_list = location / "manifest" / first["deltaManifestList"]
    delta_list.write_bytes(b"not avro")  # only snapshot 1 names it

    assert service.maintenance is not None
    service.maintenance.request("p", "expire")
    with pytest.raises(MetadataError, match=first["deltaManifestList"]):
        service.runtime.process("p", lambda: False)
    doc = service.runtime.read_stats("p", None)
    assert "stale" not in doc and doc["record_count"] == 4
    assert service.maintenance.pending("p")  # retried with the table's next run
