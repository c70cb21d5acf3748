"""systemd ``Type=notify`` integration: readiness, status, stopping and watchdog pings.

Everything is a no-op unless systemd (or a test) set ``NOTIFY_SOCKET``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import sdnotify


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self.enabled = bool(environ.get("NOTIFY_SOCKET"))
        self._notifier = sdnotify.SystemdNotifier() if self.enabled else None
        self._watchdog_s = _watchdog_interval(environ)

    def send(self, message: str) -> None:
        if self._notifier is not None:
            self._notifier.notify(message)

    @property
    def watchdog_interval_s(self) -> float | None:
        """Ping period: half of ``WATCHDOG_USEC``, as sd_watchdog_enabled(3) recommends."""
        return self._watchdog_s if self.enabled else None


def _watchdog_interval(env: Mapping[str, str]) -> float | None:
    usec = env.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None  # meant for another process (e.g. a wrapper that exec'd us)
    return int(usec) / 2 / 1_000_000
