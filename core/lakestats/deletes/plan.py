"""Which data files of a sketch job have which deletes (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakestats.model import (
    DataFile,
    DeleteSource,
    DeletionVector,
    EqualityDeletes,
    KeyMerge,
    PositionDeletes,
)


@dataclass(frozen=True)
class EqualityGroup:
    """Equality-delete files sharing one set of equality field ids, each with the data
    files (numbers) it applies to."""

    field_ids: tuple[int, ...]
    files: tuple[tuple[EqualityDeletes, tuple[int, ...]], ...]


@dataclass(frozen=True)
class LiveReadPlan:
    """The deletes of one sketch job. Data files are numbered by their index in
    ``paths`` (the job's ``__fid``); each delete lists the numbers it applies to."""

    paths: tuple[str, ...]
    positions: tuple[tuple[PositionDeletes, tuple[int, ...]], ...] = ()
    vectors: tuple[tuple[DeletionVector, int], ...] = ()
    equality: tuple[EqualityGroup, ...] = ()
    merges: tuple[tuple[KeyMerge, int], ...] = ()  # each file's primary-key merge

    @property
    def needs_row_index(self) -> bool:
        return bool(self.positions or self.vectors)


def plan_live_read(deletes: Mapping[str, Sequence[DeleteSource]]) -> LiveReadPlan:
    """``deletes``: data file path (as the job reads it) → the deletes that apply to it."""
    paths = tuple(deletes)
    positions: dict[PositionDeletes, list[int]] = {}
    vectors: list[tuple[DeletionVector, int]] = []
    equality: dict[tuple[int, ...], dict[EqualityDeletes, list[int]]] = {}
    merges: list[tuple[KeyMerge, int]] = []
    for number, path in enumerate(paths):
        for source in deletes[path]:
            if isinstance(source, PositionDeletes):
                positions.setdefault(source, []).append(number)
            elif isinstance(source, DeletionVector):
                vectors.append((source, number))
            elif isinstance(source, KeyMerge):
                merges.append((source, number))
            else:
                by_file = equality.setdefault(tuple(source.field_ids), {})
                by_file.setdefault(source, []).append(number)
    return LiveReadPlan(
        paths=paths,
        positions=tuple((d, tuple(n)) for d, n in positions.items()),
        vectors=tuple(vectors),
        equality=tuple(
            EqualityGroup(ids, tuple((d, tuple(n)) for d, n in files.items()))
            for ids, files in equality.items()
        ),
        merges=tuple(merges),
    )


def vector_only_live_rows(data_file: DataFile) -> int | None:
    """Live rows of a file whose only deletes are deletion vectors: exact without reading
    data (the vectors' union, decoded here). ``None`` for other files."""
    if not data_file.deletes or not all(isinstance(d, DeletionVector) for d in data_file.deletes):
        return None
    from pyroaring import BitMap64  # noqa: PLC0415 - imported on use

    deleted = BitMap64()
    for source in data_file.deletes:
        assert isinstance(source, DeletionVector)
        deleted |= BitMap64.deserialize(source.bitmap)
    # positions past the file's end delete nothing (the union counts each row once)
    return data_file.record_count - deleted.range_cardinality(0, data_file.record_count)
