"""A first run over many commits: what each commit's store write costs when there are many.

A table's first run processes every commit it can see, one state version each (each
snapshot keeps stats of its own), so the per-commit costs that grow with the store's
history — the state version lists every live segment and every snapshot's stats file —
add up to a cost quadratic in the commits. This times lakestats' first run (metadata only,
no Spark: what is left is the store's and the format's own work) over a Paimon table of
``--commits`` pypaimon commits of one row each (Paimon keeps no checkpoint to start from:
a first run walks every snapshot), on the local file system, ``--repeat`` times, each from
an empty store, with the phase totals of the commit reports.

    .venv/bin/python tests/bench/first_run.py                 # --commits 1200 --repeat 2
    PYTHONPATH=<checkout>/core:<checkout>/daemon .venv/bin/python tests/bench/first_run.py

The table is built once under ``--work-dir`` (the idle-poll bench's, so either builds it
for both: ~3 min).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: pypaimon tables

from idle_poll import build_paimon
from measure import load_average

import lakestats
from lakestats.analyze import CommitReport, analyze_table
from lakestats.config import Config, SketchConfig, TableConfig
from lakestats.tables import open_configured


def first_run(location: Path, state: Path) -> tuple[float, int, dict[str, float]]:
    """Seconds, commits processed and phase totals of one first run into ``state``."""
    shutil.rmtree(state, ignore_errors=True)
    config = Config(
        state_dir=str(state),
        sketch=SketchConfig(enabled=False),
        table=(TableConfig(name="t", location=str(location)),),
    )
    phases: dict[str, float] = {}

    def on_commit(report: CommitReport) -> None:
        for phase, seconds in report.timings.items():
            phases[phase] = phases.get(phase, 0.0) + seconds

    started = time.perf_counter()
    opened = open_configured(config.table[0], config)
    result = analyze_table(opened, config=config, sketcher=None, on_commit=on_commit)
    return time.perf_counter() - started, len(result.commits), phases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work-dir", default=".bench/idle-poll")
    args = parser.parse_args()
    work = Path(args.work_dir).resolve()
    print(f"lakestats from {Path(lakestats.__file__).parent}", flush=True)
    location = build_paimon(work / f"paimon{args.commits}", args.commits)
    print(f"1-minute load average at the start: {load_average():.2f}")
    print("\n| run | commits | seconds | ms per commit | phases (s) |\n|---|---|---|---|---|")
    seconds = []
    for i in range(args.repeat):
        took, commits, phases = first_run(location, work / "first-run-state")
        seconds.append(took)
        shown = ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if v >= 0.005)
        print(f"| {i + 1} | {commits:,} | {took:.2f} | {took / commits * 1000:.1f} | {shown} |")
    print(f"\nmedian {statistics.median(seconds):.2f} s; load average {load_average():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
