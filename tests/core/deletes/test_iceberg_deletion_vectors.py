"""Iceberg v3 deletion vectors: Puffin ``deletion-vector-v1`` blobs decoded and attached.

No writer here can produce v3 deletion vectors (pyiceberg 0.12 writes manifests up to
v2), so the Puffin file is built byte by byte as the spec lays it out, and pyiceberg's
own Puffin reader is the independent decoder. The sketch job's use of the decoded vector
is covered end to end by ``test_live_rows.py``.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.typedef import Record
from pyroaring import BitMap64

from lakestats.cli import main
from lakestats.exceptions import MetadataError
from lakestats.formats.iceberg.deletes import DeleteIndex, TargetCache, read_vector
from lakestats.formats.iceberg.manifests import ManifestReader
from lakestats.model import UNPARTITIONED, DeletionVector

MAGIC = b"PFA1"
DV_MAGIC = bytes.fromhex("D1D33964")
VECTORS = {"/wh/data/a.parquet": [0, 3, 1 << 33], "/wh/data/b.parquet": [7]}


def _blob(positions: list[int]) -> bytes:
    body = DV_MAGIC + BitMap64(positions).serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def _puffin(path: Path) -> dict[str, tuple[int, int]]:
    """Write a Puffin file with one vector per data file; their (offset, length)."""
    content = bytearray(MAGIC)
    where: dict[str, tuple[int, int]] = {}
    blobs = []
    for data_path, positions in VECTORS.items():
        blob = _blob(positions)
        where[data_path] = (len(content), len(blob))
        blobs.append(
            {
                "type": "deletion-vector-v1",
                "fields": [2147483645],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": len(content),
                "length": len(blob),
                "properties": {
                    "referenced-data-file": data_path,
                    "cardinality": str(len(positions)),
                },
            }
        )
        content += blob
    footer = json.dumps({"blobs": blobs}).encode()
    content += MAGIC + footer + struct.pack("<i", len(footer)) + bytes(4) + MAGIC
    path.write_bytes(bytes(content))
    return where


def _entry(data_file: DataFile, sequence_number: int) -> ManifestEntry:
    return ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED,
        snapshot_id=1,
        sequence_number=sequence_number,
        file_sequence_number=sequence_number,
        data_file=data_file,
    )


def _vector_entry(puffin: Path, data_path: str, where: tuple[int, int], seq: int) -> ManifestEntry:
    data_file = DataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.POSITION_DELETES,
        file_path=str(puffin),
        file_format=FileFormat.PUFFIN,
        partition=Record(),
        record_count=len(VECTORS[data_path]),
        file_size_in_bytes=puffin.stat().st_size,
        referenced_data_file=data_path,
        content_offset=where[0],
        content_size_in_bytes=where[1],
    )
    return _entry(data_file, seq)


def _data_entry(path: str, seq: int) -> ManifestEntry:
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=10,
        file_size_in_bytes=100,
    )
    return _entry(data_file, seq)


def test_vectors_decode_as_pyiceberg_reads_them(tmp_path: Path) -> None:
    puffin = tmp_path / "deletes.puffin"
    where = _puffin(puffin)
    reader = ManifestReader(PyArrowFileIO())
    expected = {
        dv.referenced_data_file: sorted(dv.to_vector().to_pylist())
        for dv in deletion_vectors_from_puffin_file(PuffinFile(puffin.read_bytes()))
    }
    for data_path, place in where.items():
        vector = read_vector(reader, _vector_entry(puffin, data_path, place, 1))
        assert isinstance(vector, DeletionVector)
        assert sorted(BitMap64.deserialize(vector.bitmap)) == expected[data_path]
        assert vector.cardinality == len(VECTORS[data_path])


def test_a_vector_applies_to_its_file_when_not_older(tmp_path: Path) -> None:
    puffin = tmp_path / "deletes.puffin"
    where = _puffin(puffin)
    reader = ManifestReader(PyArrowFileIO())
    a, b = VECTORS
    index = DeleteIndex(
        [_vector_entry(puffin, a, where[a], 5), _vector_entry(puffin, b, where[b], 5)],
        _NoPartitions(),  # type: ignore[arg-type]
        reader,
        0,
        TargetCache(),
    )
    (applies,) = index.applying(_data_entry(a, 5), UNPARTITIONED)
    (source,) = index.sources([applies])
    assert isinstance(source, DeletionVector)
    assert list(BitMap64.deserialize(source.bitmap)) == VECTORS[a]
    assert index.applying(_data_entry(a, 6), UNPARTITIONED) == []  # written after the vector
    assert index.applying(_data_entry("/wh/data/c.parquet", 1), UNPARTITIONED) == []


def test_a_damaged_vector_is_refused(tmp_path: Path) -> None:
    puffin = tmp_path / "deletes.puffin"
    where = _puffin(puffin)
    a = next(iter(VECTORS))
    damaged = bytearray(puffin.read_bytes())
    damaged[where[a][0] + 12] ^= 0xFF  # a byte of the bitmap: the CRC no longer matches
    puffin.write_bytes(bytes(damaged))
    with pytest.raises(MetadataError, match="CRC"):
        read_vector(ManifestReader(PyArrowFileIO()), _vector_entry(puffin, a, where[a], 1))


class _NoPartitions:
    """The converter's partition lookup for an unpartitioned table (all DeleteIndex asks)."""

    def partition_key(self, data_file: DataFile, schema_id: int) -> object:
        return UNPARTITIONED


V3_TABLE = (
    Path(__file__).resolve().parents[2] / "data" / "iceberg-v3-dv" / "iceberg_v3_deletion_vectors"
)


@pytest.mark.spark
@pytest.mark.parametrize("sketches", [True, False])
def test_a_real_v3_table_with_deletion_vectors(spark: Any, tmp_path: Path, sketches: bool) -> None:
    """Spark wrote it (Impala's test data): rows 1, 3, 5 live, with or without sketches."""
    args = [
        str(V3_TABLE),
        "--state-dir",
        str(tmp_path / "stats"),
        "--map-location",
        f"hdfs://localhost:20500/test-warehouse/iceberg_v3_deletion_vectors={V3_TABLE}",
    ]
    out = io.StringIO()
    assert main(["analyze", *args, "-q", *([] if sketches else ["--no-sketches"])], out=out) == 0
    shown = io.StringIO()
    assert main(["show", *args, "--json"], out=shown) == 0
    doc = json.loads(shown.getvalue())
    assert (doc["record_count"], doc["merged_record_count"]) == (5, 3)
    assert doc["row_deletes"] == {
        "applied_files": 2,
        "deleted_records": 2,
        "unapplied_files": 0,
        "exact": True,
    }
    if sketches:
        column = doc["columns"]["i"]
        assert (column["min"], column["max"], column["ndv"], column["null_count"]) == (1, 5, 3, 0)
