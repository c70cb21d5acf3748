"""Block sketches of a column that holds one value in every row of a file, without a scan.

Iceberg readers take an identity-partition column's value from the file's partition tuple,
not from the data file: files of tables migrated from Hive (and files rewritten by other
tools) do not even store the column. Every row of such a file holds the partition value,
so its statistics follow from the value and the row count alone. They are built here with
the pipeline's conventions (``lakestats.pipeline``) so they merge with Spark's sketches:

* ``theta``: one hash of the value's Iceberg single-value bytes (``hashing.theta_hash``,
  what Spark's job feeds to ``theta_sketch_agg``), as a single-item compact sketch; empty
  strings/binaries and NaN-free nulls enter no sketch;
* ``kll``: ``rows`` copies of the value as a double, built by doubling merges (all items
  equal, so every quantile is exact);
* ``value_sample``: the theta sketch's one hash carrying the value as a double;
* ``frequent_items``: the value (as a double; a string as itself) counted ``rows`` times;
* counts, min = max = the value, lengths in characters (strings) or bytes (binary).
"""

from __future__ import annotations

import math
import struct
from typing import Any

from datasketches import compact_theta_sketch, kll_doubles_sketch, update_theta_sketch

from lakestats.model import ColumnSketch, SketchSettings
from lakestats.sketches.frequent import STRINGS, repeated_frequent_items
from lakestats.sketches.hashing import THETA_SEED, theta_hash
from lakestats.sketches.merge import empty_kll, empty_theta
from lakestats.sketches.spec import type_spec
from lakestats.sketches.value_sample import single_value_sample
from lakestats.values import encode_bound, to_physical

# A compact, ordered, read-only theta sketch of one hash: preamble (1 long) with the seed
# hash at bytes 6-7, then the hash (DataSketches serial version 3 "single item" form).
_SINGLE_ITEM_PREAMBLE = bytes.fromhex("01030300001a")


def _seed_hash() -> bytes:
    return bytes(update_theta_sketch(5, seed=THETA_SEED).compact().serialize())[6:8]


def single_value_theta(type_str: str, value: Any, lg_k: int) -> bytes:
    """The theta sketch of a column whose only non-null value is ``value``."""
    raw = encode_bound(type_str, value) if value is not None else None
    hashed = theta_hash(raw) if raw else None
    if hashed is None:
        return empty_theta(lg_k)
    blob = _SINGLE_ITEM_PREAMBLE + _seed_hash() + struct.pack("<q", hashed)
    # re-serialized by DataSketches itself: the stored form, and a check of the layout
    return bytes(compact_theta_sketch.deserialize(blob, THETA_SEED).serialize(False))


def repeated_kll(number: float, copies: int, k: int) -> bytes:
    """A KLL doubles sketch of ``copies`` copies of ``number`` in O(log copies) merges."""
    result = kll_doubles_sketch(k)
    if copies <= 0:
        return bytes(result.serialize())
    power = kll_doubles_sketch(k)
    power.update(number)
    while copies:
        if copies & 1:
            result.merge(power)
        copies >>= 1
        if copies:
            doubled = kll_doubles_sketch.deserialize(power.serialize())
            doubled.merge(power)
            power = doubled
    return bytes(result.serialize())


def constant_sketch(
    type_str: str, value: Any, rows: int, settings: SketchSettings
) -> ColumnSketch | None:
    """Statistics of ``rows`` rows that all hold ``value`` (``None``: the type has none)."""
    spec = type_spec(type_str)
    if spec is None:
        return None
    is_nan = isinstance(value, float) and math.isnan(value)
    present = 0 if value is None else rows
    counted = 0 if is_nan else present  # NaN is kept out of min/max and KLL
    stats: dict[str, Any] = {"null_count": rows - present}
    if spec.theta:
        stats["theta"] = single_value_theta(
            type_str, value if present else None, settings.theta_lg_k
        )
    if spec.kll:
        if counted:
            stats["kll"] = repeated_kll(float(to_physical(type_str, value)), rows, settings.kll_k)
        else:
            stats["kll"] = empty_kll(settings.kll_k)
    if spec.frequent and settings.frequent_items:
        item = None
        if counted:
            item = value if spec.frequent == STRINGS else float(to_physical(type_str, value))
        stats["frequent_items"] = repeated_frequent_items(
            item, rows, settings.frequent_items, spec.frequent
        )
    if spec.kll and spec.theta and settings.value_samples:
        number = float(to_physical(type_str, value)) if counted else None
        stats["value_sample"] = single_value_sample(stats["theta"], number, settings.theta_lg_k)
    if spec.nan:
        stats["nan_count"] = present if is_nan else 0
    if spec.bounds and counted:
        stats["min"] = stats["max"] = value
    if spec.lengths:
        length = len(value) if counted else 0
        stats["len_sum"] = length * counted
        stats["len_max"] = length if counted else None
    if spec.booleans:
        stats["true_count"] = counted if value is True else 0
        stats["false_count"] = counted if value is False else 0
    return ColumnSketch(**stats)
