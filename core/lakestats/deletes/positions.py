"""Driver side of position deletes: (data file number, row position) pairs for the job.

Position-delete files are read with pyarrow, two columns only (``file_path``, ``pos``);
their ``file_path`` values go through the table's location mapping (writers on another
cluster wrote ``hdfs://…`` names) and are matched to the job's data files by their
canonical form — or, failing that, by their path without the file system, as the
manifests may name the file (``locations.path_spellings``) —, each delete file only
to the data files the format attached it to.
Matching works on the distinct paths (few), never row by row in Python. Deletion vectors
are decoded with pyroaring. The SQL job gets one Arrow table of them all; the Arrow engine
and the live-row counts take them one delete source at a time, into each file's compact
``DeadRows``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.deletes.plan import LiveReadPlan, plan_live_read
from lakestats.exceptions import DataFileError
from lakestats.locations import LocationMap, filesystem_from_uri, local_path, path_spellings
from lakestats.model import DataFile, DeletionVector, KeyMerge, PositionDeletes
from lakestats.pipeline import canonical_path

FID = "__dfid"
POS = "__dpos"
POSITIONS_SCHEMA = pa.schema([pa.field(FID, pa.int32()), pa.field(POS, pa.int64())])


def decode_vector(vector: DeletionVector) -> np.ndarray:
    """The deleted 0-based row positions of a deletion vector, ascending."""
    from pyroaring import BitMap64  # noqa: PLC0415 - imported on use

    try:
        bitmap = BitMap64.deserialize(vector.bitmap)
    except (ValueError, OSError) as exc:
        raise DataFileError(f"cannot decode a deletion vector: {exc}") from exc
    positions = np.frombuffer(bitmap.to_array(), dtype=np.uint64)
    if len(positions) and positions[-1] >= 1 << 63:
        raise DataFileError(f"a deletion vector holds row position {int(positions[-1])}")
    return positions.astype(np.int64)


def _read_parquet(source: str | pa.NativeFile, columns: list[str]) -> pa.Table:
    import pyarrow.parquet as pq  # noqa: PLC0415 - imported on use

    return pq.ParquetFile(source).read(columns=columns)


def _read_orc(source: str | pa.NativeFile, columns: list[str]) -> pa.Table:
    from pyarrow import orc  # noqa: PLC0415 - imported on use

    return orc.ORCFile(source).read(columns=columns)


_READERS: dict[str, Callable[[str | pa.NativeFile, list[str]], pa.Table]] = {
    "PARQUET": _read_parquet,
    "ORC": _read_orc,
}


def read_position_file(deletes: PositionDeletes) -> pa.Table:
    """``file_path`` and ``pos`` of a position-delete file (Parquet or ORC)."""
    reader = _READERS.get(deletes.file_format.upper())
    if reader is None:
        raise DataFileError(
            f"position-delete file {deletes.path} is {deletes.file_format}: lakestats reads "
            "Parquet and ORC delete files only"
        )
    columns = ["file_path", "pos"]
    try:
        local = local_path(deletes.path, percent_encoded=False)
        if local is not None:
            return reader(str(local), columns)
        filesystem, inner = filesystem_from_uri(deletes.path)
        with filesystem.open_input_file(inner) as source:
            return reader(source, columns)
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataFileError(f"cannot read position-delete file {deletes.path}: {first}") from exc


def positions_table(plan: LiveReadPlan, mapping: LocationMap) -> pa.Table:
    """Every deleted (data file number, position) of the job's position deletes and
    deletion vectors (``position_parts`` in one table: what the SQL job anti-joins)."""
    parts = list(position_parts(plan, mapping))
    return pa.concat_tables(parts) if parts else POSITIONS_SCHEMA.empty_table()


def position_parts(plan: LiveReadPlan, mapping: LocationMap) -> Iterator[pa.Table]:
    """The deleted (data file number, position) pairs of the job, one delete file or
    deletion vector at a time. ``plan.paths`` are where the job reads the data files
    (already mapped); a delete file's ``file_path`` value names one of them when its mapped
    canonical form (``pipeline.canonical_path``) is equal, and every row of a delete file
    the metadata ties to one data file (``PositionDeletes.target``) names that file."""
    number_of = {canonical_path(path): number for number, path in enumerate(plan.paths)}

    def numbered(value: str) -> int:
        keys = (canonical_path(mapping.apply(p)) for p in path_spellings(value))
        return next((number_of[k] for k in keys if k in number_of), -1)

    for deletes, numbers in plan.positions:
        rows = read_position_file(deletes)
        allowed = set(numbers)
        if deletes.target is not None:  # every row names the one file the metadata names
            target = numbered(deletes.target)
            fids = pa.array(np.full(rows.num_rows, target if target in allowed else -1, np.int32))
        else:
            paths = pc.dictionary_encode(rows.column("file_path").combine_chunks())
            targets = [
                found if (found := numbered(value)) in allowed else -1
                for value in paths.dictionary.to_pylist()
            ]
            fids = pc.take(pa.array(targets, pa.int32()), paths.indices)
        keep = pc.not_equal(fids, -1)
        lowest = pc.min(rows.column("pos")).as_py()
        if lowest is not None and lowest < 0:
            raise DataFileError(
                f"position-delete file {deletes.path} holds a negative row position ({lowest})"
            )
        yield pa.table(
            [pc.filter(fids, keep), pc.filter(rows.column("pos").cast(pa.int64()), keep)],
            schema=POSITIONS_SCHEMA,
        )
    for vector, number in plan.vectors:
        positions = decode_vector(vector)
        yield pa.table(
            [pa.array(np.full(len(positions), number, dtype=np.int32)), pa.array(positions)],
            schema=POSITIONS_SCHEMA,
        )


def dead_rows_by_file(plan: LiveReadPlan, mapping: LocationMap) -> tuple[list[DeadRows], int]:
    """Each of ``plan.paths``' dead rows from its position deletes and deletion vectors
    (in the order of ``plan.paths``), and how many (file, position) pairs the delete
    sources held. Built one source at a time: the driver never holds every deleted
    position of the job at once, only each file's ``DeadRows``."""
    found: dict[int, list[DeadRows]] = {}
    pairs = 0
    for part in position_parts(plan, mapping):
        pairs += part.num_rows
        if not part.num_rows:
            continue
        fids = part.column(FID).to_numpy()
        positions = part.column(POS).to_numpy()
        order = np.argsort(fids, kind="stable")
        fids, positions = fids[order], positions[order]
        bounds = [0, *(np.flatnonzero(fids[1:] != fids[:-1]) + 1).tolist(), len(fids)]
        for start, end in itertools.pairwise(bounds):
            found.setdefault(int(fids[start]), []).append(DeadRows.of(positions[start:end]))
    return [DeadRows.union(found.get(n, [])) for n in range(len(plan.paths))], pairs


def live_rows_from_positions(files: Sequence[DataFile], mapping: LocationMap) -> dict[str, int]:
    """Live rows of files whose deletes are only position deletes and deletion vectors,
    without reading their data: each file's distinct deleted positions below its row
    count, from the delete files (read on the driver) and the vectors. Keyed by path."""
    mapped = {f.path: mapping.apply(f.path) for f in files}
    plan = plan_live_read(
        {
            mapped[f.path]: tuple(
                d if isinstance(d, DeletionVector) else replace(d, path=mapping.apply(d.path))
                for d in f.deletes
                if not isinstance(d, KeyMerge)  # never given here: sketching.py
            )
            for f in files
        }
    )
    dead, _ = dead_rows_by_file(plan, mapping)
    number = {path: n for n, path in enumerate(plan.paths)}
    return {
        f.path: f.record_count - dead[number[mapped[f.path]]].count_below(f.record_count)
        for f in files
    }
