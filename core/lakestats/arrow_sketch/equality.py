"""Iceberg equality deletes as dead rows, in the Arrow engine's tasks.

A data file's rows are dead where their equality columns equal a row of an equality-delete
file that applies to it (the format decided which apply: ``model.EqualityDeletes``), NULL
equal to NULL — the SQL job's null-safe anti-join (``deletes/spark_filter.py``). Here one
Spark task per few data files reads the equality columns of each data file and of its
delete files (each delete file once per task) as the sketch job reads columns, builds each
row's columns as one length-prefixed binary value (``key_sketch.key_values``: a NULL has
its own bytes, so NULL matches NULL) and looks the data rows' values up in the delete
files' (``KeyLookup``: indexed once per task, probed a batch at a time). The positions
found go to the sketch job with the position deletes', which drops them in its tasks.

Columns of other types than ``key_sketch.KEY_TYPES`` (decimals; floating point, where
NaN and -0.0 make equality subtle) and delete files in other formats than Parquet leave the
job to the SQL job (``equality_tasks`` returns why).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.arrow_sketch.arrays import key_hashes
from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.file_sketch import (
    ArrowColumn,
    Declined,
    arrow_type,
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
    deleted: dict[tuple[str, tuple[ArrowColumn, ...]], list[pa.Array]] = {}  # read once
    lookups: dict[_Group, KeyLookup] = {}  # and looked up through one index per set of files
    for task in tasks:
        try:
            yield task.path, "ok", DeadRows.of(_dead(task, match_by, deleted, lookups))
        except Declined as why:
            yield task.path, "declined", str(why)


_Group = tuple[tuple[ArrowColumn, ...], tuple[str, ...]]


def _dead(
    task: EqualityTask,
    match_by: Literal["field_id", "name"],
    deleted: dict[tuple[str, tuple[ArrowColumn, ...]], list[pa.Array]],
    lookups: dict[_Group, KeyLookup],
) -> np.ndarray:
    value_sets: dict[tuple[ArrowColumn, ...], KeyLookup] = {}
    for columns, delete_paths in task.groups:
        if (columns, delete_paths) not in lookups:  # files of a task often share theirs
            for path in delete_paths:
                if (path, columns) not in deleted:
                    rows = read_file_columns(path, columns, match_by)
                    deleted[path, columns] = [
                        pa.array([], arrow_type(c.spec)) if rows is None else rows[c.field_id]
                        for c in columns
                    ]
            keys = [
                pa.concat_arrays([deleted[path, columns][i] for path in delete_paths])
                for i in range(len(columns))
            ]
            lookups[columns, delete_paths] = KeyLookup(keys, [c.spec.type for c in columns])
        value_sets[columns] = lookups[columns, delete_paths]
    # the data file read once, with every group's equality columns, a batch at a time
    # (``file_sketch.read_batches``): a worker holds one batch of it, not the file
    wanted = {c.field_id: c for columns, _ in task.groups for c in columns}
    job = reading_job(tuple(wanted.values()), match_by)
    dead: list[np.ndarray] = []
    start = 0
    for n, batch in file_batches(task.path, job):
        hit = np.zeros(n, dtype=bool)
        for columns, lookup in value_sets.items():
            hit |= lookup.contains([batch[c.field_id] for c in columns])
        dead.append(np.flatnonzero(hit).astype(np.int64) + start)
        start += n
    return np.concatenate(dead) if dead else np.zeros(0, dtype=np.int64)


class KeyLookup:
    """The rows of equality columns (typed arrays, one per column), indexed once and probed
    a batch at a time.

    ``pc.is_in`` builds a hash table of its whole value set on every call: 0.27 s per batch
    for a million delete keys, paid by every batch of every data file. Here the rows are
    sorted once by ``arrays.key_hashes`` of their columns; a probe hashes its rows, finds
    each one's run of equal hashes by binary search (in hash order: it walks the index
    forward) and compares the candidates' keys as bytes (``key_sketch.key_values``: NULL
    equals NULL), so a hash collision never makes a row dead. A set no bigger than the
    probed batch goes through ``pc.is_in`` still: its hash table costs less than the
    binary search's extra work per row (``tests/bench/equality_lookup.py``)."""

    def __init__(self, columns: Sequence[pa.Array], types: Sequence[str]) -> None:
        self._types = tuple(types)
        hashes = key_hashes(columns)
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._keys = self._bytes(columns).take(pa.array(order))

    def __len__(self) -> int:
        return len(self._keys)

    def _bytes(self, columns: Sequence[pa.Array]) -> pa.Array:
        return key_values(list(zip(columns, self._types, strict=True)))

    def contains(self, columns: Sequence[pa.Array]) -> np.ndarray:
        """Whether each row of ``columns`` (the lookup's types) is one of the rows."""
        rows = len(columns[0])
        found = np.zeros(rows, dtype=bool)
        if not rows or not len(self._keys):
            return found
        if len(self._keys) <= rows:  # hashing a set no bigger than the batch costs less
            hits = pc.is_in(self._bytes(columns), value_set=self._keys)
            return np.asarray(hits.to_numpy(zero_copy_only=False), dtype=bool)
        hashes = key_hashes(columns)
        order = np.argsort(hashes)
        at = np.empty(rows, dtype=np.int64)
        at[order] = np.searchsorted(self._hashes, hashes[order])
        size = len(self._hashes)
        pending = np.flatnonzero(at < size)
        pending = pending[self._hashes[at[pending]] == hashes[pending]]
        while len(pending):  # each row of a run of equal hashes in turn; runs are ~1 long
            taken = pa.array(pending)
            probes = self._bytes([c.take(taken) for c in columns])
            same = pc.equal(probes, self._keys.take(pa.array(at[pending])))
            equal = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
            found[pending[equal]] = True
            pending = pending[~equal]
            at[pending] += 1
            pending = pending[at[pending] < size]
            pending = pending[self._hashes[at[pending]] == hashes[pending]]
        return found
