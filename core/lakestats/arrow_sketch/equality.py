"""Iceberg equality deletes as dead rows, in the Arrow engine's tasks.

A data file's rows are dead where their equality columns equal a row of an equality-delete
file that applies to it (the format decided which apply: ``model.EqualityDeletes``), NULL
equal to NULL — the SQL job's null-safe anti-join (``deletes/spark_filter.py``). Here one
Spark task per few data files reads the equality columns of each data file and of its
delete files (each delete file once per task) as the sketch job reads columns, builds each
row's columns as one length-prefixed binary value (``key_sketch.key_values``: a NULL has
its own bytes, so NULL matches NULL) and looks the data rows' values up in the delete
files'. The positions found go to the sketch job with the position deletes', which drops
them in its tasks.

Columns of other types than ``key_sketch.KEY_TYPES`` (decimals; floating point, where
NaN and -0.0 make equality subtle) and delete files in other formats than Parquet leave the
job to the SQL job (``equality_tasks`` returns why).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.file_sketch import (
    ArrowColumn,
    Declined,
    file_batches,
    read_file_columns,
    reading_job,
)
from lakestats.arrow_sketch.key_sketch import key_type_supported, key_values
from lakestats.deletes.plan import LiveReadPlan
from lakestats.model import TableSchema
from lakestats.sketches.spec import type_spec


@dataclass(frozen=True)
class EqualityTask:
    """One data file and, per set of equality columns, the delete files that apply to it."""

    path: str
    groups: tuple[tuple[tuple[ArrowColumn, ...], tuple[str, ...]], ...]


def equality_tasks(plan: LiveReadPlan, schema: TableSchema) -> list[EqualityTask] | str:
    """The plan's equality deletes per data file, or why the SQL job must apply them."""
    by_id = schema.by_id()
    per_file: dict[int, dict[tuple[ArrowColumn, ...], list[str]]] = {}
    for group in plan.equality:
        columns = []
        for field_id in group.field_ids:
            column = by_id.get(field_id)
            spec = None if column is None else type_spec(column.type)
            if column is None or spec is None or not key_type_supported(spec.type):
                what = "not in the schema" if column is None else f"of type {column.type}"
                return f"equality field id {field_id} is {what}"
            columns.append(ArrowColumn(field_id, tuple(column.name.split(".")), spec, False))
        for deletes, numbers in group.files:
            if deletes.file_format.upper() != "PARQUET":
                return f"equality deletes in {deletes.file_format} ({deletes.path})"
            for number in numbers:
                by_columns = per_file.setdefault(number, {})
                by_columns.setdefault(tuple(columns), []).append(deletes.path)
    return [
        EqualityTask(plan.paths[n], tuple((c, tuple(p)) for c, p in groups.items()))
        for n, groups in sorted(per_file.items())
    ]


# -- in the Spark task ----------------------------------------------------------------------


def equality_partition(
    match_by: Literal["field_id", "name"], tasks: Iterator[EqualityTask]
) -> Iterator[tuple[str, str, DeadRows | str]]:
    """Runs in a Spark task: ``(data file, "ok", its DeadRows)`` per task, or
    ``(data file, "declined", why)`` when a file is not read as the SQL job reads it."""
    deleted: dict[tuple[str, tuple[ArrowColumn, ...]], pa.Array] = {}  # per task: read once
    for task in tasks:
        try:
            yield task.path, "ok", DeadRows.of(_dead(task, match_by, deleted))
        except Declined as why:
            yield task.path, "declined", str(why)


def _dead(
    task: EqualityTask,
    match_by: Literal["field_id", "name"],
    deleted: dict[tuple[str, tuple[ArrowColumn, ...]], pa.Array],
) -> np.ndarray:
    value_sets: dict[tuple[ArrowColumn, ...], pa.Array] = {}
    for columns, delete_paths in task.groups:
        for path in delete_paths:
            if (path, columns) not in deleted:
                rows = read_file_columns(path, columns, match_by)
                empty = pa.array([], pa.large_binary())
                deleted[path, columns] = empty if rows is None else _keys(rows, columns)
        value_sets[columns] = pa.concat_arrays([deleted[path, columns] for path in delete_paths])
    # the data file read once, with every group's equality columns, a batch at a time
    # (``file_sketch.read_batches``): a worker holds one batch of it, not the file
    wanted = {c.field_id: c for columns, _ in task.groups for c in columns}
    job = reading_job(tuple(wanted.values()), match_by)
    dead: list[np.ndarray] = []
    start = 0
    for n, batch in file_batches(task.path, job):
        hit = np.zeros(n, dtype=bool)
        for columns, value_set in value_sets.items():
            hits = pc.is_in(_keys(batch, columns), value_set=value_set)
            hit |= np.asarray(hits.to_numpy(zero_copy_only=False), dtype=bool)
        dead.append(np.flatnonzero(hit).astype(np.int64) + start)
        start += n
    return np.concatenate(dead) if dead else np.zeros(0, dtype=np.int64)


def _keys(rows: Mapping[int, pa.Array], columns: Sequence[ArrowColumn]) -> pa.Array:
    """Each row's equality columns as one binary value (NULL its own bytes)."""
    return key_values([(rows[c.field_id], c.spec.type) for c in columns])
