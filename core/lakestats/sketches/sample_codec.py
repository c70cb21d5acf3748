"""Value-sample bytes with numpy: parse, union and write compact tuple sketches.

A value sample (``value_sample``) is a DataSketches compact tuple sketch, serial version 3,
whose 9-byte summaries are datasketches-java ``DoubleSummary`` (value, mode byte). The
library reads such a sketch through a Python ``PyObjectSerDe`` callback per entry: ~4 ms
for 4,096 entries, paid for every file and column of every commit. Here the entries are
one ``numpy.frombuffer`` over a packed record type instead.

Layout (datasketches-cpp ``compact_tuple_sketch::serialize``, the same preamble as a
compact theta sketch): byte 0 preamble longs (1: empty or one exact entry, 2: exact, 3:
estimation), 1 serial version (3), 2 family (9: tuple), 3 sketch type (1), 4 unused,
5 flags, 6-7 seed hash; with 2+ preamble longs the entry count (u32) at 8; with 3 the
theta (u64) at 16; then the entries, ordered by hash. ``union`` computes what the
library's ``tuple_union`` does for the ``min`` mode — theta the smallest of the inputs'
thetas and, past ``2**lg_k`` distinct keys below it, the hash of the ``2**lg_k + 1``-th;
the smallest value per key — and writes the same bytes (tested against the library on
random inputs). Anything else (another serial version or family) goes to the library.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from datasketches import compact_theta_sketch, update_theta_sketch

from lakestats.sketches.hashing import THETA_SEED

MAX_THETA = (1 << 63) - 1
_ENTRY = np.dtype([("hash", "<u8"), ("value", "<f8"), ("mode", "u1")])  # packed: 17 bytes
_HEADER = struct.Struct("<BBBBBBH")
_SERIAL_VERSION = 3
_FAMILY_TUPLE = 9
_FAMILY_COMPACT_THETA = 3
_SKETCH_TYPE = 1
_FLAG_READ_ONLY, _FLAG_EMPTY, _FLAG_COMPACT, _FLAG_ORDERED = 0x02, 0x04, 0x08, 0x10
_MODE_MIN = 1
# what the library writes into every sketch it serializes for seed 9001
SEED_HASH = int(update_theta_sketch(5, seed=THETA_SEED).compact().get_seed_hash())


@dataclass(frozen=True)
class ParsedSample:
    theta64: int
    empty: bool
    seed_hash: int
    hashes: np.ndarray  # uint64, ascending
    values: np.ndarray  # float64, one per hash

    @property
    def theta(self) -> float:
        return self.theta64 / MAX_THETA


def parse(blob: bytes) -> ParsedSample:
    """The entries of a compact tuple sketch with ``DoubleSummary`` summaries."""
    preamble, version, family, _type, _unused, flags, seed_hash = _HEADER.unpack_from(blob)
    if version != _SERIAL_VERSION or family != _FAMILY_TUPLE:
        raise ValueError(f"not a serial-version-3 tuple sketch (version {version})")
    empty = bool(flags & _FLAG_EMPTY)
    theta = MAX_THETA
    if preamble == 1:
        count = 0 if empty or len(blob) <= 8 else 1
    else:
        (count,) = struct.unpack_from("<I", blob, 8)
        if preamble >= 3:
            (theta,) = struct.unpack_from("<Q", blob, 16)
    entries = np.frombuffer(blob, dtype=_ENTRY, count=count, offset=8 * preamble)
    hashes, values = entries["hash"], entries["value"]
    if count > 1 and not flags & _FLAG_ORDERED:
        order = np.argsort(hashes, kind="stable")
        hashes, values = hashes[order], values[order]
    return ParsedSample(int(theta), empty, int(seed_hash), hashes, values)


def union(blobs: Sequence[bytes], lg_k: int) -> bytes:
    """The ``min``-mode tuple union of ``blobs`` (at least one), as the library writes it."""
    parsed = [parse(b) for b in blobs]
    theta = min(p.theta64 for p in parsed)
    empty = all(p.empty for p in parsed)
    hashes = np.concatenate([p.hashes for p in parsed])
    values = np.concatenate([p.values for p in parsed])
    below = hashes < np.uint64(theta)
    return _bottom_k(theta, empty, hashes[below], values[below], lg_k)


def from_entries(hashes: np.ndarray, values: np.ndarray, lg_k: int) -> bytes:
    """The ``min``-mode tuple sketch of one file's ``(hash, value)`` pairs (distinct nonzero
    hashes, any order): what the library's update sketch gives once ``normalize_value_sample``
    trims it — the ``2**lg_k`` smallest hashes, theta the next one past them."""
    return _bottom_k(MAX_THETA, not len(hashes), hashes, values, lg_k)


def _bottom_k(theta: int, empty: bool, hashes: np.ndarray, values: np.ndarray, lg_k: int) -> bytes:
    hashes, values = _smallest_distinct(hashes, values, (1 << lg_k) + 1)
    order = np.argsort(hashes, kind="stable")
    hashes, values = hashes[order], values[order]
    if len(hashes):  # one entry per hash, with the smallest of its values
        starts = np.flatnonzero(np.concatenate(([True], hashes[1:] != hashes[:-1])))
        hashes, values = hashes[starts], np.minimum.reduceat(values, starts)
    nominal = 1 << lg_k
    if len(hashes) > nominal:
        theta = int(hashes[nominal])
        hashes, values = hashes[:nominal], values[:nominal]
    return _write(theta, empty and not len(hashes), hashes, values)


_WIDENINGS = 3


def _smallest_distinct(
    hashes: np.ndarray, values: np.ndarray, wanted: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every entry whose hash is among the ``wanted`` smallest distinct hashes (all entries
    of each; others may stay): a union of many samples holds a key once per file that has
    it, and sorting them all cost ~0.1 s per column of 100 files. A partition first,
    widened while duplicates leave fewer than ``wanted`` distinct hashes."""
    taken = wanted
    for _ in range(_WIDENINGS + 1):
        if taken >= len(hashes):
            break
        nearest = hashes[np.argpartition(hashes, taken - 1)[:taken]]
        if len(np.unique(nearest)) >= wanted:
            keep = hashes <= nearest.max()  # every copy of each of those hashes
            return hashes[keep], values[keep]
        taken *= 2
    return hashes, values


def _write(theta: int, empty: bool, hashes: np.ndarray, values: np.ndarray) -> bytes:
    estimating = theta < MAX_THETA and not empty
    if estimating:
        preamble = 3
    elif empty or len(hashes) == 1:
        preamble = 1
    else:
        preamble = 2
    flags = _FLAG_READ_ONLY | _FLAG_COMPACT | _FLAG_ORDERED | (_FLAG_EMPTY if empty else 0)
    out = bytearray(
        _HEADER.pack(preamble, _SERIAL_VERSION, _FAMILY_TUPLE, _SKETCH_TYPE, 0, flags, SEED_HASH)
    )
    if preamble >= 2:
        out += struct.pack("<II", len(hashes), 0)
    if preamble >= 3:
        out += struct.pack("<Q", theta)
    entries = np.empty(len(hashes), dtype=_ENTRY)
    entries["hash"], entries["value"], entries["mode"] = hashes, values, _MODE_MIN
    out += entries.tobytes()
    return bytes(out)


def theta_bytes(sample: ParsedSample) -> bytes:
    """The stored-form compact theta sketch of the sample's keys and theta."""
    flags = _FLAG_READ_ONLY | _FLAG_COMPACT | _FLAG_ORDERED | (_FLAG_EMPTY if sample.empty else 0)
    # an empty sketch from Spark carries seed hash 0; the stored form keeps it as read
    seed_hash = 0 if sample.empty else sample.seed_hash
    head = _HEADER.pack(3, _SERIAL_VERSION, _FAMILY_COMPACT_THETA, 0, 0, flags, seed_hash)
    head += struct.pack("<IIQ", len(sample.hashes), 0, sample.theta64)
    raw = head + sample.hashes.astype("<u8").tobytes()
    return bytes(compact_theta_sketch.deserialize(raw, THETA_SEED).serialize(False))
