from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import lakestats.sketches.spark as spark_module
from lakestats.exceptions import SparkUnavailableError
from lakestats.sketches.spark import (
    FIELD_ID_READ_KEY,
    MASTER_SETTLE_S,
    SparkSettings,
    get_spark,
    probe_master,
)


def test_settings_are_frozen_and_force_field_id_reading() -> None:
    conf = {FIELD_ID_READ_KEY: "false", "spark.ui.enabled": "true"}
    settings = SparkSettings(master="local[1]", conf=conf)
    conf["spark.extra"] = "x"  # the caller's dict changing later does not change the settings
    assert "spark.extra" not in settings.conf
    effective = settings.effective_conf()
    assert effective[FIELD_ID_READ_KEY] == "true"
    assert effective["spark.ui.enabled"] == "true"  # the caller may turn the UI on
    assert SparkSettings().effective_conf()["spark.ui.enabled"] == "false"
    assert SparkSettings().master == "local[*]"


@pytest.mark.spark
def test_one_session_per_process(spark: Any) -> None:
    assert get_spark() is spark
    assert get_spark(SparkSettings(master="local[1]", app_name="other")) is spark  # logged
    assert spark.conf.get(FIELD_ID_READ_KEY) == "true"


def test_importing_the_sketch_modules_does_not_import_pyspark() -> None:
    code = (
        "import sys, lakestats.pipeline, lakestats.sketches.spark, "
        "lakestats.sketches.merge, lakestats.sketches.histogram; "
        "sys.exit(1 if 'pyspark' in sys.modules else 0)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0


STOPPED_CONTEXT = """
import sys
from lakestats.sketches.spark import SparkSettings, get_spark, spark_health
settings = SparkSettings(master="local[1]", conf={"spark.ui.enabled": "false"})
first = get_spark(settings)
first.sparkContext._jsc.sc().stop()  # what Spark does after "All masters are unresponsive"
health = spark_health()
assert health.exists and health.stopped, health
second = get_spark(settings)  # recreated, not the dead one forever
assert second.range(5).count() == 5
assert not spark_health().stopped
print("recovered")
"""


def test_a_context_spark_stopped_itself_is_recreated(tmp_path: Path) -> None:
    """Issue 13: after Spark stopped its own context, every call failed with "Cannot call
    methods on a stopped SparkContext" forever. A subprocess: stopping this process's
    session would break the other tests."""
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(repo / "core")}
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_CONTEXT],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "recovered" in done.stdout


def test_a_master_that_comes_back_gets_a_moment_to_leave_standby(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real port on 127.0.0.1, closed then listening: the probe fails in one line, and
    the first probe that reaches it after that waits ``MASTER_SETTLE_S`` (Spark's client
    would wait 20 s after a registration a master in STANDBY ignored); later ones do not.
    (``time.sleep`` is recorded rather than slept.)"""
    slept: list[float] = []
    monkeypatch.setattr(spark_module.time, "sleep", slept.append)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    with pytest.raises(SparkUnavailableError, match=r"is unreachable \(127\.0\.0\.1:\d+: "):
        probe_master(master)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", port))
        listening.listen()
        probe_master(master)
        assert slept == [MASTER_SETTLE_S]
        probe_master(master)
        assert slept == [MASTER_SETTLE_S]


def test_a_new_session_waits_for_the_one_given_up_to_be_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A supervisor gives a session up (``stop_spark(reason)``) and stops it outside the
    lock; a run asking for Spark meanwhile gets a new session only after that stop ended
    (Spark would hand back the dying context: "'NoneType' object has no attribute 'sc'"),
    and registers with the master only after it had time to settle. Spark's session
    is replaced by recording fakes here: the race cannot be timed with a real one."""
    events: list[str] = []
    discarding = threading.Event()

    def slow_discard(session: Any) -> None:
        events.append("stop started")
        discarding.set()
        time.sleep(0.3)
        events.append("stop done")

    def create(settings: SparkSettings) -> Any:
        events.append("create")
        return object()

    master = "spark://127.0.0.1:7077"
    monkeypatch.setattr(spark_module, "_session", object())
    monkeypatch.setattr(spark_module, "_session_settings", SparkSettings(master=master))
    monkeypatch.setattr(spark_module, "_discard", slow_discard)
    monkeypatch.setattr(spark_module, "_create", create)
    monkeypatch.setattr(spark_module, "_masters_to_settle", set())
    stopper = threading.Thread(target=spark_module.stop_spark, args=("no executor for 4s",))
    stopper.start()
    assert discarding.wait(10)
    get_spark(SparkSettings(master=master))
    stopper.join(10)
    assert events == ["stop started", "stop done", "create"]
    assert spark_module._masters_to_settle == {master}
