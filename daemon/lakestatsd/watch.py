"""File-system watching and the polling fallback. Both only *hint* the queue.

Iceberg commits end by writing a new ``<n>-<uuid>.metadata.json`` (or, for Hadoop-style
tables, moving ``version-hint.text``) into ``<location>/metadata/``. An observer per
metadata directory turns such events into hints; manifests written earlier in the same
commit are ignored so one commit is one hint, and the queue's debounce merges the rest.

Events can be missing (NFS, object stores, FUSE, an overflowing inotify queue) or late,
so a poll job hints every table every ``watch.poll_interval_s`` regardless. The poll tick
also retries watching directories that did not exist yet (a table created after start,
a catalog that was down): a broken table is reported, never fatal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

log = structlog.get_logger("lakestatsd.watch")

Hint = Callable[[str, str], object]
LocationOf = Callable[[str], str | None]

# file names whose appearance means "a commit landed"
_COMMIT_MARKERS = (".metadata.json", "version-hint.text")


def local_metadata_dir(location: str) -> Path | None:
    """``<location>/metadata`` when the location is on the local file system, else None."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        path = unquote(parsed.path) if parsed.scheme == "file" else location
        return Path(path) / "metadata"
    return None  # s3://, gs://, abfs:// …: no change events, polling only


# Only events that mean "a file now has new content". watchdog also reports reads (opened,
# closed without writing): the daemon's own metadata reads would hint the table again and
# make an idle daemon re-run every debounce interval.
_WRITE_EVENTS = frozenset(
    {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_CLOSED}
)


def is_commit_event(event: FileSystemEvent) -> bool:
    if event.is_directory or event.event_type not in _WRITE_EVENTS:
        return False
    paths = [event.src_path, getattr(event, "dest_path", "")]
    return any(
        str(p).endswith(_COMMIT_MARKERS) and not Path(str(p)).name.startswith(".")
        for p in paths
        if p
    )


class _Handler(FileSystemEventHandler):
    def __init__(self, table: str, hint: Hint) -> None:
        self._table = table
        self._hint = hint

    def on_any_event(self, event: FileSystemEvent) -> None:
        if is_commit_event(event):
            self._hint(self._table, "watch")


class MetadataWatcher:
    """One watchdog observer thread; one watch per table metadata directory."""

    def __init__(
        self,
        tables: tuple[str, ...],
        hint: Hint,
        location_of: LocationOf,
        observer_factory: Callable[[], BaseObserver] = Observer,
    ) -> None:
        self._tables = tables
        self._hint = hint
        self._location_of = location_of
        self._observer = observer_factory()
        self._watches: dict[str, ObservedWatch] = {}
        self._unwatchable: set[str] = set()  # remote locations: polling only, say it once
        self._lock = threading.Lock()

    def start(self) -> None:
        self._observer.start()
        self.ensure_watches()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._observer.stop()
        self._observer.join(timeout_s)

    def watched(self) -> dict[str, str]:
        with self._lock:
            return {name: w.path for name, w in self._watches.items()}

    def ensure_watches(self) -> None:
        """Add a watch for every table that has none yet (called again at each poll tick)."""
        for table in self._tables:
            with self._lock:
                if table in self._watches or table in self._unwatchable:
                    continue
            location = self._location_of(table)
            if location is None:
                continue  # could not open the table: its run reports why
            directory = local_metadata_dir(location)
            if directory is None:
                log.info("watch_unsupported", table=table, location=location, fallback="poll")
                with self._lock:
                    self._unwatchable.add(table)
                continue
            if not directory.is_dir():
                continue
            try:
                watch = self._observer.schedule(
                    _Handler(table, self._hint), str(directory), recursive=False
                )
            except OSError as exc:  # e.g. inotify watch limit reached: polling still covers it
                log.warning("watch_failed", table=table, path=str(directory), error=str(exc))
                continue
            with self._lock:
                self._watches[table] = watch
            log.info("watching", table=table, path=str(directory))
            # a commit may have landed between start and this watch: look once more
            self._hint(table, "watch")


class Poller:
    """The polling fallback: an APScheduler interval job that hints every table.

    The first tick runs at start, which is also how a restarted daemon resumes: every
    table is looked at once and core continues from its state log.
    """

    def __init__(
        self,
        interval_s: float,
        tick: Callable[[], None],
    ) -> None:
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )
        self._interval_s = interval_s
        self._tick = tick

    def start(self) -> None:
        self._scheduler.add_job(
            self._safe_tick,
            "interval",
            seconds=self._interval_s,
            id="poll",
            next_run_time=datetime.now(UTC),
        )
        self._scheduler.start()

    def _safe_tick(self) -> None:
        try:
            self._tick()
        except Exception:  # a failed tick must not unschedule polling
            log.exception("poll_tick_failed")

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
