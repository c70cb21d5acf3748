"""File-system watching and the polling fallback. Both only *hint* the queue.

What a commit writes last, and where, is the table format's to say: each table's format
answers with a ``WatchSpec`` (``lakestats.formats.registry.watch_spec``), directories
relative to the table location and the file-name suffixes that mark a commit (Iceberg: a
new ``metadata/<n>-<uuid>.metadata.json``, or a moved ``version-hint.text``). One watch
per such directory turns marker events into hints; files written earlier in the same
commit are ignored so one commit is one hint, and the queue's debounce merges the rest.

Events can be missing (NFS, object stores, FUSE, an overflowing inotify queue) or late,
so a poll job hints every table every ``watch.poll_interval_s`` regardless. The poll tick
also retries watching directories that did not exist yet (a table created after start,
a catalog that was down): a broken table is reported, never fatal.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from watchdog.events import (
    EVENT_TYPE_DELETED,
    DirDeletedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from lakestats.formats.base import WatchSpec
from lakestats.formats.registry import watch_spec
from lakestats.locations import local_path

log = structlog.get_logger("lakestatsd.watch")

Hint = Callable[[str, str], object]


@dataclass(frozen=True)
class WatchTarget:
    """What the watcher needs of a table: where it lives and its format's name."""

    location: str
    format_name: str


TargetOf = Callable[[str], WatchTarget | None]


def local_metadata_dir(location: str, directory: str) -> Path | None:
    """``<location>/<directory>`` (one of a ``WatchSpec`` 's directories) when the location
    is on the local file system, else None."""
    root = local_path(location)
    if root is None:
        return None  # s3://, gs://, abfs:// …: no change events, polling only
    return root / directory


# Only events that mean "a file now has new content". watchdog also reports reads (opened,
# closed without writing): the daemon's own metadata reads would hint the table again and
# make an idle daemon re-run every debounce interval.
_WRITE_EVENT_CLASSES = (FileCreatedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent)
_WRITE_EVENTS = frozenset(cls.event_type for cls in _WRITE_EVENT_CLASSES)
# What a watch asks for: the writes above and the watched directory's own deletion. Reads
# never reach Python then — the daemon reads every metadata file it is told of, and under
# load watchdog's queue of those read events grew to 72k (27 MB). Nor do files' deletions
# (expiry deletes thousands; none is a commit): watchdog drops them before its queue.
_WATCHED_EVENTS = [*_WRITE_EVENT_CLASSES, DirDeletedEvent]


def is_commit_event(event: FileSystemEvent, spec: WatchSpec) -> bool:
    """A write of one of the format's commit markers (hidden temporary files excluded)."""
    if event.is_directory or event.event_type not in _WRITE_EVENTS:
        return False
    paths = [event.src_path, getattr(event, "dest_path", "")]
    return any(
        str(p).endswith(spec.markers) and not Path(str(p)).name.startswith(".") for p in paths if p
    )


class _Handler(FileSystemEventHandler):
    def __init__(
        self,
        table: str,
        spec: WatchSpec,
        hint: Hint,
        directories: frozenset[str],
        gone: Callable[[str], None],
    ) -> None:
        self._table = table
        self._spec = spec
        self._hint = hint
        self._directories = directories
        self._gone = gone

    def on_any_event(self, event: FileSystemEvent) -> None:
        if is_commit_event(event, self._spec):
            self._hint(self._table, "watch")
        elif event.event_type == EVENT_TYPE_DELETED and (
            os.fsdecode(event.src_path) in self._directories
        ):
            # the watched directory itself: its watch ends here (watchdog stops it)
            self._gone(self._table)


MAX_STUCK_ROUNDS = 8  # threads left hanging on tables whose open never returns


def _identity(directory: Path) -> tuple[int, int] | None:
    """What tells a directory from another created at its path; None when it is gone."""
    try:
        info = directory.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


class MetadataWatcher:
    """One watchdog observer thread; one watch per directory its table's format names."""

    def __init__(
        self,
        tables: tuple[str, ...],
        hint: Hint,
        target_of: TargetOf,
        observer_factory: Callable[[], BaseObserver] = Observer,
        spec_of: Callable[[str], WatchSpec] = watch_spec,
    ) -> None:
        self._tables = tables
        self._hint = hint
        self._target_of = target_of
        self._spec_of = spec_of  # format name → what to watch (the format registry's answer)
        self._observer = observer_factory()
        self._watches: dict[str, tuple[ObservedWatch, ...]] = {}
        self._unwatchable: set[str] = set()  # remote locations: polling only, say it once
        self._lock = threading.Lock()
        self._rounds: list[threading.Thread] = []  # ensure_watches_soon's threads
        self._in_flight: set[str] = set()  # tables a round is looking at now
        # table → (device, inode) of each directory watched: one deleted or replaced shows
        self._identities: dict[str, tuple[tuple[int, int] | None, ...]] = {}
        self._lost: set[str] = set()  # tables one of whose watched directories was deleted

    def start(self, *, background: bool = False) -> None:
        """Start the observer and add every table's watches — ``background``: on a thread
        of their own (``ensure_watches_soon``), as the daemon does."""
        self._observer.start()
        if background:
            self.ensure_watches_soon()
        else:
            self.ensure_watches()

    def ensure_watches_soon(self) -> None:
        """``ensure_watches`` on a thread of its own. Finding a table's directories opens
        it, and an open can hang (a catalog that takes the connection and never answers;
        pyiceberg's clients have no timeout): neither the event loop (the API, signals) nor
        the poll tick may wait on it. Each round passes by the tables another round is still
        looking at, so a hung table holds one thread and stops no other table's watch; the
        rounds alive at once are capped (``MAX_STUCK_ROUNDS`` + 1), polling covers the rest."""
        with self._lock:
            self._rounds = [r for r in self._rounds if r.is_alive()]
            if len(self._rounds) > MAX_STUCK_ROUNDS:
                return
            round_ = threading.Thread(
                target=self._ensure_logged, name="lakestatsd-watches", daemon=True
            )
            self._rounds.append(round_)
            round_.start()

    def _ensure_logged(self) -> None:
        try:
            self.ensure_watches()
        except Exception as exc:  # a bug here must not go unseen; polling still covers all
            log.error("ensure_watches_failed", error=str(exc), exc_info=True)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._observer.stop()
        self._observer.join(timeout_s)

    def watched(self) -> dict[str, tuple[str, ...]]:
        """Table → the directories watched for it."""
        with self._lock:
            return {name: tuple(w.path for w in ws) for name, ws in self._watches.items()}

    def ensure_watches(self) -> None:
        """Add the watches of every table that has none yet, or whose watched directory is
        not the one watched any more (called again at each poll tick)."""
        for table in self._tables:
            with self._lock:
                if table in self._in_flight:
                    continue  # another round is at it (maybe hung on its catalog)
                self._in_flight.add(table)
            try:
                self._drop_if_replaced(table)
                with self._lock:
                    if table in self._watches or table in self._unwatchable:
                        continue
                target = self._target_of(table)
                if target is None:
                    continue  # could not open the table: its run reports why
                self._watch(table, target)
            finally:
                with self._lock:
                    self._in_flight.discard(table)

    def _drop_if_replaced(self, table: str) -> None:
        """A watched directory deleted (and maybe created again at its path: a table
        dropped and written anew) ended its inotify watch: the deletion's event (``_lose``)
        or a stat per directory and tick tells, and the table is watched again."""
        with self._lock:
            watches = self._watches.get(table)
            identities = self._identities.get(table)
            lost = table in self._lost
            self._lost.discard(table)
        if watches is None or identities is None:
            return
        same = all(_identity(Path(w.path)) == i for w, i in zip(watches, identities, strict=True))
        if same and not lost:
            return
        for watch in watches:
            with suppress(KeyError, OSError):  # the emitter may have gone with the directory
                self._observer.unschedule(watch)
        with self._lock:
            self._watches.pop(table, None)
            self._identities.pop(table, None)
        log.info("watch_lost", table=table, paths=[w.path for w in watches])

    def _lose(self, table: str) -> None:
        """A watched directory of ``table`` was deleted (an inode number may come back
        with the directory made again at its path: only the event tells)."""
        with self._lock:
            self._lost.add(table)

    def _watch(self, table: str, target: WatchTarget) -> None:
        spec = self._spec_of(target.format_name)
        directories = [local_metadata_dir(target.location, d) for d in spec.directories]
        local = [d for d in directories if d is not None]
        if len(local) != len(directories):
            log.info("watch_unsupported", table=table, location=target.location, fallback="poll")
            with self._lock:
                self._unwatchable.add(table)
            return
        if not all(d.is_dir() for d in local):
            return  # not created yet: the next poll tick tries again
        watches: list[ObservedWatch] = []
        handler = _Handler(table, spec, self._hint, frozenset(map(str, local)), self._lose)
        for directory in local:
            try:
                watches.append(
                    self._observer.schedule(
                        handler, str(directory), recursive=False, event_filter=_WATCHED_EVENTS
                    )
                )
            except OSError as exc:  # e.g. inotify watch limit reached: polling still covers it
                log.warning("watch_failed", table=table, path=str(directory), error=str(exc))
                for watch in watches:
                    self._observer.unschedule(watch)
                return
        with self._lock:
            self._watches[table] = tuple(watches)
            self._identities[table] = tuple(_identity(d) for d in local)
        log.info("watching", table=table, paths=[str(d) for d in local])
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

    @property
    def crashed(self) -> str | None:
        """Why polling stopped although nobody stopped it, else None (liveness)."""
        thread = getattr(self._scheduler, "_thread", None)
        if self._scheduler.running and thread is not None and not thread.is_alive():
            return "the poller thread ended"
        return None

    def _safe_tick(self) -> None:
        try:
            self._tick()
        except Exception:  # a failed tick must not unschedule polling
            log.exception("poll_tick_failed")

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
