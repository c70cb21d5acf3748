"""Primary-key merges that keep one physical row per key, in the Arrow engine's tasks.

Under Paimon's ``deduplicate`` and ``first-row`` engines the merged row of a key is one of
its physical rows: the highest-ordered one (``first-row``: the lowest), in the file that
holds it (``model.KeyMerge``). A merge of such a table is therefore, per file, a set of
dead row positions, which the Arrow engine's sketch tasks drop as they drop a deletion
vector's. This module finds them: one Spark task per merge group (a bucket's live files,
``KeyMerge.inputs``) reads only the key, sequence and row-kind columns of every input,
orders each key's rows and marks the winners (``surviving_rows``, the same rules as the SQL
job's ``deletes/key_merge.py``), and returns each requested file's ``DeadRows``. A bucket
too big to merge at once is merged a share of its keys at a time (``dead_rows``).

Merges it cannot reproduce exactly are left to the SQL job (``winner_groups`` returns the
reason): the aggregating engines (a merged row is made of several rows), inputs written
with other key or sequence column names or types, a row-kind column that is also a table column,
floating-point or unsketchable key columns, a sequence or row-kind column without a field
id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.arrow_sketch.dead_rows import DeadRows, RowFlags
from lakestats.arrow_sketch.file_sketch import (
    ArrowColumn,
    ArrowJob,
    Declined,
    InputFooter,
    arrow_type,
    positioned_batches,
    read_footer,
    reading_job,
)
from lakestats.arrow_sketch.spill import (
    SHARE_BYTES,
    read_share,
    share_count,
    spill_by_key,
    spill_folder,
)
from lakestats.model import Column, KeyMerge, TableSchema
from lakestats.sketches.spec import type_spec

UPDATE_BEFORE, DELETE = 1, 3  # Paimon row kinds -U and -D; +I and +U are 0 and 2
_RETRACT = (UPDATE_BEFORE, DELETE)
WINNER_ENGINES = frozenset({"deduplicate", "first-row"})

_FLOATING = frozenset({"float", "double"})


@dataclass(frozen=True)
class WinnerGroup:
    """One merge group: every input of a bucket, and the job's files among them."""

    inputs: tuple[str, ...]
    requested: tuple[str, ...]
    # read as the sketch job reads columns (``file_sketch.read_columns``)
    keys: tuple[ArrowColumn, ...]
    order: tuple[ArrowColumn, ...]  # sequence fields, then the sequence column
    kind: ArrowColumn
    first_row: bool
    ignore_delete: bool
    remove_record_on_delete: bool


def winner_groups(
    merges: Sequence[tuple[KeyMerge, int]], paths: Sequence[str], schema: TableSchema
) -> list[WinnerGroup] | str:
    """The merge groups of a job's ``merges`` (``LiveReadPlan.merges``: each file's merge,
    by its number in ``paths``), or why the Arrow engine leaves them to the SQL job."""
    by_id = schema.by_id()
    groups: dict[KeyMerge, list[str]] = {}  # a file's merge names its bucket's inputs
    for merge, number in merges:
        why = _unsupported(merge, by_id, {c.name for c in schema.columns})
        if why is not None:
            return why
        if paths[number] not in {i.path for i in merge.inputs}:
            return f"{paths[number]} is not among its own merge inputs"
        groups.setdefault(merge, []).append(paths[number])
    out = []
    for merge, requested in groups.items():
        out.append(
            WinnerGroup(
                inputs=tuple(dict.fromkeys(i.path for i in merge.inputs)),
                requested=tuple(requested),
                keys=tuple(_column(by_id[f]) for f in merge.key_field_ids),
                order=(
                    *(_column(by_id[f]) for f in merge.sequence_field_ids),
                    _system(merge.sequence_field_id, merge.sequence_column, "long"),
                ),
                kind=_system(merge.row_kind_field_id, merge.row_kind_column, "int"),
                first_row=merge.engine == "first-row",
                ignore_delete=merge.ignore_delete,
                remove_record_on_delete=merge.remove_record_on_delete,
            )
        )
    return out


def _column(column: Column) -> ArrowColumn:
    spec = type_spec(column.type)
    assert spec is not None  # _unsupported refused the others
    return ArrowColumn.of(column, spec, False)


def _system(field_id: int | None, name: str, type_str: str) -> ArrowColumn:
    spec = type_spec(type_str)
    assert field_id is not None and spec is not None  # _unsupported refused a missing id
    return ArrowColumn(field_id, (name,), spec, False)


def _unsupported(merge: KeyMerge, by_id: Mapping[int, Column], names: set[str]) -> str | None:
    if merge.engine not in WINNER_ENGINES:
        return f"the {merge.engine} engine makes merged rows of several rows"
    if merge.sequence_field_id is None or merge.row_kind_field_id is None:
        return "the sequence or row-kind column has no field id (matched by name in the SQL job)"
    merged = {*merge.key_field_ids, *merge.sequence_field_ids}
    if any(w[0] in merged for i in merge.inputs for w in i.written_as):
        return "a merge input was written with other key or sequence column names or types"
    if merge.row_kind_column in names:
        return f"the row kind column {merge.row_kind_column!r} is a table column"
    for field_id in (*merge.key_field_ids, *merge.sequence_field_ids):
        column = by_id.get(field_id)
        if column is None:
            return f"merge field id {field_id} is not in the table schema"
        type_str = column.type
        if type_spec(type_str) is None or type_str in _FLOATING:
            return f"merge column of type {type_str} (grouped by the SQL job)"
    return None


# -- in the Spark task ----------------------------------------------------------------------


# What a merge holds per row at its peak besides its merge columns, which it holds twice
# (as read, then taken in key order): row numbers, sort indices, kinds, group numbers and
# masks (``spill.SHARE_BYTES`` says what this estimate kept a big bucket's merge to).
_ROW_OVERHEAD = 64


def dead_rows(
    group: WinnerGroup, *, shares: int | None = None, share_bytes: int = SHARE_BYTES
) -> dict[str, DeadRows]:
    """Each requested file's dead rows. Raises ``Declined`` for inputs it cannot read as
    the SQL job would, and a missing or unreadable input fails as in the sketch tasks
    (``file_sketch.reading_file``).

    A bucket whose merge would hold more than ``share_bytes`` is merged a share of its keys
    at a time (``merge_shares``; ``shares`` overrides it), as a grace hash join does: the
    inputs are read once, a batch at a time, each row's merge columns spilled to its key's
    share on local disk (``spill``), then each share is merged alone. Every row of a key
    is in one share, so each share finds its keys' winners exactly; they mark a bit per
    row of the requested files."""
    job = reading_job(_merge_columns(group), "field_id")
    # each input's footer read and closed: a bucket of many sorted runs holds no descriptors
    footers = [read_footer(path, job) for path in group.inputs]
    if shares is None:
        shares = merge_shares(footers, share_bytes)
    number = {path: n for n, path in enumerate(group.inputs)}
    rows = {footer.path: footer.rows for footer in footers}
    found = {path: RowFlags(rows[path]) for path in group.requested}
    for data in _shares(group, job, shares):
        _mark_dead(data, group, number, found)
        del data  # before the next share is read: one share's rows in memory at a time
    return {path: flags.dead_rows() for path, flags in found.items()}


def _mark_dead(
    data: pa.Table,
    group: WinnerGroup,
    number: Mapping[str, int],
    found: Mapping[str, RowFlags],
) -> None:
    """Mark in ``found`` (requested path → its rows' flags) the dead rows among
    ``data``'s rows (``_batches``' columns)."""
    alive = surviving_rows(
        data.select([f"k{i}" for i in range(len(group.keys))]),
        data.select([f"o{i}" for i in range(len(group.order))]),
        data.column("kind").to_numpy(zero_copy_only=False),
        first_row=group.first_row,
        ignore_delete=group.ignore_delete,
        remove_record_on_delete=group.remove_record_on_delete,
    )
    dead = ~alive
    numbers = data.column("input").to_numpy()
    positions = data.column("position").to_numpy()
    for path, flags in found.items():
        flags.mark(positions[dead & (numbers == number[path])])


def merge_shares(footers: Sequence[InputFooter], share_bytes: int) -> int:
    """Shares of a bucket's keys that keep each share's merge within ``share_bytes``
    (estimated from the inputs' footers); 1: merged at once."""
    estimate = sum(2 * f.column_bytes + f.rows * _ROW_OVERHEAD for f in footers)
    return share_count(estimate, share_bytes)


def _merge_columns(group: WinnerGroup) -> list[ArrowColumn]:
    return list(dict.fromkeys([*group.keys, *group.order, group.kind]))


def _named(group: WinnerGroup) -> list[tuple[str, ArrowColumn]]:
    """The merge columns under their names in a batch: ``k0…`` (keys), ``o0…`` (order),
    ``kind``."""
    return [
        *((f"k{i}", c) for i, c in enumerate(group.keys)),
        *((f"o{i}", c) for i, c in enumerate(group.order)),
        ("kind", group.kind),
    ]


def _batches(group: WinnerGroup, job: ArrowJob) -> Iterator[pa.Table]:
    """Every input's rows a batch at a time: ``k0…`` (keys), ``o0…`` (order), ``kind``,
    and each row's ``input`` (number in ``group.inputs``) and ``position`` in it."""
    return positioned_batches(group.inputs, job, _named(group))


def _shares(group: WinnerGroup, job: ArrowJob, shares: int) -> Iterator[pa.Table]:
    """The rows of each share of the keys in turn (``_batches``' columns); one share: all
    of them, read into memory."""
    if shares == 1:
        batches = list(_batches(group, job))
        yield _concat(batches) if batches else _empty(group)
        return
    keys = [f"k{i}" for i in range(len(group.keys))]
    with spill_folder("key merge") as folder:
        for path in spill_by_key(_batches(group, job), keys, shares, folder, "rows"):
            if path is not None:
                yield read_share(path)


def _concat(tables: list[pa.Table]) -> pa.Table:
    try:
        return pa.concat_tables(tables)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise Declined(f"the inputs disagree on a merge column's type ({exc})") from None


def _empty(group: WinnerGroup) -> pa.Table:
    columns = {name: pa.array([], arrow_type(c.spec)) for name, c in _named(group)}
    columns["input"] = pa.array([], pa.int32())
    columns["position"] = pa.array([], pa.int64())
    return pa.table(columns)


def surviving_rows(
    keys: pa.Table,
    order: pa.Table,
    kinds: np.ndarray,
    *,
    first_row: bool,
    ignore_delete: bool,
    remove_record_on_delete: bool,
) -> np.ndarray:
    """Which rows are a key's merged row (a boolean mask over the rows as given).

    The SQL job's rules (``deletes/key_merge.py``): a key's rows are ordered by ``order``'s
    columns in turn, NULL lowest; ``deduplicate`` keeps the highest-ordered row unless it
    retracts the key (-U/-D), skipping retractions first under ``ignore_delete``;
    ``first-row`` keeps the lowest-ordered +I/+U row, and with ``remove_record_on_delete``
    (and not ``ignore_delete``) only among the rows after the key's last -D.
    """
    n = keys.num_rows
    alive = np.zeros(n, dtype=bool)
    if n == 0:
        return alive
    index = pa.array(np.arange(n, dtype=np.int64))
    names = [f"__k{i}" for i in range(keys.num_columns)]
    ordered = [f"__o{i}" for i in range(order.num_columns)]
    table = pa.table([*keys.columns, *order.columns, index], names=[*names, *ordered, "__i"])
    sort = pc.sort_indices(
        table,
        sort_keys=[(c, "ascending") for c in [*names, *ordered, "__i"]],
        null_placement="at_start",
    )
    sorted_keys = keys.take(sort)
    position = sort.to_numpy()
    kind = np.asarray(kinds, dtype=np.int64)[position]
    retract = np.isin(kind, _RETRACT)
    new_key = np.ones(n, dtype=bool)
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for column in sorted_keys.columns:
            same &= _null_safe_equal(column.combine_chunks())
        new_key[1:] = ~same
    group = np.cumsum(new_key) - 1
    starts = np.flatnonzero(new_key)
    if first_row:
        candidate = ~retract
        if remove_record_on_delete and not ignore_delete:
            deletes = np.where(kind == DELETE, np.arange(n), -1)
            last_delete = np.maximum.reduceat(deletes, starts)
            candidate &= np.arange(n) > last_delete[group]
    else:
        candidate = ~retract if ignore_delete else np.ones(n, dtype=bool)
    chosen = np.flatnonzero(candidate)
    if not len(chosen):
        return alive
    chosen_group = group[chosen]
    boundary = chosen_group[1:] != chosen_group[:-1]
    if first_row:
        winners = chosen[np.concatenate([[True], boundary])]
    else:
        winners = chosen[np.concatenate([boundary, [True]])]
        winners = winners[~retract[winners]]  # the newest row retracts the key: it is gone
    alive[position[winners]] = True
    return alive


def _null_safe_equal(values: pa.Array) -> np.ndarray:
    """Whether each value equals the one before it (NULL equals NULL), for rows 1…n-1."""
    after, before = values.slice(1), values.slice(0, len(values) - 1)
    equal = pc.equal(after, before)
    both_null = pc.and_(pc.is_null(after), pc.is_null(before))
    safe = pc.if_else(pc.is_null(equal), both_null, equal)
    return np.asarray(safe.to_numpy(zero_copy_only=False), dtype=bool)


def winners_partition(
    groups: Iterator[WinnerGroup], share_bytes: int = SHARE_BYTES
) -> Iterator[tuple[str, str, DeadRows | str]]:
    """Runs in a Spark task: ``(path, "ok", its DeadRows)`` per requested file of each
    group, or ``("", "declined", why)`` for a group it cannot merge as the SQL job would."""
    for group in groups:
        try:
            dead = dead_rows(group, share_bytes=share_bytes)
        except Declined as why:
            yield "", "declined", str(why)
            continue
        for path, rows in dead.items():
            yield path, "ok", rows
