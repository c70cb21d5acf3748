"""``sketch_files(written_as=...)``: files written with other column types or names than
the schema's are read with theirs, cast and renamed to the current ones inside the one
Spark job.

The oracle: the same values cast by hand (Python's truncation, ``"true"``/``"false"``,
decimal digits) written natively with the current types and names — the sketches must be
equal.
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
from lakestats.written_types import ABSENT, read_by_field_id, written_as

pytestmark = pytest.mark.spark

SETTINGS = SketchSettings()
SCHEMA = TableSchema(3, (Column(1, "d", "int"), Column(2, "b", "string"), Column(3, "i", "string")))
DOUBLES = [1.5, -2.7, None, 99.99, 7.0, -0.4]
BOOLEANS = [True, False, None, True, True, False]
INTS = [10, None, -3, 10, 123456, 0]
WRITTEN = ((1, "d", "double"), (2, "b", "boolean"), (3, "i", "int"))


def _write(
    path: Path, columns: dict[str, tuple[int, pa.DataType, list[Any]]], *, field_ids: bool = True
) -> str:
    fields = [
        pa.field(name, t, metadata={b"PARQUET:field_id": str(fid).encode()} if field_ids else None)
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
        written_as={old: WRITTEN, half: ((1, "d", "double"),)},
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
        sketch_files(
            spark, [path], schema, SETTINGS, written_as={path: ((1, "d", "no-such-type"),)}
        )
    assert "\n" not in str(raised.value)


def test_files_without_field_ids_are_read_by_the_names_they_were_written_with(
    spark: Any, tmp_path: Path
) -> None:
    """Two columns whose names were swapped since (Paimon renames; pypaimon's files have
    no field ids): each column is read from the one it was written as, renamed, and one of
    them cast from its written type."""
    schema = TableSchema(2, (Column(1, "x", "long"), Column(2, "y", "string")))
    firsts, seconds = [5, None, -7, 12], ["a", "b", None, "dd"]
    old = _write(
        tmp_path / "old.parquet",
        {"y": (1, pa.int32(), firsts), "x": (2, pa.string(), seconds)},
        field_ids=False,
    )
    now = _write(
        tmp_path / "now.parquet",
        {"x": (1, pa.int64(), firsts), "y": (2, pa.string(), seconds)},
        field_ids=False,
    )
    written = ((1, "y", "int"), (2, "x", "string"))
    got = sketch_files(spark, [old, now], schema, SETTINGS, written_as={old: written})
    assert got[old] == got[now]
    assert (got[old][1].min, got[old][1].max, got[old][1].null_count) == (-7, 12, 1)
    assert (got[old][2].min, got[old][2].max, got[old][2].null_count) == ("a", "dd", 1)


def test_written_as_names_what_a_reader_must_know_of_a_file() -> None:
    written = {1: ("a", "int"), 2: ("b", "string"), 3: ("gone", "long"), 4: ("G", "string")}
    current = {
        1: ("a", "long"),  # retyped
        2: ("c", "string"),  # renamed
        5: ("g", "long"),  # added since under a name the file has (any case): absent
        6: ("new", "int"),  # added since under a name it has not: found by no name
    }
    expected = ((1, "a", "int"), (2, "b", "string"), (5, ABSENT, "long"))
    assert written_as(written, current) == expected
    same = {1: ("a", "int"), 2: ("b", "string")}
    assert written_as(same, same) == ()
    # a file with field ids is found by them: only other types matter, under the current
    # names (its old ones may be other columns' now: s0 and s1 swapped)
    by_id = read_by_field_id(
        ((1, "a", "int"), (2, "b", "string"), (5, ABSENT, "long"), (7, "s1", "string")),
        {**current, 4: ("s1", "binary"), 7: ("s0", "binary")},
    )
    assert by_id == ((1, "a", "int"), (7, "s0", "string"))


def test_a_column_absent_from_a_file_reads_as_null_not_as_its_namesake(
    spark: Any, tmp_path: Path
) -> None:
    """``g`` dropped (a string) and added again (a long): a file written before has the
    old ``g`` only, which must not be read as the new one (Spark cannot even convert it)."""
    schema = TableSchema(2, (Column(1, "id", "long"), Column(5, "g", "long")))
    old = _write(
        tmp_path / "old.parquet",
        {"id": (1, pa.int64(), [1, 2, 3]), "g": (4, pa.string(), ["x", "y", "z"])},
        field_ids=False,
    )
    got = sketch_files(spark, [old], schema, SETTINGS, written_as={old: ((5, ABSENT, "long"),)})
    assert got[old][5].null_count == 3 and got[old][5].min is None
    assert (got[old][1].min, got[old][1].max) == (1, 3)
