"""Delta deletion vectors → ``model.DeletionVector`` (a portable 64-bit roaring bitmap).

A ``deletionVector`` descriptor names its bitmap in one of three ways (Delta PROTOCOL.md,
"Deletion Vector Descriptor Schema"):

* ``i`` inline: ``pathOrInlineDv`` is the Z85 text of the serialized bitmap itself;
* ``u`` relative: ``pathOrInlineDv`` = optional random prefix + the 20-character Z85 text
  of a UUID; the file is ``<table>/<prefix>/deletion_vector_<uuid>.bin``;
* ``p`` absolute: ``pathOrInlineDv`` is the file's URI.

In a file, the vector starts at ``offset``: a big-endian u32 size, then the bitmap, then a
big-endian CRC-32 of it. The bitmap is Delta's "RoaringBitmapArray": a little-endian u32
magic ``1681511377`` followed by the portable 64-bit roaring format, which is exactly what
``pyroaring.BitMap64`` (de)serializes.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pyroaring import BitMap64

from lakestats.exceptions import MetadataError
from lakestats.model import DeletionVector

_Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_VALUE = {c: i for i, c in enumerate(_Z85_ALPHABET)}
_MAGIC = 1681511377
_UUID_Z85_LENGTH = 20


@dataclass(frozen=True)
class DvDescriptor:
    """One ``deletionVector`` descriptor of the log."""

    storage_type: str
    path_or_inline: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> DvDescriptor:
        return cls(
            storage_type=str(raw.get("storageType") or ""),
            path_or_inline=str(raw.get("pathOrInlineDv") or ""),
            offset=int(raw["offset"]) if raw.get("offset") is not None else None,
            size_in_bytes=int(raw.get("sizeInBytes") or 0),
            cardinality=int(raw.get("cardinality") or 0),
        )

    @property
    def unique_id(self) -> str:
        """Delta's unique id of a vector: storage type + path/inline text (+ ``@offset``)."""
        base = f"{self.storage_type}{self.path_or_inline}"
        return f"{base}@{self.offset}" if self.offset is not None else base


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ RFC 32) text → bytes; the length must be a multiple of 5."""
    if len(text) % 5:
        raise ValueError(f"Z85 text of length {len(text)} is not a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            try:
                value = value * 85 + _Z85_VALUE[char]
            except KeyError:
                raise ValueError(f"{char!r} is not a Z85 character") from None
        out += value.to_bytes(4, "big")
    return bytes(out)


def relative_dv_path(path_or_inline: str) -> str:
    """The table-relative file of a ``u`` descriptor: ``<prefix>/deletion_vector_<uuid>.bin``."""
    if len(path_or_inline) < _UUID_Z85_LENGTH:
        raise ValueError(f"{path_or_inline!r} is too short for a relative deletion vector")
    prefix = path_or_inline[:-_UUID_Z85_LENGTH]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(path_or_inline[-_UUID_Z85_LENGTH:]))}.bin"
    return f"{prefix}/{name}" if prefix else name


def decode_bitmap(blob: bytes, *, where: str) -> BitMap64:
    """A RoaringBitmapArray (magic + portable 64-bit roaring) → ``BitMap64``."""
    if len(blob) < 4 or struct.unpack_from("<I", blob)[0] != _MAGIC:
        raise MetadataError(f"{where}: not a Delta deletion vector (bad magic number)")
    try:
        return BitMap64.deserialize(blob[4:])
    except (ValueError, OverflowError) as exc:
        raise MetadataError(f"{where}: the deletion vector bitmap is corrupt ({exc})") from None


def read_deletion_vector(
    descriptor: DvDescriptor,
    read_file: Callable[[str, bool], bytes],
    *,
    where: str,
) -> DeletionVector:
    """Decode one descriptor. ``read_file(path, absolute)`` returns a vector file's bytes
    (a table-relative path, or an absolute URI when ``absolute``)."""
    kind = descriptor.storage_type
    try:
        if kind == "i":
            bitmap = decode_bitmap(z85_decode(descriptor.path_or_inline), where=where)
        elif kind in ("u", "p"):
            path = (
                relative_dv_path(descriptor.path_or_inline)
                if kind == "u"
                else unquote(descriptor.path_or_inline)
            )
            bitmap = _from_file(read_file(path, kind == "p"), descriptor, where=f"{where} ({path})")
        else:
            raise MetadataError(f"{where}: unknown deletion vector storage type {kind!r}")
    except ValueError as exc:
        raise MetadataError(f"{where}: malformed deletion vector descriptor ({exc})") from None
    if len(bitmap) != descriptor.cardinality:
        raise MetadataError(
            f"{where}: the deletion vector holds {len(bitmap)} rows but the log says "
            f"cardinality {descriptor.cardinality}"
        )
    return DeletionVector(bitmap=bitmap.serialize(), cardinality=descriptor.cardinality)


def _from_file(data: bytes, descriptor: DvDescriptor, *, where: str) -> BitMap64:
    offset = descriptor.offset or 1  # byte 0 of a vector file is its format version
    if len(data) < offset + 4:
        raise MetadataError(f"{where}: the deletion vector file is truncated")
    (size,) = struct.unpack_from(">I", data, offset)
    start, end = offset + 4, offset + 4 + size
    if size != descriptor.size_in_bytes or len(data) < end + 4:
        raise MetadataError(
            f"{where}: the deletion vector at offset {offset} is {size} bytes, the log says "
            f"{descriptor.size_in_bytes}, the file holds {len(data)} bytes"
        )
    blob = data[start:end]
    (checksum,) = struct.unpack_from(">I", data, end)
    if zlib.crc32(blob) != checksum:
        raise MetadataError(f"{where}: the deletion vector fails its CRC-32 check")
    return decode_bitmap(blob, where=where)
