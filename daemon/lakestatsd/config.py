"""The daemon's configuration: the library's ``Config`` plus what only the service reads.

One file serves ``lakestats`` and ``lakestatsd``. ``lakestats.config`` models what the
library uses and tolerates the keys below without interpreting them (its
``SERVICE_KEYS``); here they are modelled and validated strictly, so a typo in
``[watch]`` is an error naming the key (``lakestatsd --check-config`` exits 2):

* ``[watch]`` — file-system events, the polling fallback, the per-table queue;
* ``[daemon]`` — shutdown budget and log level;
* ``[maintenance] enabled, compaction_interval_s`` — the scheduled compaction job;
* ``[[table]] expire.schedule`` — when the daemon runs the table's expiry (cron, UTC).

The models extend the library's (a ``ServiceConfig`` *is* a ``Config``), so everything
in core takes them as they are. Environment overrides (``LAKESTATS_WATCH__DEBOUNCE_S``)
and durations (``"30s"``, ``"5m"`` → seconds, parsed once) work as in the library.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from lakestats.config import (
    Config,
    ConfigSection,
    ExpireConfig,
    MaintenanceConfig,
    Seconds,
    TableConfig,
    read_config_tree,
    validate_config,
)
from lakestatsd.schedules import cron_trigger

__all__ = [
    "DaemonSection",
    "ScheduledExpireConfig",
    "ServiceConfig",
    "ServiceMaintenanceConfig",
    "ServiceTableConfig",
    "WatchConfig",
    "load_service_config",
]


class WatchConfig(ConfigSection):
    """``[watch]``: how the daemon learns of commits and how it queues table runs."""

    enabled: bool = True  # file-system events; polling always runs as the fallback
    poll_interval_s: Annotated[Seconds, Field(gt=0, le=86400)] = 30.0
    debounce_s: Annotated[Seconds, Field(ge=0, le=600)] = 0.5
    max_concurrent_tables: Annotated[int, Field(ge=1, le=256)] = 2
    backoff_initial_s: Annotated[Seconds, Field(gt=0, le=3600)] = 1.0
    backoff_max_s: Annotated[Seconds, Field(gt=0, le=86400)] = 300.0
    # a run this long gives its worker back at its next batch boundary while another
    # table waits for one, and goes on after it (a backlog shares the workers)
    run_slice_s: Annotated[Seconds, Field(gt=0, le=86400)] = 30.0
    # a run silent (no commit boundary) this long is stalled: /healthz fails. None: twice
    # the Spark job timeout plus 15 minutes — a batch may run two jobs between commit
    # boundaries (rows a merge or a delete kills, then the sketches), and a slow job must
    # be cancelled by Spark first
    stall_timeout_s: Annotated[Seconds | None, Field(gt=0, le=30 * 86400)] = None


class DaemonSection(ConfigSection):
    """``[daemon]``: the process itself."""

    shutdown_timeout_s: Annotated[Seconds, Field(gt=0, le=3600)] = 30.0
    log_level: str = "info"
    # Spark supervision (lakestatsd.spark_watch): how often the session is checked, the
    # longest pause between attempts to recreate it, and how long Spark may stay unusable
    # before /healthz fails so that systemd or Kubernetes restarts the process
    spark_check_interval_s: Annotated[Seconds, Field(gt=0, le=3600)] = 5.0
    spark_retry_max_s: Annotated[Seconds, Field(gt=0, le=3600)] = 60.0
    spark_unavailable_timeout_s: Annotated[Seconds, Field(gt=0)] = 600.0
    # the JVM's own log (log4j, Java stacks): None = <state_dir>/lakestatsd-spark.log for a
    # local state dir, "" = leave it on stderr
    spark_log: str | None = None
    spark_log_level: str = "warn"

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        if value.lower() not in {"debug", "info", "warning", "error"}:
            raise ValueError("must be one of debug, info, warning, error")
        return value.lower()

    @field_validator("spark_log_level")
    @classmethod
    def _spark_level(cls, value: str) -> str:
        if value.upper() not in {"ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"}:
            raise ValueError("must be one of all, debug, info, warn, error, fatal, off")
        return value.upper()


class ScheduledExpireConfig(ExpireConfig):
    """A table's ``expire`` policy plus when the daemon runs it."""

    schedule: str | None = None  # cron expression, 5 fields, UTC (``lakestats.cron``)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                cron_trigger(value)  # the very trigger the scheduler will use
            except ValueError as exc:
                message = str(exc)
                if not message.startswith("not a"):  # APScheduler's own words
                    message = f"not a valid cron expression {value!r}: {message}"
                raise ValueError(message) from None
        return value


class ServiceMaintenanceConfig(MaintenanceConfig):
    """``[maintenance]`` plus the daemon's scheduled compaction."""

    enabled: bool = True  # the daemon's scheduled jobs; the CLI commands always work
    compaction_interval_s: Annotated[Seconds, Field(gt=0, le=30 * 86400)] = 3600.0


class ServiceTableConfig(TableConfig):
    expire: ScheduledExpireConfig | None = None


class ServiceConfig(Config):
    """Everything ``lakestatsd`` reads: the library's config and the service's sections."""

    watch: WatchConfig = Field(default_factory=WatchConfig)
    daemon: DaemonSection = Field(default_factory=DaemonSection)
    maintenance: ServiceMaintenanceConfig = Field(default_factory=ServiceMaintenanceConfig)
    table: tuple[ServiceTableConfig, ...] = ()

    def find_table(self, name: str) -> ServiceTableConfig | None:
        return next((t for t in self.table if t.name == name), None)

    @property
    def stall_timeout_s(self) -> float:
        """``watch.stall_timeout_s``, by default 2 × ``spark.job_timeout_s`` + 15 minutes."""
        configured = self.watch.stall_timeout_s
        return configured if configured is not None else 2 * self.spark.job_timeout_s + 900.0


def load_service_config(
    path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> ServiceConfig:
    """Read, overlay and validate the whole file strictly (``ConfigError`` naming the key)."""
    data, source = read_config_tree(path, env)
    return validate_config(ServiceConfig, data, source, path)
