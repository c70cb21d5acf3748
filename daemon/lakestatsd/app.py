"""The daemon assembled: the service's parts, its API backend and its lifecycle.

Each job lives in its own module: ``cli`` (arguments, exit codes), ``config`` (the
daemon's sections), ``wiring`` (parts built from config, hint routing), ``backend`` (what
the HTTP API reads), ``lifecycle`` (start order, signals, systemd, shutdown budget).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from lakestatsd.backend import ApiBackend
from lakestatsd.config import ServiceConfig
from lakestatsd.lifecycle import Lifecycle
from lakestatsd.maintenance import MaintenanceFns
from lakestatsd.runtime import AnalyzeFn, Opener, StatsReader
from lakestatsd.spark_watch import StopSpark
from lakestatsd.systemd import Notifier
from lakestatsd.wiring import CoreFns, Service, core_fns


class Daemon(Service):
    """A ``Service`` with its API backend, ready to ``run`` on a bound socket."""

    def __init__(
        self,
        config: ServiceConfig,
        *,
        analyze: AnalyzeFn,
        read_stats: StatsReader,
        opener: Opener,
        warm_spark: Callable[[], None] | None,
        stop_spark: StopSpark | None,
        notifier: Notifier | None = None,
        maintenance: MaintenanceFns | None = None,
        spark_health: Callable[[], Any] | None = None,
    ) -> None:
        super().__init__(
            config,
            CoreFns(
                analyze=analyze,
                read_stats=read_stats,
                opener=opener,
                warm_spark=warm_spark,
                stop_spark=stop_spark,
                maintenance=maintenance,
                spark_health=spark_health,
            ),
        )
        self.backend = ApiBackend(self)
        self._notifier = notifier or Notifier()

    @classmethod
    def from_config(cls, config: ServiceConfig) -> Daemon:
        """The daemon wired to the real core."""
        core = core_fns(config)
        return cls(
            config,
            analyze=core.analyze,
            read_stats=core.read_stats,
            opener=core.opener,
            warm_spark=core.warm_spark,
            stop_spark=core.stop_spark,
            maintenance=core.maintenance,
            spark_health=core.spark_health,
        )

    def run(self, sock: socket.socket) -> int:
        return Lifecycle(self, self.backend, self._notifier).run(sock)
