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
