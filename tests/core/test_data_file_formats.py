"""Data files in ORC are sketched by Spark too; Avro data files are refused clearly.

pyiceberg writes Parquet only, so the tables here are pyiceberg tables whose manifest entry
is then pointed at an ORC (or Avro) copy of the same rows, as a Java writer with
``write.format.default=orc`` would have listed it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import orc
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list

from lakestats.cli import main
from lakestats.locations import local_path
from lakestats.testing import IcebergWarehouse, exact_stats
from lakestats.values import to_json

ROWS = pa.table(
    {
        "id": pa.array(range(200), pa.int64()),
        "name": pa.array([f"n{i % 37}" if i % 11 else None for i in range(200)]),
        "score": pa.array([i / 7 for i in range(200)], pa.float64()),
    }
)


def local(path: str) -> Path:
    found = local_path(path)
    assert found is not None
    return found


def _repoint(wh: IcebergWarehouse, file_format: str) -> pa.Table:
    """Point the table's one data file entry at a copy of its rows in ``file_format``."""
    table = wh.table("t")
    snapshot = table.current_snapshot()
    assert snapshot is not None
    (manifest,) = read_manifest_list(PyArrowFileIO().new_input(snapshot.manifest_list))
    path = local(manifest.manifest_path)
    with path.open("rb") as handle:
        reader = fastavro.reader(handle)
        schema = json.loads(reader.metadata["avro.schema"])
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        entries = list(reader)
        codec = reader.codec
    (entry,) = entries
    data_file = entry["data_file"]
    parquet_path = local(data_file["file_path"])
    rows = pq.read_table(parquet_path)
    copy = parquet_path.with_suffix("." + file_format.lower())
    if file_format == "ORC":
        orc.write_table(rows, str(copy))
    else:
        copy.write_bytes(b"Obj\x01 not really avro")
    data_file["file_path"] = copy.as_uri()
    data_file["file_format"] = file_format
    data_file["file_size_in_bytes"] = copy.stat().st_size
    parquet_path.unlink()  # only the new copy can be read
    with path.open("wb") as handle:
        fastavro.writer(handle, schema, entries, metadata=meta, codec=codec)
    return rows


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


@pytest.mark.spark
def test_orc_data_files_are_sketched(spark: Any, tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", ROWS.schema)
    wh.append("t", ROWS)
    exact = exact_stats(wh.table("t"))
    _repoint(wh, "ORC")
    loc, state = wh.location("t"), str(tmp_path / "stats")
    code, text = cli("analyze", loc, "--state-dir", state, "-q")
    assert code == 0, text
    code, text = cli("show", loc, "--state-dir", state, "--json")
    doc = json.loads(text)
    assert doc["record_count"] == 200
    for name, want in exact["columns"].items():
        got = doc["columns"][name]
        assert got["sketch"]["sketched_files"] == 1, name
        assert got["null_count"] == want["null_count"], name
        assert (got["min"], got["max"]) == (to_json(want["min"]), to_json(want["max"])), name
    assert doc["columns"]["id"]["ndv"] == 200
    assert doc["columns"]["name"]["ndv"] == 37


def test_avro_data_files_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", ROWS.schema)
    wh.append("t", ROWS)
    _repoint(wh, "AVRO")
    loc, state = wh.location("t"), str(tmp_path / "stats")
    # a sketcher is never started: the refusal comes before any Spark job
    from lakestats.analyze import analyze_table
    from lakestats.config import Config
    from lakestats.exceptions import DataFileError

    config = Config.model_validate({"state_dir": state})

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no data file may be read")

    with pytest.raises(DataFileError, match=r"is Avro: .*--no-sketches") as raised:
        analyze_table(loc, config=config, sketcher=never)
    assert "\n" not in str(raised.value)
    code, text = cli("analyze", loc, "--state-dir", state, "--no-sketches", "-q")
    assert code == 0, text
