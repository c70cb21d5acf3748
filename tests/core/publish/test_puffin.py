"""The Puffin writer and reader against Apache Iceberg's own reference files and pyiceberg."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.table.puffin import PuffinFile

from lakestats.exceptions import MetadataError
from lakestats.publish.iceberg.puffin import (
    CODEC_LZ4,
    CODEC_ZSTD,
    MAGIC,
    Blob,
    PuffinReader,
    write_puffin,
)

FIXTURES = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "puffin"
PAYLOADS = [
    b"abcdefghi",
    "some blob \x00 binary data 🤯 that is not very very very very very very long, is it?".encode(),
]


def fixture(name: str) -> bytes:
    path = FIXTURES / name
    if not path.exists():
        pytest.fail(f"reference Puffin fixture {path} is missing")
    return path.read_bytes()


def test_empty_reference_file() -> None:
    data = fixture("empty-puffin-uncompressed.bin")
    reader = PuffinReader(data)
    assert reader.blobs == ()
    assert reader.properties == {}
    assert reader.footer_size == len(data) - len(MAGIC)  # all but the leading magic
    assert write_puffin([], created_by=None).data == data  # byte for byte


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("sample-metric-data-uncompressed.bin", None),
        ("sample-metric-data-compressed-zstd.bin", "zstd"),
    ],
)
def test_sample_reference_files(name: str, codec: str | None) -> None:
    data = fixture(name)
    reader = PuffinReader(data, name)
    assert reader.created_by == "Test 1234"
    assert not reader.footer_compressed
    assert [(b.type, b.fields, b.snapshot_id, b.sequence_number) for b in reader.blobs] == [
        ("some-blob", (1,), 2, 1),
        ("some-other-blob", (2,), 2, 1),
    ]
    assert [b.compression_codec for b in reader.blobs] == [codec, codec]
    assert [reader.payload(b) for b in reader.blobs] == PAYLOADS
    # Writing the same blobs gives Iceberg's bytes exactly: layout, offsets, compact JSON in
    # Iceberg's key order and, for zstd, the same frame (content size + checksum).
    rewritten = write_puffin(reader.read_all(), properties=reader.properties)
    assert rewritten.data == data
    assert rewritten.footer_size == reader.footer_size
    assert rewritten.blobs == reader.blobs


@pytest.mark.parametrize("codec", [None, CODEC_ZSTD])
def test_pyiceberg_reads_what_we_write(codec: str | None) -> None:
    blobs = [
        Blob("apache-datasketches-theta-v1", (1,), 42, 7, PAYLOADS[0], {"ndv": "9"}, codec),
        Blob("lakestats-kll-doubles-v1", (2, 3), 42, 7, PAYLOADS[1] * 50, {}, codec),
    ]
    written = write_puffin(blobs)
    puffin = PuffinFile(written.data)
    assert puffin.footer.properties == {"created-by": "lakestats 0.1.0"}
    assert [b.type for b in puffin.footer.blobs] == [b.type for b in blobs]
    assert [b.fields for b in puffin.footer.blobs] == [[1], [2, 3]]
    assert [b.properties for b in puffin.footer.blobs] == [{"ndv": "9"}, {}]
    assert [puffin.get_blob_payload(b) for b in puffin.footer.blobs] == [b.payload for b in blobs]
    # the footer size table metadata records: from the footer's magic to the end
    footer_start = len(written.data) - written.footer_size
    assert written.data[footer_start : footer_start + 4] == MAGIC
    if codec == CODEC_ZSTD:
        assert puffin.footer.blobs[1].length < len(blobs[1].payload)  # really compressed


def test_lz4_blobs_and_compressed_footer_round_trip() -> None:
    blobs = [Blob("some-blob", (1,), 1, 1, payload * 20, {}, CODEC_LZ4) for payload in PAYLOADS]
    written = write_puffin(blobs, compress_footer=True)
    flags = written.data[-8:-4]
    assert flags == b"\x01\x00\x00\x00"
    # the spec's LZ4 is the *frame* format with the content size present
    first = written.blobs[0]
    frame = written.data[first.offset : first.offset + first.length]
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert frame[4] & 0x08  # FLG: content size present
    reader = PuffinReader(written.data)
    assert reader.footer_compressed
    assert [reader.payload(b) for b in reader.blobs] == [b.payload for b in blobs]
    with pytest.raises(ValueError, match="compressed footer"):
        PuffinFile(written.data)  # pyiceberg cannot: why compressed footers are opt-in


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[:10], "shorter than"),
        (lambda d: b"XXXX" + d[4:], "does not start"),
        (lambda d: d[:-4] + b"XXXX", "does not end"),
        (lambda d: d[:-12] + (9999).to_bytes(4, "little") + d[-8:], "impossible footer"),
        (lambda d: d[:-12] + (30).to_bytes(4, "little") + d[-8:], "no magic at the start"),
    ],
)
def test_corrupt_files_fail_with_the_problem_named(mutate: object, message: str) -> None:
    data = fixture("sample-metric-data-uncompressed.bin")
    assert callable(mutate)
    with pytest.raises(MetadataError, match=message):
        PuffinReader(mutate(data), "x.stats")


def test_blob_outside_the_blob_area_is_rejected() -> None:
    written = write_puffin([Blob("t", (1,), 1, 1, b"abc")])
    bad = written.data.replace(b'"length":3', b'"length":9')
    # keep the payload size consistent with the edited JSON (same length edit)
    with pytest.raises(MetadataError, match="outside the blob area"):
        PuffinReader(bad, "x.stats")
