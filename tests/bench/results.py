"""What one benchmark run measured: the input of the report."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import accuracy
import baseline
import tpch
from measure import PeakMemory, Timing


@dataclass
class Incremental:
    """Per-commit update after the 1 % append, ``repeat`` times on copies of the state."""

    open_seconds: Timing = field(default_factory=Timing)  # open_configured (catalog, metadata)
    analyze_seconds: Timing = field(default_factory=Timing)  # analyze_table
    total_seconds: Timing = field(default_factory=Timing)  # both
    sketch_only: Timing = field(default_factory=Timing)  # sketch_files on the new file
    phases: dict[str, float] = field(default_factory=dict)  # CommitReport.timings, 1st run
    profile: str = ""


@dataclass(frozen=True)
class ColumnCost:
    """One column alone: plain ``min()`` scan vs ``sketch_files`` (the full-build profile)."""

    column: str
    type: str
    min_scan_seconds: float
    sketch_seconds: float


@dataclass
class Results:
    args: argparse.Namespace
    command: str  # the arguments the run was given
    date: str
    dataset: tpch.Dataset
    versions: dict[str, str]
    machine: dict[str, str]
    spark_start_seconds: float
    files_before: int
    bytes_before: int
    rows_before: int
    cold_min_scan: float
    min_scan: Timing
    sketch_build: Timing
    initial_seconds: float
    initial_phases: dict[str, float]
    append_seconds: float
    append_rows: int
    incremental: Incremental
    spark: baseline.SparkAnalyze
    exact_rows: int
    lakestats_rows: int
    columns: list[accuracy.ColumnAccuracy]
    memory: PeakMemory
    load_averages: dict[str, float]  # 1-minute load average at points of the run
    column_costs: list[ColumnCost]  # empty unless the full-build target was missed
    ndv_rse: float
    kll_rank_error: float
    theta_lg_k: int
    kll_k: int
