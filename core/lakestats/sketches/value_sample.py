"""Value samples: tuple sketches whose retained entries carry the column value (issue 14).

A theta sketch keeps the distinct values whose hash falls below ``theta``: a uniform
sample of the distinct values, of rate ``theta``. A *tuple* sketch over the same keys that
also keeps each key's value (as the KLL double, ``pipeline._kll_input_sql``) lets that
sample be filtered by value range, so the distinct count of any range ``(lo, hi]`` is

    ndv(lo, hi] ≈ #{retained entries with lo < value <= hi} / theta

with DataSketches' own theta error bounds on the filtered sketch (the retained count in a
range is binomial with rate ``theta``; ``range_ndv``). While the sketch holds every
distinct value (``theta`` = 1) the count is exact.

Spark 4.3's ``tuple_sketch_agg_double(key, summary, lgK, 'min')`` builds it in the sketch
job, fed the same key as the theta aggregate (the Iceberg-spec hash input,
``hashing.theta_input_sql``): its retained hashes equal the theta sketch's (tested). A key
has one value, so the ``min`` mode keeps exactly it. Rows with a NULL value (NaN floats)
are skipped by Spark, as KLL skips them.

Stored form (``value_sample`` v1): a DataSketches compact tuple sketch (serial version 3,
seed 9001) whose summaries are datasketches-java's ``DoubleSummary`` serialization, 9
bytes each: the value as a little-endian IEEE double, then the mode's ordinal (``Mode.Min``
= 1). Verified against ``DoubleSummary.toByteArray`` (``SERIALIZED_SIZE_BYTES = 9``,
``VALUE_INDEX = 0``, ``MODE_BYTE_INDEX = 8``) and by reading Spark's bytes in tests. Spark
may return more than ``2**lgK`` entries; ``normalize_value_sample`` trims to the nominal
size with a tuple union.

Those bytes are read, unioned and written by ``sample_codec`` with numpy (the library's
Python-object summaries cost ~4 ms per 4,096-entry sketch, paid per file and column on
every commit); the result is byte for byte what the library's tuple union writes (tested).
"""

from __future__ import annotations

import bisect
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from datasketches import (
    PyObjectSerDe,
    TuplePolicy,
    compact_theta_sketch,
    compact_tuple_sketch,
    tuple_union,
)

from lakestats.model import SketchSettings
from lakestats.sketches import sample_codec
from lakestats.sketches.hashing import THETA_SEED
from lakestats.sketches.spec import TypeSpec

VALUE_SAMPLE_VERSION = 1
_DOUBLE_SUMMARY = struct.Struct("<db")
_MODE_MIN = 1  # datasketches-java DoubleSummary.Mode.Min.ordinal()
DEFAULT_NUM_STD_DEVS = 2


class JavaDoubleSummarySerDe(PyObjectSerDe):  # type: ignore[misc]  # untyped C++ base
    """datasketches-java ``DoubleSummary`` bytes: 8-byte LE double + 1 mode byte."""

    def get_size(self, item: Any) -> int:
        return _DOUBLE_SUMMARY.size

    def to_bytes(self, item: Any) -> bytes:
        return _DOUBLE_SUMMARY.pack(float(item), _MODE_MIN)

    def from_bytes(self, data: bytes, offset: int) -> tuple[float, int]:
        value, _mode = _DOUBLE_SUMMARY.unpack_from(data, offset)
        return float(value), _DOUBLE_SUMMARY.size


class _MinPolicy(TuplePolicy):  # type: ignore[misc]  # untyped C++ base
    """One value per key: the smaller wins (they are equal for equal keys)."""

    def create_summary(self) -> float:
        return math.inf

    def update_summary(self, summary: float, update: float) -> float:
        return min(summary, update)

    def __call__(self, summary: float, update: float) -> float:
        return min(summary, update)


def _serde() -> Any:
    # a new instance per use: a module-level one is still alive when nanobind checks for
    # leaks at exit, and it prints "leaked instances" into the daemon's JSON log
    return JavaDoubleSummarySerDe()


def _load(blob: bytes) -> Any:
    return compact_tuple_sketch.deserialize(blob, _serde(), THETA_SEED)


def empty_value_sample(lg_k: int) -> bytes:
    return bytes(tuple_union(_MinPolicy(), lg_k, seed=THETA_SEED).get_result().serialize(_serde()))


def library_union_value_samples(blobs: Iterable[bytes | None], lg_k: int) -> bytes | None:
    """The DataSketches tuple union (the reference ``union_value_samples`` matches)."""
    union = tuple_union(_MinPolicy(), lg_k, seed=THETA_SEED)
    seen = False
    for blob in blobs:
        if blob is None:
            continue
        union.update(_load(blob))
        seen = True
    if not seen:
        return None
    return bytes(union.get_result().serialize(_serde()))


def union_value_samples(blobs: Iterable[bytes | None], lg_k: int) -> bytes | None:
    """Tuple union of ``blobs`` (``None`` skipped), trimmed to ``2**lg_k`` entries."""
    present = [b for b in blobs if b is not None]
    if not present:
        return None
    return sample_codec.union(present, lg_k)


def normalize_value_sample(blob: bytes, lg_k: int) -> bytes:
    """Spark's sketch in the stored form: trimmed to the nominal size, ordered."""
    result = union_value_samples([blob], lg_k)
    assert result is not None
    return result


def single_value_sample(theta_blob: bytes, value: float | None, lg_k: int) -> bytes:
    """The value sample of a column whose only value is ``value`` (``theta_blob`` its
    theta sketch: the same hash); empty without a value."""
    if value is None or math.isnan(value):
        return empty_value_sample(lg_k)
    theta = compact_theta_sketch.deserialize(theta_blob, THETA_SEED)
    return bytes(compact_tuple_sketch(theta, float(value)).serialize(_serde()))


@dataclass(frozen=True)
class RangeNdv:
    """Distinct values in a value range, from a value sample."""

    estimate: float
    lower_bound: float
    upper_bound: float
    retained: int  # sample entries in the range
    exact: bool  # the sample held every distinct value


@dataclass(frozen=True)
class ValueSample:
    """A loaded value sample: its retained values, sorted, and its sampling rate."""

    values: tuple[float, ...]
    theta: float
    blob: bytes

    @property
    def exact(self) -> bool:
        return self.theta >= 1.0

    def retained_in(self, lower: float, upper: float, *, include_lower: bool = False) -> int:
        """Entries with ``lower < value <= upper`` (``lower <= value`` if ``include_lower``)."""
        first, end = self.range_in(lower, upper, include_lower=include_lower)
        return end - first

    def range_in(
        self, lower: float, upper: float, *, include_lower: bool = False
    ) -> tuple[int, int]:
        """``values[first:end]`` are the entries of ``retained_in`` (``first`` <= ``end``)."""
        left = (bisect.bisect_left if include_lower else bisect.bisect_right)(self.values, lower)
        return left, max(left, bisect.bisect_right(self.values, upper))

    def estimate_in(self, lower: float, upper: float, *, include_lower: bool = False) -> float:
        return self.retained_in(lower, upper, include_lower=include_lower) / self.theta


def load_value_sample(blob: bytes) -> ValueSample:
    sample = sample_codec.parse(blob)
    values: list[float] = np.sort(sample.values).tolist()
    return ValueSample(tuple(values), sample.theta, blob)


def range_ndv(
    blob: bytes,
    lower: float,
    upper: float,
    *,
    include_lower: bool = False,
    num_std_devs: int = DEFAULT_NUM_STD_DEVS,
) -> RangeNdv:
    """NDV of ``(lower, upper]`` with DataSketches' bounds at ``num_std_devs`` (1-3): the
    sketch filtered to the range keeps its theta, so its bounds are the theta sketch's
    binomial bounds on the retained count."""

    def inside(value: float) -> bool:
        above = value >= lower if include_lower else value > lower
        return above and value <= upper

    filtered = _load(blob).filter(inside)
    return RangeNdv(
        estimate=float(filtered.get_estimate()),
        lower_bound=float(filtered.get_lower_bound(num_std_devs)),
        upper_bound=float(filtered.get_upper_bound(num_std_devs)),
        retained=int(filtered.num_retained),
        exact=not bool(filtered.is_estimation_mode()),
    )


def sample_hashes(blob: bytes) -> Sequence[int]:
    """The retained hashes, sorted (the theta sketch of the same keys keeps the same)."""
    return sorted(int(h) for h in sample_codec.parse(blob).hashes)


def value_sample_doc(blob: bytes, lg_k: int) -> dict[str, Any]:
    """What ``show --json`` says of a column's value sample (``sketch.value_sample``)."""
    sample = sample_codec.parse(blob)
    return {
        "kind": "tuple_min_double",
        "version": VALUE_SAMPLE_VERSION,
        "lg_k": lg_k,
        "theta": sample.theta,
        "retained": len(sample.hashes),
        # every bucket ndv is exact while the sample holds every distinct value
        "exact": sample.theta64 == sample_codec.MAX_THETA,
    }


def sample_carries_theta(spec: TypeSpec, settings: SketchSettings) -> bool:
    """Whether the column's value sample holds exactly its theta sketch's keys: a sampled
    type without NaN (NaN has a theta hash but no value, so it is not in the sample)."""
    return settings.value_samples and spec.kll and spec.theta and not spec.nan


def theta_of_value_sample(raw: bytes) -> bytes:
    """The compact theta sketch of the sample's keys, in the stored form: for a column
    without NaN the sample's keys are exactly the theta aggregate's (same hash input,
    same lgK, same bottom-k sizing), so the sketch job need not run both (tested: equal
    byte for byte to ``normalize_theta`` of Spark's ``theta_sketch_agg``). ``raw``: Spark's
    tuple sketch, before ``normalize_value_sample`` trims it."""
    return sample_codec.theta_bytes(sample_codec.parse(raw))
