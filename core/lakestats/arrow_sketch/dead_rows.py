"""One data file's dead rows, kept compact from where they are found to the task that drops them.

The Arrow engine learns a file's dead rows on the driver (position deletes, deletion
vectors) or from a first Spark job (primary-key winners, equality deletes), and the driver
holds every file's until the sketch job has dropped them: for a full build, every file of
the table. As int64 positions that is 8 bytes a dead row — a bucket of 16 million rows
whose merge kills 9 million sends 73 MB — while a bitmap up to the last dead row costs one
bit a row. ``DeadRows.of`` keeps whichever is smaller: positions while at most one row in
64 is dead, the bitmap above that (at most 1/64 of the positions' size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lakestats.arrow_sketch.arrays import sorted_unique

_BITS_PER_POSITION = 64  # an int64 position weighs as much as 64 bits of a bitmap


@dataclass(frozen=True, eq=False)
class DeadRows:
    """Sorted, unique dead row positions (0-based, as Spark's ``_metadata.row_index``) of
    one file: ``positions`` or, when denser, ``bits`` (little-endian packed, one bit per row
    of ``0 … length - 1``). ``length``: the last dead row + 1 (0 when none is dead)."""

    positions: np.ndarray | None
    bits: np.ndarray | None
    length: int
    count: int

    @classmethod
    def of(cls, positions: np.ndarray | Sequence[int]) -> DeadRows:
        """The dead rows at ``positions`` (any order, repeats allowed; none negative)."""
        unique = sorted_unique(np.asarray(positions, dtype=np.int64))
        if len(unique) and unique[0] < 0:
            raise ValueError(f"a negative row position: {int(unique[0])}")
        return cls._smaller(unique, None)

    @classmethod
    def from_mask(cls, dead: np.ndarray) -> DeadRows:
        """The rows where the boolean ``dead`` is true (one entry per row of the file)."""
        return cls._smaller(np.flatnonzero(dead).astype(np.int64), dead)

    @classmethod
    def _smaller(cls, positions: np.ndarray, mask: np.ndarray | None) -> DeadRows:
        """Sorted, distinct ``positions`` as positions or as a bitmap (from ``mask`` when
        the caller has it), whichever is smaller."""
        if not len(positions):
            return cls(positions, None, 0, 0)
        length = int(positions[-1]) + 1
        if len(positions) * _BITS_PER_POSITION <= length:
            return cls(positions, None, length, len(positions))
        if mask is None:
            mask = np.zeros(length, dtype=bool)
            mask[positions] = True
        return cls(None, np.packbits(mask[:length], bitorder="little"), length, len(positions))

    @staticmethod
    def union(parts: Sequence[DeadRows]) -> DeadRows:
        """The rows dead in any of ``parts`` (one file's deletes of several kinds)."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return DeadRows.of(np.zeros(0, dtype=np.int64))
        return DeadRows.of(np.concatenate([p.to_positions() for p in parts]))

    def __len__(self) -> int:
        return self.count

    @property
    def nbytes(self) -> int:
        held = self.bits if self.bits is not None else self.positions
        return 0 if held is None else int(held.nbytes)

    def count_below(self, rows: int) -> int:
        """How many of the rows ``0 … rows - 1`` are dead (a file of ``rows`` rows)."""
        if rows >= self.length:
            return self.count
        if self.bits is None:
            assert self.positions is not None
            return int(np.searchsorted(self.positions, rows))
        return int(np.unpackbits(self.bits[: (rows + 7) // 8], bitorder="little")[:rows].sum())

    def to_positions(self) -> np.ndarray:
        if self.bits is None:
            assert self.positions is not None
            return self.positions
        bits = np.unpackbits(self.bits, count=self.length, bitorder="little")
        return np.flatnonzero(bits).astype(np.int64)

    def mask(self, start: int, rows: int) -> np.ndarray | None:
        """Whether each of the rows ``start … start + rows - 1`` is dead; ``None`` when
        none is (positions past the file's end delete nothing)."""
        stop = min(start + rows, self.length)
        if start >= stop:
            return None
        out = np.zeros(rows, dtype=bool)
        if self.bits is None:
            assert self.positions is not None
            lo, hi = np.searchsorted(self.positions, [start, stop])
            if lo == hi:
                return None
            out[self.positions[lo:hi] - start] = True
            return out
        first = start // 8
        bits = np.unpackbits(self.bits[first : (stop + 7) // 8], bitorder="little")
        skip = start - first * 8
        window = bits[skip : skip + stop - start].astype(bool)
        if not window.any():
            return None
        out[: stop - start] = window
        return out


class RowFlags:
    """One bit per row of a file, set as its dead rows are found (a share of a merge or a
    lookup at a time), then kept as ``DeadRows``: a task that finds the dead rows of files
    of 125 M rows holds 16 MB of flags, not a byte a row."""

    def __init__(self, rows: int) -> None:
        self._rows = rows
        self._bits = np.zeros((rows + 7) // 8, dtype=np.uint8)

    @property
    def nbytes(self) -> int:
        return int(self._bits.nbytes)

    def mark(self, positions: np.ndarray) -> None:
        """Flag the rows at ``positions`` (any order, repeats allowed; each below ``rows``)."""
        at = np.asarray(positions, dtype=np.int64)
        np.bitwise_or.at(self._bits, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))

    def dead_rows(self) -> DeadRows:
        """The flagged rows (unpacked a file at a time: a byte a row of this file alone)."""
        mask = np.unpackbits(self._bits, count=self._rows, bitorder="little").view(bool)
        return DeadRows.from_mask(mask)
