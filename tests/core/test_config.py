"""Config: TOML + environment, every mistake named by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakestats.config import load_config, parse_duration
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
    assert config.sketch.kll_k == 200 and config.sketch.theta_lg_k == 12


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
