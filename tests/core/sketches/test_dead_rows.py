"""A file's dead rows as positions or a bitmap: the same rows either way, the smaller kept."""

from __future__ import annotations

import numpy as np
import pytest

from lakestats.arrow_sketch.dead_rows import DeadRows, RowFlags


def _reference(positions: np.ndarray, start: int, rows: int) -> np.ndarray:
    return np.isin(np.arange(start, start + rows), positions)


@pytest.mark.parametrize(("count", "span"), [(0, 1), (1, 1), (40, 100_000), (30_000, 100_000)])
def test_every_window_of_rows_is_dead_where_the_positions_say(count: int, span: int) -> None:
    rng = np.random.default_rng(count)
    positions = rng.choice(span, count, replace=False) if count else np.zeros(0, np.int64)
    repeated = np.concatenate([positions, positions[: count // 3]])  # repeats, any order
    dead = DeadRows.of(repeated)
    unique = np.unique(positions)

    assert len(dead) == len(unique)
    assert dead.to_positions().tolist() == unique.tolist()
    # the smaller form: positions while 64 rows or more per dead row, else the bitmap
    if count and count * 64 > int(unique[-1]) + 1:
        assert dead.bits is not None and dead.nbytes <= (int(unique[-1]) + 8) // 8
    else:
        assert dead.positions is not None and dead.nbytes == 8 * len(unique)
    # windows at byte edges and not, past the last dead row, past the file's end
    for start, rows in [(0, 1), (0, 8), (3, 13), (7, 1_000), (8, 4_096), (max(0, span - 5), 50)]:
        got = dead.mask(start, rows)
        want = _reference(unique, start, rows)
        if want.any():
            assert got is not None and got.tolist() == want.tolist(), (start, rows)
        else:
            assert got is None, (start, rows)
    for rows in (0, 1, 7, 8, 9, span // 2, span, span + 100):
        assert dead.count_below(rows) == int((unique < rows).sum()), rows
    for start in rng.integers(0, span, 50):
        rows = int(rng.integers(1, 3_000))
        got = dead.mask(int(start), rows)
        want = _reference(unique, int(start), rows)
        assert (got if got is not None else np.zeros(rows, bool)).tolist() == want.tolist()


def test_a_union_is_every_kind_of_delete_of_the_file() -> None:
    vector = DeadRows.of(np.arange(0, 10_000, 2))  # dense: a bitmap
    equality = DeadRows.of(np.array([1, 3, 50_001]))  # sparse: positions
    assert vector.bits is not None and equality.positions is not None

    both = DeadRows.union([vector, equality])

    want = sorted({*range(0, 10_000, 2), 1, 3, 50_001})
    assert both.to_positions().tolist() == want and len(both) == len(want)
    assert DeadRows.union([equality]) is equality


def test_a_negative_position_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        DeadRows.of(np.array([3, -1]))


def test_the_bitmap_of_a_dense_merge_is_a_fraction_of_its_positions() -> None:
    # a primary-key bucket whose merge kills more than half of its 1,000,000 rows
    rng = np.random.default_rng(9)
    positions = np.flatnonzero(rng.random(1_000_000) < 0.57)
    dead = DeadRows.of(positions)
    assert dead.nbytes <= 1_000_000 // 8 < positions.nbytes // 36


@pytest.mark.parametrize("dead_share", [0.0, 0.001, 0.2, 1.0])
def test_a_mask_of_the_files_rows_gives_what_its_positions_give(dead_share: float) -> None:
    rng = np.random.default_rng(4)
    flags = rng.random(50_000) < dead_share
    flags[-10:] = False  # live rows after the last dead one are not kept

    from_mask = DeadRows.from_mask(flags)
    from_positions = DeadRows.of(np.flatnonzero(flags))

    assert from_mask.to_positions().tolist() == np.flatnonzero(flags).tolist()
    assert (from_mask.length, len(from_mask), from_mask.nbytes) == (
        from_positions.length,
        len(from_positions),
        from_positions.nbytes,
    )
    assert (from_mask.bits is None) == (from_positions.bits is None)


@pytest.mark.parametrize("rows", [0, 1, 7, 8, 9, 50_003])
def test_row_flags_marked_in_pieces_give_the_dead_rows_of_their_mask(rows: int) -> None:
    """Flags set a share at a time (any order, repeats) are the rows of one mask, one bit
    a row while they are being found."""
    rng = np.random.default_rng(rows)
    flags = RowFlags(rows)
    mask = np.zeros(rows, dtype=bool)
    for _ in range(4):
        positions = rng.integers(0, rows, size=rows // 3) if rows else np.zeros(0, np.int64)
        flags.mark(positions)
        flags.mark(positions[: len(positions) // 2])  # repeats change nothing
        mask[positions] = True
    if rows:
        flags.mark(np.array([rows - 1]))  # the last row: the bitmap's last byte
        mask[rows - 1] = True
    dead = flags.dead_rows()
    want = DeadRows.from_mask(mask)
    assert dead.to_positions().tolist() == np.flatnonzero(mask).tolist()
    assert (dead.length, len(dead), dead.nbytes) == (want.length, len(want), want.nbytes)
    assert flags.nbytes == (rows + 7) // 8
