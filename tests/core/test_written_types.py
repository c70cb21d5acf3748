"""``sketch_files(retyped=...)``: files written with other column types than the schema's
are read with theirs and cast to the current ones inside the one Spark job.

The oracle: the same values cast by hand (Python's truncation, ``"true"``/``"false"``,
decimal digits) written natively with the current types — the sketches must be equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.exceptions import SketchError
from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import JOB_GROUP, sketch_files

pytestmark = pytest.mark.spark

SETTINGS = SketchSettings()
SCHEMA = TableSchema(3, (Column(1, "d", "int"), Column(2, "b", "string"), Column(3, "i", "string")))
DOUBLES = [1.5, -2.7, None, 99.99, 7.0, -0.4]
BOOLEANS = [True, False, None, True, True, False]
INTS = [10, None, -3, 10, 123456, 0]
WRITTEN = ((1, "double"), (2, "boolean"), (3, "int"))


def _write(path: Path, columns: dict[str, tuple[int, pa.DataType, list[Any]]]) -> str:
    fields = [
        pa.field(name, t, metadata={b"PARQUET:field_id": str(fid).encode()})
        for name, (fid, t, _) in columns.items()
    ]
    arrays = [pa.array(values, type=t) for _, t, values in columns.values()]
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)
    return str(path)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@pytest.fixture(scope="module")
def sketched(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("retyped")
    old = _write(
        root / "old.parquet",
        {
            "d": (1, pa.float64(), DOUBLES),
            "b": (2, pa.bool_(), BOOLEANS),
            "i": (3, pa.int32(), INTS),
        },
    )
    half = _write(  # only one column changed since this one was written
        root / "half.parquet",
        {
            "d": (1, pa.float64(), DOUBLES),
            "b": (2, pa.string(), ["x", None, "y", "", "z", "x"]),
            "i": (3, pa.string(), ["a", "b", None, "c", "d", "e"]),
        },
    )
    cast = _write(  # what the old file holds, cast by hand, written with the current types
        root / "cast.parquet",
        {
            "d": (1, pa.int32(), [None if v is None else int(v) for v in DOUBLES]),
            "b": (2, pa.string(), [_text(v) for v in BOOLEANS]),
            "i": (3, pa.string(), [_text(v) for v in INTS]),
        },
    )
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(JOB_GROUP))
    result = sketch_files(
        spark,
        [old, half, cast],
        SCHEMA,
        SETTINGS,
        retyped={old: WRITTEN, half: ((1, "double"),)},
    )
    jobs = set(tracker.getJobIdsForGroup(JOB_GROUP)) - before
    return {"result": result, "jobs": jobs, "old": old, "half": half, "cast": cast}


def test_retyped_files_are_read_in_the_one_job(sketched: dict[str, Any]) -> None:
    assert len(sketched["jobs"]) == 1
    assert set(sketched["result"]) == {sketched["old"], sketched["half"], sketched["cast"]}


def test_a_retyped_file_sketches_as_its_values_cast_to_the_current_types(
    sketched: dict[str, Any],
) -> None:
    old, cast = sketched["result"][sketched["old"]], sketched["result"][sketched["cast"]]
    assert old == cast
    assert (old[1].min, old[1].max, old[1].null_count) == (-2, 99, 1)
    assert (old[2].min, old[2].max) == ("false", "true")
    assert (old[3].min, old[3].max) == ("-3", "123456")


def test_files_grouped_by_their_written_types(sketched: dict[str, Any]) -> None:
    half = sketched["result"][sketched["half"]]
    assert half[1] == sketched["result"][sketched["cast"]][1]
    assert (half[2].min, half[2].max, half[2].null_count) == ("", "z", 1)
    assert (half[3].min, half[3].max) == ("a", "e")


def test_a_column_written_as_an_unreadable_type_is_one_line(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "x.parquet", {"d": (1, pa.float64(), [1.0])})
    schema = TableSchema(1, (Column(1, "d", "int"),))
    with pytest.raises(SketchError, match="written as 'no-such-type'") as raised:
        sketch_files(spark, [path], schema, SETTINGS, retyped={path: ((1, "no-such-type"),)})
    assert "\n" not in str(raised.value)
