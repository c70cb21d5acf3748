"""Data-skipping advice: how well min/max already prunes each column, and what would help.

Pure analysis over per-file column facts (no I/O; ``lakestats.advise_io`` reads them from
the store). It answers what Hyperspace's ``MinMaxAnalysisUtil`` answers before a
re-clustering — how many files a point lookup must read given each file's [min, max] — and,
as the Flint skipping-index RFC asks, picks the skipping structure that fits each column
from its type, NDV, NDV per file, overlap, null fraction and size. The rule and the
formulas are in docs/advisor.md; the constants are ``AdviceSettings``.

* ``model``: facts in (``FileColumn``, ``ColumnInput``), advice out (``ColumnAdvice``,
  ``AdviceReport``), and how values of each type are ordered and shown;
* ``measure``: lookups, ranges and the overlap profile of one column (``analyze_column``);
* ``rule``: the recommendation (``recommend``);
* ``analysis``: a whole table and each partition (``advise``);
* ``render``: the JSON report and the terminal text.

Cost is linear in files × columns (plus sorting the bounds), independent of row counts.
"""

from lakestats.advise.analysis import advise, join_reports
from lakestats.advise.measure import Bounds, analyze_column
from lakestats.advise.model import (
    AdviceKind,
    AdviceReport,
    AdviceSettings,
    BloomSizing,
    ColumnAdvice,
    ColumnInput,
    FileColumn,
    LookupCost,
    OverlapBin,
    PartitionAdvice,
    Recommendation,
    display_value,
    has_kll,
    order_key,
)
from lakestats.advise.render import column_json, render_column, render_report, report_json
from lakestats.advise.rule import ColumnFacts, bloom_sizing, recommend

__all__ = [
    "AdviceKind",
    "AdviceReport",
    "AdviceSettings",
    "BloomSizing",
    "Bounds",
    "ColumnAdvice",
    "ColumnFacts",
    "ColumnInput",
    "FileColumn",
    "LookupCost",
    "OverlapBin",
    "PartitionAdvice",
    "Recommendation",
    "advise",
    "analyze_column",
    "bloom_sizing",
    "column_json",
    "display_value",
    "has_kll",
    "join_reports",
    "order_key",
    "recommend",
    "render_column",
    "render_report",
    "report_json",
]
