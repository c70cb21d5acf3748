"""The equality-delete lookup (``arrow_sketch/equality.py`` ``KeyLookup``) answers what
``pc.is_in`` answers on the rows' key bytes (``key_values``: the SQL job's null-safe
equality) for rows of typed columns, NULL parts, repeats and forced hash collisions
included."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakestats.arrow_sketch import equality
from lakestats.arrow_sketch.equality import KeyLookup
from lakestats.arrow_sketch.key_sketch import key_values

TYPES = ("long", "string")


def _columns(ids: list[int | None], names: list[str | None]) -> list[pa.Array]:
    return [pa.array(ids, pa.int64()), pa.array(names, pa.string())]


def _bytes(columns: list[pa.Array]) -> pa.Array:
    return key_values(list(zip(columns, TYPES, strict=True)))


def test_probes_answer_what_is_in_answers_on_the_key_bytes() -> None:
    rng = np.random.default_rng(2)
    deleted_ids = rng.integers(0, 500, 3_000).tolist()  # repeats: a key deleted twice
    deleted_names = [None if i % 7 == 0 else f"n{i % 11}" for i in deleted_ids]
    deletes = _columns(deleted_ids, deleted_names)
    lookup = KeyLookup(deletes, TYPES)
    assert len(lookup) == 3_000

    for seed in range(5):
        probe = np.random.default_rng(seed)
        ids = [None if x < 5 else int(x) for x in probe.integers(0, 700, 10_000)]
        names = [None if (i or 0) % 7 == 0 else f"n{(i or 0) % 11}" for i in ids]
        values = _columns(ids, names)
        want = pc.is_in(_bytes(values), value_set=_bytes(deletes)).to_numpy(zero_copy_only=False)
        got = lookup.contains(values)
        assert got.tolist() == want.tolist()
        assert 0 < got.sum() < len(ids)
        # at an offset, as a batch of a longer column is
        assert lookup.contains([c.slice(17) for c in values]).tolist() == want[17:].tolist()


def test_equal_hashes_of_different_keys_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # every row hashes alike: each probe walks the whole run, comparing bytes
    monkeypatch.setattr(
        equality, "key_hashes", lambda columns: np.zeros(len(columns[0]), np.uint64)
    )
    lookup = KeyLookup(_columns([1, 2, 3, 3, None], ["a", "b", None, None, "z"]), TYPES)
    values = _columns([3, 2, 2, None, 9, 1], [None, "b", "c", "z", "a", "a"])

    assert lookup.contains(values).tolist() == [True, True, False, True, False, True]


def test_nothing_is_found_in_an_empty_set_or_for_no_rows() -> None:
    empty = KeyLookup(_columns([], []), TYPES)
    assert empty.contains(_columns([1], ["a"])).tolist() == [False]
    one = KeyLookup(_columns([1], ["a"]), TYPES)
    assert one.contains([c.slice(0, 0) for c in _columns([2], ["b"])]).tolist() == []
