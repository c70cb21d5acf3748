"""The stats document's ``ndv``: the theta estimate, capped by the values the files hold
(theta errs either way past 4,096 distinct values; a unique column must not read more
distinct values than rows)."""

from __future__ import annotations

import math

from datasketches import update_theta_sketch

from lakestats.model import ColumnAggregate, SketchSettings
from lakestats.publish.native import column_doc
from lakestats.sketches.hashing import THETA_SEED

# 7,715 distinct longs: DataSketches' estimate at lgK 12 is 7,734 (deterministic hashing)
UNIQUE = 7715


def theta_of(values: range) -> bytes:
    sketch = update_theta_sketch(12, 1.0, THETA_SEED)
    for value in values:
        sketch.update(value)
    return bytes(sketch.compact().serialize())


def doc(**counts: int | None) -> dict[str, object]:
    column = ColumnAggregate(
        field_id=1, type="long", files=1, records=UNIQUE, theta=theta_of(range(UNIQUE)), **counts
    )
    return column_doc(column, 1, "long", UNIQUE, SketchSettings())


def test_a_unique_column_never_reads_more_distinct_values_than_rows() -> None:
    estimate = update_theta_sketch(12, 1.0, THETA_SEED)
    for value in range(UNIQUE):
        estimate.update(value)
    assert round(estimate.get_estimate()) > UNIQUE  # the sketch itself overshoots
    assert doc(value_count=UNIQUE, null_count=0, nan_count=0)["ndv"] == UNIQUE


def test_the_cap_counts_nulls_out_and_nan_as_one_value() -> None:
    # the same sketch over files said to hold 10 more values, nulls and NaNs among them
    assert doc(value_count=UNIQUE + 10, null_count=10, nan_count=0)["ndv"] == UNIQUE
    capped = doc(value_count=UNIQUE + 10, null_count=4, nan_count=6)["ndv"]
    assert capped == UNIQUE + 1  # NaN is one distinct value of its own
    # a bound above the estimate leaves it as the sketch says
    loose = doc(value_count=2 * UNIQUE, null_count=0, nan_count=0)["ndv"]
    assert isinstance(loose, int) and math.isclose(loose, UNIQUE, rel_tol=0.05) and loose > UNIQUE


def test_unknown_or_inconsistent_counts_bound_nothing() -> None:
    sketch_says = doc(value_count=None, null_count=0, nan_count=0)["ndv"]
    assert isinstance(sketch_says, int) and sketch_says > UNIQUE
    assert doc(value_count=5, null_count=10, nan_count=0)["ndv"] == sketch_says
