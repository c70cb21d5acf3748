"""Merging and querying stored sketches: pure Python over datasketches bytes, no Spark.

Theta sketches are stored as *uncompressed* compact sketches (serial version 3): every
DataSketches release and every Iceberg/Trino reader loads that form, while the compressed
form Spark emits (version 4) needs datasketches-java 4+ / C++ 4+.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from datasketches import (
    compact_theta_sketch,
    kll_doubles_sketch,
    theta_a_not_b,
    theta_union,
    update_theta_sketch,
)

from lakestats.sketches.hashing import THETA_SEED

# Bounds at two standard deviations (~95 %), what DESIGN §4 publishes as "the error bound".
DEFAULT_NUM_STD_DEVS = 2


def empty_theta(lg_k: int) -> bytes:
    """The serialized empty compact theta sketch (a file or column with no values)."""
    return bytes(update_theta_sketch(lg_k, seed=THETA_SEED).compact().serialize())


def empty_kll(k: int) -> bytes:
    return bytes(kll_doubles_sketch(k).serialize())


def normalize_theta(blob: bytes) -> bytes:
    """Re-serialize any compact theta sketch (e.g. Spark's compressed one) in the stored form."""
    return bytes(compact_theta_sketch.deserialize(blob, THETA_SEED).serialize(False))


def union_theta(blobs: Iterable[bytes | None], lg_k: int) -> bytes | None:
    """Theta union of ``blobs`` (``None`` entries skipped); ``None`` if there was none.

    The union's result does not depend on the order of its inputs (tested); its nominal
    size is ``2**lg_k``, so merging sketches built with a larger lgK keeps only the
    precision of ``lg_k``.
    """
    union = theta_union(lg_k, seed=THETA_SEED)
    seen = False
    for blob in blobs:
        if blob is None:
            continue
        union.update(compact_theta_sketch.deserialize(blob, THETA_SEED))
        seen = True
    if not seen:
        return None
    return bytes(union.get_result(True).serialize(False))


def theta_estimate(blob: bytes) -> float:
    """Distinct-count estimate of a theta sketch."""
    return float(compact_theta_sketch.deserialize(blob, THETA_SEED).get_estimate())


def theta_difference(blob: bytes, minus: bytes | None) -> bytes:
    """The sketch of values in ``blob``'s set and not in ``minus``'s (theta A-not-B)."""
    a = compact_theta_sketch.deserialize(blob, THETA_SEED)
    if minus is None:
        return bytes(a.serialize(False))
    b = compact_theta_sketch.deserialize(minus, THETA_SEED)
    return bytes(theta_a_not_b(THETA_SEED).compute(a, b).serialize(False))


def theta_bounds(blob: bytes, num_std_devs: int = DEFAULT_NUM_STD_DEVS) -> tuple[float, float]:
    """(lower, upper) bound of the distinct count at ``num_std_devs`` (1, 2 or 3)."""
    sketch = compact_theta_sketch.deserialize(blob, THETA_SEED)
    return float(sketch.get_lower_bound(num_std_devs)), float(sketch.get_upper_bound(num_std_devs))


def theta_is_exact(blob: bytes) -> bool:
    """True when the sketch saw fewer distinct values than it can hold (estimate is exact)."""
    return not compact_theta_sketch.deserialize(blob, THETA_SEED).is_estimation_mode()


def theta_relative_standard_error(lg_k: int) -> float:
    """RSE of a theta (QuickSelect) sketch in estimation mode: 1/sqrt(k - 1), k = 2**lg_k."""
    return float((2**lg_k - 1) ** -0.5)


def merge_kll(blobs: Iterable[bytes | None], k: int) -> bytes | None:
    """KLL doubles merge of ``blobs`` (``None`` skipped); ``None`` if there was none.

    The merged sketch's rank error is that of its smallest k.
    """
    merged = kll_doubles_sketch(k)
    seen = False
    for blob in blobs:
        if blob is None:
            continue
        merged.merge(kll_doubles_sketch.deserialize(blob))
        seen = True
    if not seen:
        return None
    return bytes(merged.serialize())


def kll_count(blob: bytes) -> int:
    """Number of values the KLL sketch has seen."""
    return int(kll_doubles_sketch.deserialize(blob).n)


def kll_quantiles(blob: bytes, qs: Sequence[float]) -> dict[float, float]:
    """Approximate quantiles (inclusive rank definition); ``{}`` for an empty sketch.

    Quantile 0 and 1 are the exact minimum and maximum the sketch saw (KLL's own
    ``get_quantile`` answers them from retained items only, which may have lost the ends).
    """
    sketch = kll_doubles_sketch.deserialize(blob)
    if sketch.is_empty():
        return {}
    return {float(q): _kll_quantile(sketch, float(q)) for q in qs}


def _kll_quantile(sketch: kll_doubles_sketch, q: float) -> float:
    if q <= 0.0:
        return float(sketch.get_min_value())
    if q >= 1.0:
        return float(sketch.get_max_value())
    return float(sketch.get_quantile(q, True))


def kll_normalized_rank_error(k: int, *, pmf: bool = False) -> float:
    """Normalized rank error of a KLL sketch with parameter ``k`` at ~99 % confidence.

    ``pmf=False``: for a single quantile or rank query, ``|rank(reported quantile) - q|``
    (1.33 % at k = 200). ``pmf=True``: for the difference of two ranks, i.e. the mass of a
    histogram bucket (1.65 % at k = 200).
    """
    return float(kll_doubles_sketch.get_normalized_rank_error(k, pmf))
