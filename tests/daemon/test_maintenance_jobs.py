"""Scheduled expiry and compaction in the daemon: triggers, the per-table queue, metrics."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from call_counts import count_calls
from lakestats.analyze import analyze_table, read_stats
from lakestats.config import SketchConfig, load_config
from lakestats.exceptions import ConfigError
from lakestats.maintenance import compact, expire, stale_stats
from lakestats.tables import OpenedTable, open_configured
from lakestats.testing import IcebergWarehouse
from lakestatsd.app import Daemon
from lakestatsd.config import ScheduledExpireConfig as ExpireConfig
from lakestatsd.config import ServiceConfig as Config
from lakestatsd.config import ServiceMaintenanceConfig as MaintenanceConfig
from lakestatsd.config import ServiceTableConfig as TableConfig
from lakestatsd.maintenance import (
    COMPACT,
    EXPIRE,
    STORE_OBSERVE_EVERY_S,
    MaintenanceFns,
    MaintenanceRunner,
    MaintenanceScheduler,
    newest_version,
)
from lakestatsd.schedules import next_fire_times
from lakestatsd.wiring import Service, core_fns

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def wait_for(check: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_cron_and_interval_jobs_request_maintenance(tmp_path: Path) -> None:
    config = Config(
        state_dir=str(tmp_path),
        maintenance=MaintenanceConfig(compaction_interval_s=0.1),
        table=(
            TableConfig(
                name="a",
                location=str(tmp_path / "a"),
                expire=ExpireConfig(retain_last=5, schedule="30 3 * * 1"),
            ),
            TableConfig(name="b", location=str(tmp_path / "b"), expire=ExpireConfig(retain_last=5)),
        ),
    )
    requests: list[tuple[str, str]] = []
    lock = threading.Lock()

    def request(table: str, job: str) -> None:
        with lock:
            requests.append((table, job))

    jobs = MaintenanceScheduler(config, request)
    jobs.start()
    try:
        # "b" has a policy but no schedule: the daemon leaves its expiry to the CLI
        assert set(jobs.jobs()) == {"expire:a", "compact:a", "compact:b"}
        assert jobs.triggers()["expire:a"].startswith("cron[")
        nxt = jobs.jobs()["expire:a"]
        assert nxt is not None
        assert nxt == next_fire_times("30 3 * * 1", datetime.now(UTC), 1)[0]
        assert (nxt.weekday(), nxt.hour, nxt.minute) == (0, 3, 30)
        wait_for(lambda: {("a", COMPACT), ("b", COMPACT)} <= set(requests))
    finally:
        jobs.stop()
    assert ("a", EXPIRE) not in requests  # Monday 03:30 UTC is not now


def test_maintenance_runs_in_the_table_worker_never_beside_analyze(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    table = TableConfig(
        name="t",
        catalog=wh.catalog_name,
        identifier=wh.identifier("t"),
        expire=ExpireConfig(retain_last=3, schedule="0 0 1 1 *"),
    )
    config = Config(
        state_dir=str(tmp_path / "state"),
        sketch=SketchConfig(enabled=False),
        maintenance=MaintenanceConfig(
            grace_period="0s", min_log_versions=1, max_segments=2, compaction_interval_s=0.2
        ),
        catalog={wh.catalog_name: dict(wh.catalog_properties)},
        table=(table,),
    )
    busy = threading.Lock()  # held by whichever of analyze / maintenance runs on "t"
    overlaps: list[str] = []
    ran: list[str] = []

    def exclusive(name: str, fn: Callable[[], Any]) -> Any:
        if not busy.acquire(blocking=False):
            overlaps.append(name)
            busy.acquire()
        try:
            ran.append(name)
            return fn()
        finally:
            busy.release()

    def analyze(
        opened: OpenedTable, *, should_stop: Any, on_commit: Any, on_pending: Any, **more: Any
    ) -> Any:
        return exclusive(
            "analyze",
            lambda: analyze_table(
                opened,
                config=config,
                sketcher=None,
                should_stop=should_stop,
                on_commit=on_commit,
                on_pending=on_pending,
                **more,
            ),
        )

    daemon = Daemon(
        config,
        analyze=analyze,
        read_stats=read_stats,
        opener=open_configured,
        warm_spark=None,
        stop_spark=None,
        maintenance=MaintenanceFns(
            expire=lambda opened: exclusive("expire", lambda: expire(opened, config)),
            compact=lambda opened: exclusive("compact", lambda: compact(opened, config)),
            stale=stale_stats,
        ),
    )
    assert daemon.maintenance is not None and daemon.maintenance_jobs is not None
    daemon.queue.start()
    daemon.maintenance_jobs.start()
    try:
        for i in range(12):
            wh.append("t", pa.table({"id": [i]}, schema=SCHEMA))
            daemon.hint("t", "api")
            time.sleep(0.05)
        lineage = wh.lineage("t")
        # the cron job is due once a year; ask as its trigger would
        daemon.request_maintenance("t", EXPIRE)
        wait_for(lambda: wh.lineage("t") == lineage[-3:])

        def settled() -> bool:
            state = open_configured(table, config).store.current()
            return (
                state is not None
                and state.last_snapshot_id == lineage[-1]
                and set(state.stats) == set(lineage[-3:])
                and len(state.segments) <= 2
            )

        wait_for(settled)
        wait_for(lambda: "compact" in ran[ran.index("expire") :])

        # expiry by someone else, no new commit: the next (poll) run follows it
        wh.expire_snapshots("t", [lineage[-3]])
        daemon.hint("t", "poll")

        def followed() -> bool:
            state = open_configured(table, config).store.current()
            return state is not None and set(state.stats) == set(lineage[-2:])

        wait_for(followed)
    finally:
        daemon.maintenance_jobs.stop()
        assert daemon.queue.stop(10)
    assert not overlaps, overlaps
    assert {"analyze", "expire", "compact"} <= set(ran)
    text = generate_latest(daemon.metrics.registry).decode()
    for metric in (
        'lakestats_store_files{table="t"}',
        'lakestats_store_bytes{table="t"}',
        'lakestats_seconds_since_last_expiry{table="t"}',
        'lakestats_seconds_since_last_compaction{table="t"}',
        'lakestats_maintenance_runs_total{job="expire",outcome="ok",table="t"}',
        'lakestats_stats_expired_snapshots_total{table="t"}',
    ):
        assert metric in text, metric
    removed = [
        line
        for line in text.splitlines()
        if line.startswith("lakestats_maintenance_files_removed_total{")
    ]
    assert removed and sum(float(line.rsplit(" ", 1)[1]) for line in removed) > 0
    files = next(
        line for line in text.splitlines() if line.startswith('lakestats_store_files{table="t"}')
    )
    assert float(files.rsplit(" ", 1)[1]) > 0


def test_cron_day_of_week_is_read_the_standard_way() -> None:
    monday = datetime(2026, 11, 23, tzinfo=UTC)  # a Monday
    for expression, weekdays in [
        ("0 3 * * 1", {0}),
        ("0 3 * * 0", {6}),
        ("0 3 * * 7", {6}),
        ("0 3 * * 1-5", {0, 1, 2, 3, 4}),
        ("0 3 * * 5-7", {4, 5, 6}),
        ("0 3 * * */2", {6, 1, 3, 5}),
        ("0 3 * * sat,sun", {5, 6}),
    ]:
        fired = next_fire_times(expression, monday, 14)
        assert {t.weekday() for t in fired} == weekdays, expression
        assert all((t.hour, t.minute) == (3, 0) for t in fired)


def test_bad_maintenance_config_is_a_clear_error() -> None:
    for env, message in [
        (
            {"LAKESTATS_MAINTENANCE__GRACE_PERIOD": "soon"},
            "maintenance.grace_period: not a duration",
        ),
        (
            {
                "LAKESTATS_MAINTENANCE__GRACE_PERIOD": "2h",
                "LAKESTATS_MAINTENANCE__LOG_RETENTION": "1h",
            },
            "log_retention must be at least grace_period",
        ),
        ({"LAKESTATS_MAINTENANCE__MAX_SEGMENTS": "0"}, "maintenance.max_segments"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, env)
    with pytest.raises(ValueError, match="5-field cron"):
        ExpireConfig(retain_last=1, schedule="0 3 * *")
    with pytest.raises(ValueError, match="bad day of week"):
        ExpireConfig(retain_last=1, schedule="0 3 * * funday")
    with pytest.raises(ValueError, match="not a valid cron expression"):
        ExpireConfig(retain_last=1, schedule="0 25 * * *")
    with pytest.raises(ValueError, match="needs older_than and/or retain_last"):
        ExpireConfig(schedule="0 3 * * *")


def test_the_store_is_measured_when_it_changes_not_on_every_poll(tmp_path: Path) -> None:
    """``observe_store`` runs on every poll tick; the measure walks the table's whole store
    (a recursive listing on S3), so it is taken again only when the state log changed,
    after a maintenance job, or when ``STORE_OBSERVE_EVERY_S`` passed. A real table and
    store; the walks counted through the store's own ``usage``."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", pa.table({"id": [1]}, schema=SCHEMA))
    table = TableConfig(name="t", catalog=wh.catalog_name, identifier=wh.identifier("t"))
    config = Config(
        state_dir=str(tmp_path / "state"),
        sketch=SketchConfig(enabled=False),
        catalog={wh.catalog_name: dict(wh.catalog_properties)},
        table=(table,),
    )
    opened = open_configured(table, config)
    analyze_table(opened, config=config, sketcher=None)
    measured: list[tuple[int, int]] = []
    usage = opened.store.usage

    def counted() -> tuple[int, int]:
        measured.append(usage())
        return measured[-1]

    opened.store.usage = counted  # type: ignore[method-assign]
    now = [1000.0]
    registry = CollectorRegistry()
    runner = MaintenanceRunner(
        config,
        registry,
        MaintenanceFns(
            expire=lambda o: expire(o, config),
            compact=lambda o: compact(o, config),
            stale=stale_stats,
        ),
        clock=lambda: now[0],
    )

    def gauge() -> float:
        text = generate_latest(registry).decode()
        line = next(
            x for x in text.splitlines() if x.startswith('lakestats_store_files{table="t"}')
        )
        return float(line.rsplit(" ", 1)[1])

    runner.observe_store("t", opened, newest_version(opened))
    runner.observe_store("t", opened, newest_version(opened))
    assert len(measured) == 1 and gauge() == measured[0][0] > 0
    wh.append("t", pa.table({"id": [2]}, schema=SCHEMA))
    analyze_table(opened, config=config, sketcher=None)  # a new state version
    runner.observe_store("t", opened, newest_version(opened))
    runner.observe_store("t", opened, newest_version(opened))
    assert len(measured) == 2 and gauge() == measured[1][0] > measured[0][0]
    now[0] += STORE_OBSERVE_EVERY_S
    runner.observe_store("t", opened, newest_version(opened))
    assert len(measured) == 3
    runner.request("t", COMPACT)
    assert runner.run_pending("t", opened, lambda: False)
    runner.observe_store("t", opened, newest_version(opened))
    assert len(measured) == 4


def test_an_idle_poll_asks_for_the_newest_state_version_once(tmp_path: Path) -> None:
    """The poll's cheap path reads the store's newest state version (``current``: two
    stats, two HEADs on S3); the store metric keys on that read instead of asking again.
    After a commit or a maintenance job the store is measured again. The daemon's own
    runtime on a real table; the store's calls counted around the real ones."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    wh.append("t", pa.table({"id": [1]}, schema=SCHEMA))
    config = Config.model_validate(
        {
            "state_dir": str(tmp_path / "state"),
            "sketch": {"enabled": False},
            "table": [{"name": "t", "location": wh.location("t")}],
        }
    )
    core = core_fns(config)
    calls: Counter[str] = Counter(current=0, usage=0)
    handles: list[OpenedTable] = []

    def counting_opener(table: Any, cfg: Any) -> OpenedTable:
        opened = core.opener(table, cfg)
        count_calls(opened.store, "current", calls)
        count_calls(opened.store, "usage", calls)
        handles.append(opened)
        return opened

    service = Service(config, dataclasses.replace(core, opener=counting_opener))
    assert service.maintenance is not None

    def gauge() -> float:
        text = generate_latest(service.metrics.registry).decode()
        line = next(
            x for x in text.splitlines() if x.startswith('lakestats_store_files{table="t"}')
        )
        return float(line.rsplit(" ", 1)[1])

    def poll() -> dict[str, int]:
        before = dict(calls)
        assert service.runtime.process("t", lambda: False)
        return {k: calls[k] - before[k] for k in calls}

    poll()  # the first run: the initial commit's stats
    assert poll()["current"] == 1 and gauge() == handles[-1].store.usage()[0]
    for _ in range(3):
        assert poll() == {"current": 1, "usage": 0}
    wh.append("t", pa.table({"id": [2]}, schema=SCHEMA))
    assert poll()["usage"] == 1  # a new state version: measured again
    assert poll() == {"current": 1, "usage": 0}
    measured = gauge()
    assert measured == handles[-1].store.usage()[0]
    service.maintenance.request("t", COMPACT)
    assert poll()["usage"] >= 1  # after the job, measured again, with what it wrote
    assert gauge() == handles[-1].store.usage()[0]
    assert poll() == {"current": 1, "usage": 0}
    assert len(handles) == 1
