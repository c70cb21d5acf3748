"""Merging and querying sketches in pure Python (no Spark), and the histogram estimator."""

from __future__ import annotations

import itertools
import random

import numpy as np
from datasketches import kll_doubles_sketch, update_theta_sketch
from hypothesis import given, settings
from hypothesis import strategies as st

from lakestats.sketches.histogram import equi_depth_histogram
from lakestats.sketches.merge import (
    empty_kll,
    empty_theta,
    kll_count,
    kll_normalized_rank_error,
    kll_quantiles,
    merge_kll,
    theta_bounds,
    theta_estimate,
    theta_is_exact,
    theta_relative_standard_error,
    union_theta,
)


def _theta(values: range | list[int], lg_k: int) -> bytes:
    sketch = update_theta_sketch(lg_k)
    for v in values:
        sketch.update(v)
    return bytes(sketch.compact().serialize())


def _kll(values: np.ndarray, k: int = 200) -> bytes:
    sketch = kll_doubles_sketch(k)
    for v in values:
        sketch.update(float(v))
    return bytes(sketch.serialize())


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 3_000)), min_size=1, max_size=6),
    lg_k=st.integers(5, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_theta_union_is_order_independent(
    parts: list[tuple[int, int]], lg_k: int, seed: int
) -> None:
    blobs = [_theta(range(start, start + size), lg_k) for start, size in parts]
    reference = union_theta(blobs, lg_k)
    assert reference is not None
    shuffled = blobs[:]
    random.Random(seed).shuffle(shuffled)
    again = union_theta(shuffled, lg_k)
    assert again is not None
    assert theta_estimate(again) == theta_estimate(reference)
    # and the estimate is a sound one for the true union
    exact = len(set().union(*(range(s, s + n) for s, n in parts)))
    lower, upper = theta_bounds(reference, 3)
    assert lower <= exact <= upper


def test_union_of_nothing_is_none_and_empty_sketches_are_neutral() -> None:
    assert union_theta([], 12) is None
    assert union_theta([None], 12) is None
    blob = _theta(range(100), 12)
    merged = union_theta([empty_theta(12), blob, None], 12)
    assert merged is not None
    assert theta_estimate(merged) == 100
    assert theta_is_exact(merged)
    assert merge_kll([], 200) is None
    assert kll_quantiles(empty_kll(200), [0.5]) == {}


def test_theta_accuracy_within_three_rse() -> None:
    lg_k = 12
    blobs = [_theta(range(i * 30_000, (i + 1) * 30_000 + 10_000), lg_k) for i in range(4)]
    merged = union_theta(blobs, lg_k)
    assert merged is not None
    exact = 4 * 30_000 + 10_000
    rse = theta_relative_standard_error(lg_k)
    assert abs(theta_estimate(merged) - exact) <= 3 * rse * exact
    assert not theta_is_exact(merged)


def test_kll_merge_ranks_within_error_bound() -> None:
    rng = np.random.default_rng(7)
    data = np.concatenate([rng.normal(0, 1, 40_000), rng.zipf(1.5, 30_000).astype(float)])
    rng.shuffle(data)
    chunks = np.array_split(data, 7)
    merged = merge_kll([_kll(c) for c in chunks], 200)
    assert merged is not None
    assert kll_count(merged) == len(data)
    eps = kll_normalized_rank_error(200, pmf=True)
    ordered = np.sort(data)
    qs = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]
    for q, value in kll_quantiles(merged, qs).items():
        below = np.searchsorted(ordered, value, "left") / len(data)
        at_or_below = np.searchsorted(ordered, value, "right") / len(data)
        assert below - eps <= q <= at_or_below + eps
    ends = kll_quantiles(merged, [0.0, 1.0])
    assert ends == {0.0: ordered[0], 1.0: ordered[-1]}
    assert abs(kll_normalized_rank_error(200) - 0.0133) < 0.001


def test_histogram_uniform_buckets_are_equi_depth() -> None:
    data = np.arange(100_000, dtype=float)
    buckets = equi_depth_histogram(_kll(data), 100_000.0, 10, value_step=1.0)
    assert len(buckets) == 10
    assert buckets[0].lower == 0.0 and buckets[-1].upper == 99_999.0
    assert all(b.approximate for b in buckets)
    for b in buckets:
        assert abs(b.count - 10_000) <= kll_normalized_rank_error(200, pmf=True) * 100_000
        assert b.ndv is not None and b.ndv <= b.count + 1e-9
    assert abs(sum(b.count for b in buckets) - 100_000) < 1e-6
    # each bucket is capped by its approximate row count and integer span, so the shares
    # may fall a little short of the total, never above it
    total_ndv = sum(b.ndv or 0 for b in buckets)
    assert 0.98 * 100_000 <= total_ndv <= 100_000 + 1e-6
    for left, right in itertools.pairwise(buckets):
        assert left.upper == right.lower


def test_histogram_collapses_equal_boundaries_and_caps_ndv() -> None:
    rng = np.random.default_rng(3)
    hot = np.full(60_000, 42.0)  # 60 % of rows are one value
    rest = rng.integers(0, 1_000, 40_000).astype(float)
    data = np.concatenate([hot, rest])
    rng.shuffle(data)
    ndv = float(len(np.unique(data)))
    buckets = equi_depth_histogram(_kll(data), ndv, 100, value_step=1.0)
    assert len(buckets) < 50  # ~60 boundaries collapsed into the hot value
    uppers = [b.upper for b in buckets]
    assert uppers == sorted(set(uppers))
    hot_bucket = next(b for b in buckets if b.lower < 42.0 <= b.upper)
    assert hot_bucket.count >= 60_000 * 0.97
    # an integer range (lower, upper] holds at most upper - lower values
    for b in buckets[1:]:
        assert b.ndv is not None and b.ndv <= max(1.0, b.upper - b.lower) + 1e-9
    assert abs(sum(b.count for b in buckets) - len(data)) < 1e-6


def test_histogram_single_value_and_empty() -> None:
    one = equi_depth_histogram(_kll(np.full(10, 5.0)), 1.0, 100)
    assert len(one) == 1
    assert (one[0].lower, one[0].upper, one[0].count, one[0].ndv) == (5.0, 5.0, 10.0, 1.0)
    assert equi_depth_histogram(empty_kll(200), 0.0, 100) == []
    assert equi_depth_histogram(None, None, 100) == []
    no_ndv = equi_depth_histogram(_kll(np.arange(100.0)), None, 4)
    assert all(b.ndv is None for b in no_ndv)
    with_theta = equi_depth_histogram(_kll(np.arange(100.0)), _theta(range(100), 12), 4)
    assert abs(sum(b.ndv or 0 for b in with_theta) - 100) < 1e-6
