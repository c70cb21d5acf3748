"""Array helpers the Arrow engine's tasks and the driver share."""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for integers (sorted, distinct) at the cost of a sort: numpy 2's
    ``unique`` hashes, ~5-10× slower than a sort on 10^5 uint64 hashes or int64 positions
    (docs/benchmarks.md, "Deletion vectors on the driver"). Nothing is sorted when
    ``values`` are sorted and distinct already, as a deletion vector's positions are."""
    if len(values) < 2 or bool((values[1:] > values[:-1]).all()):
        return values
    ordered = np.sort(values)
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    out: np.ndarray = ordered[first]
    return out
