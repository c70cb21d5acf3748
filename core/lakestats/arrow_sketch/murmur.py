"""MurmurHash3_x64_128 (seed 9001) over many keys at once, in numpy.

The hash DataSketches' theta sketch applies to each key (``update(byte[])``): the first
64-bit half, shifted right by one (``hashing.theta_hash`` is the one-key reference in pure
Python; the tests compare both on random keys). Every function takes keys as numpy arrays
and returns one ``uint64`` hash per key; uint64 arithmetic wraps, which is what the
algorithm wants, so overflow warnings are silenced.
"""

from __future__ import annotations

import numpy as np

from lakestats.sketches.hashing import THETA_SEED

_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_BLOCK = 16


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    rotated: np.ndarray = (x << np.uint64(r)) | (x >> np.uint64(64 - r))
    return rotated


def _fmix(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    mixed: np.ndarray = k ^ (k >> np.uint64(33))
    return mixed


def _finish(h1: np.ndarray, h2: np.ndarray, length: np.ndarray) -> np.ndarray:
    h1 = h1 ^ length
    h2 = h2 ^ length
    h1 = h1 + h2
    h2 = h2 + h1
    h1, h2 = _fmix(h1), _fmix(h2)
    hashed: np.ndarray = (h1 + h2) >> np.uint64(1)
    return hashed


def _mix_k1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    return h1 ^ (_rotl(k1 * _C1, 31) * _C2)


def _mix_k2(h2: np.ndarray, k2: np.ndarray) -> np.ndarray:
    return h2 ^ (_rotl(k2 * _C2, 33) * _C1)


def hash_words(words: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    """Theta hashes of keys of 1 to 8 bytes, each given as its little-endian read (the key's
    bytes in the low bytes of the word, zero above); ``length`` per key or for all."""
    n = len(words)
    seed = np.full(n, THETA_SEED, dtype=np.uint64)
    lengths = np.broadcast_to(np.asarray(length, dtype=np.uint64), (n,))
    with np.errstate(over="ignore"):
        return _finish(_mix_k1(seed, words.astype(np.uint64, copy=False)), seed, lengths)


def hash_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Theta hashes of the keys ``data[starts[i] : starts[i] + lengths[i]]`` (``data`` a
    uint8 array). Keys of length 0 get hash 0 (the caller drops them: DataSketches refuses
    empty keys). Work is proportional to the keys' total length: each 16-byte block round
    runs over the keys that still have one, longest first."""
    n = len(starts)
    out = np.zeros(n, dtype=np.uint64)
    if not n:
        return out
    lengths = lengths.astype(np.int64, copy=False)
    order = np.argsort(-lengths, kind="stable")  # longest first: each round is a prefix
    starts_sorted = starts.astype(np.int64, copy=False)[order]
    lengths_sorted = lengths[order]
    # reads may run up to 16 bytes past a key's end: pad, and mask what is not the key's
    padded = np.concatenate([data.astype(np.uint8, copy=False), np.zeros(_BLOCK, np.uint8)])
    offsets = np.arange(_BLOCK, dtype=np.int64)
    h1 = np.full(n, THETA_SEED, dtype=np.uint64)
    h2 = np.full(n, THETA_SEED, dtype=np.uint64)
    blocks = lengths_sorted // _BLOCK
    with np.errstate(over="ignore"):
        for b in range(int(blocks[0]) if n else 0):
            m = int(np.searchsorted(-blocks, -(b + 1), side="right"))  # keys with block b
            raw = padded[(starts_sorted[:m] + b * _BLOCK)[:, None] + offsets[None, :]]
            words = raw.view("<u8")
            k1, k2 = words[:, 0], words[:, 1]
            x1 = _mix_k1(h1[:m], k1)
            x1 = _rotl(x1, 27) + h2[:m]
            x1 = x1 * np.uint64(5) + np.uint64(0x52DCE729)
            x2 = _mix_k2(h2[:m], k2)
            x2 = _rotl(x2, 31) + x1
            h2[:m] = x2 * np.uint64(5) + np.uint64(0x38495AB5)
            h1[:m] = x1
        rest = lengths_sorted - blocks * _BLOCK
        tail_at = starts_sorted + blocks * _BLOCK
        raw = padded[tail_at[:, None] + offsets[None, :]]
        raw = np.where(offsets[None, :] < rest[:, None], raw, np.uint8(0))
        words = np.ascontiguousarray(raw).view("<u8")
        k1, k2 = words[:, 0], words[:, 1]
        h2 = np.where(rest > 8, _mix_k2(h2, k2), h2)
        h1 = np.where(rest > 0, _mix_k1(h1, k1), h1)
        hashed = _finish(h1, h2, lengths_sorted.astype(np.uint64))
    hashed[lengths_sorted == 0] = 0
    out[order] = hashed
    return out


def hash_matrix(mat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Theta hashes of keys given as the *last* ``lengths[i]`` bytes of each row of a
    (n, width) uint8 matrix (decimals' minimal big-endian forms)."""
    n, width = mat.shape
    flat = np.ascontiguousarray(mat).reshape(-1)
    lengths = lengths.astype(np.int64, copy=False)
    starts = np.arange(n, dtype=np.int64) * width + (width - lengths)
    return hash_bytes(flat, starts, lengths)
