"""SIGKILL trials while publishing Paimon statistics: whenever the publisher dies, the
table stays readable, every snapshot names files that exist and parse, and the next run
publishes. (A writer appends between publishes in the same doomed process.)"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_paimon_publish import COLUMNS, java_reads, merged, rows

from lakestats.formats.paimon import open_paimon_location
from lakestats.publish.paimon import PaimonPublisher
from paimon_tables import PaimonWarehouse

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[2]

_LOOP = textwrap.dedent(
    """
    import sys, itertools
    from pathlib import Path
    from paimon_tables import PaimonWarehouse
    from test_paimon_publish import merged, rows
    from lakestats.formats.paimon import open_paimon_location
    from lakestats.publish.paimon import PaimonPublisher
    warehouse = PaimonWarehouse(Path(sys.argv[1]))
    table = open_paimon_location(sys.argv[2])
    published = {}
    print("ready", flush=True)
    for i in itertools.count(100):
        warehouse.write("t", rows([i]))
        table.refresh()
        publisher = PaimonPublisher(table)
        publisher.stage(merged(table, table.current_snapshot_id()), published)
        published = publisher.flush(published)
    """
)


def check_consistent(location: Path, warehouse: PaimonWarehouse) -> int:
    """Every snapshot parses and names existing files; pypaimon reads it; the row count."""
    table = open_paimon_location(str(location))
    ids = sorted(table.snapshot_ids())
    assert ids == list(range(1, len(ids) + 1))
    for snapshot_id in ids:
        document = json.loads((location / "snapshot" / f"snapshot-{snapshot_id}").read_text())
        for key in ("baseManifestList", "deltaManifestList"):
            assert (location / "manifest" / document[key]).exists(), (snapshot_id, key)
        if document.get("statistics"):
            java_reads(location, document["statistics"])
    live = table.live_files(ids[-1])
    assert all(Path(f.path).exists() for f in live)
    read = warehouse.table("t").new_read_builder()
    rows_read = read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows
    assert rows_read == sum(f.record_count for f in live)
    return rows_read


def test_sigkill_while_publishing_never_breaks_the_table(tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", COLUMNS)
    warehouse.write("t", rows([0]))
    chance = random.Random(12)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS / "core/publish")])}
    for _trial in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _LOOP, str(tmp_path / "wh"), str(location)],
            env=env,
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        time.sleep(chance.uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        child.wait()
        check_consistent(location, warehouse)
    # the next run publishes (and sweeps what a killed run left unnamed)
    table = open_paimon_location(str(location))
    publisher = PaimonPublisher(table)
    warehouse.write("t", rows([1]))
    table.refresh()
    publisher.stage(merged(table, table.current_snapshot_id() or 0), {})
    publisher.flush({})
    table.refresh()
    latest = table.snapshot(table.current_snapshot_id() or 0)
    assert latest.commit_kind == "ANALYZE" and latest.statistics
    total = check_consistent(location, warehouse)
    assert java_reads(location, latest.statistics)["mergedRecordCount"] == total
    publisher.sweep(0)
    named = {table.snapshot(i).statistics for i in table.snapshot_ids()}
    assert {p.name for p in (location / "statistics").iterdir()} <= named
