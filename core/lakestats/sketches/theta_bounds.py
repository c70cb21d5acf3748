"""DataSketches' own confidence bounds on a distinct count estimated from a theta sample.

A theta sketch (or a value sample filtered to a value range) estimates a distinct count as
``retained / theta``; its lower and upper bounds (``get_lower_bound``/``get_upper_bound``
at 1-3 standard deviations) are the binomial bounds of DataSketches' ``BinomialBoundsN``
on that retained count, and depend only on the count and theta, not on which hashes were
kept. ``retained_bounds`` gets them from the library itself through a compact theta sketch
of ``retained`` placeholder hashes at that theta: the same numbers ``range_ndv`` gives for
the filtered sketch (tested), without filtering the sample through a Python callback per
entry (~ms per range; a histogram asks once per bucket).
"""

from __future__ import annotations

import functools
import struct

import numpy as np
from datasketches import compact_theta_sketch, update_theta_sketch

from lakestats.sketches.hashing import THETA_SEED

MAX_THETA = (1 << 63) - 1
_HEADER = struct.Struct("<BBBBBBH")
_SERIAL_VERSION = 3
_FAMILY_COMPACT_THETA = 3
_FLAGS = 0x02 | 0x08 | 0x10  # read-only, compact, ordered


@functools.cache
def _seed_hash() -> int:
    return int(update_theta_sketch(5, seed=THETA_SEED).compact().get_seed_hash())


@functools.lru_cache(maxsize=4096)
def retained_bounds(retained: int, theta: float, num_std_devs: int = 2) -> tuple[float, float]:
    """(lower, upper) bounds of the distinct count behind ``retained`` sample entries kept
    at sampling rate ``theta`` (0 < theta <= 1), at ``num_std_devs`` (1, 2 or 3: ~68, 95,
    99.7 %) standard deviations. Exact (both ``retained``) at ``theta`` 1."""
    if retained < 0 or not 0 < theta <= 1:
        raise ValueError(f"retained {retained} / theta {theta} out of range")
    if theta >= 1:
        return float(retained), float(retained)
    theta64 = max(retained + 1, min(MAX_THETA, int(theta * MAX_THETA)))
    head = _HEADER.pack(3, _SERIAL_VERSION, _FAMILY_COMPACT_THETA, 0, 0, _FLAGS, _seed_hash())
    head += struct.pack("<IIQ", retained, 0, theta64)
    hashes = np.arange(1, retained + 1, dtype="<u8")  # any distinct hashes below theta
    sketch = compact_theta_sketch.deserialize(head + hashes.tobytes(), THETA_SEED)
    return float(sketch.get_lower_bound(num_std_devs)), float(sketch.get_upper_bound(num_std_devs))
