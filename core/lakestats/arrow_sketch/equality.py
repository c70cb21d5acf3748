"""Iceberg equality deletes as dead rows, in the Arrow engine's tasks.

A data file's rows are dead where their equality columns equal a row of an equality-delete
file that applies to it (the format decided which apply: ``model.EqualityDeletes``), NULL
equal to NULL — the SQL job's null-safe anti-join (``deletes/spark_filter.py``). Here one
Spark task per few data files reads the equality columns of each data file and of its
delete files as the sketch job reads columns, builds each row's columns as one
length-prefixed binary value (``key_sketch.key_values``: a NULL has its own bytes, so NULL
matches NULL) and looks the data rows' values up in the delete files' (``KeyLookup``). The
positions found go to the sketch job with the position deletes', which drops them in its
tasks.

A task indexes every delete file it needs once, whichever of its data files it applies to
(``DeleteSet``): each delete row remembers its file, and a data row dies only by a row of a
file that applies to its own. (Flink's upserts write a delete file per checkpoint, which
applies to the data files of every checkpoint before it: one index per distinct list of
files would hold the oldest files once per data file.) A set too big for a task's memory
(its footers say: ``lookup_shares``) is looked up a share of its keys at a time, as a
grace hash join does (``spill``): the delete rows and the rows of the data files they may
kill are spilled by a hash of their key to local disk, and each share's delete rows are
indexed and probed alone. Equal keys hash equally, so each share finds exactly its keys'
dead rows.

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
from lakestats.arrow_sketch.dead_rows import DeadRows, RowFlags
from lakestats.arrow_sketch.file_sketch import (
    ArrowColumn,
    ArrowJob,
    Declined,
    InputFooter,
    arrow_type,
    file_batches,
    positioned_batches,
    read_footer,
    reading_job,
)
from lakestats.arrow_sketch.key_sketch import key_type_supported, key_values
from lakestats.arrow_sketch.spill import (
    SHARE_BYTES,
    read_share,
    share_batches,
    share_count,
    spill_by_key,
    spill_folder,
)
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
            columns.append(ArrowColumn.of(column, spec, False))
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


@dataclass(frozen=True, eq=False)
class DeleteSet:
    """The delete files on one set of equality columns that a task's data files use, and
    which of them apply to each data file."""

    columns: tuple[ArrowColumn, ...]
    paths: tuple[str, ...]
    data_paths: tuple[str, ...]
    applies: np.ndarray  # bool [data file, delete file]: this file's rows kill that file's

    @classmethod
    def of_tasks(cls, tasks: Sequence[EqualityTask]) -> list[DeleteSet]:
        """One set per set of equality columns among ``tasks``, each delete file once."""
        by_columns: dict[tuple[ArrowColumn, ...], dict[str, tuple[str, ...]]] = {}
        for task in tasks:
            for columns, delete_paths in task.groups:
                by_columns.setdefault(columns, {})[task.path] = delete_paths
        out = []
        for columns, users in by_columns.items():
            paths = tuple(dict.fromkeys(p for used in users.values() for p in used))
            number = {path: n for n, path in enumerate(paths)}
            applies = np.zeros((len(users), len(paths)), dtype=bool)
            for row, used in enumerate(users.values()):
                applies[row, [number[p] for p in used]] = True
            out.append(cls(columns, paths, tuple(users), applies))
        return out


def equality_partition(
    match_by: Literal["field_id", "name"],
    tasks: Iterator[EqualityTask],
    share_bytes: int = SHARE_BYTES,
) -> Iterator[tuple[str, str, DeadRows | str]]:
    """Runs in a Spark task: ``(data file, "ok", its DeadRows)`` per task, or
    ``(data file, "declined", why)`` when a file is not read as the SQL job reads it. A
    delete set whose lookup would hold more than ``share_bytes`` is looked up in shares
    (``lookup_shares``)."""
    planned = list(tasks)  # a few data files' names: a set's files are looked up together
    spilled: list[dict[str, DeadRows]] = []
    in_memory: list[tuple[DeleteSet, KeyLookup]] = []
    try:
        for deletes in DeleteSet.of_tasks(planned):
            job = reading_job(deletes.columns, match_by)
            shares = lookup_shares([read_footer(p, job) for p in deletes.paths], share_bytes)
            if shares > 1:
                spilled.append(dead_in_shares(deletes, job, shares))
            else:
                in_memory.append((deletes, _lookup(deletes, job)))
    except Declined as why:
        for task in planned:
            yield task.path, "declined", str(why)
        return
    for task in planned:
        try:
            dead = DeadRows.of(_dead(task.path, in_memory, match_by))
        except Declined as why:
            yield task.path, "declined", str(why)
            continue
        found = [by_path[task.path] for by_path in spilled if task.path in by_path]
        yield task.path, "ok", DeadRows.union([dead, *found])


def _names(deletes: DeleteSet) -> list[str]:
    return [f"k{i}" for i in range(len(deletes.columns))]


def _keyed(deletes: DeleteSet, batch: dict[int, pa.Array]) -> dict[str, pa.Array]:
    """A batch's equality columns under their ``_names``."""
    return {
        name: batch[c.field_id] for name, c in zip(_names(deletes), deletes.columns, strict=True)
    }


def _delete_batches(deletes: DeleteSet, job: ArrowJob) -> Iterator[pa.Table]:
    """Every delete file's rows a batch at a time: ``k0…`` (the equality columns) and each
    row's ``file`` (its number in ``deletes.paths``)."""
    for number, path in enumerate(deletes.paths):
        for n, batch in file_batches(path, job):
            table = _keyed(deletes, batch)
            table["file"] = pa.array(np.full(n, number, dtype=np.int32))
            yield pa.table(table)


def _lookup(deletes: DeleteSet, job: ArrowJob) -> KeyLookup:
    """The whole set's rows, indexed."""
    batches = list(_delete_batches(deletes, job))
    if not batches:
        empty = [pa.array([], arrow_type(c.spec)) for c in deletes.columns]
        return KeyLookup(empty, _types(deletes), np.zeros(0, dtype=np.int32))
    rows = pa.concat_tables(batches).combine_chunks()
    del batches
    keys = [rows.column(name).combine_chunks() for name in _names(deletes)]
    return KeyLookup(keys, _types(deletes), rows.column("file").to_numpy())


def _types(deletes: DeleteSet) -> list[str]:
    return [c.spec.type for c in deletes.columns]


def _dead(
    data_path: str,
    lookups: Sequence[tuple[DeleteSet, KeyLookup]],
    match_by: Literal["field_id", "name"],
) -> np.ndarray:
    """The data file's rows that a row of an applying delete file of ``lookups`` equals."""
    used = []
    for deletes, lookup in lookups:
        if data_path in deletes.data_paths:
            applies = deletes.applies[deletes.data_paths.index(data_path)][None, :]
            used.append((deletes.columns, lookup, applies))
    if not used:
        return np.zeros(0, dtype=np.int64)
    # the data file read once, with every set's equality columns, a batch at a time
    # (``file_sketch.read_batches``): a worker holds one batch of it, not the file
    wanted = {c.field_id: c for columns, _, _ in used for c in columns}
    job = reading_job(tuple(wanted.values()), match_by)
    dead: list[np.ndarray] = []
    start = 0
    for n, batch in file_batches(data_path, job):
        hit = np.zeros(n, dtype=bool)
        for columns, lookup, applies in used:
            hit |= lookup.contains([batch[c.field_id] for c in columns], applies)
        dead.append(np.flatnonzero(hit).astype(np.int64) + start)
        start += n
    return np.concatenate(dead) if dead else np.zeros(0, dtype=np.int64)


# What a lookup holds per delete row besides its columns, which it holds about three times
# (as read, concatenated, inside the key bytes): the key bytes' offsets and length
# prefixes, twice (built, then taken in hash order), the hashes, their order and files,
# and what the reader's pool keeps. Measured: a set of 4 M / 16 M keys of 27 bytes peaked
# 0.9 / 3.4 GiB looked up at once, 222 bytes a row (docs/benchmarks.md, "An
# equality-delete set against a task's memory").
_ROW_OVERHEAD = 140


def lookup_shares(footers: Sequence[InputFooter], share_bytes: int) -> int:
    """Shares of a delete set's keys that keep each share's lookup within ``share_bytes``
    (estimated from the delete files' footers); 1: looked up at once."""
    estimate = sum(3 * f.column_bytes + f.rows * _ROW_OVERHEAD for f in footers)
    return share_count(estimate, share_bytes)


def dead_in_shares(deletes: DeleteSet, job: ArrowJob, shares: int) -> dict[str, DeadRows]:
    """Each data file's rows that a row of an applying delete file equals, found a share of
    the keys at a time: both sides are read once, a batch at a time, and spilled by key;
    each share's delete rows are indexed (``KeyLookup``) and its data rows probed a spilled
    batch at a time, marking a bit per data row."""
    names = _names(deletes)
    named = list(zip(names, deletes.columns, strict=True))
    # each data file's footer read and closed: its rows size its flags
    found = [RowFlags(read_footer(p, job).rows) for p in deletes.data_paths]
    with spill_folder("equality lookup") as folder:
        deleted = spill_by_key(_delete_batches(deletes, job), names, shares, folder, "deletes")
        data = positioned_batches(deletes.data_paths, job, named)
        probed = spill_by_key(data, names, shares, folder, "rows")
        for delete_share, data_share in zip(deleted, probed, strict=True):
            if delete_share is None or data_share is None:
                continue  # no key of this share on one side: nothing dies
            share = read_share(delete_share)
            keys = [share.column(name).combine_chunks() for name in names]
            lookup = KeyLookup(keys, _types(deletes), share.column("file").to_numpy())
            del share, keys
            for batch in share_batches(data_share):
                inputs = batch.column("input").to_numpy()
                probe = [batch.column(name) for name in names]
                hit = lookup.contains(probe, deletes.applies, inputs)
                positions = batch.column("position").to_numpy()
                for number in np.unique(inputs[hit]):
                    found[number].mark(positions[hit & (inputs == number)])
            del lookup  # before the next share's: one share's delete rows at a time
    return {path: flags.dead_rows() for path, flags in zip(deletes.data_paths, found, strict=True)}


class KeyLookup:
    """The rows of equality columns (typed arrays, one per column), indexed once and probed
    a batch at a time; each row may carry a tag (the delete file it comes from) that says
    which probed rows it may match.

    ``pc.is_in`` builds a hash table of its whole value set on every call: 0.27 s per batch
    for a million delete keys, paid by every batch of every data file. Here the rows are
    sorted once by ``arrays.key_hashes`` of their columns; a probe hashes its rows, finds
    each one's run of equal hashes by binary search (in hash order: it walks the index
    forward) and compares the candidates' keys as bytes (``key_sketch.key_values``: NULL
    equals NULL), so a hash collision never makes a row dead. A set no bigger than the
    probed batch goes through ``pc.is_in`` still when every row may match: its hash table
    costs less than the binary search's extra work per row
    (``tests/bench/equality_lookup.py``)."""

    def __init__(
        self, columns: Sequence[pa.Array], types: Sequence[str], tags: np.ndarray | None = None
    ) -> None:
        self._types = tuple(types)
        hashes = key_hashes(columns)
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._keys = self._bytes(columns).take(pa.array(order))
        self._tags = None if tags is None else np.asarray(tags)[order]

    def __len__(self) -> int:
        return len(self._keys)

    def _bytes(self, columns: Sequence[pa.Array]) -> pa.Array:
        return key_values(list(zip(columns, self._types, strict=True)))

    def contains(
        self,
        columns: Sequence[pa.Array],
        allowed: np.ndarray | None = None,
        inputs: np.ndarray | None = None,
    ) -> np.ndarray:
        """Whether each row of ``columns`` (the lookup's types) equals one of the rows that
        may match it: with ``allowed`` (bool [input, tag]), a row of input ``inputs[i]``
        (0 for every row without ``inputs``) only matches rows whose tag it allows."""
        rows = len(columns[0])
        found = np.zeros(rows, dtype=bool)
        if not rows or not len(self._keys):
            return found
        unrestricted = allowed is None or self._tags is None or bool(allowed.all())
        if unrestricted and len(self._keys) <= rows:  # a set no bigger than the batch
            hits = pc.is_in(self._bytes(columns), value_set=self._keys)
            return np.asarray(hits.to_numpy(zero_copy_only=False), dtype=bool)
        row_input = np.zeros(rows, dtype=np.int64) if inputs is None else inputs
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
            match = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
            if not unrestricted:
                assert allowed is not None and self._tags is not None
                match &= allowed[row_input[pending], self._tags[at[pending]]]
            found[pending[match]] = True
            pending = pending[~match]  # a key's other rows (other files) are next in its run
            at[pending] += 1
            pending = pending[at[pending] < size]
            pending = pending[self._hashes[at[pending]] == hashes[pending]]
        return found
