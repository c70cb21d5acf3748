"""``publish.sweeps``: one process sweeps a table's stray files at most once per grace
period, each table on its own clock."""

from __future__ import annotations

import uuid

from lakestats.publish.sweeps import sweep_due


def test_a_table_is_swept_once_per_grace_period() -> None:
    now = [100.0]
    table, other = f"t-{uuid.uuid4()}", f"u-{uuid.uuid4()}"

    def due(key: str, grace_s: float) -> bool:
        return sweep_due(key, grace_s, clock=lambda: now[0])

    assert due(table, 60)  # the first run of this process
    assert not due(table, 60)
    now[0] += 59.9
    assert not due(table, 60)
    assert due(other, 60)  # another table: its own clock
    now[0] += 0.1
    assert due(table, 60)  # a full grace period since the last sweep
    assert not due(table, 60)
    assert due(table, 0)  # a grace of 0: every run
    assert due(table, 0)
