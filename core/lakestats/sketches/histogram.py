"""Equi-depth histograms derived at read time from a merged KLL sketch (and theta NDV).

Follows the Databend RFC "KLL-Based Histogram Generation for ANALYZE TABLE", minus its
second data pass (lakestats never rescans): boundaries are the KLL quantiles at
``i / buckets``; adjacent equal boundaries (a value hotter than one bucket) collapse into
one bucket, so fewer than ``buckets`` buckets is normal for skewed data; each bucket's row
count comes from the KLL CDF at its boundaries.

Bucket ``i`` covers ``(lower, upper]``, except the first, which covers ``[lower, upper]``
(its lower bound is the minimum). Bounds are in the KLL unit of the column (see
``spec.TypeSpec.kll_unit``: the value, days or microseconds since epoch).

Per-bucket NDV is *measured* when the column has a value sample
(``sketches.value_sample``: the theta sketch's retained keys carrying their value): the
entries whose value falls in the bucket's range divided by the sample's theta, exact while
the sample holds every distinct value, else within the theta sketch's binomial bounds on
that retained count (``ndv_bounds``, DataSketches' bounds at 2 standard deviations). When
the sample is an estimate and the bucket's share of the column's NDV by row count (below)
lies inside those bounds, the bucket keeps that share: the sample cannot tell it from the
truth, and it is far more precise (it pools the whole column's theta estimate, ±1.6 % at
lgK 12, where a bucket's ~41 entries carry ±16 %); outside them the measured value holds
(distinct values spread unevenly over the rows: skew, clustering, sparse tails). It is
capped at the number of representable values in the range when ``value_step`` is given (1
for int/long/date/timestamp micros, 10^-scale for decimals) and, for an estimate, at the
bucket's row count; at least 1 (the bucket's upper bound is a value that exists); a
single-value bucket has exactly 1. Where the bucket's sampled distinct values are not
evenly spread over its range, it also carries the values cutting them into quarters
(``ndv_cuts``: a reader places the bucket's values between them, not evenly).

Without a value sample (stores written before it existed) the NDV is an *estimate by
proportion* (``ndv_apportioned``): the column's total NDV is shared out in proportion to
the bucket's row count, every bucket getting at least one distinct value, and no bucket
more than its row count or the representable values in its range. What a cap cuts off is
shared among the other buckets (water-filling), so the bucket NDVs sum to the total NDV
whenever the caps allow it. It is biased high for buckets holding one very frequent value
among continuous (float) data and low for sparse tails. Counts are whole numbers, exact
when the sketch kept every value (``approximate=False``), else within the KLL bucket-mass
error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from datasketches import kll_doubles_sketch

from lakestats.sketches.merge import theta_estimate
from lakestats.sketches.theta_bounds import retained_bounds
from lakestats.sketches.value_sample import ValueSample, load_value_sample

# cuts per bucket through its distinct values (``HistogramBucket.ndv_cuts``): 3 quartiles
NDV_CUTS = 3
# the value sample's bounds on a bucket's NDV (``ndv_bounds``): DataSketches' at 3
# standard deviations (~99.7 %); an apportioned share inside them is kept
NDV_STD_DEVS = 3
# standard errors a cut must lie from even spacing to be published (``_uneven_cuts``)
CUT_Z = 3.0


@dataclass(frozen=True)
class HistogramBucket:
    lower: float
    upper: float
    count: float  # rows in the bucket, from the KLL CDF (a whole number)
    ndv: float | None  # distinct values in the bucket (see the module docstring)
    # False when the sketch kept every value (not in estimation mode): bounds and count exact
    approximate: bool = True
    # True: ndv is the column's NDV shared by row count; False: measured from a value sample
    ndv_apportioned: bool = True
    # the value sample's bounds on the bucket's distinct count (2 standard deviations,
    # capped like ndv); None without a sample; both equal ndv while the sample is exact
    ndv_bounds: tuple[float, float] | None = None
    # where the bucket's distinct values lie: the values below which 1/(len+1), 2/(len+1),
    # … of them are (from the value sample); () without a sample or with too few entries
    ndv_cuts: tuple[float, ...] = ()
    # where the bucket's rows lie: the KLL quantiles cutting its rows into quarters, when
    # they are surely not evenly spread over its range (``_uneven_count_cuts``); else ()
    count_cuts: tuple[float, ...] = ()


def equi_depth_histogram(
    kll_blob: bytes | None,
    theta_blob_or_ndv: bytes | float | None,
    buckets: int,
    *,
    value_step: float | None = None,
    value_sample: bytes | None = None,
) -> list[HistogramBucket]:
    """Equi-depth histogram of at most ``buckets`` buckets (plus one per hot value); ``[]``
    for an empty sketch.

    ``theta_blob_or_ndv`` is the column's theta sketch or an NDV already estimated from it;
    ``None`` leaves bucket NDVs unset. A value holding at least one bucket's share of the
    rows (by the sketch: its weight, within the bucket-mass error) gets a bucket of its own,
    ``(previous value, value]``: with ``value_step`` the previous representable value, else
    the next float below, so the range holds that one value and its count is the value's.
    With ``value_sample`` each bucket's NDV is measured from it (else apportioned).
    """
    if buckets < 1:
        raise ValueError(f"buckets must be >= 1, got {buckets}")
    if kll_blob is None:
        return []
    sketch = kll_doubles_sketch.deserialize(kll_blob)
    if sketch.is_empty():
        return []
    n = float(sketch.n)
    approximate = bool(sketch.is_estimation_mode())
    inner = sketch.get_quantiles([i / buckets for i in range(1, buckets)], True)
    # the true extremes, not KLL's quantile 0/1 (retained items only)
    cuts = [sketch.get_min_value(), *inner, sketch.get_max_value()]
    bounds: list[float] = []
    for value in cuts:
        if not bounds or value > bounds[-1]:
            bounds.append(float(value))
    total_ndv = _total_ndv(theta_blob_or_ndv)
    sample = None if value_sample is None else load_value_sample(value_sample)
    if len(bounds) == 1:
        ndv = None if total_ndv is None and sample is None else 1.0
        return [HistogramBucket(bounds[0], bounds[0], n, ndv, approximate, sample is None)]

    def rows_to(value: float, inclusive: bool = True) -> float:
        # KLL's rank is a cumulative weight divided by n: scaled back and rounded it is the
        # exact integer weight, so counts print as 640.0 and not 639.9999999999999
        return float(round(n * sketch.get_rank(value, inclusive)))

    hot = _hot_values(bounds, n / buckets, rows_to) if buckets > 1 else set()
    lowers: list[float] = []
    uppers: list[float] = []
    ends: list[float] = []  # rows <= each upper
    single: set[int] = set()  # buckets that hold one value
    if bounds[0] in hot:  # a hot minimum: the first bucket [min, min]
        single.add(0)
        lowers.append(bounds[0])
        uppers.append(bounds[0])
        ends.append(rows_to(bounds[0]))
    for value in bounds[1:]:
        lower = uppers[-1] if uppers else bounds[0]
        if value in hot:
            below = _previous_value(value, value_step)
            rows_below = rows_to(value, inclusive=False)
            others = rows_below - (ends[-1] if ends else 0.0)  # rows in (lower, value)
            # decimals' steps are not exact in binary: 0.07 - 0.01 > 0.06
            # the first bucket holds the minimum: split it even if the sketch kept no
            # other row below the hot value (a compacted tail), down to [min, min]
            if not ends and lower < value:
                below = max(below, lower)
                if below - lower <= (value_step or 0.0) / 2:
                    below = lower
                    single.add(0)
            elif not (others > 0 and below - lower > (value_step or 0.0) / 2):
                below = value  # nothing to split off
            if below < value:
                lowers.append(lower)
                uppers.append(below)
                ends.append(rows_below)
                lower, others = below, 0.0
            if others <= 0:
                single.add(len(uppers))
        lowers.append(lower)
        uppers.append(value)
        ends.append(rows_to(value))
    ends[-1] = n  # the maximum: every row
    counts = [ends[j] - (ends[j - 1] if j else 0.0) for j in range(len(ends))]
    ndvs: list[float | None] = [None] * len(counts)
    measured: list[_Measured | None] = [None] * len(counts)
    apportioned = None
    if total_ndv is not None:
        caps = []
        for j, count in enumerate(counts):
            cap = max(count, 1.0)
            if j in single:
                cap = 1.0
            elif value_step is not None and value_step > 0:
                span = (uppers[j] - lowers[j]) / value_step
                cap = min(cap, span + (1.0 if j == 0 else 0.0))
            caps.append(max(cap, 1.0))
        apportioned = _water_fill(total_ndv, counts, caps)
        ndvs = list(apportioned)
    if sample is not None:
        measured = list(
            _measured_ndvs(
                sample, _Buckets(lowers, uppers, counts, single), value_step, apportioned
            )
        )
        ndvs = [m.ndv for m in measured if m is not None]
    count_cuts = _uneven_count_cuts(sketch, _Buckets(lowers, uppers, counts, single))
    return [
        HistogramBucket(
            lowers[j],
            uppers[j],
            counts[j],
            ndvs[j],
            approximate,
            sample is None,
            None if m is None else m.bounds,
            () if m is None else m.cuts,
            count_cuts[j],
        )
        for j, m in enumerate(measured)
    ]


def _uneven_count_cuts(sketch: kll_doubles_sketch, buckets: _Buckets) -> list[tuple[float, ...]]:
    """Per bucket, the KLL quantiles cutting its rows into ``NDV_CUTS + 1`` equal parts,
    where some cut lies further from even spacing than KLL's own error can explain: its
    rows below the evenly spaced position differ from its share by more than the
    single-quantile rank error (~99 %; 0 when the sketch kept every value) — a Zipf tail
    whose rows crowd at the bottom of a wide bucket. Else ``()``."""
    n = float(sketch.n)
    error = float(sketch.normalized_rank_error(False)) * n if sketch.is_estimation_mode() else 0.0
    pieces = NDV_CUTS + 1
    wanted: list[int] = []
    ranks: list[float] = []
    start = 0.0
    for j, count in enumerate(buckets.counts):
        if j not in buckets.single and count > 0 and buckets.uppers[j] > buckets.lowers[j]:
            wanted.append(j)
            ranks += [(start + count * i / pieces) / n for i in range(1, pieces)]
        start += count
    out: list[tuple[float, ...]] = [() for _ in buckets.counts]
    if not wanted:
        return out
    values = [float(v) for v in sketch.get_quantiles(ranks, True)]
    for k, j in enumerate(wanted):
        cuts = tuple(values[k * NDV_CUTS : (k + 1) * NDV_CUTS])
        lower, upper, count = buckets.lowers[j], buckets.uppers[j], buckets.counts[j]
        for i, cut in enumerate(cuts, start=1):
            position = (min(max(cut, lower), upper) - lower) / (upper - lower)
            if abs(position - i / pieces) * count > error:
                out[j] = cuts
                break
    return out


@dataclass(frozen=True)
class _Measured:
    ndv: float
    bounds: tuple[float, float]
    cuts: tuple[float, ...]


@dataclass(frozen=True)
class _Buckets:
    lowers: list[float]
    uppers: list[float]
    counts: list[float]
    single: set[int]  # buckets that hold one value


def _measured_ndvs(
    sample: ValueSample,
    buckets: _Buckets,
    value_step: float | None,
    apportioned: list[float] | None,
) -> list[_Measured]:
    """Each bucket's NDV from the value sample and the sample's bounds on it, within
    [1, representable values] (and at most its rows when the sample is itself an
    estimate); the ``apportioned`` share instead where it lies inside the bounds."""
    out = []
    for j, (lower, upper) in enumerate(zip(buckets.lowers, buckets.uppers, strict=True)):
        if j in buckets.single:
            out.append(_Measured(1.0, (1.0, 1.0), ()))
            continue
        first, end = sample.range_in(lower, upper, include_lower=j == 0)
        retained = end - first
        ndv = retained / sample.theta
        low, high = retained_bounds(retained, min(sample.theta, 1.0), NDV_STD_DEVS)
        if not sample.exact and apportioned is not None and low <= apportioned[j] <= high:
            ndv = apportioned[j]  # consistent with the sample, and more precise
        cap = math.inf if sample.exact else max(buckets.counts[j], 1.0)
        if value_step is not None and value_step > 0:
            # decimals' steps are not exact in binary: round the span
            span = round((upper - lower) / value_step, 6)
            cap = min(cap, math.floor(span) + (1.0 if j == 0 else 0.0))
        ndv = max(min(ndv, cap), 1.0)
        high = max(min(high, cap), 1.0)
        cuts = _uneven_cuts(sample.values[first:end], lower, upper)
        out.append(_Measured(ndv, (min(max(low, 1.0), high), high), cuts))
    return out


def _uneven_cuts(values: tuple[float, ...], lower: float, upper: float) -> tuple[float, ...]:
    """The values cutting a bucket's sampled distinct ``values`` (ascending, in
    ``[lower, upper]``) into ``NDV_CUTS + 1`` equal parts, when they are not evenly spread
    over the range; else ``()`` (a reader spaces the bucket's values evenly).

    Evenly spread: every cut's position in the range is within ``CUT_Z`` standard errors
    of its share, ``|u - p| <= CUT_Z * sqrt(p (1 - p) / retained)`` (the sample quantile
    of uniform positions). A sample of a uniform key's bucket (~41 entries at lgK 12) would
    otherwise move each cut by ~±7 % of the range: worse than spacing evenly."""
    retained = len(values)
    pieces = NDV_CUTS + 1
    if retained <= NDV_CUTS or upper <= lower:
        return ()
    cuts = tuple(values[(retained * i) // pieces] for i in range(1, pieces))
    for i, cut in enumerate(cuts, start=1):
        share = i / pieces
        position = (cut - lower) / (upper - lower)
        if abs(position - share) > CUT_Z * math.sqrt(share * (1 - share) / retained):
            return cuts
    return ()


def _hot_values(
    candidates: list[float], bucket_rows: float, rows_to: Callable[[float, bool], float]
) -> set[float]:
    """Values with at least ``bucket_rows`` rows. A value that heavy spans a bucket's
    share of ranks, so it is one of the quantile cuts: only those are checked."""
    return {v for v in candidates if rows_to(v, True) - rows_to(v, False) >= bucket_rows}


def _previous_value(value: float, value_step: float | None) -> float:
    """The representable value just below ``value`` in KLL units."""
    if value_step is not None and value_step > 0 and math.isfinite(value):
        return value - value_step
    return math.nextafter(value, -math.inf)


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
