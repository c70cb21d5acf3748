from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lakestats.sketches.spark import FIELD_ID_READ_KEY, SparkSettings, get_spark


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
