"""Equi-depth histograms derived at read time from a merged KLL sketch (and theta NDV).

Follows the Databend RFC "KLL-Based Histogram Generation for ANALYZE TABLE", minus its
second data pass (lakestats never rescans): boundaries are the KLL quantiles at
``i / buckets``; adjacent equal boundaries (a value hotter than one bucket) collapse into
one bucket, so fewer than ``buckets`` buckets is normal for skewed data; each bucket's row
count comes from the KLL CDF at its boundaries.

Bucket ``i`` covers ``(lower, upper]``, except the first, which covers ``[lower, upper]``
(its lower bound is the minimum). Bounds are in the KLL unit of the column (see
``spec.TypeSpec.kll_unit``: the value, days or microseconds since epoch).

Per-bucket NDV is an *estimate by proportion*, not a measurement: a theta sketch cannot be
split by value range, so the column's total NDV is shared out in proportion to the bucket's
row count, every bucket getting at least one distinct value (its upper bound is a value the
sketch saw), and no bucket more than its row count or, when ``value_step`` is given (1 for
int/long/date/timestamp micros, 10^-scale for decimals), more than the number of
representable values in its range. What a cap cuts off is shared among the other buckets
(water-filling), so the bucket NDVs sum to the total NDV whenever the caps allow it. It is
biased high for buckets holding one very frequent value among continuous (float) data and
low for sparse tails. Counts and NDVs are approximate and say so (``approximate``).
"""

from __future__ import annotations

from dataclasses import dataclass

from datasketches import kll_doubles_sketch

from lakestats.sketches.merge import theta_estimate


@dataclass(frozen=True)
class HistogramBucket:
    lower: float
    upper: float
    count: float  # rows in the bucket, from the KLL CDF (approximate)
    ndv: float | None  # distinct values in the bucket, estimated by proportion (approximate)
    approximate: bool = True


def equi_depth_histogram(
    kll_blob: bytes | None,
    theta_blob_or_ndv: bytes | float | None,
    buckets: int,
    *,
    value_step: float | None = None,
) -> list[HistogramBucket]:
    """Equi-depth histogram of at most ``buckets`` buckets; ``[]`` for an empty sketch.

    ``theta_blob_or_ndv`` is the column's theta sketch or an NDV already estimated from it;
    ``None`` leaves bucket NDVs unset.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be >= 1, got {buckets}")
    if kll_blob is None:
        return []
    sketch = kll_doubles_sketch.deserialize(kll_blob)
    if sketch.is_empty():
        return []
    n = float(sketch.n)
    inner = sketch.get_quantiles([i / buckets for i in range(1, buckets)], True)
    # the true extremes, not KLL's quantile 0/1 (retained items only)
    cuts = [sketch.get_min_value(), *inner, sketch.get_max_value()]
    bounds: list[float] = []
    for value in cuts:
        if not bounds or value > bounds[-1]:
            bounds.append(float(value))
    total_ndv = _total_ndv(theta_blob_or_ndv)
    if len(bounds) == 1:
        ndv = None if total_ndv is None else 1.0
        return [HistogramBucket(bounds[0], bounds[0], n, ndv)]

    cdf = sketch.get_cdf(bounds[1:], True)  # cdf[j] = fraction of rows <= bounds[j + 1]
    # KLL's CDF is a cumulative weight divided by n: scaled back and rounded it is the exact
    # integer weight, so counts print as 640.0 and not 639.9999999999999
    cumulative = [float(round(n * c)) for c in cdf]
    counts = [cumulative[j] - (cumulative[j - 1] if j else 0.0) for j in range(len(bounds) - 1)]
    ndvs: list[float | None] = [None] * len(counts)
    if total_ndv is not None:
        caps = []
        for j, count in enumerate(counts):
            cap = max(count, 1.0)
            if value_step is not None and value_step > 0:
                span = (bounds[j + 1] - bounds[j]) / value_step
                cap = min(cap, span + (1.0 if j == 0 else 0.0))
            caps.append(max(cap, 1.0))
        ndvs = list(_water_fill(total_ndv, counts, caps))
    return [
        HistogramBucket(bounds[j], bounds[j + 1], counts[j], ndvs[j]) for j in range(len(counts))
    ]


def _total_ndv(source: bytes | float | None) -> float | None:
    if source is None:
        return None
    if isinstance(source, bytes | bytearray):
        return theta_estimate(bytes(source))
    return float(source)


def _water_fill(total: float, weights: list[float], caps: list[float]) -> list[float]:
    """Share ``total`` in proportion to ``weights``, each share within [1, cap]."""
    shares = [1.0] * len(weights)
    remaining = total - len(weights)
    active = {j for j in range(len(weights)) if caps[j] > 1.0}
    while remaining > 0 and active:
        weight = sum(weights[j] for j in active)
        if weight <= 0:
            break
        capped = {j for j in active if shares[j] + remaining * weights[j] / weight >= caps[j]}
        if not capped:
            for j in active:
                shares[j] += remaining * weights[j] / weight
            break
        for j in capped:
            remaining -= caps[j] - shares[j]
            shares[j] = caps[j]
        active -= capped
    return shares
