"""The recommendation rule (docs/advisor.md): which skipping structure fits a column."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lakestats.advise.model import (
    EXACT_ENOUGH,
    FLOAT_TYPES,
    LN2_SQUARED,
    RANGE_TYPES,
    AdviceKind,
    AdviceSettings,
    BloomSizing,
    LookupCost,
    Recommendation,
)


def bloom_sizing(ndv_per_file: float, fpp: float, files: int) -> BloomSizing:
    n = max(ndv_per_file, 1.0)
    bits = math.ceil(-n * math.log(fpp) / LN2_SQUARED)
    hashes = max(1, round(bits / n * math.log(2)))
    return BloomSizing(ndv_per_file, fpp, bits, hashes, files * math.ceil(bits / 8))


@dataclass(frozen=True)
class ColumnFacts:
    type: str
    files: int
    with_values: int
    non_null: int
    null_fraction: float | None
    ndv: float | None
    ndv_per_file: float | None
    files_per_value: float | None
    point: LookupCost | None
    sorted_after: float | None


def _n(x: float) -> str:
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def recommend(facts: ColumnFacts, settings: AdviceSettings) -> Recommendation:
    """The documented rule (docs/advisor.md): the first case that applies wins."""
    s = settings
    if facts.with_values == 0 or facts.point is None:
        return Recommendation(AdviceKind.NONE, "no non-null values: min/max skip every file")
    if facts.files < s.min_files:
        return Recommendation(
            AdviceKind.NONE, f"only {facts.files} file(s): skipping cannot save much"
        )
    e = facts.point.files_expected
    if e <= 1.0 + s.clustered_share * (facts.files - 1):
        return Recommendation(
            AdviceKind.NONE,
            f"well clustered: a point lookup reads {_n(e)} of {facts.files} files by min/max",
            e,
        )
    if facts.null_fraction is not None and facts.null_fraction > s.mostly_null:
        return Recommendation(
            AdviceKind.MIN_MAX,
            f"{facts.null_fraction:.0%} null: null counts already skip the all-null files",
        )
    if facts.type == "boolean":
        return Recommendation(
            AdviceKind.MIN_MAX, "boolean: min/max already is an exact set of its ≤ 2 values"
        )
    ndv, after = facts.ndv, facts.sorted_after
    floating = facts.type in FLOAT_TYPES
    if (
        ndv is not None
        and after is not None
        and not floating
        and ndv <= min(facts.with_values, s.partition_max_ndv)
        and e >= s.min_gain * after
    ):
        return Recommendation(
            AdviceKind.PARTITION,
            f"{_n(ndv)} distinct values, each a file's worth of rows or more: partitioned "
            f"by it a lookup reads ≈ {_n(after)} files instead of {_n(e)}",
            after,
        )
    per_file, truly = facts.ndv_per_file, facts.files_per_value
    if (
        per_file is not None
        and truly is not None
        and not floating
        and per_file <= s.value_set_max
        and e >= s.min_gain * truly
    ):
        return Recommendation(
            AdviceKind.VALUE_SET,
            f"≈ {_n(per_file)} distinct values per file: a value set per file reads only "
            f"the ≈ {_n(truly)} files holding the value instead of {_n(e)}",
            truly,
        )
    key_like = ndv is not None and facts.non_null > 0 and ndv >= s.key_like * facts.non_null
    rangeable = facts.type in RANGE_TYPES or facts.type.startswith("decimal")
    if per_file is not None and truly is not None and not floating and (key_like or not rangeable):
        with_bloom = truly + s.bloom_fpp * max(e - truly, 0.0)
        if e >= s.min_gain * with_bloom:
            bloom = bloom_sizing(per_file, s.bloom_fpp, facts.with_values)
            kind = "key-like" if key_like else "high-NDV"
            return Recommendation(
                AdviceKind.BLOOM_FILTER,
                f"{kind} ({_n(ndv or 0)} distinct, ≈ {_n(per_file)} per file) with poor "
                f"overlap: a Bloom filter ({bloom.bits_per_file:,} bits/file, fpp "
                f"{s.bloom_fpp:g}) reads ≈ {_n(with_bloom)} files instead of {_n(e)}",
                with_bloom,
                bloom,
            )
    if after is not None and e >= s.min_gain * after:
        return Recommendation(
            AdviceKind.SORT,
            f"poor overlap ({_n(e)} of {facts.files} files per lookup): sorted or clustered "
            f"by it a lookup reads ≈ {_n(after)}",
            after,
        )
    if truly is not None and e <= EXACT_ENOUGH * truly:
        return Recommendation(
            AdviceKind.NONE,
            f"min/max already reads little more than the ≈ {_n(truly)} files that hold the "
            f"value ({_n(e)} of {facts.files}), and no rewrite would halve that",
            e,
        )
    return Recommendation(
        AdviceKind.MIN_MAX,
        f"{_n(e)} of {facts.files} files per lookup, and no structure would divide that "
        f"by {s.min_gain:g}: min/max only",
    )
