"""The I/O edge of the advisor: live files' per-column facts from the stats store.

Reads only lakestats' own store (segments of the current state, minus tombstones) and the
table's current schema — no data file, no Spark — and hands ``lakestats.advise`` plain
``FileColumn`` records. Bounds follow ``merge.column_of_file``: exact scan min/max where
the metadata bound is missing or truncated, else the metadata bound.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from lakestats.advise import (
    AdviceReport,
    AdviceSettings,
    ColumnInput,
    FileColumn,
    advise,
    join_reports,
    order_key,
)
from lakestats.config import Config
from lakestats.exceptions import LakestatsError, SnapshotNotFoundError
from lakestats.merge import column_of_file
from lakestats.model import (
    Column,
    DataFile,
    FileContent,
    SketchSettings,
    StateVersion,
    TableSchema,
)
from lakestats.store import StatsStore
from lakestats.tables import OpenedTable


class UnknownColumnError(LakestatsError):
    """``--column`` / ``?column=`` names no column of the table's current schema."""


# (file, column) pairs whose stats one pass over the segments decodes: a wide table is
# advised a group of columns at a time, each group's sketches let go before the next is
# read, so memory follows the files, not files × columns (~6 KB of sketches per pair)
PAIRS_PER_PASS = 100_000


def current_state(store: StatsStore, table: str | None = None) -> StateVersion:
    """The store's newest state; ``table``: the configured name, for the message."""
    state = store.current()
    if state is None:
        name = store.table_id if table is None else table
        raise SnapshotNotFoundError(
            f"no stats stored for table {name!r} yet: run `lakestats analyze` first"
        )
    return state


def live_data_files(
    store: StatsStore,
    field_ids: Collection[int] | None = None,
    state: StateVersion | None = None,
) -> tuple[int | None, list[DataFile]]:
    """(snapshot id, live data files) of ``state`` (default: the store's current one);
    ``field_ids``: with only those fields' stats (``segments.read_segment``). Their
    sketches come without value samples, which the advisor does not use."""
    if state is None:
        state = current_state(store)
    files: list[DataFile] = []
    for segment in state.segments:
        if segment.live_file_count <= 0:
            continue
        for data_file in store.read_segment(segment.path, field_ids=field_ids, value_samples=False):
            if data_file.content is FileContent.DATA and data_file.path not in segment.dead_files:
                files.append(data_file)
    return state.last_snapshot_id, files


def select_columns(schema: TableSchema, names: Sequence[str] | None) -> list[Column]:
    """The named columns (all when ``names`` is empty); an unknown name is an error."""
    if not names:
        return list(schema.columns)
    by_name = {c.name: c for c in schema.columns}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        known = ", ".join(c.name for c in schema.columns)
        raise UnknownColumnError(f"unknown column(s) {', '.join(unknown)}; the table has: {known}")
    return [by_name[n] for n in dict.fromkeys(names)]


def file_column(data_file: DataFile, column: Column) -> FileColumn:
    """One file's facts about one column. A file written before the column existed holds
    only nulls for it, which min/max pruning skips like any all-null file."""
    present = (
        column.field_id in data_file.field_ids
        or column.field_id in data_file.columns
        or column.field_id in data_file.sketches
    )
    if not present:
        return FileColumn(
            data_file.path,
            data_file.partition,
            data_file.record_count,
            data_file.file_size_bytes,
            has_values=False,
            null_count=data_file.record_count,
        )
    agg = column_of_file(data_file, column.field_id, column.type)
    nulls = agg.null_count
    nans = agg.nan_count or 0
    has_values = nulls is None or data_file.record_count - nulls - nans > 0
    return FileColumn(
        path=data_file.path,
        partition=data_file.partition,
        records=data_file.record_count,
        file_bytes=data_file.file_size_bytes,
        lower=order_key(column.type, agg.lower),
        upper=order_key(column.type, agg.upper),
        has_values=has_values,
        null_count=nulls,
        column_bytes=agg.column_size,
        theta=agg.theta,
        kll=agg.kll,
        frequent=agg.frequent_items,
    )


def column_inputs(files: Sequence[DataFile], columns: Sequence[Column]) -> list[ColumnInput]:
    return [
        ColumnInput(c.field_id, c.name, c.type, tuple(file_column(f, c) for f in files))
        for c in columns
    ]


def advise_store(
    store: StatsStore,
    schema: TableSchema,
    *,
    table: str,
    columns: Sequence[str] | None = None,
    sketch: SketchSettings | None = None,
    settings: AdviceSettings | None = None,
) -> AdviceReport:
    """The advice report of a table from its stats store alone."""
    chosen = select_columns(schema, columns)
    base = settings or AdviceSettings()
    if sketch is not None:
        base = replace(base, kll_k=sketch.kll_k, theta_lg_k=sketch.theta_lg_k)
    state = current_state(store, table)  # one state for every pass
    live = sum(max(segment.live_file_count, 0) for segment in state.segments)
    per_pass = max(1, PAIRS_PER_PASS // max(live, 1))
    reports = []
    for start in range(0, max(len(chosen), 1), per_pass):
        group = chosen[start : start + per_pass]
        every = len(group) == len(schema.columns)
        fields = None if every else {c.field_id for c in group}
        snapshot_id, files = live_data_files(store, fields, state)
        reports.append(advise(table, snapshot_id, column_inputs(files, group), base))
        del files  # the group's sketches, before the next group's are read
    return join_reports(reports)


def advise_table(
    opened: OpenedTable, config: Config, columns: Sequence[str] | None = None
) -> AdviceReport:
    """``lakestats advise`` and ``GET /v1/tables/{name}/advice``: the current schema's
    columns over the stored stats of the last processed snapshot."""
    return advise_store(
        opened.store,
        opened.table.schema(),
        table=opened.name,
        columns=columns,
        sketch=config.sketch.settings(),
    )
