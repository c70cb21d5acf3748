"""Puffin files (Apache Iceberg's statistics container), written and read per the spec.

Layout (format/puffin-spec.md)::

    Magic Blob₁ Blob₂ … Blobₙ Footer
    Footer = Magic FooterPayload FooterPayloadSize Flags Magic

* ``Magic`` is ``PFA1``; ``FooterPayloadSize`` a 4-byte signed little-endian integer, the
  length of the (possibly compressed) payload; ``Flags`` 4 bytes, byte 0 bit 0 set when
  the payload is compressed (always LZ4), every other bit reserved (written 0).
* ``FooterPayload`` is UTF-8 JSON: ``blobs`` (type, fields, snapshot-id, sequence-number,
  offset, length, optional compression-codec, optional properties) and optional
  ``properties`` (``created-by`` recommended).
* Codecs: ``lz4`` is a single LZ4 *frame* with the content size present, ``zstd`` a single
  Zstandard frame with the content size present. No codec means stored as is.

The JSON is written compactly and in the key order Apache Iceberg's own writer uses, so a
file with the same blobs and properties is byte-identical to one Iceberg writes (the
uncompressed fixtures in the tests prove it). pyiceberg's ``PuffinFile`` reads neither a
compressed footer nor lz4 blobs, so the defaults here are an uncompressed footer and
uncompressed or zstd blobs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lz4.frame
import zstandard

from lakestats import __version__
from lakestats.exceptions import MetadataError

MAGIC = b"PFA1"
FOOTER_STRUCT_SIZE = 12  # payload size (4) + flags (4) + magic (4)
FLAG_FOOTER_COMPRESSED = 0x01  # byte 0, bit 0
CODEC_LZ4 = "lz4"
CODEC_ZSTD = "zstd"
CODECS = frozenset({CODEC_LZ4, CODEC_ZSTD})

# Blob types of the Puffin spec: the only ones table metadata may list (pyiceberg's
# metadata model rejects any other type in ``blob-metadata``).
THETA_BLOB = "apache-datasketches-theta-v1"
DELETION_VECTOR_BLOB = "deletion-vector-v1"
SPEC_BLOB_TYPES = frozenset({THETA_BLOB, DELETION_VECTOR_BLOB})
# lakestats' own blob type (docs/publishing.md): a serialized KLL doubles sketch. Never
# listed in table metadata.
KLL_BLOB = "lakestats-kll-doubles-v1"

CREATED_BY = f"lakestats {__version__}"


@dataclass(frozen=True)
class Blob:
    """A blob to write: what it is, what it describes, its uncompressed payload."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    payload: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    compression_codec: str | None = None  # codec to store the payload with


@dataclass(frozen=True)
class BlobMetadata:
    """A blob's entry in the footer (offset and length of the stored, maybe compressed, bytes)."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.compression_codec is not None:
            doc["compression-codec"] = self.compression_codec
        if self.properties:
            doc["properties"] = dict(self.properties)
        return doc


@dataclass(frozen=True)
class PuffinBytes:
    """A written Puffin file: its bytes and what table metadata needs to register it."""

    data: bytes
    footer_size: int  # the whole footer, magic to magic (``file-footer-size-in-bytes``)
    blobs: tuple[BlobMetadata, ...]

    @property
    def file_size(self) -> int:
        return len(self.data)


def compress(codec: str | None, data: bytes) -> bytes:
    if codec is None:
        return data
    if codec == CODEC_ZSTD:
        # Content size and checksum in the frame header, as Iceberg's writer (zstd-jni) makes
        # them: the same payload gives the same bytes.
        compressor = zstandard.ZstdCompressor(write_content_size=True, write_checksum=True)
        return bytes(compressor.compress(data))
    if codec == CODEC_LZ4:
        return bytes(lz4.frame.compress(data, store_size=True))
    raise ValueError(f"unknown Puffin compression codec {codec!r} (use zstd or lz4)")


def decompress(codec: str | None, data: bytes, what: str) -> bytes:
    if codec is None:
        return data
    try:
        if codec == CODEC_ZSTD:
            # Every frame the spec allows carries its content size; decompress() needs it.
            return bytes(zstandard.ZstdDecompressor().decompress(data))
        if codec == CODEC_LZ4:
            return bytes(lz4.frame.decompress(data))
    except (zstandard.ZstdError, RuntimeError, ValueError) as exc:
        raise MetadataError(f"{what}: cannot decompress {codec} data ({exc})") from exc
    raise MetadataError(f"{what}: unknown compression codec {codec!r}")


def write_puffin(
    blobs: Sequence[Blob],
    *,
    properties: Mapping[str, str] | None = None,
    created_by: str | None = CREATED_BY,
    compress_footer: bool = False,
) -> PuffinBytes:
    """Serialize ``blobs`` into one Puffin file (in memory; files here are small).

    ``created_by`` goes into the footer ``properties`` (``None`` leaves it out, as Iceberg's
    writer does when not given one). ``compress_footer`` LZ4-compresses the footer payload
    (pyiceberg cannot read such files).
    """
    out = bytearray(MAGIC)
    metadata: list[BlobMetadata] = []
    for blob in blobs:
        stored = compress(blob.compression_codec, blob.payload)
        metadata.append(
            BlobMetadata(
                type=blob.type,
                fields=tuple(blob.fields),
                snapshot_id=blob.snapshot_id,
                sequence_number=blob.sequence_number,
                offset=len(out),
                length=len(stored),
                compression_codec=blob.compression_codec,
                properties=dict(blob.properties),
            )
        )
        out += stored
    footer_props = dict(properties or {})
    if created_by is not None:
        footer_props.setdefault("created-by", created_by)
    doc: dict[str, Any] = {"blobs": [m.to_json() for m in metadata]}
    if footer_props:
        doc["properties"] = footer_props
    payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    flags = 0
    if compress_footer:
        payload = compress(CODEC_LZ4, payload)
        flags |= FLAG_FOOTER_COMPRESSED
    footer_start = len(out)
    out += MAGIC
    out += payload
    out += len(payload).to_bytes(4, "little", signed=True)
    out += bytes([flags, 0, 0, 0])
    out += MAGIC
    return PuffinBytes(bytes(out), len(out) - footer_start, tuple(metadata))


class PuffinReader:
    """A Puffin file read from bytes: its blob metadata, footer properties and payloads.

    ``source`` names the file in errors (``MetadataError``), which say what is wrong.
    """

    def __init__(self, data: bytes, source: str = "Puffin file") -> None:
        self._data = data
        self._source = source
        minimal = len(MAGIC) + len(MAGIC) + FOOTER_STRUCT_SIZE
        if len(data) < minimal:
            self._fail(f"is {len(data)} bytes long, shorter than the smallest Puffin file")
        if data[: len(MAGIC)] != MAGIC:
            self._fail(f"does not start with the Puffin magic {MAGIC!r}")
        if data[-len(MAGIC) :] != MAGIC:
            self._fail(f"does not end with the Puffin magic {MAGIC!r}")
        struct_start = len(data) - FOOTER_STRUCT_SIZE
        payload_size = int.from_bytes(data[struct_start : struct_start + 4], "little", signed=True)
        flags = data[struct_start + 4 : struct_start + 8]
        footer_start = struct_start - payload_size - len(MAGIC)
        if payload_size < 0 or footer_start < len(MAGIC):
            self._fail(f"has an impossible footer payload size {payload_size}")
        if data[footer_start : footer_start + len(MAGIC)] != MAGIC:
            self._fail("has no magic at the start of its footer (wrong footer payload size?)")
        self.footer_compressed = bool(flags[0] & FLAG_FOOTER_COMPRESSED)
        self.footer_size = len(data) - footer_start
        payload = data[footer_start + len(MAGIC) : struct_start]
        if self.footer_compressed:
            payload = decompress(CODEC_LZ4, payload, f"{source} footer")
        self.blobs, self.properties = self._parse_footer(payload, footer_start)

    def _fail(self, problem: str) -> None:
        raise MetadataError(f"{self._source} {problem}")

    def _parse_footer(
        self, payload: bytes, footer_start: int
    ) -> tuple[tuple[BlobMetadata, ...], dict[str, str]]:
        try:
            doc = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MetadataError(f"{self._source} footer is not valid JSON ({exc})") from exc
        try:
            if not isinstance(doc, dict) or not isinstance(doc.get("blobs"), list):
                raise ValueError("footer has no 'blobs' list")
            props = _string_map(doc.get("properties", {}), "properties")
            blobs = tuple(_blob_metadata(raw) for raw in doc["blobs"])
        except (ValueError, TypeError, KeyError) as exc:
            raise MetadataError(f"{self._source} footer is not Puffin metadata ({exc})") from exc
        for blob in blobs:
            if blob.offset < len(MAGIC) or blob.offset + blob.length > footer_start:
                self._fail(
                    f"blob {blob.type!r} at offset {blob.offset} (length {blob.length}) "
                    "lies outside the blob area"
                )
        return blobs, props

    @property
    def created_by(self) -> str | None:
        return self.properties.get("created-by")

    def payload(self, blob: BlobMetadata) -> bytes:
        """The blob's uncompressed payload."""
        stored = self._data[blob.offset : blob.offset + blob.length]
        return decompress(blob.compression_codec, stored, f"{self._source} blob {blob.type!r}")

    def read_all(self) -> list[Blob]:
        return [
            Blob(
                type=m.type,
                fields=m.fields,
                snapshot_id=m.snapshot_id,
                sequence_number=m.sequence_number,
                payload=self.payload(m),
                properties=dict(m.properties),
                compression_codec=m.compression_codec,
            )
            for m in self.blobs
        ]


def _string_map(raw: Any, what: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"{what} must map strings to strings")
    return dict(raw)


def _int(raw: Mapping[str, Any], key: str) -> int:
    value = raw[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"blob field {key!r} must be an integer, got {value!r}")
    return value


def _blob_metadata(raw: Any) -> BlobMetadata:
    if not isinstance(raw, dict):
        raise ValueError(f"blob entry is not an object: {raw!r}")
    fields = raw["fields"]
    if not isinstance(fields, list) or not all(
        isinstance(f, int) and not isinstance(f, bool) for f in fields
    ):
        raise ValueError("blob 'fields' must be a list of integers")
    blob_type = raw["type"]
    if not isinstance(blob_type, str):
        raise ValueError("blob 'type' must be a string")
    codec = raw.get("compression-codec")
    if codec is not None and codec not in CODECS:
        raise ValueError(f"unknown compression codec {codec!r}")
    length = _int(raw, "length")
    if length < 0:
        raise ValueError(f"negative blob length {length}")
    return BlobMetadata(
        type=blob_type,
        fields=tuple(fields),
        snapshot_id=_int(raw, "snapshot-id"),
        sequence_number=_int(raw, "sequence-number"),
        offset=_int(raw, "offset"),
        length=length,
        compression_codec=codec,
        properties=_string_map(raw.get("properties", {}), "blob properties"),
    )
