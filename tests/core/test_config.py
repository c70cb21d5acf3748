"""Config: TOML + environment, every mistake named by its key."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from datasketches import kll_doubles_sketch

from lakestats.config import SERVICE_KEYS, Config, load_config, parse_duration, without_service_keys
from lakestats.exceptions import ConfigError

GOOD = """
state_dir = "var/lakestats"
[http]
listen = "127.0.0.1:9000"
[spark]
master = "local[2]"
[spark.conf]
"spark.sql.shuffle.partitions" = 4
[sketch]
kll_k = 400
[[table]]
name = "sales"
location = "/data/warehouse/db/sales"
[[table]]
name = "events"
catalog = "main"
identifier = "db.events"
[catalog.main]
type = "sql"
uri = "sqlite:////data/warehouse/catalog.db"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lakestats.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_good_file_parses_and_resolves_relative_paths(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD), env={})
    assert config.state_dir == str(tmp_path / "var/lakestats")
    assert config.http.port == 9000
    assert config.spark.conf["spark.sql.shuffle.partitions"] == "4"
    assert config.sketch.settings().kll_k == 400
    assert config.find_table("events").identifier == "db.events"  # type: ignore[union-attr]
    assert config.catalog["main"]["type"] == "sql"


def test_defaults_without_a_file() -> None:
    config = load_config(None, env={})
    assert config.state_dir == ".lakestats"
    assert config.http.listen == "127.0.0.1:8765"
    assert config.spark.master == "local[*]"
    # issue 14: k derives from the default error rate (a quarter of a bucket's share); it
    # was a fixed 200 (1.65 % error against a bucket's 1 %)
    assert config.sketch.settings().kll_k == 1481 and config.sketch.theta_lg_k == 12


def test_environment_overrides_every_level(tmp_path: Path) -> None:
    config = load_config(
        _write(tmp_path, GOOD),
        env={
            "LAKESTATS_STATE_DIR": "/srv/stats",
            "LAKESTATS_HTTP__TOKEN": "s3cret",
            "LAKESTATS_SPARK__CONF__spark.driver.memory": "2g",
            "LAKESTATS_CATALOG__MAIN__URI": "sqlite:////other.db",
            "LAKESTATS_TABLE__SALES__SKETCHES": "false",
            "LAKESTATS_SKETCH__QUANTILES": "0.1,0.5,0.9",
        },
    )
    assert config.state_dir == "/srv/stats"
    assert config.http.token == "s3cret"
    assert config.spark.conf["spark.driver.memory"] == "2g"
    assert config.catalog["main"]["uri"] == "sqlite:////other.db"
    assert config.find_table("sales").sketches is False  # type: ignore[union-attr]
    assert config.sketch.quantiles == (0.1, 0.5, 0.9)


def test_a_catalog_given_only_by_the_environment_is_named_in_lower_case(tmp_path: Path) -> None:
    # the environment spells names in capitals: LAKESTATS_CATALOG__MAIN__* is [catalog.main],
    # as LAKESTATS_TABLE__SALES__* is table "sales", so a table naming "main" finds it
    text = GOOD[: GOOD.index("[catalog.main]")]
    config = load_config(
        _write(tmp_path, text),
        env={
            "LAKESTATS_CATALOG__MAIN__TYPE": "sql",
            "LAKESTATS_CATALOG__MAIN__URI": "sqlite:////c.db",
        },
    )
    assert config.catalog == {"main": {"type": "sql", "uri": "sqlite:////c.db"}}
    assert config.find_table("events").catalog == "main"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("bogus = 1\n" + GOOD, {}, "key bogus: unknown key"),
        (GOOD.replace("[sketch]", "[sketch]\nkll = 1"), {}, "key sketch.kll: unknown key"),
        (GOOD.replace("kll_k = 400", "kll_k = 3"), {}, "key sketch.kll_k"),
        (GOOD.replace("kll_k = 400", "kll_k = 'big'"), {}, "key sketch.kll_k"),
        (GOOD, {"LAKESTATS_SKETCH__THETA_LG_K": "40"}, "key sketch.theta_lg_k"),
        (GOOD, {"LAKESTATS_SKETCH__QUANTILES": "0.9,0.1"}, "sorted and unique"),
        (GOOD, {"LAKESTATS_SKETCH__QUANTILES": "1.5"}, "between 0 and 1"),
        (GOOD, {"LAKESTATS_HTTP__LISTEN": "nowhere"}, "key http.listen: must be HOST:PORT"),
        (GOOD, {"LAKESTATS_SKETCH__HISTOGRAM_BUCKETS": "0"}, "key sketch.histogram_buckets"),
        (GOOD.replace('catalog = "main"', 'catalog = "nope"'), {}, "[catalog.nope]"),
        (GOOD.replace('name = "events"', 'name = "sales"'), {}, "duplicate table name"),
        (
            GOOD.replace('location = "/data/warehouse/db/sales"', ""),
            {},
            "key table[0]: needs location",
        ),
        (GOOD.replace('name = "sales"', 'name = "../etc"'), {}, "key table[0].name"),
        ("state_dir = [", {}, "is not valid TOML"),
    ],
)
def test_bad_input_names_the_key(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text), env=env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope.toml does not exist"):
        load_config(tmp_path / "nope.toml", env={})


@pytest.mark.parametrize(
    ("text", "seconds"), [("45s", 45), ("30m", 1800), ("12h", 43200), ("7d", 604800), (90, 90)]
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_bad_duration() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


SERVICE = """
[watch]
poll_interval_s = "2m"
debounce_s = 1
[daemon]
shutdown_timeout_s = "45s"
[maintenance]
enabled = false
compaction_interval_s = "12h"
grace_period = "30m"
[[table]]
name = "orders"
location = "warehouse/orders"
expire = { older_than = "7d", retain_last = 3, schedule = "0 3 * * 1" }
"""


def test_cli_loader_tolerates_the_daemon_sections(tmp_path: Path) -> None:
    """One file for both: the library reads its keys and leaves the daemon's alone."""
    config = load_config(_write(tmp_path, SERVICE), env={"LAKESTATS_WATCH__BOGUS": "1"})
    assert "watch" not in Config.model_fields and "daemon" not in Config.model_fields
    assert config.maintenance.grace_period_s == 1800.0
    table = config.find_table("orders")
    assert table is not None and table.expire is not None
    assert table.expire.older_than_s == 7 * 86400.0 and table.expire.retain_last == 3
    assert table.location == str(tmp_path / "warehouse/orders")
    assert not hasattr(table.expire, "schedule")


def test_library_keys_stay_strict_beside_the_daemon_ones(tmp_path: Path) -> None:
    text = SERVICE.replace("[maintenance]", "[maintenance]\ngrace = 1")
    with pytest.raises(ConfigError, match=r"key maintenance\.grace: unknown key"):
        load_config(_write(tmp_path, text), env={})


def test_durations_are_seconds_once_loaded(tmp_path: Path) -> None:
    config = load_config(
        _write(tmp_path, SERVICE),
        env={"LAKESTATS_HTTP__WAIT_TIMEOUT_S": "2m", "LAKESTATS_MAINTENANCE__LOG_RETENTION": "1h"},
    )
    assert config.http.wait_timeout_s == 120.0
    assert config.maintenance.log_retention_s == 3600.0
    # stored as numbers: nothing parses them again on access
    dumped = config.maintenance.model_dump()
    assert dumped["grace_period_s"] == 1800.0 and isinstance(dumped["log_retention_s"], float)
    # log retention defaults to the grace period
    assert load_config(_write(tmp_path, SERVICE), env={}).maintenance.log_retention_s == 1800.0


@pytest.mark.parametrize("value", ["-5", "5y", "soon", "nan"])
def test_bad_durations_name_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"key http\.wait_timeout_s"):
        load_config(None, env={"LAKESTATS_HTTP__WAIT_TIMEOUT_S": value})


def test_without_service_keys_copies_and_drops_only_those() -> None:
    raw = {
        "watch": {"enabled": False},
        "maintenance": {"enabled": True, "grace_period": "1h"},
        "table": [{"name": "t", "expire": {"retain_last": 1, "schedule": "0 3 * * *"}}],
    }
    assert without_service_keys(raw) == {
        "maintenance": {"grace_period": "1h"},
        "table": [{"name": "t", "expire": {"retain_last": 1}}],
    }
    assert raw["table"][0]["expire"]["schedule"] == "0 3 * * *"  # type: ignore[index]
    assert {k[0] for k in SERVICE_KEYS} == {"watch", "daemon", "maintenance", "table"}


def test_uris_and_absolute_paths_are_not_rebased(tmp_path: Path) -> None:
    text = (
        'state_dir = "file:///srv/state"\n'
        '[[table]]\nname = "a"\nlocation = "s3://bucket/a"\n'
        '[[table]]\nname = "b"\nlocation = "/abs/b"\n'
        '[[table]]\nname = "c"\nlocation = "./rel/c"\n'
    )
    config = load_config(_write(tmp_path, text), env={})
    assert config.state_dir == "file:///srv/state"
    assert [t.location for t in config.table] == [
        "s3://bucket/a",
        "/abs/b",
        str(tmp_path / "rel/c"),
    ]


def test_spark_conf_from_a_shell_safe_variable_name(tmp_path: Path) -> None:
    """``export LAKESTATS_SPARK__CONF__spark.driver.memory=4g`` is not valid shell: the
    underscore spelling must reach Spark as the dotted key, camelCase intact."""
    env = {
        "LAKESTATS_SPARK__CONF__spark_driver_memory": "4g",
        "LAKESTATS_SPARK__CONF__spark_driver_bindAddress": "127.0.0.1",
        "LAKESTATS_SPARK__CONF__spark.executor.memory": "2g",  # the dotted form still works
    }
    conf = load_config(None, env=env).spark.conf
    assert conf == {
        "spark.driver.memory": "4g",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "2g",
    }
    shell = subprocess.run(
        ["sh", "-c", "export LAKESTATS_SPARK__CONF__spark_driver_memory=4g && echo ok"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shell.stdout.strip() == "ok"


def test_unquoted_dotted_keys_of_free_form_tables_reach_spark_and_pyiceberg(
    tmp_path: Path,
) -> None:
    """TOML reads ``spark.driver.memory = "4g"`` (unquoted) as nested tables, and
    ``[catalog.main.s3]`` is one: both become the dotted keys Spark and pyiceberg take, not
    a key ``spark`` holding a printed dict that Spark would silently ignore. An environment
    variable's ``__`` path sets the same flat key, replacing the file's however spelled."""
    path = tmp_path / "c.toml"
    path.write_text(
        "[spark.conf]\n"
        'spark.driver.memory = "4g"\n'
        "spark.sql.shuffle.partitions = 8\n"
        '"spark.ui.enabled" = false\n'
        "[catalog.main]\n"
        'uri = "sqlite:///c.db"\n'
        "[catalog.main.s3]\n"
        'endpoint = "http://minio:9000"\n'
    )
    config = load_config(path, env={})
    assert config.spark.conf == {
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.enabled": "false",
    }
    assert config.catalog == {"main": {"uri": "sqlite:///c.db", "s3.endpoint": "http://minio:9000"}}
    env = {
        "LAKESTATS_CATALOG__MAIN__S3__ENDPOINT": "http://other:9000",
        "LAKESTATS_SPARK__CONF__spark__driver__memory": "8g",
    }
    config = load_config(path, env=env)
    assert config.catalog["main"]["s3.endpoint"] == "http://other:9000"
    assert config.spark.conf["spark.driver.memory"] == "8g"
    assert "s3" not in config.catalog["main"] and "spark" not in config.spark.conf


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '"spark.driver.memory" = "1g"\nspark.driver.memory = "4g"\n',
            "key spark.conf: spark.driver.memory is set twice",
        ),
        ('spark.jars = ["a.jar"]\n', "key spark.conf: spark.jars: a list is not a property"),
    ],
)
def test_a_free_form_key_set_twice_or_a_list_is_a_config_error(
    tmp_path: Path, body: str, message: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[spark.conf]\n" + body)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, env={})


def test_table_added_from_the_environment_gets_a_lower_case_name() -> None:
    config = load_config(None, env={"LAKESTATS_TABLE__SALES__LOCATION": "/data/sales"})
    assert [t.name for t in config.table] == ["sales"]
    assert config.find_table("sales") is not None


def test_a_tables_nested_keys_come_from_the_environment_too(tmp_path: Path) -> None:
    """``LAKESTATS_TABLE__<NAME>__EXPIRE__RETAIN_LAST`` reaches ``expire.retain_last``,
    beside the file's ``expire.older_than``, as a section's nested key does."""
    text = GOOD.replace(
        'identifier = "db.events"', 'identifier = "db.events"\nexpire = {older_than = "7d"}'
    )
    config = load_config(
        _write(tmp_path, text),
        env={
            "LAKESTATS_TABLE__EVENTS__EXPIRE__RETAIN_LAST": "5",
            "LAKESTATS_TABLE__SALES__EXPIRE__OLDER_THAN": "2d",
        },
    )
    events, sales = config.find_table("events"), config.find_table("sales")
    assert events is not None and events.expire is not None
    assert (events.expire.retain_last, events.expire.older_than_s) == (5, 7 * 86400)
    assert sales is not None and sales.expire is not None
    assert (sales.expire.retain_last, sales.expire.older_than_s) == (None, 2 * 86400)
    with pytest.raises(ConfigError, match="expire is not a section"):
        load_config(
            _write(tmp_path, text),
            env={
                "LAKESTATS_TABLE__EVENTS__EXPIRE": "5",
                "LAKESTATS_TABLE__EVENTS__EXPIRE__RETAIN_LAST": "5",
            },
        )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"LAKESTATS_SKETCH__KLL_K": "many"},
            "environment variable LAKESTATS_SKETCH__KLL_K: key sketch.kll_k:",
        ),
        ({"LAKESTATS_BOGUS__X": "1"}, "environment variable LAKESTATS_BOGUS__X: key bogus:"),
        (
            {"LAKESTATS_TABLE__EVENTS__EXPIRE__RETAIN_LAST": "0"},
            "environment variable LAKESTATS_TABLE__EVENTS__EXPIRE__RETAIN_LAST: "
            "key table[1].expire.retain_last:",
        ),
    ],
)
def test_a_bad_value_from_the_environment_is_blamed_on_its_variable(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    path = _write(tmp_path, GOOD)
    with pytest.raises(ConfigError) as raised:
        load_config(path, env=env)
    assert str(raised.value).startswith(message), raised.value
    # a mistake in the file is still the file's, beside a variable that is fine
    with pytest.raises(ConfigError, match=f"^{path}: key sketch.kll_k:"):
        load_config(
            _write(tmp_path, GOOD.replace("kll_k = 400", "kll_k = 1")),
            env={"LAKESTATS_SKETCH__THETA_LG_K": "12"},
        )


@pytest.mark.parametrize("text", ['[table]\nname = "a"\n', 'table = "x"\n', "table = [1]\n"])
def test_a_table_override_onto_a_table_key_that_is_not_an_array(tmp_path: Path, text: str) -> None:
    with pytest.raises(
        ConfigError, match=r"LAKESTATS_TABLE__A__LOCATION: key table: .*\[\[table\]\]"
    ):
        load_config(_write(tmp_path, text), env={"LAKESTATS_TABLE__A__LOCATION": "/tmp"})


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('location = "/data/a\\u0000b"', "table[0].location"),
        ('location = "/d"\nlocation_map = {"/x\\u0000" = "/y"}', "table[0].location_map"),
    ],
)
def test_a_nul_in_a_path_is_a_config_error(tmp_path: Path, table: str, key: str) -> None:
    text = f'[[table]]\nname = "t"\n{table}\n'
    with pytest.raises(ConfigError, match=f"key {re.escape(key)}: .*NUL character"):
        load_config(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("sketch", "warns"),
    [
        ({"kll_k": 200}, True),  # ±1.65 % against a 1 % bucket
        ({"kll_k": 200, "enabled": False}, False),  # no sketches made: nothing to say
        ({"kll_k": 200, "histogram_buckets": 50}, False),  # 2 % buckets
        ({"kll_k": 800}, False),
        ({"kll_error_rate": 0.009}, False),  # a rate is held below a bucket by validation
        ({}, False),
    ],
)
def test_a_kll_k_coarser_than_a_bucket_is_a_warning(sketch: dict[str, object], warns: bool) -> None:
    config = Config.model_validate({"sketch": sketch})
    k = config.sketch.settings().kll_k
    share = 1 / config.sketch.histogram_buckets
    coarse = kll_doubles_sketch.get_normalized_rank_error(k, True) >= share
    assert (coarse and config.sketch.enabled) == warns
    assert len(config.warnings()) == int(warns)
