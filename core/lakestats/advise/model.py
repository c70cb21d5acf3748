"""The advisor's vocabulary: column facts in, advice out, and how values are ordered."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lakestats.model import JsonScalar, PartitionKey
from lakestats.values import kll_value, to_json

# Types whose KLL sketch exists (sketches/spec.py) and whose values are numbers in KLL
# units: the distribution of lookups comes from the sketch, bounds compare as doubles.
KLL_TYPES = frozenset({"int", "long", "float", "double", "date", "timestamp", "timestamptz"})
FLOAT_TYPES = frozenset({"float", "double"})
# Types queried by ranges as well as by equality (rule 8: not given a Bloom filter unless
# key-like): the KLL types, decimals, and the ordered types sketches do not cover
RANGE_TYPES = KLL_TYPES | {"time", "timestamp_ns", "timestamptz_ns"}
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LN2_SQUARED = math.log(2) ** 2
# min/max reading at most this many times the files that truly hold a value is as good as
# an exact index (a value set or Bloom filter could not halve it)
EXACT_ENOUGH = 1.25
LABEL_BYTES = 2  # bytes past the shared prefix that label a part of a string axis


def has_kll(type_str: str) -> bool:
    return type_str in KLL_TYPES or type_str.startswith("decimal")


def order_key(type_str: str, value: Any) -> Any:
    """A bound as the analysis compares it: KLL units (a double) where the column has a KLL
    sketch, so bounds and quantiles share one axis; the value itself otherwise. A NaN bound
    orders nothing (no value is above or below it): it is unknown, ``None``."""
    if isinstance(value, float) and math.isnan(value):
        return None
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
        return to_json(kll_value(type_str, float(key)))
    if isinstance(key, bool | int | float | str):
        return key
    if isinstance(key, bytes):
        return key.hex()
    if isinstance(key, dt.date | dt.time):  # times of day, nanosecond timestamps: ISO
        return key.isoformat()
    return str(key)


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
    frequent: bytes | None = None  # frequent-items sketch (``sketches.frequent``)


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
