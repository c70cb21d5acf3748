"""``ReusingSketcher``: stored sketches stand in for files the store holds; everything
else, and every read with deletes, goes to the sketcher it wraps. The walks it serves run
end to end in ``tests/core/formats/test_rollback_walk.py`` (Spark, every format)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from lakestats.exceptions import StoreError
from lakestats.model import Column, ColumnSketch, TableSchema
from lakestats.sketching import ReusingSketcher

SCHEMA = TableSchema(schema_id=0, columns=(Column(1, "id", "long"),))
STORED = {"held": {1: ColumnSketch(null_count=0, min=1, max=9)}}


class Inner:
    """Answers every path with a sketch of its own; records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.startup_s = 2.5

    def __call__(
        self, paths: Sequence[str], schema: TableSchema, bounds_for: Collection[int], **kw: Any
    ) -> Mapping[str, Mapping[int, ColumnSketch]]:
        self.calls.append((list(paths), kw))
        return {path: {1: ColumnSketch(null_count=len(path))} for path in paths}


def stored(paths: Sequence[str]) -> Mapping[str, Mapping[int, ColumnSketch]]:
    return {p: STORED[p] for p in paths if p in STORED}


def test_held_files_come_from_the_store_the_rest_from_the_sketcher() -> None:
    inner = Inner()
    sketcher = ReusingSketcher(inner, stored)

    got = sketcher(["held", "new"], SCHEMA, (), written_as={"held": "r1", "new": "r2"})

    assert got == {"held": STORED["held"], "new": {1: ColumnSketch(null_count=3)}}
    assert inner.calls == [(["new"], {"written_as": {"new": "r2"}})]
    assert sketcher.reused == {"held"} and sketcher.startup_s == 2.5


def test_a_call_the_store_answers_whole_starts_nothing() -> None:
    inner = Inner()
    sketcher = ReusingSketcher(inner, stored)
    assert sketcher(["held"], SCHEMA, ()) == STORED
    assert inner.calls == [] and sketcher.startup_s == 0.0


def test_reads_with_deletes_are_never_answered_from_the_store() -> None:
    inner = Inner()
    sketcher = ReusingSketcher(inner, stored)
    deletes = {"held": ("a position delete",)}
    got = sketcher(["held"], SCHEMA, (), deletes=deletes)
    assert got == {"held": {1: ColumnSketch(null_count=4)}}
    assert inner.calls == [(["held"], {"deletes": deletes})]
    assert sketcher.reused == set()


def test_an_unreadable_store_means_reading_the_files() -> None:
    def swept(paths: Sequence[str]) -> Mapping[str, Mapping[int, ColumnSketch]]:
        raise StoreError("segments/1.parquet: not found")

    inner = Inner()
    sketcher = ReusingSketcher(inner, swept)
    assert set(sketcher(["held", "new"], SCHEMA, ())) == {"held", "new"}
    assert inner.calls == [(["held", "new"], {})]
    assert sketcher.reused == set()
