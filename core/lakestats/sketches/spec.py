"""Which block-level statistics apply to which Iceberg type, and the sketch parameter rules.

No pyspark here: the CLI and the merger use this module without starting Spark.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from numbers import Real

from datasketches import kll_doubles_sketch

from lakestats.exceptions import ConfigError
from lakestats.model import SketchSettings
from lakestats.sketches.frequent import (
    DOUBLES,
    MAX_ITEMS_TRACKED,
    MIN_ITEMS_TRACKED,
    STRINGS,
    ItemKind,
)

# The ranges Spark 4 accepts, checked against the functions themselves:
#   kll_sketch_agg_double(x, k)      -> KLL_SKETCH_K_OUT_OF_RANGE unless 8 <= k <= 65535
#   theta_sketch_agg(x, lgNomEntries) -> SKETCH_INVALID_LG_NOM_ENTRIES unless 4 <= lg <= 26
# and the Python datasketches that merges them (datasketches 5.x: theta lg_k >= 5, KLL
# 8 <= k <= 65535). The accepted ranges are the intersection. Validating here turns a failed
# Spark job (or a stack trace deep in a batch) into a configuration error at start-up.
KLL_K_MIN, KLL_K_MAX = 8, 65535
THETA_LG_K_MIN, THETA_LG_K_MAX = 5, 26
# KLL at its largest k resolves ranks to ~0.01 %, so more buckets than this only repeat
# boundaries; the cap also keeps a typo (1e9) from allocating a billion buckets.
HISTOGRAM_BUCKETS_MAX = 10_000
# The default KLL error: a quarter of one histogram bucket's share of the rows, so a
# bucket's row count is within ±25 % of its size at ~99 % confidence even in the worst
# case (typically within a few %). Chosen from the measurement in docs/benchmarks.md
# ("KLL k: store bytes and sketch time"): k 1,600 (what a quarter of 1 % needs) costs
# ~5× the store bytes of k 200 and no measurable sketch time.
DEFAULT_BUCKET_ERROR_SHARE = 0.25

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*(\d+)\s*\]$")


@dataclass(frozen=True)
class TypeSpec:
    """The statistics the sketch pipeline computes for one Iceberg type.

    ``kll_unit`` says what the KLL doubles mean (``value``, ``days since epoch``,
    ``microseconds since epoch``); histogram bounds are in that unit too.
    """

    type: str
    spark_type: str  # Spark SQL type name used in the read schema
    theta: bool  # NDV sketch with Iceberg-Puffin hashing (see hashing.py)
    kll: bool  # quantiles / histogram over the value as a double
    kll_unit: str | None
    nan: bool  # float/double: count NaNs, keep them out of min/max and KLL
    lengths: bool  # string (characters) / binary (bytes): sum and max of lengths
    booleans: bool  # true/false counts
    bounds: bool  # min/max computed by the scan

    @property
    def frequent(self) -> ItemKind | None:
        """What its frequent-items sketch counts (``sketch.frequent_items`` > 0): the KLL
        double, a string column's string, or nothing (booleans have exact counts; binary and
        uuid values are not sketched)."""
        if self.kll:
            return DOUBLES
        return STRINGS if self.type == "string" else None


def type_spec(type_str: str) -> TypeSpec | None:
    """The statistics for an Iceberg type string; ``None`` if the pipeline cannot read it.

    Unsupported: ``time`` (Spark 4 reads Parquet TIME only behind an experimental flag),
    ``timestamp_ns``/``timestamptz_ns`` (Spark has microsecond timestamps only), and
    every non-primitive or unknown type. Those columns get no block sketch at all; their
    manifest metrics still apply.
    """
    t = type_str.strip().lower()
    if t == "boolean":
        return TypeSpec(t, "boolean", True, False, None, False, False, True, True)
    if t in ("int", "long"):
        spark = "int" if t == "int" else "bigint"
        return TypeSpec(t, spark, True, True, "value", False, False, False, True)
    if t in ("float", "double"):
        return TypeSpec(t, t, True, True, "value", True, False, False, True)
    if m := _DECIMAL.match(t):
        precision, scale = int(m.group(1)), int(m.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            return None
        spark = f"decimal({precision},{scale})"
        return TypeSpec(t, spark, True, True, "value", False, False, False, True)
    if t == "date":
        return TypeSpec(t, "date", True, True, "days since epoch", False, False, False, True)
    if t in ("timestamp", "timestamptz"):
        spark = "timestamp_ntz" if t == "timestamp" else "timestamp"
        unit = "microseconds since epoch"
        return TypeSpec(t, spark, True, True, unit, False, False, False, True)
    if t == "string":
        return TypeSpec(t, "string", True, False, None, False, True, False, True)
    if t == "binary":
        return TypeSpec(t, "binary", True, False, None, False, True, False, True)
    if _FIXED.match(t) or t == "uuid":
        # Parquet FIXED_LEN_BYTE_ARRAY (UUID annotated or not) reads as BINARY when the read
        # schema says so; lengths are constant, so no length stats.
        return TypeSpec(t, "binary", True, False, None, False, False, False, True)
    return None


def no_histogram_reason(type_str: str) -> str:
    """Why a column of this type has no histogram in a stats document: the type gets none,
    or this column's stats were computed without sketches (or it holds no value)."""
    spec = type_spec(type_str)
    if spec is not None and spec.kll:
        return "its stats were computed without sketches, or it holds no value"
    return f"no column of type {type_str} has one"


def no_ndv_reason(type_str: str) -> str:
    """Why a column of this type has no NDV in a stats document, as ``no_histogram_reason``."""
    spec = type_spec(type_str)
    if spec is not None and spec.theta:
        return "its stats were computed without sketches"
    return f"no column of type {type_str} is sketched"


def decimal_precision_scale(type_str: str) -> tuple[int, int]:
    m = _DECIMAL.match(type_str.strip().lower())
    if not m:
        raise ValueError(f"not a decimal type: {type_str!r}")
    return int(m.group(1)), int(m.group(2))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def kll_pmf_error(k: int) -> float:
    """Normalized rank error of a bucket's mass (a difference of two ranks) at ~99 %
    confidence for KLL parameter ``k``: DataSketches' own published formula."""
    return float(kll_doubles_sketch.get_normalized_rank_error(k, True))


def kll_k_for_error(error_rate: float) -> int:
    """The smallest KLL ``k`` whose bucket-mass error (``kll_pmf_error``) is at most
    ``error_rate``; ``ConfigError`` if no k in Spark's accepted range reaches it."""
    given: object = error_rate  # config may hand over anything; the annotation is a promise
    if isinstance(given, bool) or not isinstance(given, Real) or not math.isfinite(float(given)):
        raise ConfigError(f"sketch.kll_error_rate must be a number, got {error_rate!r}")
    best, worst = kll_pmf_error(KLL_K_MAX), kll_pmf_error(KLL_K_MIN)
    if not best <= float(error_rate) <= worst:
        raise ConfigError(
            f"sketch.kll_error_rate must be between {best:.6f} (k {KLL_K_MAX}) and "
            f"{worst:.4f} (k {KLL_K_MIN}), got {error_rate!r}"
        )
    low, high = KLL_K_MIN, KLL_K_MAX  # the error falls as k grows: bisect
    while low < high:
        mid = (low + high) // 2
        if kll_pmf_error(mid) <= error_rate:
            high = mid
        else:
            low = mid + 1
    return low


def default_kll_error_rate(histogram_buckets: int) -> float:
    """``DEFAULT_BUCKET_ERROR_SHARE`` of one bucket's share of the rows, but never finer
    than the largest k can give (10,000 buckets would ask for more)."""
    return max(DEFAULT_BUCKET_ERROR_SHARE / histogram_buckets, kll_pmf_error(KLL_K_MAX))


def coarse_kll_warning(settings: SketchSettings) -> str | None:
    """A note when ``kll_k`` was set directly to one whose bucket-mass error is not below a
    histogram bucket's share (an error for ``kll_error_rate``; only a warning for k, which
    configs from before issue 14 set to 200), else ``None``."""
    if settings.kll_error_rate is not None:
        return None  # k derived from a rate, which validation already held below a bucket
    error, share = kll_pmf_error(settings.kll_k), 1 / settings.histogram_buckets
    if error < share:
        return None
    default_rate = default_kll_error_rate(settings.histogram_buckets)
    return (
        f"sketch.kll_k {settings.kll_k} bounds a histogram bucket's row count only within "
        f"±{error:.2%} of the rows, not below one bucket's share ({share:.2%} at "
        f"{settings.histogram_buckets} buckets): bucket counts may be off by "
        f"{error / share:.0%} of a bucket. Remove kll_k to derive k "
        f"{kll_k_for_error(default_rate)} from the default kll_error_rate {default_rate:g}"
    )


def validate_sketch_settings(settings: SketchSettings) -> SketchSettings:
    """Return ``settings`` if every parameter is usable, else raise ``ConfigError``.

    Nothing is defaulted or clamped: a wrong value is an error naming the key.
    """
    k = settings.kll_k
    if not _is_int(k) or not KLL_K_MIN <= k <= KLL_K_MAX:
        raise ConfigError(
            f"sketch.kll_k must be an integer between {KLL_K_MIN} and {KLL_K_MAX}, got {k!r}"
        )
    lg = settings.theta_lg_k
    if not _is_int(lg) or not THETA_LG_K_MIN <= lg <= THETA_LG_K_MAX:
        raise ConfigError(
            f"sketch.theta_lg_k must be an integer between {THETA_LG_K_MIN} and "
            f"{THETA_LG_K_MAX}, got {lg!r}"
        )
    b = settings.histogram_buckets
    if not _is_int(b) or not 1 <= b <= HISTOGRAM_BUCKETS_MAX:
        raise ConfigError(
            f"sketch.histogram_buckets must be an integer between 1 and "
            f"{HISTOGRAM_BUCKETS_MAX}, got {b!r}"
        )
    items = settings.frequent_items
    if not _is_int(items) or not (items == 0 or MIN_ITEMS_TRACKED <= items <= MAX_ITEMS_TRACKED):
        raise ConfigError(
            f"sketch.frequent_items must be 0 (none) or an integer between {MIN_ITEMS_TRACKED} "
            f"and {MAX_ITEMS_TRACKED}, got {items!r}"
        )
    if not isinstance(settings.value_samples, bool):
        raise ConfigError(
            f"sketch.value_samples must be true or false, got {settings.value_samples!r}"
        )
    rate = settings.kll_error_rate
    if rate is not None:
        if kll_k_for_error(rate) != k:
            raise ConfigError(
                f"sketch.kll_k {k} does not match sketch.kll_error_rate {rate!r} "
                f"(which needs k {kll_k_for_error(rate)}): set one of them"
            )
        if rate >= 1 / b:
            raise ConfigError(
                f"sketch.kll_error_rate {rate!r} is not below one histogram bucket's share "
                f"of the rows (1/{b} = {1 / b:g}): bucket counts could be off by a whole "
                "bucket; lower the rate or use fewer histogram_buckets"
            )
    qs = settings.quantiles
    if not isinstance(qs, tuple | list):
        raise ConfigError(f"sketch.quantiles must be a list of numbers in [0, 1], got {qs!r}")
    previous: float | None = None
    for item in qs:
        q: object = item  # config may hand over anything; the annotation is a promise only
        if isinstance(q, bool) or not isinstance(q, Real) or not math.isfinite(float(q)):
            raise ConfigError(f"sketch.quantiles must contain numbers in [0, 1], got {q!r}")
        if not 0.0 <= float(q) <= 1.0:
            raise ConfigError(f"sketch.quantiles values must be within [0, 1], got {q!r}")
        if previous is not None and float(q) <= previous:
            raise ConfigError(
                f"sketch.quantiles must be sorted ascending without duplicates, got {list(qs)!r}"
            )
        previous = float(q)
    return settings
