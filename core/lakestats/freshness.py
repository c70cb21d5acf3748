"""How far a table's stats are behind the table: the data of ``lakestats status`` and of
the "behind" note of ``lakestats show``.

One lineage walk per table (the same ``commits_since`` that ``analyze`` uses), no data
read, nothing written. A table that cannot be opened or read is reported with its error,
never raised: a status listing must show every configured table.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any

from lakestats.config import Config, TableConfig
from lakestats.exceptions import LakestatsError
from lakestats.lineage import Pending, pending_commits, replaced_commit
from lakestats.tables import OpenedTable, open_configured


@dataclass(frozen=True)
class Freshness:
    """One table's stats against the table itself, as of ``checked_at_ms``."""

    name: str
    format: str | None
    last_snapshot_id: int | None  # the snapshot the stats describe (None: never analyzed)
    current_snapshot_id: int | None
    # commits the stats do not reflect yet (None: unknown); commits that change no data
    # file are not counted: their data is their parent's, which the stats describe
    commits_behind: int | None
    newest_unprocessed_age_s: float | None  # age of the newest commit not reflected
    oldest_unprocessed_age_s: float | None  # how long the stats have been missing a commit
    last_error: str | None
    checked_at_ms: int
    # why the next analyze starts over from the table's lineage (rolled back past the
    # stats, or their snapshot id names another commit now); None: it continues
    starts_over: str | None = None
    # the folder under the state dir that holds its stats (None: it cannot be opened)
    store_folder: str | None = None

    @property
    def up_to_date(self) -> bool:
        return self.last_error is None and self.commits_behind == 0

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "up_to_date": self.up_to_date}


def freshness(opened: OpenedTable, now_ms: int | None = None) -> Freshness:
    """The stats of ``opened`` against its current snapshot (raises what reading raises)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    opened.table.refresh()
    current = opened.table.current_snapshot_id()
    state = opened.store.current()
    last = state.last_snapshot_id if state is not None else None
    replaced = replaced_commit(opened.table, state)
    walk = (
        Pending(())
        if current is None or (current == last and replaced is None)
        else pending_commits(opened.table, state)
    )
    if walk.stopped is not None:
        raise walk.stopped  # how far behind is unknown past a commit that cannot be read
    # a commit that changes no data file (Paimon's ANALYZE snapshot, lakestats' own after a
    # publishing run) has its parent's data: stats do not fall behind by it — but with
    # no stats at all, every commit is one they lack (an append of no rows has stats too)
    pending = [c for c in walk.commits if last is None or c.added_files or c.removed_files]
    return Freshness(
        name=opened.name,
        format=opened.table.format_name,
        last_snapshot_id=last,
        current_snapshot_id=current,
        commits_behind=len(pending),
        newest_unprocessed_age_s=_age(now, pending[-1].timestamp_ms) if pending else None,
        oldest_unprocessed_age_s=_age(now, pending[0].timestamp_ms) if pending else None,
        last_error=None,
        checked_at_ms=now,
        starts_over=walk.started_over,
        store_folder=opened.store.folder,
    )


def table_status(table: TableConfig, config: Config) -> Freshness:
    """``freshness`` of a configured table; an error becomes ``last_error``."""
    try:
        return freshness(open_configured(table, config))
    except LakestatsError as exc:
        return Freshness(
            name=table.name,
            format=None,
            last_snapshot_id=None,
            current_snapshot_id=None,
            commits_behind=None,
            newest_unprocessed_age_s=None,
            oldest_unprocessed_age_s=None,
            last_error=f"{type(exc).__name__}: {exc}",
            checked_at_ms=int(time.time() * 1000),
        )


def daemon_tables(base_url: str, timeout_s: float = 1.0) -> list[dict[str, Any]] | None:
    """The tables a running daemon reports (``GET /v1/tables``), or None when no daemon
    answers."""
    try:
        with urllib.request.urlopen(f"{base_url}/v1/tables", timeout=timeout_s) as response:  # noqa: S310 - http(s) URL from validated config
            doc = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    tables = doc.get("tables") if isinstance(doc, dict) else None
    if not isinstance(tables, list):
        return None
    return [t for t in tables if isinstance(t, dict) and "name" in t]


def _age(now_ms: int, then_ms: int) -> float:
    return round(max(0.0, (now_ms - then_ms) / 1000.0), 3)


def describe_age(seconds: float | None) -> str:
    """``42s``, ``5m``, ``3h``, ``2d`` — for people."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
