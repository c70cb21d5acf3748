"""Paimon deletion vectors: index manifests and DV index files → ``model.DeletionVector``.

A snapshot's ``indexManifest`` lists every index file of the table (``_KIND`` 0 ADD, 1
DELETE); those of type ``DELETION_VECTORS`` hold one vector per data file, located by
``_DELETIONS_VECTORS_RANGES`` (data file name, offset, length, cardinality). The file
``index/<name>`` starts with a version byte (1); at each offset: a big-endian int32 size,
a big-endian int32 magic (1581511376, ``BitmapDeletionVector``), a portable 32-bit roaring
bitmap of deleted row positions, and a big-endian CRC-32 of magic + bitmap. The bitmap is
re-serialised as the 64-bit roaring bitmap lakestats' model carries.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap, BitMap64

from lakestats.exceptions import MetadataError
from lakestats.model import DeletionVector

DELETION_VECTORS_INDEX = "DELETION_VECTORS"
BITMAP_MAGIC = 1581511376
BITMAP64_MAGIC = 1581511377  # Bitmap64DeletionVector (newer Paimon): 64-bit portable roaring
_ADD = 0
_DELETE = 1


@dataclass(frozen=True)
class VectorRange:
    """Where one data file's deletion vector is: index file, offset, length, cardinality."""

    index_file: str
    offset: int
    length: int
    cardinality: int | None


DataFileKey = tuple[bytes, int, str]  # (partition, bucket, data file name)


def vector_ranges(
    records: Iterable[Mapping[str, Any]], manifest: str
) -> dict[DataFileKey, VectorRange]:
    """Data file → its vector, from the records of one (full) index manifest."""
    live: dict[tuple[bytes, int, str], list[Mapping[str, Any]]] = {}
    try:
        for record in records:
            if record.get("_INDEX_TYPE") != DELETION_VECTORS_INDEX:
                continue
            key = (
                bytes(record.get("_PARTITION") or b""),
                int(record.get("_BUCKET") or 0),
                str(record["_FILE_NAME"]),
            )
            if int(record.get("_KIND") or 0) == _DELETE:
                live.pop(key, None)
            else:
                live[key] = list(record.get("_DELETIONS_VECTORS_RANGES") or ())
        ranges: dict[DataFileKey, VectorRange] = {}
        for (partition, bucket, index_file), entries in live.items():
            for entry in entries:
                cardinality = entry.get("_CARDINALITY")
                ranges[(partition, bucket, str(entry["f0"]))] = VectorRange(
                    index_file=index_file,
                    offset=int(entry["f1"]),
                    length=int(entry["f2"]),
                    cardinality=None if cardinality is None else int(cardinality),
                )
        return ranges
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataError(f"{manifest}: malformed index manifest entry ({exc!r})") from exc


def decode_vector(blob: bytes, where: str) -> DeletionVector:
    """One serialized Paimon deletion vector (size, magic, bitmap, CRC) as the model's."""
    if len(blob) < 12:
        raise MetadataError(f"{where}: a deletion vector needs 12 bytes, got {len(blob)}")
    size, magic = struct.unpack_from(">iI", blob, 0)
    body = blob[4 : 4 + size]
    if size < 4 or len(body) != size or len(blob) < 8 + size:
        raise MetadataError(f"{where}: deletion vector size {size} does not fit its range")
    (crc,) = struct.unpack_from(">I", blob, 4 + size)
    if zlib.crc32(body) != crc:
        raise MetadataError(f"{where}: deletion vector checksum mismatch")
    try:
        if magic == BITMAP_MAGIC:
            positions: Iterable[int] = BitMap.deserialize(bytes(body[4:]))
        elif magic == BITMAP64_MAGIC:
            positions = BitMap64.deserialize(bytes(body[4:]))
        else:
            raise MetadataError(f"{where}: unknown deletion vector magic {magic}")
    except MetadataError:
        raise
    except Exception as exc:  # pyroaring raises ValueError/OverflowError on bad bitmaps
        raise MetadataError(f"{where}: cannot decode deletion vector ({exc})") from exc
    bitmap = BitMap64(positions)
    return DeletionVector(bitmap=bitmap.serialize(), cardinality=len(bitmap))


def read_vector(read_index_file: Callable[[str], bytes], vector: VectorRange) -> DeletionVector:
    """The deletion vector at ``vector``; ``read_index_file`` reads ``index/<name>``."""
    data = read_index_file(vector.index_file)
    where = f"index/{vector.index_file}@{vector.offset}"
    if data[:1] != b"\x01":
        raise MetadataError(f"index/{vector.index_file}: unknown deletion vector file version")
    decoded = decode_vector(data[vector.offset : vector.offset + vector.length + 8], where)
    if vector.cardinality is not None and decoded.cardinality != vector.cardinality:
        raise MetadataError(
            f"{where}: deletion vector holds {decoded.cardinality} rows, "
            f"the index manifest says {vector.cardinality}"
        )
    return decoded
