"""Rendering advice: the JSON report and the terminal text."""

from __future__ import annotations

from typing import Any

from lakestats.advise.model import (
    AdviceReport,
    ColumnAdvice,
    LookupCost,
    display_value,
)
from lakestats.render import partition_text, printable


def _cost_json(cost: LookupCost | None) -> dict[str, Any] | None:
    if cost is None:
        return None
    return {
        "selectivity": cost.selectivity,
        "files_expected": cost.files_expected,
        "files_max": cost.files_max,
        "bytes_expected": cost.bytes_expected,
        "bytes_max": cost.bytes_max,
        "share_expected": cost.share_expected,
    }


def column_json(advice: ColumnAdvice) -> dict[str, Any]:
    """One column's advice in the JSON contract (snake_case; docs/advisor.md)."""
    rec = advice.recommendation
    bloom = rec.bloom
    return {
        "field_id": advice.field_id,
        "name": advice.name,
        "type": advice.type,
        "files": advice.files,
        "files_with_values": advice.files_with_values,
        "files_without_bounds": advice.files_without_bounds,
        "records": advice.records,
        "null_fraction": advice.null_fraction,
        "ndv": advice.ndv,
        "ndv_per_file": {"mean": advice.ndv_per_file_mean, "max": advice.ndv_per_file_max},
        "files_per_value": advice.files_per_value,
        "distribution": advice.distribution,
        "point_lookup": _cost_json(advice.point),
        "range_lookups": [_cost_json(r) for r in advice.ranges],
        "overlap": {
            "split": advice.overlap_split,
            "bins": [
                {
                    "lower": display_value(advice.type, b.lower),
                    "upper": display_value(advice.type, b.upper),
                    "files": b.files,
                    "share": b.share,
                }
                for b in advice.overlap
            ],
        },
        "point_selectivity": advice.point_selectivity,
        "files_per_lookup_sorted": advice.files_per_lookup_sorted,
        "recommendation": {
            "kind": rec.kind.value,
            "reason": rec.reason,
            "files_per_lookup_after": rec.files_per_lookup_after,
            "bloom_filter": None
            if bloom is None
            else {
                "ndv_per_file": bloom.ndv_per_file,
                "fpp": bloom.fpp,
                "bits_per_file": bloom.bits_per_file,
                "hashes": bloom.hashes,
                "total_bytes": bloom.total_bytes,
            },
        },
    }


def report_json(report: AdviceReport) -> dict[str, Any]:
    """The whole report; ``partitions`` is always there (empty when unpartitioned), with
    every partition of at least ``min_files`` files; ``small_partitions`` counts the rest."""
    s = report.settings
    return {
        "table": report.table,
        "snapshot_id": report.snapshot_id,
        "files": report.files,
        "settings": {
            "eval_points": s.eval_points,
            "selectivities": list(s.selectivities),
            "overlap_bins": s.overlap_bins,
            "bloom_fpp": s.bloom_fpp,
        },
        "columns": [column_json(c) for c in report.columns],
        "partitions": [
            {
                "partition": p.partition.as_dict(),
                "spec_id": p.partition.spec_id,
                "files": p.files,
                "columns": [column_json(c) for c in p.columns],
            }
            for p in report.partitions
        ],
        "small_partitions": report.small_partitions,
    }


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def _bar(share: float, width: int = 30) -> str:
    filled = round(share * width)
    return "█" * filled + "·" * (width - filled)


def _cost_line(label: str, cost: LookupCost) -> str:
    return (
        f"  {label:<14} files ≈ {cost.files_expected:,.2f} ({cost.share_expected:.1%}), "
        f"max {cost.files_max:,}; bytes ≈ {_bytes(cost.bytes_expected)}, "
        f"max {_bytes(cost.bytes_max)}"
    )


def render_column(advice: ColumnAdvice) -> str:
    ndv = "?" if advice.ndv is None else f"{advice.ndv:,.0f}"
    per_file = "?" if advice.ndv_per_file_mean is None else f"{advice.ndv_per_file_mean:,.0f}"
    nulls = "?" if advice.null_fraction is None else f"{advice.null_fraction:.1%}"
    lines = [
        f"{printable(advice.name)} ({advice.type}): {advice.files:,} files, "
        f"{advice.records:,} rows, "
        f"nulls {nulls}, ndv ≈ {ndv}, ndv/file ≈ {per_file}"
    ]
    if advice.point is not None:
        lines.append(_cost_line("point lookup", advice.point))
    lines.extend(_cost_line(f"range {r.selectivity:.0%}", r) for r in advice.ranges)
    if advice.files_per_lookup_sorted is not None:
        lines.append(f"  {'if sorted':<14} files ≈ {advice.files_per_lookup_sorted:,.2f}")
    if advice.overlap:
        if advice.overlap_split == "kll_quantiles":
            what = f"each 1/{len(advice.overlap)} of the rows (KLL quantiles)"
        else:
            what = f"{len(advice.overlap)} equal parts of the value range (no KLL)"
        lines.append(f"  overlap: share of files covering {what}")
        labels = [printable(str(display_value(advice.type, b.lower))) for b in advice.overlap]
        width = min(max(len(label) for label in labels), 26)
        for label, b in zip(labels, advice.overlap, strict=True):
            lines.append(f"    {label[:width]:>{width}} │{_bar(b.share)}│ {b.share:6.1%}")
    rec = advice.recommendation
    lines.append(f"  → {rec.kind.value}: {rec.reason}")
    return "\n".join(lines) + "\n"


def render_report(report: AdviceReport, *, per_partition: bool = False) -> str:
    """The terminal form; the per-partition summary only when asked for."""
    head = (
        f"{printable(report.table)}: snapshot {report.snapshot_id}, "
        f"{report.files:,} live data files\n"
    )
    parts = [head, *("\n" + render_column(c) for c in report.columns)]
    if per_partition and report.partitions:
        parts.append("\nper partition (point lookups):\n")
        for p in report.partitions:
            key = partition_text(p.partition.values) or "(unpartitioned)"
            for c in p.columns:
                e = "-" if c.point is None else f"{c.point.files_expected:,.2f}"
                m = "-" if c.point is None else f"{c.point.files_max:,}"
                parts.append(
                    f"  {key}  {printable(c.name)}: {p.files:,} files, lookup ≈ {e} (max {m}) "
                    f"→ {c.recommendation.kind.value}\n"
                )
    elif report.partitions:
        parts.append(
            f"\n{len(report.partitions)} partitions: --per-partition (or --json) shows each\n"
        )
    if report.small_partitions:
        parts.append(
            f"{report.small_partitions:,} partition(s) with fewer than "
            f"{report.settings.min_files} files not analysed one by one (too few to skip)\n"
        )
    return "".join(parts)
