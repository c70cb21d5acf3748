"""The API backend: what ``lakestatsd.api.Backend`` asks of the running service.

Readiness, the table list and statuses, stats reads, hints and their wait state, and the
metrics payload — each read from the ``Service`` parts, never changing them (hints aside).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest

from lakestats.shards import ShardPlan
from lakestatsd.config import ServiceConfig
from lakestatsd.wiring import Service, state_dir_writable


class ApiBackend:
    """``api.Backend`` over a ``Service``."""

    def __init__(self, service: Service) -> None:
        self._service = service

    @property
    def config(self) -> ServiceConfig:
        return self._service.config

    def hint(self, name: str, source: str) -> int | None:
        return self._service.hint(name, source)

    def shards(self) -> ShardPlan:
        return self._service.shards

    def wait_state(self, name: str, ticket: int) -> str | None:
        queue = self._service.queue
        if queue.is_done(name, ticket):
            return "done"
        if queue.stopping:
            return "stopping"
        return None

    def table_status(self, name: str) -> dict[str, Any]:
        status = self._service.queue.status()[name]
        freshness = self._service.freshness
        processed, current = freshness.snapshot_ids(name)
        return {
            "name": name,
            "last_snapshot_id": processed,
            "current_snapshot_id": current,
            "freshness_lag_seconds": freshness.lag_s(name),
            "store_folder": self._service.runtime.store_folder(name),
            **status.as_json(),
        }

    def tables(self) -> list[dict[str, Any]]:
        out = []
        watcher = self._service.watcher
        watched = watcher.watched() if watcher is not None else {}
        for table in self.config.table:
            entry = self.table_status(table.name)
            entry["source"] = (
                {"location": table.location}
                if table.location is not None
                else {"catalog": table.catalog, "identifier": table.identifier}
            )
            entry["watched"] = table.name in watched
            out.append(entry)
        return out

    def read_stats(self, name: str, snapshot_id: int | None) -> dict[str, Any]:
        return self._service.runtime.read_stats(name, snapshot_id)

    def advise(self, name: str, columns: list[str] | None) -> dict[str, Any]:
        """Data-skipping advice from the table's stored stats; reads no data, no Spark."""
        from lakestats.advise import report_json  # noqa: PLC0415 - only this endpoint needs it
        from lakestats.advise_io import advise_table  # noqa: PLC0415
        from lakestats.exceptions import TableNotFoundError  # noqa: PLC0415
        from lakestats.tables import open_configured  # noqa: PLC0415

        table = self.config.find_table(name)
        if table is None:  # the API looked the name up already; a direct caller may not
            raise TableNotFoundError(f"no configured table named {name!r}")
        return report_json(advise_table(open_configured(table, self.config), self.config, columns))

    def metrics_payload(self) -> bytes:
        metrics = self._service.metrics
        metrics.ready.set(1 if self.readiness()[0] else 0)
        return generate_latest(metrics.registry)

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        """Should the supervisor restart us? Only for what a restart can fix: a thread the
        daemon cannot work without died of a bug (the dispatcher, a table worker, the
        poller), Spark stayed unusable past ``daemon.spark_unavailable_timeout_s``, or a
        table's run has been stalled past ``watch.stall_timeout_s`` (a hung read holds a
        worker for good: Python cannot cancel it)."""
        service = self._service
        dead = [p for p in (service.queue.crashed, service.poller.crashed) if p]
        watch = service.spark_watch
        spark_alive, spark_error = watch.alive() if watch is not None else (True, None)
        stalled = service.queue.stalled(service.config.stall_timeout_s)
        if dead:
            detail: dict[str, Any] = {"status": "dead", "errors": dead}
        else:
            detail = {"status": "ok" if spark_alive and not stalled else "failing"}
        if not spark_alive:
            detail["spark"] = spark_error
        if stalled:
            # seconds each stalled run has been silent (no commit boundary reached)
            detail["stalled"] = {name: round(s, 1) for name, s in sorted(stalled.items())}
        return not dead and spark_alive and not stalled, detail

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        status = self._service.status
        spark_state = self._service.spark_state
        watch = self._service.spark_watch
        spark_error = watch.status.error if watch is not None else None
        spark_ok = spark_state in ("up", "disabled")
        state_ok, state_error = state_dir_writable(self.config.state_dir)
        checks: dict[str, Any] = {
            "spark": {"ok": spark_ok, "state": spark_state, "error": spark_error},
            "state_dir": {"ok": state_ok, "path": self.config.state_dir, "error": state_error},
            "scheduler": {"ok": self._service.queue.alive and self._service.queue.crashed is None},
            "shutting_down": {"ok": not status.stopping},
        }
        # a state dir that cannot be written (full, read-only) is reported, and each table
        # that fails on it says so (kind "storage"), but it does not make the daemon
        # unready: the stats already written are still served
        ready = all(c["ok"] for k, c in checks.items() if k != "state_dir")
        # a broken table is reported here but does not make the daemon unready: the
        # healthy tables and the API must stay in service (alert on lakestats_table_healthy)
        tables = {t.name: self.table_status(t.name) for t in self.config.table}
        return ready, {"ready": ready, "checks": checks, "tables": tables}
