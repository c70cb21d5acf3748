"""SIGKILL `lakestats analyze` at random points, run it again: the result is exactly that
of an uninterrupted run, and the state references no missing or partial file."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakestats.cli import main
from lakestats.store import StatsStore, referenced_files
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
TRIALS = 5


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "lakestats.cli", *args]


def env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    return {**os.environ, "PYTHONPATH": f"{root / 'core'}{os.pathsep}{root / 'daemon'}"}


def show(loc: str, state: Path, snapshot: int) -> dict[str, Any]:
    out = io.StringIO()
    args = ["show", loc, "--state-dir", str(state), "--json", "--snapshot", str(snapshot)]
    assert main(args, out=out) == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    doc.pop("computed_at_ms")
    return doc


@pytest.mark.slow
def test_sigkill_during_analyze_then_rerun(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(12):
        wh.append(
            "t",
            pa.table(
                {"id": list(range(i * 10, i * 10 + 10)), "name": [f"n{i}"] * 10}, schema=SCHEMA
            ),
        )
        if i % 4 == 3:
            wh.delete("t", f"id < {i * 5}")
    loc = wh.location("t")
    lineage = wh.lineage("t")

    reference = tmp_path / "reference"
    subprocess.run(
        cli("analyze", loc, "--state-dir", str(reference), "--no-sketches", "-q"),
        env=env(),
        check=True,
        capture_output=True,
    )
    expected = {s: show(loc, reference, s) for s in lineage}

    rng = random.Random(20261122)
    killed_mid_run = 0
    for trial in range(TRIALS):
        state = tmp_path / f"trial-{trial}"
        # several kills per trial, each after a random delay, so runs die at many points
        for _ in range(2):
            proc = subprocess.Popen(
                cli("analyze", loc, "--state-dir", str(state), "--no-sketches", "-q"),
                env=env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.3, 2.0))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed_mid_run += 1
            proc.wait()
        subprocess.run(
            cli("analyze", loc, "--state-dir", str(state), "--no-sketches", "-q"),
            env=env(),
            check=True,
            capture_output=True,
        )
        for snapshot in lineage:
            assert show(loc, state, snapshot) == expected[snapshot], (trial, snapshot)
        (table_dir,) = [p for p in state.iterdir() if p.is_dir()]
        store = StatsStore(state, table_dir.name)
        current = store.current()
        assert current is not None and current.last_snapshot_id == lineage[-1]
        for rel in referenced_files(current):
            assert (table_dir / rel).is_file(), rel
        # a killed run may leave a temp file (cleanup's job), never a partial version
        for version in store.versions():
            assert store.read_version(version).table_id == table_dir.name
    assert killed_mid_run > 0  # the trials really interrupted runs
