"""``sketch.frequent_items`` and ``sketch.value_samples``: validated, and what the job keeps.

One small Parquet file (a ``long`` and a ``double`` column) sketched by the production
``sketch_files`` at two settings; the theta sketch is the same bytes whether it comes
from the value sample (NaN-free ``long``) or from ``theta_sketch_agg`` (samples off).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketches import PyDoublesSerDe, frequent_items_sketch

from lakestats.config import SketchConfig
from lakestats.exceptions import ConfigError
from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.sketches.frequent import lg_map_size, merge_frequent_items
from lakestats.sketches.spec import validate_sketch_settings
from lakestats.sketches.value_sample import load_value_sample

SCHEMA = TableSchema(1, (Column(1, "n", "long"), Column(2, "x", "double")))


def test_settings_are_validated() -> None:
    # on by default since the Arrow engine computes them (docs/benchmarks.md, "Value
    # samples and frequent items: on by default"); opt-in before
    assert SketchConfig().settings().frequent_items == 256
    assert SketchConfig().settings().value_samples is True
    assert SketchConfig(frequent_items=0, value_samples=False).settings().frequent_items == 0
    for bad in (-1, 7, 1001):
        with pytest.raises(ValueError, match="frequent_items"):
            SketchConfig(frequent_items=bad)
        with pytest.raises(ConfigError, match=r"sketch\.frequent_items must be 0 \(none\)"):
            validate_sketch_settings(SketchSettings(frequent_items=bad))
    with pytest.raises(ConfigError, match=r"sketch\.value_samples must be true or false"):
        validate_sketch_settings(SketchSettings(value_samples="yes"))  # type: ignore[arg-type]


def test_map_sizes_are_sparks() -> None:
    # measured on Spark 4.3: epsilon 3.5 / slots of approx_top_k_accumulate's sketch
    assert [1 << lg_map_size(n) for n in (8, 64, 256, 512, 1000)] == [16, 128, 512, 1024, 2048]


def test_merging_keeps_the_larger_map() -> None:
    small, large = frequent_items_sketch(9), frequent_items_sketch(11)
    small.update(1.0, 5)
    large.update(2.0, 7)
    serde = PyDoublesSerDe()
    merged = merge_frequent_items([bytes(small.serialize(serde)), bytes(large.serialize(serde))])
    assert merged is not None
    out = frequent_items_sketch.deserialize(merged, serde)
    assert out.epsilon == pytest.approx(3.5 / 2048)
    assert (out.get_estimate(1.0), out.get_estimate(2.0)) == (5, 7)


@pytest.mark.spark
def test_the_job_keeps_what_the_settings_ask(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "f.parquet")
    longs = [i % 300 for i in range(3000)]
    doubles = [math.nan if i % 10 == 0 else float(i % 40) for i in range(3000)]
    schema = pa.schema(
        [
            pa.field("n", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
            pa.field("x", pa.float64(), metadata={b"PARQUET:field_id": b"2"}),
        ]
    )
    pq.write_table(pa.table([longs, doubles], schema=schema), path)
    runs = {
        name: sketch_files(spark, [path], SCHEMA, settings)[path]
        for name, settings in (
            ("on", SketchSettings(theta_lg_k=5, frequent_items=256, value_samples=True)),
            ("off", SketchSettings(theta_lg_k=5, frequent_items=0, value_samples=False)),
        )
    }
    default, off = runs["on"], runs["off"]
    for field_id in (1, 2):
        assert off[field_id].value_sample is None and off[field_id].frequent_items is None
        assert default[field_id].value_sample is not None
        # the theta sketch does not depend on where it came from
        assert default[field_id].theta == off[field_id].theta
    assert len(load_value_sample(default[1].value_sample or b"").values) == 32  # lgK 5
    sketch = frequent_items_sketch.deserialize(default[1].frequent_items, PyDoublesSerDe())
    assert sketch.epsilon == pytest.approx(3.5 / 512)  # 256 tracked: Spark's 512 slots
    assert sketch.get_estimate(7.0) == 10  # 300 values over 512 slots: exact
