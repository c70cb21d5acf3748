"""Reading position-delete files on the driver: Parquet and ORC alike, clear errors else.

Real files written by pyarrow's Parquet and ORC writers (the formats Java writers use for
delete files), with a column beside ``file_path``/``pos`` as Iceberg allows (``row``);
no Spark.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

from lakestats.deletes.positions import read_position_file
from lakestats.exceptions import DataFileError
from lakestats.model import PositionDeletes

ROWS = pa.table(
    {
        "file_path": ["file:///t/a.parquet", "file:///t/a.parquet", "file:///t/b.parquet"],
        "pos": pa.array([0, 7, 3], pa.int64()),
        "row": ["x", "y", "z"],
    }
)


@pytest.mark.parametrize("file_format", ["PARQUET", "orc"])
def test_parquet_and_orc_files_read_the_same_two_columns(tmp_path: Path, file_format: str) -> None:
    path = tmp_path / f"deletes.{file_format.lower()}"
    if file_format == "PARQUET":
        pq.write_table(ROWS, path)
    else:
        orc.write_table(ROWS, path)
    for name in (str(path), path.as_uri()):  # plain path and file: URI
        got = read_position_file(PositionDeletes(path=name, file_format=file_format))
        assert got.column_names == ["file_path", "pos"]
        assert got.column("file_path").to_pylist() == ROWS.column("file_path").to_pylist()
        assert got.column("pos").to_pylist() == [0, 7, 3]


def test_an_avro_delete_file_is_refused_in_one_line(tmp_path: Path) -> None:
    path = str(tmp_path / "deletes.avro")
    with pytest.raises(DataFileError, match=r"deletes\.avro is AVRO: .*Parquet and ORC") as err:
        read_position_file(PositionDeletes(path=path, file_format="AVRO"))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("file_format", ["PARQUET", "ORC"])
def test_an_unreadable_delete_file_names_itself_in_one_line(
    tmp_path: Path, file_format: str
) -> None:
    path = tmp_path / "broken"
    path.write_bytes(b"not a delete file at all")
    with pytest.raises(DataFileError, match=r"cannot read position-delete file .*broken: ") as err:
        read_position_file(PositionDeletes(path=str(path), file_format=file_format))
    assert "\n" not in str(err.value)
    missing = PositionDeletes(path=str(tmp_path / "gone.parquet"), file_format=file_format)
    with pytest.raises(DataFileError, match=r"cannot read position-delete file .*gone\.parquet"):
        read_position_file(missing)


def test_each_files_dead_rows_are_the_sql_jobs_positions(tmp_path: Path) -> None:
    """``dead_rows_by_file`` (the Arrow engine, one delete source at a time) holds for each
    data file exactly the positions ``positions_table`` (the SQL job's table) gives it:
    a delete file naming two data files and one it is not attached to, repeats, positions
    past the end, and a deletion vector on a file that also has a delete file."""
    from pyroaring import BitMap64

    from lakestats.deletes.plan import plan_live_read
    from lakestats.deletes.positions import FID, POS, dead_rows_by_file, positions_table
    from lakestats.locations import LocationMap
    from lakestats.model import DeletionVector

    a, b, c = (f"file:///t/{n}.parquet" for n in "abc")
    first, second = tmp_path / "d1.parquet", tmp_path / "d2.parquet"
    pq.write_table(
        pa.table(
            {
                "file_path": [a, a, b, b, c, a],
                "pos": pa.array([5, 2, 9, 9, 1, 10**6], pa.int64()),
            }
        ),
        first,
    )
    pq.write_table(pa.table({"file_path": [b], "pos": pa.array([0], pa.int64())}), second)
    one = PositionDeletes(path=str(first), file_format="PARQUET")
    two = PositionDeletes(path=str(second), file_format="PARQUET")
    dense = BitMap64(range(0, 4000, 3))
    vector = DeletionVector(dense.serialize(), len(dense))
    plan = plan_live_read({a: (one,), b: (one, two, vector), c: ()})  # c: not attached

    dead, pairs = dead_rows_by_file(plan, LocationMap())

    table = positions_table(plan, LocationMap())
    want = {n: set() for n in range(3)}
    for fid, pos in zip(table.column(FID).to_pylist(), table.column(POS).to_pylist(), strict=True):
        want[fid].add(pos)
    assert pairs == table.num_rows == 5 + 1 + len(dense)
    assert [d.to_positions().tolist() for d in dead] == [sorted(want[n]) for n in range(3)]
    assert dead[0].to_positions().tolist() == [2, 5, 10**6] and len(dead[2]) == 0
    assert dead[1].bits is not None  # one row in three dead: a bitmap
    assert dead[0].count_below(6) == 2 and dead[1].count_below(4) == 2  # rows 0 and 3


def test_a_delete_file_naming_none_of_the_jobs_files_kills_nothing(tmp_path: Path) -> None:
    from lakestats.deletes.plan import plan_live_read
    from lakestats.deletes.positions import dead_rows_by_file
    from lakestats.locations import LocationMap

    path = tmp_path / "elsewhere.parquet"
    pq.write_table(pa.table({"file_path": ["file:///other.parquet"], "pos": [1]}), path)
    deletes = PositionDeletes(path=str(path), file_format="PARQUET")

    dead, pairs = dead_rows_by_file(
        plan_live_read({"file:///t/a.parquet": (deletes,)}), LocationMap()
    )

    assert pairs == 0 and [len(d) for d in dead] == [0]


def test_a_negative_position_is_named_with_its_delete_file(tmp_path: Path) -> None:
    from lakestats.deletes.plan import plan_live_read
    from lakestats.deletes.positions import dead_rows_by_file
    from lakestats.locations import LocationMap

    path = tmp_path / "hostile.parquet"
    pq.write_table(pa.table({"file_path": ["file:///t/a.parquet"] * 2, "pos": [3, -2]}), path)
    deletes = PositionDeletes(path=str(path), file_format="PARQUET")
    plan = plan_live_read({"file:///t/a.parquet": (deletes,)})

    with pytest.raises(DataFileError, match=r"hostile\.parquet holds a negative row position"):
        dead_rows_by_file(plan, LocationMap())
