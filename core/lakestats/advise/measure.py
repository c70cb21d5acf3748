"""Measuring min/max pruning: files per point lookup and per range, the overlap profile.

A column's files are reduced to two sorted bound arrays and every lookup is two binary
searches; lookups are weighted by the column's value distribution from its merged KLL
sketch, not by a uniform domain (docs/advisor.md).
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate, pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
from datasketches import kll_doubles_sketch

from lakestats.advise.model import (
    LABEL_BYTES,
    AdviceSettings,
    ColumnAdvice,
    ColumnInput,
    FileColumn,
    LookupCost,
    OverlapBin,
    has_kll,
)
from lakestats.advise.rule import ColumnFacts, recommend
from lakestats.sketches.frequent import frequent_values, kind_of, merge_frequent_items
from lakestats.sketches.merge import (
    kll_normalized_rank_error,
    merge_kll,
    theta_estimate,
    union_theta,
)
from lakestats.values import from_physical, to_physical


class Bounds:
    """Files reduced to sorted bound arrays: a lookup costs two binary searches.

    A file with bounds [lo, hi] intersects [a, b] iff lo ≤ b and hi ≥ a; since lo ≤ hi,
    the files with hi < a are a subset of those with lo ≤ b, so the count is
    #{lo ≤ b} − #{hi < a}. Prefix sums of sizes in the same orders give the bytes.
    Files with unknown bounds are added to every answer.
    """

    def __init__(self, files: Sequence[FileColumn]) -> None:
        bounded = [f for f in files if f.has_values and f.lower is not None and f.upper is not None]
        unknown = [f for f in files if f.has_values and (f.lower is None or f.upper is None)]
        self.count = len(bounded)
        self.unknown_files = len(unknown)
        self.unknown_bytes = sum(f.file_bytes for f in unknown)
        by_lower = sorted(bounded, key=lambda f: f.lower)
        by_upper = sorted(bounded, key=lambda f: f.upper)
        self.lowers = [f.lower for f in by_lower]
        self.uppers = [f.upper for f in by_upper]
        self._lower_bytes = [0, *accumulate(f.file_bytes for f in by_lower)]
        self._upper_bytes = [0, *accumulate(f.file_bytes for f in by_upper)]
        self._sizes = [(f.lower, f.upper, f.file_bytes) for f in bounded]
        self._arrays: tuple[npt.NDArray[Any], ...] | None = None

    def files_overlapping(self, a: Any, b: Any) -> int:
        """Files a predicate ``a ≤ x ≤ b`` must read (``a == b``: a point lookup)."""
        started = bisect.bisect_right(self.lowers, b)
        ended = bisect.bisect_left(self.uppers, a)
        return started - ended + self.unknown_files

    def files_in_part(self, a: Any, b: Any, *, first: bool) -> int:
        """Files intersecting the part (a, b] of the domain ([a, b] for the first part), so
        a file starting exactly at a cut is counted in the part the cut closes, not twice."""
        if first or a == b:  # a part of one value (a heavy one): the files holding it
            return self.files_overlapping(a, b)
        started = bisect.bisect_right(self.lowers, b)
        ended = bisect.bisect_right(self.uppers, a)
        return started - ended + self.unknown_files

    def overlapping_many(
        self, a: npt.ArrayLike, b: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(files, bytes) for many numeric predicates ``a[i] ≤ x ≤ b[i]`` at once: the same
        two binary searches, vectorised (KLL columns evaluate hundreds of them per group,
        and a table may have thousands of partitions)."""
        if self._arrays is None:
            self._arrays = (
                np.asarray(self.lowers, dtype=np.float64),
                np.asarray(self.uppers, dtype=np.float64),
                np.asarray(self._lower_bytes, dtype=np.int64),
                np.asarray(self._upper_bytes, dtype=np.int64),
            )
        lowers, uppers, lower_bytes, upper_bytes = self._arrays
        started = np.searchsorted(lowers, np.asarray(b, dtype=np.float64), side="right")
        ended = np.searchsorted(uppers, np.asarray(a, dtype=np.float64), side="left")
        files = started - ended + self.unknown_files
        sizes = lower_bytes[started] - upper_bytes[ended] + self.unknown_bytes
        return files.astype(np.int64), sizes.astype(np.int64)

    def bytes_overlapping(self, a: Any, b: Any) -> int:
        started = bisect.bisect_right(self.lowers, b)
        ended = bisect.bisect_left(self.uppers, a)
        return self._lower_bytes[started] - self._upper_bytes[ended] + self.unknown_bytes

    def max_depth(self) -> tuple[int, int]:
        """(files, bytes): the most any single value must read, over the whole domain.

        A sweep over the bounds; at equal values starts come before ends because the
        intervals are closed.
        """
        events: list[tuple[Any, int, int]] = []
        for lower, upper, size in self._sizes:
            events.append((lower, 0, size))
            events.append((upper, 1, size))
        events.sort(key=lambda e: (e[0], e[1]))
        files = size_now = best_files = best_bytes = 0
        for _, kind, size in events:
            if kind == 0:
                files += 1
                size_now += size
                best_files = max(best_files, files)
                best_bytes = max(best_bytes, size_now)
            else:
                files -= 1
                size_now -= size
        return best_files + self.unknown_files, best_bytes + self.unknown_bytes


@dataclass(frozen=True)
class _Distribution:
    """Where lookups go: ``values``, M equally weighted KLL quantiles (``kind == "kll"``),
    or nothing (the spread model)."""

    kind: str
    values: npt.NDArray[np.float64] | None
    kll: kll_doubles_sketch | None


def _distribution(files: Sequence[FileColumn], type_str: str, s: AdviceSettings) -> _Distribution:
    m = s.eval_points
    blobs = [f.kll for f in files if f.has_values and f.kll is not None]
    merged = merge_kll(blobs, s.kll_k) if blobs and has_kll(type_str) else None
    sketch = kll_doubles_sketch.deserialize(merged) if merged is not None else None
    if sketch is not None and not sketch.is_empty():
        values = sketch.get_quantiles((np.arange(m) + 0.5) / m, True)
        return _Distribution("kll", np.asarray(values, dtype=np.float64), sketch)
    # No KLL (strings, binary, booleans, or no sketches): see ``_spread_expectation``.
    return _Distribution("spread_within_bounds", None, None)


def _kll_cuts(sketch: kll_doubles_sketch, parts: int) -> list[float]:
    """``parts + 1`` boundaries, each part holding an equal share of the rows."""
    inner = sketch.get_quantiles([i / parts for i in range(1, parts)], True)
    return [sketch.get_min_value(), *inner, sketch.get_max_value()]


class Axis:
    """A monotone map of bounds without KLL units onto a number line.

    Strings and binary are placed by the 8 bytes that follow the prefix all of the
    column's bounds share (so "customer-0001" … "customer-0400" do not all collapse onto
    "customer"), big-endian; UUIDs by their top 64 bits; booleans as 0/1. Values that still
    share those 8 bytes land on one point (handled as single points). Times of day are
    placed by their microseconds since midnight, and timestamps without KLL units
    (nanosecond ones) by their microseconds since the epoch, as KLL places timestamps.

    Numbers are themselves, except ±Infinity: no finite position is proportional to it,
    so it is placed at the column's lowest (highest) finite bound — a file reaching to
    infinity is taken as spread over the finite part of its range — or at 0 when every
    bound is infinite. ``lowest`` and ``highest`` stay the true extremes (chart labels).
    """

    def __init__(self, values: Iterable[Any]) -> None:
        """``values``: every lower and upper bound of the column's files."""
        bounds = list(values)
        self.lowest, self.highest = min(bounds), max(bounds)
        finite = [v for v in bounds if isinstance(v, float) and math.isfinite(v)]
        self._ends = (min(finite), max(finite)) if finite else (0.0, 0.0)
        self._skip = 0
        self._prefix = b""
        self._text = isinstance(self.lowest, str)
        self._bytewise = isinstance(self.lowest, str | bytes)
        if isinstance(self.lowest, str | bytes) and isinstance(self.highest, str | bytes):
            a, b = self._bytes(self.lowest), self._bytes(self.highest)
            while self._skip < min(len(a), len(b)) and a[self._skip] == b[self._skip]:
                self._skip += 1
            self._prefix = a[: self._skip]

    @staticmethod
    def _bytes(value: str | bytes) -> bytes:
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)

    def place(self, value: Any) -> float:
        if isinstance(value, float) and math.isinf(value):
            return self._ends[0] if value < 0 else self._ends[1]
        if isinstance(value, bool | int | float):
            return float(value)
        if isinstance(value, str | bytes):
            window = self._bytes(value)[self._skip : self._skip + 8]
            return float(int.from_bytes(window.ljust(8, b"\0"), "big"))
        if isinstance(value, uuid.UUID):
            return float(value.int >> 64)
        if isinstance(value, dt.datetime):
            return float((value - _epoch(value)) // _MICROSECOND)
        if isinstance(value, dt.time):
            return float(to_physical("time", value))
        raise TypeError(f"cannot place {type(value).__name__} bounds on an axis")

    def value(self, x: float) -> Any:
        """A value at position ``x`` (chart labels): ``place`` inverted, up to the 8 bytes
        it keeps. Positions of numbers, booleans and UUIDs stay positions."""
        if isinstance(self.lowest, dt.datetime):
            return _epoch(self.lowest) + round(x) * _MICROSECOND
        if isinstance(self.lowest, dt.time):
            return from_physical("time", round(x))
        if not self._bytewise:
            return x
        window = min(int(x), 2**64 - 1).to_bytes(8, "big")
        if not self._text:
            return self._prefix + window[:LABEL_BYTES]
        # the first bytes past the shared prefix, while they read as text: a label, not a
        # value of the column
        shown = bytearray()
        for byte in window[:LABEL_BYTES]:
            if not 0x20 <= byte < 0x7F:
                break
            shown.append(byte)
        return (self._prefix + bytes(shown)).decode("utf-8", errors="replace") + "…"


_MICROSECOND = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _epoch(value: dt.datetime) -> dt.datetime:
    return _EPOCH if value.tzinfo is None else _EPOCH_TZ


def _bounds_of(bounded: Sequence[FileColumn]) -> list[Any]:
    return [v for f in bounded for v in (f.lower, f.upper)]


def _exact(points: Sequence[float]) -> list[int]:
    """Finite positions as integers over their common binary denominator (every double is
    n / 2^k): sums of covers × widths stay exact, so a span wider than the largest double
    (−1.5e308 … 1.5e308) does not overflow, and a narrow file next to a very wide one is
    not lost in the wide one's rounding."""
    ratios = [x.as_integer_ratio() for x in points]
    denominator = max((d for _, d in ratios), default=1)
    return [n * (denominator // d) for n, d in ratios]


_INTEGRAL = ("int", "long", "date")


def _axis_overlap(
    bounded: Sequence[FileColumn], group: Bounds, files: int, parts: int, *, integral: bool
) -> tuple[OverlapBin, ...]:
    """The overlap profile without KLL: ``parts`` parts of equal width on the ``Axis``
    (there is no row distribution to cut by); labels are values at the cuts. An
    ``integral`` column (ints, longs, dates) holding fewer values than ``parts`` gets a
    part per value: equal widths would cut parts holding no value, labelled alike.
    ``group``: the bounds of the group's files (``bounded`` and those without bounds)."""
    axis = Axis(_bounds_of(bounded))
    lowest, highest = axis.lowest, axis.highest
    if integral and highest - lowest < parts:
        values = [float(v) for v in range(math.floor(lowest), math.floor(highest) + 1)]
        holding = [group.files_in_part(v, v, first=True) for v in values]
        return tuple(OverlapBin(v, v, k, k / files) for v, k in zip(values, holding, strict=True))
    unknown = group.unknown_files
    placed = [
        FileColumn(
            f.path, f.partition, f.records, f.file_bytes, axis.place(f.lower), axis.place(f.upper)
        )
        for f in bounded
    ]
    bounds = Bounds(placed)
    # exact fractions: b − a overflows between −1.5e308 and 1.5e308, a cut does not
    a, b = Fraction(axis.place(lowest)), Fraction(axis.place(highest))
    cuts = [float(a + (b - a) * i / parts) for i in range(parts + 1)]
    labels = [lowest, *(axis.value(x) for x in cuts[1:-1]), highest]
    out = []
    for i in range(parts):
        k = bounds.files_in_part(cuts[i], cuts[i + 1], first=i == 0) + unknown
        out.append(OverlapBin(labels[i], labels[i + 1], k, k / files))
    return tuple(out)


def _spread_expectation(
    bounded: Sequence[FileColumn], axis: Axis, bounds: Bounds
) -> tuple[float, float]:
    """Expected (files, bytes) of a point lookup without a KLL sketch (strings, binary).

    Model: each file's rows are spread evenly over its own [min, max], placed on a number
    line by ``Axis``; a lookup's value is a row's value. Between two adjacent bounds the
    files covering a point do not change, so a file's mean cover over its span is a
    difference of prefix integrals: O(F log F) in all, kept exact in integers (``_exact``).
    A file whose min and max embed to one number covers that single point (counted on the
    true bounds).
    """
    if not bounded:
        return 0.0, 0.0
    spans = [(axis.place(f.lower), axis.place(f.upper)) for f in bounded]
    points = sorted({x for span in spans for x in span})
    at = {x: i for i, x in enumerate(points)}
    exact = _exact(points)
    diff_files = [0] * (len(points) + 1)
    diff_bytes = [0] * (len(points) + 1)
    for f, (lo, hi) in zip(bounded, spans, strict=True):
        if hi > lo:  # covers segments at[lo] … at[hi]-1 (segment k: points[k] .. points[k+1])
            diff_files[at[lo]] += 1
            diff_files[at[hi]] -= 1
            diff_bytes[at[lo]] += f.file_bytes
            diff_bytes[at[hi]] -= f.file_bytes
    widths = [b - a for a, b in pairwise(exact)]
    cover_files = list(accumulate(diff_files))[: len(widths)]
    cover_bytes = list(accumulate(diff_bytes))[: len(widths)]
    # integral of the cover from points[0] to points[k]
    int_files = [0, *accumulate(c * w for c, w in zip(cover_files, widths, strict=True))]
    int_bytes = [0, *accumulate(c * w for c, w in zip(cover_bytes, widths, strict=True))]
    weights = [max(f.records - (f.null_count or 0), 1) for f in bounded]
    total = sum(weights)
    e_files = e_bytes = 0.0
    for f, (lo, hi), weight in zip(bounded, spans, weights, strict=True):
        if hi > lo:
            i, j = at[lo], at[hi]
            # int / int: correctly rounded, and at most the files (bytes) of the column
            width = exact[j] - exact[i]
            cover = (int_files[j] - int_files[i]) / width + bounds.unknown_files
            size = (int_bytes[j] - int_bytes[i]) / width + bounds.unknown_bytes
        else:
            cover = bounds.files_overlapping(f.lower, f.lower)
            size = bounds.bytes_overlapping(f.lower, f.lower)
        e_files += weight / total * cover
        e_bytes += weight / total * size
    return e_files, e_bytes


def _point_cost(
    bounds: Bounds, dist: _Distribution, bounded: Sequence[FileColumn], files: int
) -> LookupCost:
    if dist.values is not None:  # equally weighted quantile points
        counts, sizes = bounds.overlapping_many(dist.values, dist.values)
        e_files, e_bytes = float(counts.mean()), float(sizes.mean())
    else:
        e_files, e_bytes = _spread_expectation(bounded, Axis(_bounds_of(bounded)), bounds)
    max_files, max_bytes = bounds.max_depth()
    return LookupCost(None, e_files, max_files, e_bytes, max_bytes, e_files / files)


def _range_cost(bounds: Bounds, dist: _Distribution, s: float, m: int, files: int) -> LookupCost:
    """Ranges holding a share ``s`` of the rows, [Q(t), Q(t + s)], start t uniform."""
    assert dist.kll is not None
    starts = (np.arange(m) + 0.5) / m * (1.0 - s)
    lows = dist.kll.get_quantiles(starts, True)
    highs = dist.kll.get_quantiles(np.minimum(starts + s, 1.0), True)
    counts, sizes = bounds.overlapping_many(lows, highs)
    e_files = float(counts.mean())
    return LookupCost(
        s, e_files, int(counts.max()), float(sizes.mean()), int(sizes.max()), e_files / files
    )


def _frequent_shares(files: Sequence[FileColumn], type_str: str) -> list[float] | None:
    """The shares of the rows of the values the files' merged frequent-items sketch
    surely lists (counted above its maximum error), each the middle of its bounds; None
    when a sketched file (one with a theta sketch) has no frequent-items sketch, or the
    column's type has none."""
    kind = kind_of(type_str)
    sketched = [f for f in files if f.has_values and f.theta is not None]
    if kind is None or not sketched or any(f.frequent is None for f in sketched):
        return None
    merged = merge_frequent_items((f.frequent for f in sketched), kind)
    if merged is None:
        return None
    found = frequent_values(merged, sys.maxsize, kind)
    if not found.rows:
        return None
    return [(v.lower + v.upper) / 2 / found.rows for v in found.values]


def _point_selectivity(
    dist: _Distribution, ndv: float | None, kll_k: int, frequent: Sequence[float] | None
) -> float | None:
    """Σ p_v² over values v (the expected share of rows a point lookup matches).

    The heavy values come from KLL where the column has it: a value holding a share p of
    the rows appears ≈ p·M times among the M equally spaced KLL quantiles, so repeated
    quantiles measure them. Only shares above twice the sketch's PMF error count as heavy:
    below that, a repeat may be one retained item standing for many distinct values.
    Without KLL (strings), the values the frequent-items sketch lists are the heavy ones
    (``frequent``). The rest of the rows are taken as spread evenly over the remaining
    NDV; with neither sketch, σ = 1 / NDV.
    """
    if ndv is None or ndv < 1:
        return None
    if dist.values is not None:
        m = len(dist.values)
        _, counts = np.unique(dist.values, return_counts=True)
        floor = 2 * kll_normalized_rank_error(kll_k, pmf=True)
        heavy = [float(c) / m for c in counts if c / m > floor]
    elif frequent is not None:
        heavy = list(frequent)
    else:
        return 1.0 / ndv
    rest_share = max(0.0, 1.0 - sum(heavy))
    rest_ndv = max(ndv - len(heavy), 1.0)
    return min(1.0, sum(p * p for p in heavy) + rest_share * rest_share / rest_ndv)


def analyze_column(
    column: ColumnInput, settings: AdviceSettings, files: Sequence[FileColumn] | None = None
) -> ColumnAdvice:
    """The advice for one column over ``files`` (default: all of ``column.files``)."""
    group = list(column.files if files is None else files)
    n_files = len(group)
    with_values = [f for f in group if f.has_values]
    bounds = Bounds(group)
    records = sum(f.records for f in group)
    nulls = [f.null_count for f in group]
    null_fraction = (
        sum(n for n in nulls if n is not None) / records
        if records and all(n is not None for n in nulls)
        else None
    )
    thetas = [f.theta for f in with_values if f.theta is not None]
    union = union_theta(thetas, settings.theta_lg_k) if thetas else None
    ndv = theta_estimate(union) if union is not None else None
    per_file = [theta_estimate(t) for t in thetas]
    ndv_mean = sum(per_file) / len(per_file) if per_file else None
    ndv_max = max(per_file) if per_file else None
    files_per_value = min(sum(per_file) / ndv, float(len(per_file))) if per_file and ndv else None

    dist = _distribution(group, column.type, settings)
    point: LookupCost | None = None
    ranges: tuple[LookupCost, ...] = ()
    overlap: tuple[OverlapBin, ...] = ()
    bounded = [f for f in group if f.has_values and f.lower is not None and f.upper is not None]
    if dist.kll is not None:
        point = _point_cost(bounds, dist, bounded, n_files)
        ranges = tuple(
            _range_cost(bounds, dist, s, settings.eval_points, n_files)
            for s in settings.selectivities
        )
        cuts = _kll_cuts(dist.kll, settings.overlap_bins)
        overlap = tuple(
            OverlapBin(a, b, k := bounds.files_in_part(a, b, first=i == 0), k / n_files)
            for i, (a, b) in enumerate(pairwise(cuts))
        )
    elif bounded:
        point = _point_cost(bounds, dist, bounded, n_files)
        overlap = _axis_overlap(
            bounded,
            bounds,
            n_files,
            settings.overlap_bins,
            integral=column.type in _INTEGRAL,
        )
    frequent = _frequent_shares(group, column.type) if dist.values is None else None
    selectivity = _point_selectivity(dist, ndv, settings.kll_k, frequent)
    sorted_after = (
        min(float(len(with_values)), 1.0 + len(with_values) * selectivity)
        if selectivity is not None and with_values
        else None
    )
    non_null = records - sum(n or 0 for n in nulls)
    facts = ColumnFacts(
        type=column.type,
        files=n_files,
        with_values=len(with_values),
        non_null=non_null,
        null_fraction=null_fraction,
        ndv=ndv,
        ndv_per_file=ndv_mean,
        files_per_value=files_per_value,
        point=point,
        sorted_after=sorted_after,
    )
    return ColumnAdvice(
        field_id=column.field_id,
        name=column.name,
        type=column.type,
        files=n_files,
        files_with_values=len(with_values),
        files_without_bounds=bounds.unknown_files,
        records=records,
        null_fraction=null_fraction,
        ndv=ndv,
        ndv_per_file_mean=ndv_mean,
        ndv_per_file_max=ndv_max,
        files_per_value=files_per_value,
        distribution=dist.kind,
        point=point,
        ranges=ranges,
        overlap_split="kll_quantiles" if dist.kll is not None else "equal_width",
        overlap=overlap,
        point_selectivity=selectivity,
        files_per_lookup_sorted=sorted_after,
        recommendation=recommend(facts, settings),
    )
