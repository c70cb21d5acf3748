"""Configuration: one TOML file, every key overridable from the environment, validated.

The CLI and the daemon read the same file. This module holds what the library uses; the
daemon's own sections (``[watch]``, ``[daemon]``, the scheduling keys of ``[maintenance]``
and of each table's ``expire``) are modelled in ``lakestatsd.config``, which extends
``Config``. The library's loader tolerates those keys (``SERVICE_KEYS``) without
interpreting them, so a file the daemon accepts is a file the CLI accepts. Unknown keys
and bad values are rejected with a message naming the key (``ConfigError``), never
replaced by a silent default. Durations are parsed once, at load: fields ending in ``_s``
hold seconds.

Environment overrides use ``LAKESTATS_`` plus the key path joined with ``__``::

    LAKESTATS_STATE_DIR=/var/lib/lakestats
    LAKESTATS_HTTP__LISTEN=0.0.0.0:8765
    LAKESTATS_SPARK__CONF__spark_driver_memory=4g    (spark.driver.memory; "_" for ".")
    LAKESTATS_CATALOG__MAIN__URI=sqlite:////data/catalog.db
    LAKESTATS_TABLE__SALES__LOCATION=/data/warehouse/db/sales

Section and key names are matched case-insensitively, except the keys of the free-form
tables: ``spark.conf`` keys keep their case, and ``catalog.<name>`` keys are taken as the
file writes them and lower-cased from the environment (pyiceberg's properties are lower
case). Their nested tables become dotted keys (``flat_properties``).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar
from urllib.parse import urlparse

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lakestats.cache import DEFAULT_BYTES as DEFAULT_CACHE_BYTES
from lakestats.exceptions import ConfigError
from lakestats.locations import check_state_dir, local_path
from lakestats.model import SketchSettings
from lakestats.shards import MAX_SHARDS, ShardPlan, plan_shards
from lakestats.sketches.frequent import MAX_ITEMS_TRACKED
from lakestats.sketches.spec import (
    coarse_kll_warning,
    default_kll_error_rate,
    kll_k_for_error,
    validate_sketch_settings,
)

ENV_PREFIX = "LAKESTATS_"
SHARD_PLACEHOLDER = "{shard}"
DEFAULT_STATE_DIR = ".lakestats"
_TABLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# Every duration is at most ten years: beyond that a timer or a sleep overflows
# (threading.TIMEOUT_MAX is ~292 years, but float arithmetic on top of it is not safe).
MAX_DURATION_S = 10 * 365 * 86400.0


class ConfigSection(BaseModel):
    """A config section: frozen, unknown keys rejected, strings stripped."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def parse_duration(value: object) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"`` or a number of seconds → seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a finite number of seconds, not negative")
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"not a duration: {value!r} (use e.g. 45s, 30m, 12h, 7d)")
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if not seconds <= MAX_DURATION_S:
        raise ValueError(f"must be at most ten years ({MAX_DURATION_S:.0f} seconds)")
    return seconds


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(value: object) -> int:
    """``"512MiB"``, ``"10GB"``, ``"4k"`` or a number of bytes → bytes (binary units)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        raise ValueError("must be a whole number of bytes or a size such as 512MiB")
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use e.g. 512MiB, 10GiB, or bytes)")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)[:1].lower()]


Seconds = Annotated[float, BeforeValidator(parse_duration)]
"""A duration field: written as ``"7d"``, ``"12h"``, ``"30m"``, ``"45s"`` or a number,
held as seconds once validated (parsed once, at load)."""


class HttpConfig(ConfigSection):
    listen: str = "127.0.0.1:8765"
    token: str | None = None
    max_body_bytes: Annotated[int, Field(ge=0, le=64 * 1024 * 1024)] = 64 * 1024
    wait_timeout_s: Annotated[Seconds, Field(gt=0, le=3600)] = 60.0
    # a request (line, headers, body) must arrive within this, else 408 and close
    request_timeout_s: Annotated[Seconds, Field(gt=0, le=300)] = 10.0
    # where clients (`lakestats notify`) reach the daemon; default: http://<listen>.
    # "{shard}" in it is replaced by the replica keeping the table ([shards])
    url: str | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            if re.search(r"[{}]", value.replace(SHARD_PLACEHOLDER, "")):
                raise ValueError(f"the only placeholder it may hold is {SHARD_PLACEHOLDER}")
            parsed = urlparse(value.replace(SHARD_PLACEHOLDER, "0"))
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError("must be an http:// or https:// URL, e.g. http://lakestatsd:8765")
        return value

    @field_validator("token")
    @classmethod
    def _real_token(cls, value: str | None) -> str | None:
        # a blank token would silently switch authentication off: leave it out instead
        if value is not None and not value:
            raise ValueError("is blank: set a real token, or remove the key to disable auth")
        if value is not None and any(c.isspace() for c in value):
            raise ValueError("must not contain whitespace (it is sent as 'Bearer <token>')")
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


def flat_properties(table: Mapping[Any, Any], prefix: str = "") -> dict[str, str]:
    """A free-form table (``[spark.conf]``, ``[catalog.<name>]``) as the flat string
    properties Spark and pyiceberg take. TOML reads an unquoted dotted key
    (``spark.driver.memory = "4g"``) as nested tables, and an environment override's
    ``__`` nests too: they are joined back with ``.``. TOML's ints and bools become
    strings (``"200"``, ``"true"``); a list or a key set twice is an error."""
    flat: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        nested = flat_properties(value, f"{name}.") if isinstance(value, Mapping) else None
        if nested is None:
            if isinstance(value, list | tuple):
                raise ValueError(f"{name}: a list is not a property value (write one string)")
            nested = {name: str(value).lower() if isinstance(value, bool) else str(value)}
        for full, text in nested.items():
            if full in flat:
                raise ValueError(f"{full} is set twice (as a dotted key and as a table)")
            flat[full] = text
    return flat


class SparkConfig(ConfigSection):
    master: str = "local[*]"
    conf: dict[str, str] = Field(default_factory=dict)
    # every sketch job is cancelled after this long (a hung job never blocks a table)
    job_timeout_s: Annotated[Seconds, Field(gt=0)] = 3600.0
    # a cluster session (or a job) without any executor for this long is unusable
    executor_wait_s: Annotated[Seconds, Field(gt=0)] = 60.0

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return flat_properties(value) if isinstance(value, Mapping) else value


class SketchConfig(ConfigSection):
    enabled: bool = True
    # k directly, or derived from the error rate (default: a quarter of a bucket's share)
    kll_k: Annotated[int, Field(ge=8, le=65535)] | None = None
    kll_error_rate: Annotated[float, Field(gt=0, lt=1)] | None = None
    theta_lg_k: Annotated[int, Field(ge=5, le=26)] = 12  # Python datasketches merges need ≥ 5
    histogram_buckets: Annotated[int, Field(ge=1, le=10000)] = 100
    quantiles: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
    # items each file's frequent-items sketch tracks (0: no frequent values); 8 … 1000. On by
    # default, as value samples, since the Arrow engine computes both at about scan speed
    # (docs/benchmarks.md, "Value samples and frequent items: on by default")
    frequent_items: Annotated[int, Field(ge=0, le=MAX_ITEMS_TRACKED)] = 256
    # per-bucket NDV from a value sample per file and column
    value_samples: bool = True
    # "auto": the Arrow engine for plain jobs (same results, ~scan speed; Python workers need
    # lakestats' dependencies); "sql": always the SQL aggregate (docs/sketches.md)
    engine: Literal["auto", "sql"] = "auto"
    max_files_per_job: Annotated[int, Field(ge=1, le=1_000_000)] = 2000
    # a batch's new data files weigh at most this much (a single bigger commit is one batch)
    max_bytes_per_job: Annotated[int, BeforeValidator(parse_size), Field(ge=1, le=1 << 50)] = (
        64 * 1024**3
    )
    # batches grow from one commit while they finish within half this; slower ones shrink
    batch_target_s: Annotated[Seconds, Field(gt=0, le=86400)] = 60.0

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

    @model_validator(mode="after")
    def _one_kll_parameter(self) -> Self:
        if self.kll_k is not None and self.kll_error_rate is not None:
            raise ValueError("set kll_k or kll_error_rate, not both (k derives from the rate)")
        if self.kll_error_rate is not None or self.frequent_items:
            try:
                validate_sketch_settings(self.settings())
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return self

    def settings(self) -> SketchSettings:
        """The sketch parameters; ``kll_k`` derives from ``kll_error_rate`` (by default
        ``spec.default_kll_error_rate`` of the bucket count) unless set directly."""
        rate = self.kll_error_rate
        if self.kll_k is not None:
            k = self.kll_k
        else:
            if rate is None:
                rate = default_kll_error_rate(self.histogram_buckets)
            k = kll_k_for_error(rate)
        return SketchSettings(
            kll_k=k,
            kll_error_rate=rate,
            theta_lg_k=self.theta_lg_k,
            histogram_buckets=self.histogram_buckets,
            quantiles=self.quantiles,
            frequent_items=self.frequent_items,
            value_samples=self.value_samples,
        )


class ExpireConfig(ConfigSection):
    """A table's snapshot retention, run by ``lakestats expire`` (and, on a schedule that
    ``lakestatsd`` reads from the same table entry, by the daemon): the table format's own
    expiry, then the stats of the expired snapshots."""

    older_than_s: Seconds | None = Field(default=None, alias="older_than")
    retain_last: Annotated[int, Field(ge=1, le=1_000_000)] | None = None

    @model_validator(mode="after")
    def _has_policy(self) -> Self:
        if self.older_than_s is None and self.retain_last is None:
            raise ValueError("needs older_than and/or retain_last")
        return self


class MaintenanceConfig(ConfigSection):
    """Segment compaction, state log retention and file cleanup (``docs/maintenance.md``).

    The daemon's scheduling keys of this section (``enabled``, ``compaction_interval_s``)
    belong to ``lakestatsd.config``; the library only tolerates them (``SERVICE_KEYS``).
    """

    grace_period_s: Seconds = Field(default=3600.0, alias="grace_period")
    # default: the grace period (filled in before validation, so it is a plain number after)
    log_retention_s: Seconds = Field(default=3600.0, alias="log_retention")
    min_log_versions: Annotated[int, Field(ge=1, le=100000)] = 10
    max_segments: Annotated[int, Field(ge=1, le=100000)] = 64
    segment_target_files: Annotated[int, Field(ge=1, le=10_000_000)] = 1000

    @model_validator(mode="before")
    @classmethod
    def _retention_defaults_to_grace(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("log_retention") is None:
            return {**data, "log_retention": data.get("grace_period", 3600.0)}
        return data

    @model_validator(mode="after")
    def _retention_covers_grace(self) -> Self:
        if self.log_retention_s < self.grace_period_s:
            raise ValueError(
                "log_retention must be at least grace_period: a reader may use a state "
                "version for the whole grace period after it was superseded"
            )
        return self


class TableConfig(ConfigSection):
    name: str
    location: str | None = None
    catalog: str | None = None
    identifier: str | None = None
    # "iceberg", "delta", "paimon": detected from a location's layout when not given;
    # a catalog table is Iceberg unless it says otherwise
    format: str | None = None
    sketches: bool = True
    publish: bool = True
    expire: ExpireConfig | None = None
    # path prefix written in the metadata → where those files really are (copied tables,
    # restores, mounted buckets); see ``lakestats.locations.LocationMap``
    location_map: dict[str, str] = Field(default_factory=dict)
    # "apply": data files touched by equality deletes are re-read with them applied
    # (exact); "approximate": they are not re-read for equality deletes, and their stats
    # (then including deleted rows) say so (docs/deletes.md)
    equality_deletes: Literal["apply", "approximate"] = "apply"
    # Paimon primary-key tables without deletion vectors: "apply": each touched bucket's
    # live files are merged by key in the sketch job, so per-column stats and
    # mergedRecordCount describe the rows readers see (exact); "estimate": files are
    # sketched as stored (every version of a key), mergedRecordCount estimated from the
    # key sketch (docs/paimon.md)
    key_merge: Literal["apply", "estimate"] = "apply"

    @field_validator("location")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        # no file system takes a NUL in a path: refused here, not by the first open
        if value is not None and "\x00" in value:
            raise ValueError(f"{value!r} contains a NUL character")
        return value

    @field_validator("location_map")
    @classmethod
    def _prefixes(cls, value: dict[str, str]) -> dict[str, str]:
        for source, target in value.items():
            if not source.strip() or not target.strip():
                raise ValueError(f"{source!r} = {target!r}: prefixes must not be empty")
            if "\x00" in source + target:
                raise ValueError(f"{source!r} = {target!r}: contains a NUL character")
        return value

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        from lakestats.formats.registry import REGISTRY  # noqa: PLC0415 - keeps pyarrow out of config loading

        if value is not None:
            value = value.lower()
            known = [entry.name for entry in REGISTRY.entries]
            if value not in known:
                raise ValueError(f"unknown table format {value!r} (known: {', '.join(known)})")
        return value

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


def _shard_index(value: object) -> object:
    """An index, or a StatefulSet pod's name (``lakestatsd-2``), whose ordinal it takes:
    Kubernetes' downward API hands every pod its name (``metadata.name``)."""
    if isinstance(value, str) and not value.strip().isdigit():
        match = re.search(r"-(\d+)$", value.strip())
        if match is None:
            raise ValueError(
                f"{value!r} is neither a number nor a name ending in -<ordinal> "
                "(a StatefulSet pod's name, e.g. lakestatsd-2)"
            )
        return int(match.group(1))
    return value


class ShardsConfig(ConfigSection):
    """``[shards]``: tables shared out among ``count`` daemon replicas (``lakestats.shards``);
    this replica keeps those of ``index``."""

    count: Annotated[int, Field(ge=1, le=MAX_SHARDS)] = 1
    index: Annotated[int, BeforeValidator(_shard_index), Field(ge=0)] = 0

    @field_validator("index")
    @classmethod
    def _index_below_count(cls, index: int, info: ValidationInfo) -> int:
        # a field's check (count is validated first), so the error names shards.index
        count = info.data.get("count")
        if count is not None and index >= count:
            raise ValueError(
                f"index {index} is not below count {count} (replicas are numbered 0 … {count - 1})"
            )
        return index


class Config(ConfigSection):
    state_dir: str = DEFAULT_STATE_DIR
    # what the process keeps of its tables' metadata and stats files (``lakestats.cache``)
    cache_size: Annotated[int, BeforeValidator(parse_size), Field(ge=0, le=1 << 50)] = (
        DEFAULT_CACHE_BYTES
    )
    shards: ShardsConfig = Field(default_factory=ShardsConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    sketch: SketchConfig = Field(default_factory=SketchConfig)
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    catalog: dict[str, dict[str, str]] = Field(default_factory=dict)
    table: tuple[TableConfig, ...] = ()

    @field_validator("state_dir")
    @classmethod
    def _state_dir_usable(cls, value: str) -> str:
        return checked_state_dir(value)

    @field_validator("catalog", mode="before")
    @classmethod
    def _catalog_strings(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                str(name): flat_properties(props) if isinstance(props, Mapping) else props
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

    def warnings(self) -> tuple[str, ...]:
        """Settings that are valid but likely not meant, a sentence each (the daemon logs
        them as ``config_warning`` at start; ``analyze`` and ``--check-config`` print them)."""
        note = coarse_kll_warning(self.sketch.settings()) if self.sketch.enabled else None
        return (note,) if note else ()

    def find_table(self, name: str) -> TableConfig | None:
        return next((t for t in self.table if t.name == name), None)

    def shard_plan(self) -> ShardPlan:
        """The configured tables split among the ``[shards]`` replicas, seen from this one."""
        names = tuple(t.name for t in self.table)
        return plan_shards(names, self.shards.index, self.shards.count)


def checked_state_dir(value: str) -> str:
    """``value`` as a state dir, or ``ValueError`` saying why it cannot be one: empty (it
    would be the config file's own folder, whose other folders ``forget`` would take for
    stats folders), on a store without exclusive create, or below a file. One stat per
    ancestor, so a typo pointing at a file is a config error naming the key rather than a
    traceback at the first write."""
    if not value.strip():
        raise ValueError("must name a directory (it is empty)")
    local = local_path(value)
    if local is None:
        check_state_dir(value)
        return value
    for path in (local, *local.parents):
        try:
            if path.exists() and not path.is_dir():
                raise ValueError(f"{path} is a file, not a directory")
        except OSError:
            return value  # unreadable: the first write reports it with the path
    return value


AnyConfig = TypeVar("AnyConfig", bound=Config)


@dataclass(frozen=True)
class ConfigSource:
    """Where a config tree came from, for messages: the file (or ``environment``) and the
    key path each ``LAKESTATS_*`` variable set (``watch.poll_interval_s``,
    ``table[0].expire.retain_last``), so a bad value is blamed on the variable that gave it."""

    name: str
    env_keys: Mapping[str, str] = field(default_factory=dict)  # key path → variable

    def of(self, loc: str) -> str:
        """The source of the key at ``loc``: the variable that set it or a key below it
        (a section only a variable created), else the file."""
        for key, var in self.env_keys.items():
            if key == loc or key.startswith((loc + ".", loc + "[")):
                return f"environment variable {var}"
        return self.name


def _env_overlay(
    raw: dict[str, Any], env: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Apply ``LAKESTATS_A__B__C=value`` overrides onto the parsed TOML tree; also which
    key path each variable set (``ConfigSource.env_keys``)."""
    data: dict[str, Any] = {**raw}
    keys: dict[str, str] = {}
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == "LAKESTATS_CONFIG":
            continue
        parts = var[len(ENV_PREFIX) :].split("__")
        if not all(parts):
            raise ConfigError(f"environment variable {var}: empty key segment")
        keys[_apply_override(data, parts, env[var], var)] = var
    return data, keys


def _apply_override(data: dict[str, Any], parts: list[str], value: str, var: str) -> str:
    """Set the key ``parts`` names in ``data``; returns its path as messages spell it."""
    head = parts[0].lower()
    if head == "table":
        if len(parts) < 3:
            raise ConfigError(f"environment variable {var}: use LAKESTATS_TABLE__<NAME>__<KEY>")
        listed = data.get("table", [])
        if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
            # `[table]` where `[[table]]` was meant: say so here, where the overlay meets it
            raise ConfigError(
                f"environment variable {var}: key table: the config's tables are not an "
                "array of [[table]] sections"
            )
        tables = [dict(t) for t in listed]
        wanted = parts[1].lower()
        match = next((t for t in tables if str(t.get("name", "")).lower() == wanted), None)
        if match is None:
            # the environment spells names in capitals by convention: the table is "sales"
            match = {"name": parts[1].lower()}
            tables.append(match)
        data["table"] = tables
        # the table's own keys are a path below it, as a section's are: EXPIRE__RETAIN_LAST
        keys = [p.lower() for p in parts[2:]]
        _set_path(match, keys, value, var)
        return f"table[{tables.index(match)}]." + ".".join(keys)
    spark_conf = head == "spark" and len(parts) > 1 and parts[1].lower() == "conf"
    keys = [p.lower() for p in parts]
    if head == "catalog" and len(parts) > 2:
        # catalog names are the user's own words: match them case-insensitively; the
        # environment spells names in capitals by convention, so a new one is "main"
        catalogs = data.get("catalog")
        names = catalogs if isinstance(catalogs, dict) else {}
        keys[1] = next((k for k in names if k.lower() == keys[1]), keys[1])
    if spark_conf and len(parts) > 2:
        # Spark conf keys are case-sensitive; catalog properties are lower-case by convention
        rest = parts[2:]
        if len(rest) == 1 and "." not in rest[0]:
            # a shell variable name cannot hold a dot: spark_driver_memory is spark.driver.memory
            rest = [rest[0].replace("_", ".")]
        keys = [*keys[:2], *rest]
    if (spark_conf or head == "catalog") and len(keys) > 3:
        # a free-form table's key is flat (``flat_properties``): CATALOG__MAIN__S3__ENDPOINT
        # sets "s3.endpoint", replacing it however the file spelled it
        section = data.get(keys[0])
        nested = section.get(keys[1]) if isinstance(section, dict) else None
        if isinstance(nested, dict):
            with suppress(ValueError):  # a bad table is reported by validation, by key
                _set_path(data, keys[:2], flat_properties(nested), var)
        keys = [*keys[:2], ".".join(keys[2:])]
    _set_path(data, keys, value, var)
    return ".".join(keys)


def _set_path(data: dict[str, Any], keys: list[str], value: Any, var: str) -> None:
    """Set ``data[k0][k1]…[kn] = value``, copying each section on the way (the parsed TOML
    tree is not ours to change) and creating the missing ones."""
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"environment variable {var}: {key} is not a section")
        child = dict(child)
        node[key] = child
        node = child
    node[keys[-1]] = value


def _describe(error: ValidationError, source: ConfigSource) -> str:
    first = error.errors()[0]
    loc = ""
    for part in first["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else f".{part}" if loc else str(part)
    msg = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    where = f" key {loc}:" if loc else ""
    return f"{source.of(loc) if loc else source.name}:{where} {msg}"


# Keys of the one config file that only the service (``lakestatsd``) reads. The library
# tolerates them without interpreting them, so one file serves both ``lakestats`` and
# ``lakestatsd``; ``lakestatsd.config`` validates them strictly. ``*`` is every list item.
SERVICE_KEYS: tuple[tuple[str, ...], ...] = (
    ("watch",),
    ("daemon",),
    ("maintenance", "enabled"),
    ("maintenance", "compaction_interval_s"),
    ("table", "*", "expire", "schedule"),
)


def without_service_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` minus the ``SERVICE_KEYS`` (copies only what it changes)."""
    out = dict(data)
    for key_path in SERVICE_KEYS:
        out = _drop(out, key_path)
    return out


def _drop(node: dict[str, Any], key_path: tuple[str, ...]) -> dict[str, Any]:
    head, rest = key_path[0], key_path[1:]
    if head not in node:
        return node
    out = dict(node)
    if not rest:
        del out[head]
    elif rest[0] == "*" and isinstance(out[head], list):
        out[head] = [
            _drop(item, rest[1:]) if isinstance(item, dict) else item for item in out[head]
        ]
    elif isinstance(out[head], dict):
        out[head] = _drop(out[head], rest)
    return out


def read_config_tree(
    path: str | Path | None, env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], ConfigSource]:
    """The TOML file (if any) with the environment overrides applied, not yet validated,
    and where each key came from, for messages."""
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
    data, env_keys = _env_overlay(raw, environ)
    return data, ConfigSource(source, env_keys)


def validate_config(
    model: type[AnyConfig], data: Mapping[str, Any], source: ConfigSource, path: str | Path | None
) -> AnyConfig:
    """Validate a config tree as ``model`` (``Config`` or the daemon's extension of it);
    relative paths written in a file become relative to that file."""
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    if path is not None:
        config = _resolve_relative(config, Path(path).resolve().parent, "state_dir" in data)
    return config


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read, overlay and validate the configuration. ``None`` → defaults plus environment.

    The daemon's own keys (``SERVICE_KEYS``) are accepted and ignored here.
    """
    data, source = read_config_tree(path, env)
    return validate_config(Config, without_service_keys(data), source, path)


def _resolve_relative(config: AnyConfig, base: Path, state_dir_given: bool) -> AnyConfig:
    """Relative paths written in a config file are relative to that file.

    The default state dir (no ``state_dir`` anywhere) stays relative to the working
    directory, as the CLI documents. URIs (``file:``, ``s3://`` …) are left as written.
    """

    def fix(p: str) -> str:
        local = local_path(p)
        if local is None or local.is_absolute() or p.startswith("file:"):
            return p
        return str(base / local)

    tables = tuple(
        t.model_copy(
            update={
                "location": fix(t.location) if t.location else t.location,
                "location_map": {k: fix(v) for k, v in t.location_map.items()},
            }
        )
        for t in config.table
    )
    state_dir = fix(config.state_dir) if state_dir_given else config.state_dir
    return config.model_copy(update={"state_dir": state_dir, "table": tables})
