"""Which other daemons keep these tables: each announces itself in the state dir.

Two daemons keeping one table — the same config started twice, a Deployment scaled past
one replica on a shared volume, replicas without ``[shards]`` — still give right stats
(the store takes turns), but do every commit's work twice and race each other's
scheduled expiry, and nothing else tells. So each daemon holds an exclusive ``flock`` on a
file of its own under ``<state_dir>/.lakestatsd/`` naming its host, pid and tables (as
hashes of where they are), and
looks at the others' files at start and every ``RECHECK_S``: a file whose lock is held
is a live daemon (a warning names the tables both keep, once per daemon), one whose lock
nobody holds was left by a daemon that is gone, and is deleted. The folder is hidden:
``status`` and ``forget`` skip it. Local state dirs only — an S3 prefix has no locks.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import structlog

from lakestats.config import Config, TableConfig
from lakestats.locations import local_path, location_key

log = structlog.get_logger("lakestatsd.presence")

FOLDER = ".lakestatsd"
RECHECK_S = 600.0


def table_key(table: TableConfig, config: Config) -> str:
    """Where a configured table is, for comparing across configs: its location, or its
    catalog's URI (else the catalog's name) and identifier — hashed, since a catalog URI
    may carry a password and the file is for any daemon on the state dir to read."""
    if table.location is not None:
        where = location_key(table.location)
    else:
        props = config.catalog.get(table.catalog or "", {})
        where = f"{props.get('uri') or table.catalog}#{table.identifier}"
    return hashlib.sha256(where.encode()).hexdigest()


@dataclass(frozen=True)
class OtherDaemon:
    """A live daemon's announcement, and the tables it keeps that this one keeps too."""

    host: str
    pid: int
    started_at_ms: int
    shared: tuple[str, ...]  # this daemon's names for them


class Presence:
    """This daemon's announcement under ``state_dir`` (``announce``/``withdraw``) and its
    look at the others' (``others``)."""

    def __init__(self, state_dir: Path, config: Config) -> None:
        self._folder = state_dir / FOLDER
        self._keys = {table_key(t, config): t.name for t in config.table}
        self._path = (
            self._folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        )
        self._file: IO[bytes] | None = None
        self._warned: set[str] = set()

    @classmethod
    def for_config(cls, config: Config) -> Presence | None:
        """``None`` for a state dir on object storage (no locks there)."""
        directory = local_path(config.state_dir)
        return None if directory is None else cls(directory, config)

    def announce(self) -> None:
        """Write and lock this daemon's file; an error (a read-only state dir) is logged
        and the daemon goes on without it — the runs say what is wrong with the dir."""
        doc = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at_ms": int(time.time() * 1000),
            "tables": sorted(self._keys),
        }
        # locked and written under a name others skip, then renamed (the lock goes with
        # the file): no other daemon ever sees it unlocked and takes it for a dead one's
        temp = self._path.with_name(f".{self._path.name}.tmp")
        for attempt in range(2):
            handle: IO[bytes] | None = None
            try:
                self._folder.mkdir(parents=True, exist_ok=True)
                handle = temp.open("wb")
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                handle.write(json.dumps(doc).encode())
                handle.flush()
                temp.replace(self._path)
            except OSError as exc:
                if handle is not None:
                    handle.close()
                if isinstance(exc, FileNotFoundError) and not attempt:
                    continue  # the last daemon out removed the folder meanwhile
                log.warning("presence_unavailable", path=str(self._path), error=str(exc))
                return
            self._file = handle
            return

    def withdraw(self) -> None:
        if self._file is None:
            return
        try:
            self._path.unlink(missing_ok=True)
            with suppress(OSError):
                self._folder.rmdir()  # the last one out: the state dir as it was
        finally:
            self._file.close()
            self._file = None

    def others(self) -> list[OtherDaemon]:
        """The other live daemons that keep a table this one keeps; files of daemons that
        are gone are deleted."""
        found: list[OtherDaemon] = []
        for path in self._announcements():
            other = self._read_if_alive(path)
            if other is not None and other.shared:
                found.append(other)
        return found

    def warn_about_others(self) -> list[OtherDaemon]:
        """``others``, each logged as a warning the first time it is seen."""
        found = self.others()
        for other in found:
            who = f"{other.host}:{other.pid}:{other.started_at_ms}"
            if who in self._warned:
                continue
            self._warned.add(who)
            log.warning(
                "tables_kept_by_another_daemon",
                other_host=other.host,
                other_pid=other.pid,
                tables=list(other.shared),
                note="both do every commit's work and race each other's expiry: run one "
                "daemon per table, or split the tables with [shards]",
            )
        return found

    def _announcements(self) -> Iterable[Path]:
        try:
            paths = sorted(self._folder.iterdir())
        except OSError:
            return []
        for path in paths:
            if path.suffix == ".tmp":
                self._drop_if_abandoned(path)
        return [p for p in paths if p.suffix == ".json" and p != self._path]

    @staticmethod
    def _drop_if_abandoned(temp: Path) -> None:
        """A temporary announcement left by a daemon killed before it renamed it: unlocked
        and older than a minute (one being written is locked, or seconds old)."""
        try:
            if time.time() - temp.stat().st_mtime < 60:
                return
            with temp.open("rb") as handle:
                if not _held(handle):
                    temp.unlink(missing_ok=True)
        except OSError:
            return

    def _read_if_alive(self, path: Path) -> OtherDaemon | None:
        try:
            with path.open("rb") as handle:
                if not _held(handle):  # its daemon is gone
                    path.unlink(missing_ok=True)
                    return None
                doc = json.loads(handle.read() or b"{}")
                keys = doc.get("tables", []) if isinstance(doc, dict) else []
                shared = sorted(self._keys[k] for k in keys if k in self._keys)
                return OtherDaemon(
                    host=str(doc.get("host", "?")),
                    pid=int(doc.get("pid", 0)),
                    started_at_ms=int(doc.get("started_at_ms", 0)),
                    shared=tuple(shared),
                )
        except (OSError, ValueError, TypeError) as exc:
            log.debug("presence_unreadable", path=str(path), error=str(exc))
        return None


def _held(handle: IO[bytes]) -> bool:
    """Whether a live daemon holds this file's lock (an flock goes with its process)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False
