"""Rows spilled by key hash (``arrow_sketch/spill.py``): every row lands once, a key's rows
in one share; the files go when read and the folder when left; a disk that cannot take
the rows is a ``Declined``, which sends the work to the SQL job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakestats.arrow_sketch.file_sketch import Declined
from lakestats.arrow_sketch.spill import (
    MAX_SHARES,
    read_share,
    share_batches,
    share_count,
    spill_by_key,
    spill_folder,
)


def _tables() -> list[pa.Table]:
    rng = np.random.default_rng(3)
    out = []
    for start in range(0, 1_000, 250):
        ids = rng.integers(0, 40, 250)
        names = [None if i % 6 == 0 else f"n{i % 5}" for i in ids.tolist()]
        row = np.arange(start, start + 250)
        out.append(pa.table({"k0": ids, "k1": pa.array(names), "row": row}))
    return out


def test_every_row_lands_once_and_a_keys_rows_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path},/nonexistent")
    with spill_folder("test work") as folder:
        assert folder.parent == tmp_path and folder.name.startswith("lakestats-test-work-")
        paths = spill_by_key(_tables(), ["k0", "k1"], 5, folder, "rows")
        assert len(paths) == 5 and all(p is not None for p in paths)
        shares = []
        for i, path in enumerate(paths):
            assert path is not None
            table = read_share(path) if i % 2 else pa.Table.from_batches(list(share_batches(path)))
            assert not path.exists()  # removed once read
            shares.append(table)
        assert not list(folder.iterdir())
    assert not folder.exists()

    rows = sorted(r for t in shares for r in t.column("row").to_pylist())
    assert rows == list(range(1_000))
    owner: dict[tuple[object, object], int] = {}
    for i, table in enumerate(shares):
        for key in zip(table.column("k0").to_pylist(), table.column("k1").to_pylist(), strict=True):
            assert owner.setdefault(key, i) == i  # NULLs included: one share per key


def test_a_share_without_rows_has_no_file(tmp_path: Path) -> None:
    one = [pa.table({"k0": pa.array([7, 7, 7]), "row": pa.array([0, 1, 2])})]
    paths = spill_by_key(one, ["k0"], 4, tmp_path, "rows")
    assert sum(p is not None for p in paths) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"rows-{i}.arrow" for i, p in enumerate(paths) if p is not None
    ]


def test_a_disk_that_cannot_take_the_rows_declines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "missing"))
    with (
        pytest.raises(Declined, match="no room for the test work's spill"),
        spill_folder("test work"),
    ):
        pass
    with pytest.raises(Declined, match="cannot spill to"):
        spill_by_key(_tables(), ["k0"], 3, tmp_path / "gone", "rows")


def test_rows_read_wrongly_fail_as_themselves(tmp_path: Path) -> None:
    """A failure of the rows' own reader is the caller's, never a ``Declined``; the
    files written so far are closed (the caller's folder removes them)."""

    def failing() -> Iterator[pa.Table]:
        yield from _tables()[:2]
        raise RuntimeError("a corrupt input")

    with pytest.raises(RuntimeError, match="a corrupt input"):
        spill_by_key(failing(), ["k0"], 3, tmp_path, "rows")
    assert len(list(tmp_path.iterdir())) == 3


def test_the_share_count_covers_the_estimate() -> None:
    assert share_count(0, 100) == 1
    assert share_count(100, 100) == 1
    assert share_count(101, 100) == 2
    assert share_count(10**15, 100) == MAX_SHARES
