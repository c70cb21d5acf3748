"""Reading a test's stats store as a new process would."""

from __future__ import annotations

from pathlib import Path

from lakestats.model import StateVersion
from lakestats.store import StatsStore


def store_of(state_dir: Path) -> tuple[StatsStore, StateVersion]:
    """A new store object for the one table under ``state_dir`` (nothing cached: what a
    new process sees) and its current state."""
    (table_dir,) = [p for p in state_dir.iterdir() if p.is_dir()]
    store = StatsStore(state_dir, table_dir.name)
    state = store.current()
    assert state is not None
    return store, state
