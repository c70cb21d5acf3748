"""A primary key's theta sketches from the Arrow engine against the SQL job's, byte for byte.

Real Parquet files with Paimon's layout (field ids, the ``_VALUE_KIND`` row-kind column,
keys of every type the engine builds, NULL parts, empty strings, +I/-U/+U/-D rows) and
one without field ids (pypaimon's); ``sketch_files`` with ``engine="sql"`` and
``"auto"`` must give identical ``KEY_SKETCH_ID`` and ``RETRACTED_KEY_SKETCH_ID`` bytes,
in exact and in estimation mode.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from structlog.testing import capture_logs

from lakestats.arrow_sketch.key_sketch import key_values
from lakestats.model import (
    KEY_SKETCH_ID,
    RETRACTED_KEY_SKETCH_ID,
    Column,
    KeySketch,
    SketchSettings,
    TableSchema,
)
from lakestats.pipeline import sketch_files
from lakestats.sketches.key import key_bytes
from lakestats.sketches.merge import theta_estimate

pytestmark = pytest.mark.spark

KIND_ID = 2147483646  # Paimon's _VALUE_KIND field id
SETTINGS = SketchSettings(theta_lg_k=5)  # 32 entries: small files reach estimation mode
COLUMNS = (
    (1, "k_int", "int", pa.int32()),
    (2, "k_long", "long", pa.int64()),
    (3, "k_str", "string", pa.string()),
    (4, "k_date", "date", pa.date32()),
    (5, "k_ts", "timestamp", pa.timestamp("us")),
    (6, "k_bin", "binary", pa.binary()),
    (7, "k_bool", "boolean", pa.bool_()),
    (8, "k_uuid", "uuid", pa.binary(16)),
)


def _values(rng: random.Random, type_str: str, n: int) -> list[Any]:
    def one(i: int) -> Any:
        if rng.random() < 0.1:
            return None
        pick = rng.randrange(60)
        return {
            "int": pick - 6,
            "long": (pick - 6) * 2**40,
            "string": "" if pick == 0 else f"s{pick}é",
            "date": dt.date(1969, 12, 25) + dt.timedelta(days=pick),
            "timestamp": dt.datetime(1969, 12, 31, 23) + dt.timedelta(minutes=7 * pick),
            "binary": bytes(range(pick)),
            "boolean": pick % 2 == 0,
            "uuid": uuid.UUID(int=pick).bytes,
        }[type_str]

    return [one(i) for i in range(n)]


def _write(path: Path, rows: int, seed: int, *, with_ids: bool) -> None:
    rng = random.Random(seed)
    fields, arrays = [], []
    for field_id, name, type_str, arrow in COLUMNS:
        metadata = {b"PARQUET:field_id": str(field_id).encode()} if with_ids else None
        fields.append(pa.field(name, arrow, metadata=metadata))
        arrays.append(pa.array(_values(rng, type_str, rows), arrow))
    kind_meta = {b"PARQUET:field_id": str(KIND_ID).encode()} if with_ids else None
    fields.append(pa.field("_VALUE_KIND", pa.int8(), metadata=kind_meta))
    arrays.append(pa.array([rng.choice([0, 0, 1, 2, 3]) for _ in range(rows)], pa.int8()))
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)


def _schema(key_ids: tuple[int, ...], retract_kinds: tuple[int, ...]) -> TableSchema:
    return TableSchema(
        schema_id=0,
        columns=tuple(Column(fid, name, t) for fid, name, t, _ in COLUMNS),
        key=KeySketch(
            field_ids=key_ids,
            row_kind_column="_VALUE_KIND",
            row_kind_field_id=KIND_ID,
            non_add_kinds=(1, 3),
            retract_kinds=retract_kinds,
        ),
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("keys")
    paths = []
    for n, (rows, with_ids) in enumerate([(300, True), (40, True), (250, False)]):
        path = root / f"f{n}.parquet"
        _write(path, rows, seed=n, with_ids=with_ids)
        paths.append(str(path))
    return paths


KEYS = {
    "every type": ((1, 2, 3, 4, 5, 6, 7, 8), (3,)),
    "one long": ((2,), (1, 3)),
    "string then int": ((3, 1), ()),
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_key_sketches_are_the_sql_jobs_bytes(spark: Any, files: list[str], name: str) -> None:
    key_ids, retract_kinds = KEYS[name]
    schema = _schema(key_ids, retract_kinds)
    sql = sketch_files(spark, files, schema, SETTINGS, engine="sql")
    with capture_logs() as logs:
        arrow = sketch_files(spark, files, schema, SETTINGS, engine="auto")

    sketched = [e for e in logs if e["event"] == "arrow_engine_sketched"]
    assert sketched and sketched[0]["files"] == len(files) and sketched[0]["declined"] == 0
    ids = [KEY_SKETCH_ID, RETRACTED_KEY_SKETCH_ID] if retract_kinds else [KEY_SKETCH_ID]
    for path in files:
        for sketch_id in ids:
            assert arrow[path][sketch_id].theta == sql[path][sketch_id].theta, (path, sketch_id)
        assert RETRACTED_KEY_SKETCH_ID in arrow[path] if retract_kinds else True
    estimates = [theta_estimate(arrow[p][KEY_SKETCH_ID].theta) for p in files]
    assert max(estimates) > 2**SETTINGS.theta_lg_k  # estimation mode reached


def test_key_values_built_in_pieces_are_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys are copied a piece of rows at a time (bounded memory): pieces of 5 rows give
    the bytes of one piece, NULLs, empty strings and an offset included."""
    from lakestats.arrow_sketch import key_sketch

    strings = pa.array([None if i % 7 == 0 else "x" * (i % 4) for i in range(123)]).slice(2)
    longs = pa.array([None if i % 5 == 0 else i * 10**9 for i in range(123)]).slice(2)
    columns = [(strings, "string"), (longs, "long")]
    at_once = key_values(columns).to_pylist()
    monkeypatch.setattr(key_sketch, "_ROWS_AT_A_TIME", 5)
    assert key_values(columns).to_pylist() == at_once
    assert len(set(at_once)) > 30


def test_key_values_are_the_documented_bytes() -> None:
    ints = pa.array([1, None, -5], pa.int32())
    strings = pa.array(["a", "bc", None], pa.string())
    longs = pa.array([2**40, None, -1], pa.int64())

    got = key_values([(ints, "int"), (strings, "string"), (longs, "long")]).to_pylist()

    def be(value: int, width: int) -> bytes:
        return value.to_bytes(width, "big", signed=True)

    assert got == [
        key_bytes([be(1, 4), b"a", be(2**40, 8)]),
        key_bytes([None, b"bc", None]),
        key_bytes([be(-5, 4), None, be(-1, 8)]),
    ]
