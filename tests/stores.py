"""Reading a test's stats store as a new process would."""

from __future__ import annotations

from pathlib import Path

from lakestats.config import Config, load_config
from lakestats.model import StateVersion
from lakestats.store import StatsStore


def metadata_only_config(state_dir: Path) -> Config:
    """The default config (and environment) with ``state_dir``, sketches off: what
    ``--no-sketches`` runs get, for a table opened and analyzed in the test's process."""
    config = load_config(None).model_copy(update={"state_dir": state_dir})
    sketch = config.sketch.model_copy(update={"enabled": False})
    return config.model_copy(update={"sketch": sketch})


def store_of(state_dir: Path) -> tuple[StatsStore, StateVersion]:
    """A new store object for the one table under ``state_dir`` (nothing cached: what a
    new process sees) and its current state."""
    (table_dir,) = [p for p in state_dir.iterdir() if p.is_dir()]
    store = StatsStore(state_dir, table_dir.name)
    state = store.current()
    assert state is not None
    return store, state
