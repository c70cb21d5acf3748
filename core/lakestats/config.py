"""Configuration: one TOML file, every key overridable from the environment, validated.

The CLI and the daemon share this one schema, so a file that the daemon accepts is a file
the CLI accepts and the other way round. Unknown keys and bad values are rejected with a
message naming the key (``ConfigError``), never replaced by a silent default.

Environment overrides use ``LAKESTATS_`` plus the key path joined with ``__``::

    LAKESTATS_STATE_DIR=/var/lib/lakestats
    LAKESTATS_HTTP__LISTEN=0.0.0.0:8765
    LAKESTATS_SPARK__CONF__spark.driver.memory=4g
    LAKESTATS_CATALOG__MAIN__URI=sqlite:////data/catalog.db
    LAKESTATS_TABLE__SALES__LOCATION=/data/warehouse/db/sales

Section and key names are matched case-insensitively, except the free-form tables
(``spark.conf``, ``catalog.<name>``) whose keys are taken as written.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Self
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lakestats.exceptions import ConfigError
from lakestats.model import SketchSettings

ENV_PREFIX = "LAKESTATS_"
DEFAULT_STATE_DIR = ".lakestats"
_TABLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class HttpConfig(_Section):
    listen: str = "127.0.0.1:8765"
    token: str | None = None
    max_body_bytes: Annotated[int, Field(ge=0, le=64 * 1024 * 1024)] = 64 * 1024
    wait_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # where clients (`lakestats notify`) reach the daemon; default: http://<listen>
    url: str | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parsed = urlparse(value)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError("must be an http:// or https:// URL, e.g. http://lakestatsd:8765")
        return value

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:8765")
        return value

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


class SparkConfig(_Section):
    master: str = "local[*]"
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        # TOML gives ints and bools; Spark wants strings ("true", "4g", "200").
        if isinstance(value, Mapping):
            return {
                str(k): (str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in value.items()
            }
        return value


class SketchConfig(_Section):
    enabled: bool = True
    kll_k: Annotated[int, Field(ge=8, le=65535)] = 200
    theta_lg_k: Annotated[int, Field(ge=5, le=26)] = 12  # Python datasketches merges need ≥ 5
    histogram_buckets: Annotated[int, Field(ge=1, le=10000)] = 100
    quantiles: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
    max_files_per_job: Annotated[int, Field(ge=1)] = 2000

    @field_validator("quantiles", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        # From the environment a list arrives as "0.1,0.5,0.9".
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @field_validator("quantiles")
    @classmethod
    def _ranks(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("must list at least one rank")
        for q in value:
            if not math.isfinite(q) or not 0.0 <= q <= 1.0:
                raise ValueError(f"every rank must be between 0 and 1, got {q}")
        if list(value) != sorted(set(value)):
            raise ValueError("ranks must be sorted and unique")
        return value

    def settings(self) -> SketchSettings:
        return SketchSettings(
            kll_k=self.kll_k,
            theta_lg_k=self.theta_lg_k,
            histogram_buckets=self.histogram_buckets,
            quantiles=self.quantiles,
        )


class WatchConfig(_Section):
    enabled: bool = True  # file-system events; polling always runs as the fallback
    poll_interval_s: Annotated[float, Field(gt=0, le=86400)] = 30.0
    debounce_s: Annotated[float, Field(ge=0, le=600)] = 0.5
    max_concurrent_tables: Annotated[int, Field(ge=1, le=256)] = 2
    backoff_initial_s: Annotated[float, Field(gt=0)] = 1.0
    backoff_max_s: Annotated[float, Field(gt=0)] = 300.0


class DaemonConfig(_Section):
    shutdown_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    log_level: str = "info"

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        if value.lower() not in {"debug", "info", "warning", "error"}:
            raise ValueError("must be one of debug, info, warning, error")
        return value.lower()


def parse_duration(value: str | int | float) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"`` or a number of seconds → seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("must not be negative")
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 45s, 30m, 12h, 7d)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _cron_days(field: str) -> str:
    """A standard cron day-of-week field (0 or 7 = Sunday, 1 = Monday …) as day names.

    APScheduler numbers days from Monday = 0, so ``CronTrigger.from_crontab("0 3 * * 1")``
    would fire on Tuesdays; names mean the same to both.
    """
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field.lower().split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"bad step in day of week {field!r}")
        if base == "*":
            lo, hi = 0, 6
        elif "-" in base:
            first, last = base.split("-", 1)
            lo, hi = _cron_day(first), _cron_day(last)
            if hi == 0:
                hi = 7  # "5-7" / "5-sun": through Sunday
        else:
            lo = hi = _cron_day(base)
        if lo > hi:
            raise ValueError(f"bad range in day of week {field!r}")
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(_DAY_NAMES[d] for d in sorted(days))


def _cron_day(token: str) -> int:
    if token.isdigit() and 0 <= int(token) <= 7:
        return int(token) % 7 if int(token) != 7 else 0
    if token[:3] in _DAY_NAMES:
        return _DAY_NAMES.index(token[:3])
    raise ValueError(f"bad day of week {token!r}")


def crontab_fields(expression: str) -> dict[str, str]:
    """A 5-field cron expression (standard day-of-week numbering) as APScheduler
    ``CronTrigger`` keyword arguments. ``ValueError`` when it is not one."""
    parts = expression.split()
    if len(parts) != 5:
        raise ValueError(
            f"not a 5-field cron expression: {expression!r} (e.g. '0 3 * * *' = 03:00 UTC)"
        )
    minute, hour, day, month, day_of_week = parts
    return {
        "minute": minute,
        "hour": hour,
        "day": day,
        "month": month,
        "day_of_week": _cron_days(day_of_week),
    }


class ExpireConfig(_Section):
    """A table's snapshot retention, run by ``lakestats expire`` and (with a schedule) the
    daemon: the table format's own expiry, then the stats of the expired snapshots."""

    older_than: str | None = None
    retain_last: Annotated[int, Field(ge=1)] | None = None
    schedule: str | None = None  # cron expression, 5 fields, UTC

    @field_validator("older_than")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            from apscheduler.triggers.cron import CronTrigger  # noqa: PLC0415

            fields = crontab_fields(value)
            try:
                CronTrigger(**fields, timezone="UTC")
            except ValueError as exc:
                raise ValueError(f"not a valid cron expression {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _has_policy(self) -> Self:
        if self.older_than is None and self.retain_last is None:
            raise ValueError("needs older_than and/or retain_last")
        return self

    @property
    def older_than_s(self) -> float | None:
        return None if self.older_than is None else parse_duration(self.older_than)


class MaintenanceConfig(_Section):
    """Segment compaction, state log retention and file cleanup (``docs/maintenance.md``)."""

    enabled: bool = True  # the daemon's scheduled jobs; the CLI commands always work
    grace_period: str = "1h"
    log_retention: str | None = None  # default: the grace period
    min_log_versions: Annotated[int, Field(ge=1, le=100000)] = 10
    max_segments: Annotated[int, Field(ge=1, le=100000)] = 64
    segment_target_files: Annotated[int, Field(ge=1)] = 1000
    compaction_interval_s: Annotated[float, Field(gt=0, le=30 * 86400)] = 3600.0

    @field_validator("grace_period", "log_retention")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @model_validator(mode="after")
    def _retention_covers_grace(self) -> Self:
        if self.log_retention is not None and self.log_retention_s < self.grace_period_s:
            raise ValueError(
                "log_retention must be at least grace_period: a reader may use a state "
                "version for the whole grace period after it was superseded"
            )
        return self

    @property
    def grace_period_s(self) -> float:
        return parse_duration(self.grace_period)

    @property
    def log_retention_s(self) -> float:
        if self.log_retention is None:
            return self.grace_period_s
        return parse_duration(self.log_retention)


class TableConfig(_Section):
    name: str
    location: str | None = None
    catalog: str | None = None
    identifier: str | None = None
    sketches: bool = True
    publish: bool = True
    expire: ExpireConfig | None = None

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _TABLE_NAME.match(value):
            raise ValueError(
                "must start with a letter or digit and use only letters, digits, '_', '.', '-'"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        by_catalog = self.catalog is not None or self.identifier is not None
        if self.location is not None and by_catalog:
            raise ValueError("give either location or catalog + identifier, not both")
        if self.location is None and not (self.catalog and self.identifier):
            raise ValueError("needs location, or both catalog and identifier")
        return self


class Config(_Section):
    state_dir: str = DEFAULT_STATE_DIR
    http: HttpConfig = Field(default_factory=HttpConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    sketch: SketchConfig = Field(default_factory=SketchConfig)
    watch: WatchConfig = Field(default_factory=WatchConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    catalog: dict[str, dict[str, str]] = Field(default_factory=dict)
    table: tuple[TableConfig, ...] = ()

    @field_validator("catalog", mode="before")
    @classmethod
    def _catalog_strings(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                str(name): (
                    {str(k): str(v) for k, v in props.items()}
                    if isinstance(props, Mapping)
                    else props
                )
                for name, props in value.items()
            }
        return value

    @model_validator(mode="after")
    def _tables_consistent(self) -> Self:
        seen: set[str] = set()
        for i, table in enumerate(self.table):
            if table.name in seen:
                raise ValueError(f"table[{i}].name: duplicate table name {table.name!r}")
            seen.add(table.name)
            if table.catalog is not None and table.catalog not in self.catalog:
                raise ValueError(
                    f"table[{i}].catalog: no [catalog.{table.catalog}] section is configured"
                )
        return self

    def find_table(self, name: str) -> TableConfig | None:
        return next((t for t in self.table if t.name == name), None)


def _env_overlay(raw: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Apply ``LAKESTATS_A__B__C=value`` overrides onto the parsed TOML tree."""
    data: dict[str, Any] = {**raw}
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == "LAKESTATS_CONFIG":
            continue
        parts = var[len(ENV_PREFIX) :].split("__")
        if not all(parts):
            raise ConfigError(f"environment variable {var}: empty key segment")
        _apply_override(data, parts, env[var], var)
    return data


def _apply_override(data: dict[str, Any], parts: list[str], value: str, var: str) -> None:
    head = parts[0].lower()
    if head == "table":
        if len(parts) != 3:
            raise ConfigError(f"environment variable {var}: use LAKESTATS_TABLE__<NAME>__<KEY>")
        tables = [dict(t) for t in data.get("table", [])]
        wanted = parts[1].lower()
        match = next((t for t in tables if str(t.get("name", "")).lower() == wanted), None)
        if match is None:
            match = {"name": parts[1]}
            tables.append(match)
        match[parts[2].lower()] = value
        data["table"] = tables
        return
    spark_conf = head == "spark" and len(parts) > 1 and parts[1].lower() == "conf"
    node = data
    for depth, part in enumerate(parts[:-1]):
        key = part.lower()
        if head == "catalog" and depth == 1:
            # catalog names are the user's own words: match them case-insensitively
            key = next((k for k in node if k.lower() == part.lower()), part)
        child = node.get(key)
        if child is None:
            child = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"environment variable {var}: {key} is not a section")
        child = dict(child)
        node[key] = child
        node = child
    # Spark conf keys are case-sensitive; catalog properties are lower-case by convention.
    last = parts[-1] if spark_conf else parts[-1].lower()
    node[last] = value


def _describe(error: ValidationError, source: str) -> str:
    first = error.errors()[0]
    loc = ""
    for part in first["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else f".{part}" if loc else str(part)
    msg = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    where = f" key {loc}:" if loc else ""
    return f"{source}:{where} {msg}"


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read, overlay and validate the configuration. ``None`` → defaults plus environment."""
    environ = os.environ if env is None else env
    raw: dict[str, Any] = {}
    source = "environment"
    if path is not None:
        source = str(path)
        try:
            with Path(path).open("rb") as handle:
                raw = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {path} is a directory") from None
        except PermissionError:
            raise ConfigError(f"config file {path} is not readable (permission denied)") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text") from None
    data = _env_overlay(raw, environ)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    if path is not None:
        config = _resolve_relative(config, Path(path).resolve().parent, "state_dir" in data)
    return config


def _resolve_relative(config: Config, base: Path, state_dir_given: bool) -> Config:
    """Relative paths written in a config file are relative to that file.

    The default state dir (no ``state_dir`` anywhere) stays relative to the working
    directory, as the CLI documents.
    """

    def fix(p: str) -> str:
        return p if "://" in p or Path(p).is_absolute() else str(base / p)

    tables = tuple(
        t.model_copy(update={"location": fix(t.location)}) if t.location else t
        for t in config.table
    )
    state_dir = fix(config.state_dir) if state_dir_given else config.state_dir
    return config.model_copy(update={"state_dir": state_dir, "table": tables})
