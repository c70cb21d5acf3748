"""The daemon's config: the library's file plus the service's sections, validated strictly."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lakestatsd_harness import fast_config_text

from lakestats.config import SERVICE_KEYS, Config, ExpireConfig, TableConfig, load_config
from lakestats.exceptions import ConfigError
from lakestatsd.cli import main
from lakestatsd.config import (
    ScheduledExpireConfig,
    ServiceConfig,
    ServiceMaintenanceConfig,
    ServiceTableConfig,
    load_service_config,
)

FILE = """
state_dir = "state"
[watch]
enabled = false
poll_interval_s = "2m"
debounce_s = 1
backoff_max_s = "1h"
[daemon]
shutdown_timeout_s = "45s"
log_level = "WARNING"
[maintenance]
enabled = false
compaction_interval_s = "12h"
grace_period = "30m"
[[table]]
name = "orders"
location = "warehouse/orders"
expire = { older_than = "7d", schedule = "30 3 * * 1" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lakestatsd.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_one_file_for_both_loaders(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    service = load_service_config(path, env={"LAKESTATS_WATCH__DEBOUNCE_S": "2s"})
    assert isinstance(service, Config)  # core takes it as it is
    assert service.watch.enabled is False
    assert service.watch.poll_interval_s == 120.0 and service.watch.debounce_s == 2.0
    assert service.watch.backoff_max_s == 3600.0
    assert service.daemon.shutdown_timeout_s == 45.0 and service.daemon.log_level == "warning"
    assert service.maintenance.enabled is False
    assert service.maintenance.compaction_interval_s == 43200.0
    assert service.maintenance.grace_period_s == 1800.0
    table = service.find_table("orders")
    assert table is not None and table.expire is not None
    assert table.expire.schedule == "30 3 * * 1" and table.expire.older_than_s == 604800.0
    assert table.location == str(tmp_path / "warehouse/orders")
    assert service.state_dir == str(tmp_path / "state")

    library = load_config(path, env={})  # the CLI reads the very same file
    assert library.state_dir == service.state_dir
    assert library.table[0].expire == ExpireConfig(older_than="7d")
    assert type(library.table[0].expire) is ExpireConfig


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        (FILE.replace("[watch]", "[watch]\npoll = 3"), {}, "key watch.poll: unknown key"),
        (FILE, {"LAKESTATS_DAEMON__GRACE": "1"}, "key daemon.grace: unknown key"),
        (FILE.replace('"12h"', '"often"'), {}, "key maintenance.compaction_interval_s: not a"),
        (FILE, {"LAKESTATS_WATCH__POLL_INTERVAL_S": "-1"}, "key watch.poll_interval_s"),
        (FILE, {"LAKESTATS_DAEMON__LOG_LEVEL": "loud"}, "key daemon.log_level: must be one"),
        (
            FILE.replace("30 3 * * 1", "30 3 * * 9"),
            {},
            "key table[0].expire.schedule: not a valid cron expression '30 3 * * 9': "
            "bad day of week '9'",
        ),
        (
            FILE.replace("30 3 * * 1", "30 3 *"),
            {},
            "key table[0].expire.schedule: not a 5-field cron expression",
        ),
    ],
)
def test_daemon_sections_are_strict(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_service_config(path, env=env)
    assert message in str(info.value) and "\n" not in str(info.value)
    load_config(path, env=env)  # the library does not interpret these keys


def test_a_library_key_mistake_is_an_error_for_both(tmp_path: Path) -> None:
    path = write(tmp_path, FILE.replace("schedule =", "when = 1, schedule ="))
    for load in (load_config, load_service_config):
        with pytest.raises(ConfigError, match=r"key table\[0\]\.expire\.when: unknown key"):
            load(path, env={})


def test_check_config_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, FILE.replace("[daemon]", "[daemon]\nshutdown = 3"))
    assert main(["--config", str(bad), "--check-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "key daemon.shutdown: unknown key" in err[0]
    good = write(tmp_path, FILE)
    assert main(["--config", str(good), "--check-config"]) == 0
    assert "configuration OK (1 tables)" in capsys.readouterr().out


def test_a_kll_k_coarser_than_a_bucket_is_a_warning_at_check_and_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_daemon: Any
) -> None:
    """``kll_k = 200``, as the example configs had it, still starts (an error would stop
    an upgraded daemon), but says what it costs: on stderr for ``--check-config``, as a
    ``config_warning`` event at start."""
    coarse = write(tmp_path, FILE + "[sketch]\nkll_k = 200\n")
    assert main(["--config", str(coarse), "--check-config"]) == 0
    captured = capsys.readouterr()
    assert "configuration OK" in captured.out
    (warning,) = captured.err.strip().splitlines()
    assert warning.startswith("lakestatsd: warning: sketch.kll_k 200 bounds")
    assert main(["--config", str(write(tmp_path, FILE)), "--check-config"]) == 0
    assert capsys.readouterr().err == ""  # the derived default: nothing to say

    text = fast_config_text(tmp_path / "state", "")
    # logged before Spark starts: no need to wait for the JVM
    daemon = run_daemon(
        text, wait_ready=False, LAKESTATS_SKETCH__ENABLED="true", LAKESTATS_SKETCH__KLL_K="200"
    )
    (event,) = daemon.wait_event("config_warning")
    assert event["level"] == "warning" and warning.endswith(event["note"])


def test_service_keys_are_what_the_daemon_adds() -> None:
    """Core's list of keys it tolerates matches what the daemon models: no drift."""
    added = {(name,) for name in set(ServiceConfig.model_fields) - set(Config.model_fields)}
    maintenance = set(ServiceMaintenanceConfig.model_fields) - set(
        Config.model_fields["maintenance"].annotation.model_fields  # type: ignore[union-attr]
    )
    added |= {("maintenance", name) for name in maintenance}
    schedule = set(ScheduledExpireConfig.model_fields) - set(ExpireConfig.model_fields)
    added |= {("table", "*", "expire", name) for name in schedule}
    assert set(ServiceTableConfig.model_fields) == set(TableConfig.model_fields)
    assert set(SERVICE_KEYS) == added


def test_the_demo_finds_the_repository_config_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(tmp_path)  # not the repository
    monkeypatch.syspath_prepend(str(repo / "examples"))  # as for a script: its shared module
    spec = importlib.util.spec_from_file_location("demo_example", repo / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    config_path = demo.CONFIG_PATH
    assert config_path == repo / "config" / "local.toml"
    config = load_service_config(config_path, env={})
    location = config.table[0].location
    assert location is not None
    assert Path(location).resolve() == repo / "demo-warehouse/warehouse/shop/orders"
    assert importlib.util.find_spec("lakestats.demo") is None  # not part of the library


def test_the_stall_timeout_outlasts_two_spark_jobs_unless_set(tmp_path: Path) -> None:
    path = tmp_path / "lakestatsd.toml"
    path.write_text("")
    assert load_service_config(path).stall_timeout_s == 2 * 3600 + 900
    path.write_text('[spark]\njob_timeout_s = "10m"\n')
    assert load_service_config(path).stall_timeout_s == 2 * 600 + 900
    path.write_text('[spark]\njob_timeout_s = "10m"\n[watch]\nstall_timeout_s = "5m"\n')
    assert load_service_config(path).stall_timeout_s == 300
