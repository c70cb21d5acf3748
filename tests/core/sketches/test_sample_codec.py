"""The value-sample codec (``sketches.sample_codec``) and the theta sketch derived from it.

* ``union`` writes exactly the bytes of the DataSketches tuple union (the reference,
  ``library_union_value_samples``) on random inputs of every shape: empty, one entry,
  exact, estimating, mixed lgK; ``parse`` reads the same entries as the library.
* The sketch job no longer runs ``theta_sketch_agg`` for NaN-free sampled columns: their
  theta sketch is the value sample's keys. Proven here byte for byte against the theta
  sketch Spark's own ``theta_sketch_agg`` computes over the same spec-hash input (what the
  job published before), per type and per file: all-null, one value, exact, estimating.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasketches import update_tuple_sketch

from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import _job_session, canonical_path, sketch_files
from lakestats.sketches import sample_codec
from lakestats.sketches.hashing import theta_input_sql
from lakestats.sketches.merge import normalize_theta
from lakestats.sketches.spec import type_spec
from lakestats.sketches.value_sample import (
    _load,
    _MinPolicy,
    _serde,
    empty_value_sample,
    library_union_value_samples,
    sample_carries_theta,
    union_value_samples,
)


def _random_sample(rng: random.Random, rows: int, lg_k: int, distinct: int) -> bytes:
    sketch = update_tuple_sketch(_MinPolicy(), lg_k, seed=9001)
    for _ in range(rows):
        key = rng.randrange(distinct)
        sketch.update(key, float(key % 97) - rng.random())
    return bytes(sketch.compact().serialize(_serde()))


def test_union_writes_the_librarys_bytes() -> None:
    rng = random.Random(14)
    for _ in range(200):
        blobs = [
            _random_sample(
                rng,
                rng.choice([0, 1, 2, 10, 40, 500, 3000]),
                rng.choice([5, 8, 12]),
                rng.choice([3, 50, 1000, 10**6]),
            )
            for _ in range(rng.randint(1, 4))
        ]
        if rng.random() < 0.2:
            blobs.append(empty_value_sample(12))
        lg_k = rng.choice([5, 6, 8, 12])
        assert union_value_samples(blobs, lg_k) == library_union_value_samples(blobs, lg_k)


def test_parse_reads_the_librarys_entries() -> None:
    blob = _random_sample(random.Random(3), 5000, 8, 10**6)
    parsed = sample_codec.parse(blob)
    sketch = _load(blob)
    assert sorted((int(h), float(v)) for h, v in sketch) == list(
        zip(parsed.hashes.tolist(), parsed.values.tolist(), strict=True)
    )
    assert parsed.theta64 == int(sketch.theta64)
    assert parsed.theta64 < sample_codec.MAX_THETA  # estimating: theta was read


# -- the theta sketch derived from the sample equals Spark's theta_sketch_agg ----------

LG_K = 5  # 32: the 150-distinct files estimate
_UTC = dt.UTC
_TYPES: list[tuple[str, pa.DataType, Any]] = [
    ("int", pa.int32(), lambda n: n - 1000),
    ("long", pa.int64(), lambda n: n * 7_919_000_003),
    ("decimal(15, 2)", pa.decimal128(15, 2), lambda n: Decimal(n * 37 - 5000).scaleb(-2)),
    ("decimal(38, 4)", pa.decimal128(38, 4), lambda n: Decimal(n * 10**25 + n).scaleb(-4)),
    ("date", pa.date32(), lambda n: dt.date(1900, 1, 1) + dt.timedelta(days=n * 3)),
    (
        "timestamptz",
        pa.timestamp("us", tz="UTC"),
        lambda n: dt.datetime(2020, 1, 1, tzinfo=_UTC) + dt.timedelta(seconds=n * 61),
    ),
]
# per file: rows, distinct values (0: every value null)
_FILES = [(5, 0), (20, 1), (60, 20), (400, 150)]


@pytest.mark.spark
def test_derived_theta_equals_sparks_theta_sketch(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(9)
    columns = [Column(i, f"c{i}", t) for i, (t, _a, _v) in enumerate(_TYPES, start=1)]
    settings = SketchSettings(theta_lg_k=LG_K, value_samples=True)
    specs = [type_spec(c.type) for c in columns]
    assert all(spec is not None and sample_carries_theta(spec, settings) for spec in specs)
    paths = []
    for f, (rows, distinct) in enumerate(_FILES):
        arrays, fields = [], []
        for column, (_t, arrow_type, value) in zip(columns, _TYPES, strict=True):
            data = [value(rng.randrange(distinct)) if distinct else None for _ in range(rows)]
            meta = {b"PARQUET:field_id": str(column.field_id).encode()}
            fields.append(pa.field(column.name, arrow_type, metadata=meta))
            arrays.append(pa.array(data, type=arrow_type))
        path = str(tmp_path / f"f{f}.parquet")
        pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)
        paths.append(path)
    sketched = sketch_files(spark, paths, TableSchema(1, tuple(columns)), settings)

    # what the job computed before: theta_sketch_agg over the same spec-hash input
    session = _job_session(spark)
    aggregates = ", ".join(
        f"theta_sketch_agg({theta_input_sql(c.type, c.name)}, {LG_K}) AS t{c.field_id}"
        for c in columns
    )
    view = session.read.parquet(*paths).selectExpr("_metadata.file_path AS path", "*")
    view.createOrReplaceTempView("derived_theta_check")
    rows = session.sql(
        f"SELECT path, {aggregates} FROM derived_theta_check GROUP BY path"  # noqa: S608
    ).collect()
    by_path = {canonical_path(p): p for p in paths}
    assert len(rows) == len(paths)
    estimating = 0
    for row in rows:
        per_column = sketched[by_path[canonical_path(row["path"])]]
        for column in columns:
            expected = normalize_theta(bytes(row[f"t{column.field_id}"]))
            assert per_column[column.field_id].theta == expected, (row["path"], column.type)
            sample = sample_codec.parse(per_column[column.field_id].value_sample or b"")
            estimating += sample.theta64 < sample_codec.MAX_THETA
    assert estimating == len(columns)  # the 150-distinct file estimates in every column
