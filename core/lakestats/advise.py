"""Data-skipping advice: how well min/max already prunes each column, and what would help.

Pure analysis over per-file column facts (no I/O; ``advise_io`` reads them from the store).
It answers what Hyperspace's ``MinMaxAnalysisUtil`` answers before a re-clustering — how
many files a point lookup must read given each file's [min, max] — and, as the Flint
skipping-index RFC asks, picks the skipping structure that fits each column from its type,
NDV, NDV per file, overlap, null fraction and size. The rule and the formulas are in
docs/advisor.md; the constants are ``AdviceSettings``.

Cost is linear in files × columns (plus sorting the bounds): a column's files are reduced
to two sorted bound arrays and every lookup is two binary searches, so nothing here depends
on the number of rows. Lookups are weighted by the column's value distribution from its
merged KLL sketch (``eval_points`` equally spaced quantiles), not by a uniform domain.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from itertools import accumulate, pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
from datasketches import kll_doubles_sketch

from lakestats.merge import partition_sort_key
from lakestats.model import JsonScalar, PartitionKey
from lakestats.sketches.merge import (
    kll_normalized_rank_error,
    merge_kll,
    theta_estimate,
    union_theta,
)
from lakestats.sketches.spec import decimal_precision_scale

# Types whose KLL sketch exists (sketches/spec.py) and whose values are numbers in KLL
# units: the distribution of lookups comes from the sketch, bounds compare as doubles.
KLL_TYPES = frozenset({"int", "long", "float", "double", "date", "timestamp", "timestamptz"})
FLOAT_TYPES = frozenset({"float", "double"})
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_LN2_SQUARED = math.log(2) ** 2
# min/max reading at most this many times the files that truly hold a value is as good as
# an exact index (a value set or Bloom filter could not halve it)
EXACT_ENOUGH = 1.25
LABEL_BYTES = 2  # bytes past the shared prefix that label a part of a string axis


def has_kll(type_str: str) -> bool:
    return type_str in KLL_TYPES or type_str.startswith("decimal")


def order_key(type_str: str, value: Any) -> Any:
    """A bound as the analysis compares it: KLL units (a double) where the column has a KLL
    sketch, so bounds and quantiles share one axis; the value itself otherwise."""
    if value is None or not has_kll(type_str):
        return value
    if isinstance(value, dt.datetime):
        delta = (value - _EPOCH_TZ) if value.tzinfo is not None else (value - _EPOCH)
        return float(delta // dt.timedelta(microseconds=1))
    if isinstance(value, dt.date):
        return float((value - _EPOCH_DATE).days)
    return float(value)


def display_value(type_str: str, key: Any) -> JsonScalar:
    """An ``order_key`` back in the column's own terms, rendered as JSON."""
    if key is None:
        return None
    if has_kll(type_str):
        number = float(key)
        if not math.isfinite(number):
            return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        if type_str in ("int", "long"):
            return round(number)
        if type_str.startswith("decimal"):
            scale = decimal_precision_scale(type_str)[1]
            return str(Decimal(repr(number)).quantize(Decimal(1).scaleb(-scale)))
        if type_str == "date":
            return (_EPOCH_DATE + dt.timedelta(days=round(number))).isoformat()
        if type_str in ("timestamp", "timestamptz"):
            epoch = _EPOCH_TZ if type_str == "timestamptz" else _EPOCH
            return (epoch + dt.timedelta(microseconds=round(number))).isoformat()
        return number
    if isinstance(key, bool | int | float | str):
        return key
    if isinstance(key, bytes):
        return key.hex()
    return str(key)


# -- inputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileColumn:
    """One live data file's facts about one column, as lakestats' store has them.

    ``lower``/``upper`` are ``order_key`` values; both ``None`` with ``has_values`` true
    means the bounds are unknown, so every lookup must read the file.
    """

    path: str
    partition: PartitionKey
    records: int
    file_bytes: int
    lower: Any = None
    upper: Any = None
    has_values: bool = True  # False: all null (or column absent): min/max skip it always
    null_count: int | None = None
    column_bytes: int | None = None
    theta: bytes | None = None
    kll: bytes | None = None


@dataclass(frozen=True)
class ColumnInput:
    field_id: int
    name: str
    type: str
    files: tuple[FileColumn, ...]


@dataclass(frozen=True)
class AdviceSettings:
    """The constants of the rule (docs/advisor.md explains each)."""

    eval_points: int = 512  # KLL quantiles lookups are averaged over
    selectivities: tuple[float, ...] = (0.01, 0.1)
    overlap_bins: int = 20
    min_files: int = 4  # fewer files than this: skipping cannot save much
    clustered_share: float = 0.1  # point lookups read ≤ 1 + this × (files - 1): clustered
    mostly_null: float = 0.9  # null fraction above which no index is worth it
    min_gain: float = 2.0  # a change must at least divide the files read by this
    partition_max_ndv: int = 1000
    value_set_max: int = 100  # Flint's default value-set size limit
    key_like: float = 0.5  # NDV / non-null rows above which lookups are by key
    bloom_fpp: float = 0.01
    kll_k: int = 200  # merged sketches: the table's sketch settings
    theta_lg_k: int = 12


# -- outputs ------------------------------------------------------------------------------


class AdviceKind(StrEnum):
    NONE = "none"
    PARTITION = "partition"
    SORT = "sort"
    BLOOM_FILTER = "bloom_filter"
    VALUE_SET = "value_set"
    MIN_MAX = "min_max"


@dataclass(frozen=True)
class LookupCost:
    """Files (and bytes) a query must read after min/max pruning."""

    selectivity: float | None  # None: a point lookup (equality)
    files_expected: float
    files_max: int
    bytes_expected: float
    bytes_max: int
    share_expected: float  # files_expected / files


@dataclass(frozen=True)
class OverlapBin:
    lower: Any  # order_key
    upper: Any
    files: int  # files whose [min, max] (or unknown bounds) intersect (lower, upper]
    share: float


@dataclass(frozen=True)
class BloomSizing:
    """A per-file Bloom filter sized for the mean NDV per file: m = -n ln p / (ln 2)²."""

    ndv_per_file: float
    fpp: float
    bits_per_file: int
    hashes: int
    total_bytes: int  # over all files with values


@dataclass(frozen=True)
class Recommendation:
    kind: AdviceKind
    reason: str
    files_per_lookup_after: float | None = None
    bloom: BloomSizing | None = None


@dataclass(frozen=True)
class ColumnAdvice:
    field_id: int
    name: str
    type: str
    files: int
    files_with_values: int
    files_without_bounds: int
    records: int
    null_fraction: float | None
    ndv: float | None
    ndv_per_file_mean: float | None
    ndv_per_file_max: float | None
    files_per_value: float | None  # Σ per-file NDV / NDV: files truly holding a value
    distribution: str  # "kll" or "spread_within_bounds"
    point: LookupCost | None
    ranges: tuple[LookupCost, ...]
    overlap_split: str  # "kll_quantiles" or "equal_width" (no KLL: see ``Axis``)
    overlap: tuple[OverlapBin, ...]
    point_selectivity: float | None
    files_per_lookup_sorted: float | None
    recommendation: Recommendation


@dataclass(frozen=True)
class PartitionAdvice:
    partition: PartitionKey
    files: int
    columns: tuple[ColumnAdvice, ...]


@dataclass(frozen=True)
class AdviceReport:
    table: str
    snapshot_id: int | None
    files: int
    columns: tuple[ColumnAdvice, ...]
    partitions: tuple[PartitionAdvice, ...] = ()
    settings: AdviceSettings = field(default_factory=AdviceSettings)
    # partitions with fewer than ``settings.min_files`` files: not analysed one by one,
    # their advice is rule 2's "too few files" (keeps tables with a partition per file
    # cheap to advise and their report small)
    small_partitions: int = 0


# -- the measurement ----------------------------------------------------------------------


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
    share those 8 bytes land on one point (handled as single points).
    """

    def __init__(self, lowest: Any, highest: Any) -> None:
        self._skip = 0
        self._prefix = b""
        self._text = isinstance(lowest, str)
        self._bytewise = isinstance(lowest, str | bytes)
        if isinstance(lowest, str | bytes) and isinstance(highest, str | bytes):
            a, b = self._bytes(lowest), self._bytes(highest)
            while self._skip < min(len(a), len(b)) and a[self._skip] == b[self._skip]:
                self._skip += 1
            self._prefix = a[: self._skip]

    @staticmethod
    def _bytes(value: str | bytes) -> bytes:
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)

    def place(self, value: Any) -> float:
        if isinstance(value, bool | int | float):
            return float(value)
        if isinstance(value, str | bytes):
            window = self._bytes(value)[self._skip : self._skip + 8]
            return float(int.from_bytes(window.ljust(8, b"\0"), "big"))
        if isinstance(value, uuid.UUID):
            return float(value.int >> 64)
        raise TypeError(f"cannot place {type(value).__name__} bounds on an axis")

    def value(self, x: float) -> Any:
        """A value at position ``x`` (chart labels): ``place`` inverted, up to the 8 bytes
        it keeps. Positions of numbers, booleans and UUIDs stay positions."""
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


def _axis_overlap(
    bounded: Sequence[FileColumn], unknown: int, files: int, parts: int
) -> tuple[OverlapBin, ...]:
    """The overlap profile without KLL: ``parts`` parts of equal width on the ``Axis``
    (there is no row distribution to cut by); labels are values at the cuts."""
    lowest = min(f.lower for f in bounded)
    highest = max(f.upper for f in bounded)
    axis = Axis(lowest, highest)
    placed = [
        FileColumn(
            f.path, f.partition, f.records, f.file_bytes, axis.place(f.lower), axis.place(f.upper)
        )
        for f in bounded
    ]
    bounds = Bounds(placed)
    a, b = axis.place(lowest), axis.place(highest)
    cuts = [a + (b - a) * i / parts for i in range(parts + 1)]
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
    difference of prefix integrals: O(F log F) in all. A file whose min and max embed to
    one number covers that single point (counted on the true bounds).
    """
    if not bounded:
        return 0.0, 0.0
    spans = [(axis.place(f.lower), axis.place(f.upper)) for f in bounded]
    points = sorted({x for span in spans for x in span})
    at = {x: i for i, x in enumerate(points)}
    diff_files = [0] * (len(points) + 1)
    diff_bytes = [0] * (len(points) + 1)
    for f, (lo, hi) in zip(bounded, spans, strict=True):
        if hi > lo:  # covers segments at[lo] … at[hi]-1 (segment k: points[k] .. points[k+1])
            diff_files[at[lo]] += 1
            diff_files[at[hi]] -= 1
            diff_bytes[at[lo]] += f.file_bytes
            diff_bytes[at[hi]] -= f.file_bytes
    widths = [b - a for a, b in pairwise(points)]
    cover_files = list(accumulate(diff_files))[: len(widths)]
    cover_bytes = list(accumulate(diff_bytes))[: len(widths)]
    # integral of the cover from points[0] to points[k]
    int_files = [0.0, *accumulate(c * w for c, w in zip(cover_files, widths, strict=True))]
    int_bytes = [0.0, *accumulate(c * w for c, w in zip(cover_bytes, widths, strict=True))]
    weights = [max(f.records - (f.null_count or 0), 1) for f in bounded]
    total = sum(weights)
    e_files = e_bytes = 0.0
    for f, (lo, hi), weight in zip(bounded, spans, weights, strict=True):
        if hi > lo:
            i, j = at[lo], at[hi]
            cover = (int_files[j] - int_files[i]) / (hi - lo) + bounds.unknown_files
            size = (int_bytes[j] - int_bytes[i]) / (hi - lo) + bounds.unknown_bytes
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
        lowest = min(f.lower for f in bounded)
        highest = max(f.upper for f in bounded)
        e_files, e_bytes = _spread_expectation(bounded, Axis(lowest, highest), bounds)
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


def _point_selectivity(dist: _Distribution, ndv: float | None, kll_k: int) -> float | None:
    """Σ p_v² over values v (the expected share of rows a point lookup matches).

    A value holding a share p of the rows appears ≈ p·M times among the M equally spaced
    KLL quantiles, so repeated quantiles measure the heavy values. Only shares above twice
    the sketch's PMF error count as heavy: below that, a repeat may be one retained item
    standing for many distinct values. The rest of the rows are taken as spread evenly
    over the remaining NDV.
    """
    if ndv is None or ndv < 1:
        return None
    if dist.values is None:
        return 1.0 / ndv
    m = len(dist.values)
    _, counts = np.unique(dist.values, return_counts=True)
    floor = 2 * kll_normalized_rank_error(kll_k, pmf=True)
    heavy = [float(c) / m for c in counts if c / m > floor]
    rest_share = max(0.0, 1.0 - sum(heavy))
    rest_ndv = max(ndv - len(heavy), 1.0)
    return min(1.0, sum(p * p for p in heavy) + rest_share * rest_share / rest_ndv)


def _bloom(ndv_per_file: float, fpp: float, files: int) -> BloomSizing:
    n = max(ndv_per_file, 1.0)
    bits = math.ceil(-n * math.log(fpp) / _LN2_SQUARED)
    hashes = max(1, round(bits / n * math.log(2)))
    return BloomSizing(ndv_per_file, fpp, bits, hashes, files * math.ceil(bits / 8))


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
        overlap = _axis_overlap(bounded, bounds.unknown_files, n_files, settings.overlap_bins)
    selectivity = _point_selectivity(dist, ndv, settings.kll_k)
    sorted_after = (
        min(float(len(with_values)), 1.0 + len(with_values) * selectivity)
        if selectivity is not None and with_values
        else None
    )
    non_null = records - sum(n or 0 for n in nulls)
    facts = _Facts(
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


# -- the rule -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Facts:
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


def recommend(facts: _Facts, settings: AdviceSettings) -> Recommendation:
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
    rangeable = facts.type in KLL_TYPES or facts.type.startswith("decimal")
    if per_file is not None and truly is not None and not floating and (key_like or not rangeable):
        with_bloom = truly + s.bloom_fpp * max(e - truly, 0.0)
        if e >= s.min_gain * with_bloom:
            bloom = _bloom(per_file, s.bloom_fpp, facts.with_values)
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


# -- a whole table ------------------------------------------------------------------------


def advise(
    table: str,
    snapshot_id: int | None,
    columns: Sequence[ColumnInput],
    settings: AdviceSettings | None = None,
) -> AdviceReport:
    """Advice per column over all files, and per partition when there is more than one
    (only partitions of at least ``min_files`` files; the others are counted)."""
    s = settings or AdviceSettings()
    table_advice = tuple(analyze_column(c, s) for c in columns)
    all_files = {f.path: f.partition for c in columns for f in c.files}
    keys = sorted(set(all_files.values()), key=partition_sort_key)
    partitions: list[PartitionAdvice] = []
    small = 0
    if len(keys) > 1:
        grouped = [_by_partition(c.files) for c in columns]
        counts = Counter(all_files.values())
        for key in keys:
            if counts[key] < s.min_files:
                small += 1
                continue
            per_column = tuple(
                analyze_column(c, s, groups.get(key, []))
                for c, groups in zip(columns, grouped, strict=True)
            )
            partitions.append(PartitionAdvice(key, counts[key], per_column))
    return AdviceReport(
        table, snapshot_id, len(all_files), table_advice, tuple(partitions), s, small
    )


def _by_partition(files: Iterable[FileColumn]) -> Mapping[PartitionKey, list[FileColumn]]:
    groups: dict[PartitionKey, list[FileColumn]] = {}
    for f in files:
        groups.setdefault(f.partition, []).append(f)
    return groups


# -- rendering ----------------------------------------------------------------------------


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
        f"{advice.name} ({advice.type}): {advice.files:,} files, {advice.records:,} rows, "
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
        labels = [str(display_value(advice.type, b.lower)) for b in advice.overlap]
        width = min(max(len(label) for label in labels), 26)
        for label, b in zip(labels, advice.overlap, strict=True):
            lines.append(f"    {label[:width]:>{width}} │{_bar(b.share)}│ {b.share:6.1%}")
    rec = advice.recommendation
    lines.append(f"  → {rec.kind.value}: {rec.reason}")
    return "\n".join(lines) + "\n"


def render_report(report: AdviceReport, *, per_partition: bool = False) -> str:
    """The terminal form; the per-partition summary only when asked for."""
    head = f"{report.table}: snapshot {report.snapshot_id}, {report.files:,} live data files\n"
    parts = [head, *("\n" + render_column(c) for c in report.columns)]
    if per_partition and report.partitions:
        parts.append("\nper partition (point lookups):\n")
        for p in report.partitions:
            key = ", ".join(f"{k}={v}" for k, v in p.partition.values) or "(unpartitioned)"
            for c in p.columns:
                e = "-" if c.point is None else f"{c.point.files_expected:,.2f}"
                m = "-" if c.point is None else f"{c.point.files_max:,}"
                parts.append(
                    f"  {key}  {c.name}: {p.files:,} files, lookup ≈ {e} (max {m}) "
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
