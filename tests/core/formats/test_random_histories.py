"""Random histories of a Delta table (delta-rs) and a Paimon table (pypaimon), kept by one
open table the way the daemon keeps it (its merged view and partition groups in memory),
with short aggregate chains and one-file segment row groups: after every commit the stats
equal a from-scratch run's and the exact counts, bounds and partitions of the live rows
that each format's own reader returns.

The Iceberg twin is ``tests/core/store/test_segment_chain.py``; these drive the commit
kinds only Delta and Paimon have (copy-on-write updates, predicate overwrites, delta-rs'
OPTIMIZE, checkpoints with log cleanup and VACUUM; Paimon's whole-table overwrites, file
deletes and snapshot expiry; schema changes) through the same core. Metadata-only runs
(``--no-sketches``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_tables import NO_LOG_RETENTION, DeltaWriter, assert_describes_live_rows, live_rows
from lakestats.analyze import analyze_table
from lakestats.config import Config, TableConfig
from lakestats.maintenance import compact
from lakestats.read import read_stats
from lakestats.store import store as store_module
from lakestats.tables import OpenedTable, open_configured, open_table
from paimon_tables import PaimonWarehouse
from stores import metadata_only_config

PARTS = 12
COLUMNS = (("id", "long"), ("name", "string"), ("part", "string"))
STEPS = 8


def part_of(i: int) -> str:
    return f"p{i % PARTS:02d}"


def batch(schema: pa.Schema, ids: list[int], part: str | None = None) -> dict[str, list[Any]]:
    """Rows ``ids`` of the table's current ``schema``, each in its own id's partition
    unless ``part``; other columns derived from the id, some of them null."""
    columns: dict[str, list[Any]] = {}
    for field in schema:
        if field.name == "id":
            columns["id"] = ids
        elif field.name == "part":
            columns["part"] = [part or part_of(i) for i in ids]
        elif pa.types.is_integer(field.type):
            columns[field.name] = [None if i % 5 == 0 else 3 * i for i in ids]
        else:
            columns[field.name] = [None if i % 7 == 0 else f"n{i % 40}" for i in ids]
    return columns


def stats(opened: OpenedTable) -> dict[str, Any]:
    """The ``show --json`` document less what differs between two stores of equal stats:
    when each was computed, where each published (the from-scratch one does not), and the
    commit's own summary (a run over a log cut by cleanup starts from a baseline)."""
    doc = read_stats(opened)
    return {k: v for k, v in doc.items() if k not in {"computed_at_ms", "published", "commit"}}


class Evolving:
    """The names of the columns a history may change (never ``id`` or ``part``)."""

    def __init__(self) -> None:
        self.names = ["name"]
        self.made = 0

    def _new_name(self) -> str:
        self.made += 1
        return f"c{self.made}"

    def added(self) -> str:
        self.names.append(self._new_name())
        return self.names[-1]

    def kind(self, kind: str) -> str:
        """``kind``, or an added column where there is no column to rename or drop."""
        changes = kind in ("rename column", "drop column")
        return "add column" if changes and not self.names else kind

    def renamed(self, rng: random.Random) -> tuple[str, str]:
        old = rng.choice(self.names)
        new = self._new_name()
        self.names[self.names.index(old)] = new
        return old, new

    def dropped(self, rng: random.Random) -> str:
        gone = rng.choice(self.names)
        self.names.remove(gone)
        return gone


class DeltaHistory:
    """delta-rs renames and drops columns of column-mapping tables only, and cannot
    OPTIMIZE them: the history has one or the other."""

    table_format = "delta"

    def __init__(self, root: Path, *, column_mapping: bool = False) -> None:
        self.column_mapping = column_mapping
        self.writer = DeltaWriter(root / "t")
        self.writer.create(
            COLUMNS,
            column_mapping=column_mapping,
            partition_by=["part"],
            configuration=NO_LOG_RETENTION,
        )
        self.location = str(self.writer.path)
        self.columns = Evolving()

    def kinds(self) -> dict[str, int]:
        """Each commit kind and its weight."""
        kinds = {
            "append": 4,
            "delete part": 1,
            "delete rows": 2,
            "overwrite part": 1,
            "update": 2,
            "cleanup": 1,
            "vacuum": 1,
            "add column": 1,
        }
        if self.column_mapping:
            return {**kinds, "rename column": 1, "drop column": 1}
        return {**kinds, "optimize": 1}

    def append(self, ids: list[int]) -> None:
        self.writer.append(batch(self.writer.arrow_schema(), ids))

    def commit(self, kind: str, rng: random.Random, ids: list[int]) -> None:
        kind = self.columns.kind(kind)
        part = part_of(rng.randrange(PARTS))
        some = ", ".join(str(rng.randrange(max(ids) + 1)) for _ in range(rng.randrange(1, 25)))
        if kind == "delete part":
            self.writer.delete(f"part = '{part}'")
        elif kind == "delete rows":
            self.writer.delete(f"id in ({some})")
        elif kind == "overwrite part":
            from deltalake import write_deltalake

            schema = self.writer.arrow_schema()
            data = pa.table(batch(schema, ids, part), schema=schema)
            write_deltalake(self.location, data, mode="overwrite", predicate=f"part = '{part}'")
        elif kind == "update":
            self.writer.update({"name": "'updated'"}, f"id in ({some})")
        elif kind == "optimize":
            self.writer.table().optimize.compact()  # dataChange=false: rows rewritten
        elif kind == "cleanup":
            self.writer.cleanup()  # a checkpoint, then every commit before it goes
        elif kind == "vacuum":
            self.writer.vacuum()
        elif kind == "add column":
            self.writer.add_column(self.columns.added(), "long")
        elif kind == "rename column":
            old, new = self.columns.renamed(rng)
            self.writer.rename_column(old, new)
        elif kind == "drop column":
            self.writer.drop_column(self.columns.dropped(rng))
        else:
            raise AssertionError(kind)

    def live_rows(self) -> pa.Table:
        return live_rows(self.location)


class PaimonHistory:
    table_format = "paimon"

    def __init__(self, root: Path) -> None:
        self.warehouse = PaimonWarehouse(root / "wh")
        self.location = str(self.warehouse.create("t", COLUMNS, partition_keys=["part"]))
        self.columns = Evolving()

    def kinds(self) -> dict[str, int]:
        return {
            "append": 4,
            "delete part": 2,
            "delete files": 1,
            "overwrite": 1,
            "add column": 1,
            "rename column": 1,
            "drop column": 1,
            "expire": 1,
        }

    def append(self, ids: list[int]) -> None:
        self.warehouse.write("t", batch(self.warehouse.arrow_schema("t"), ids))

    def commit(self, kind: str, rng: random.Random, ids: list[int]) -> None:
        kind = self.columns.kind(kind)
        if kind == "overwrite":
            schema = self.warehouse.arrow_schema("t")
            self.warehouse.write("t", batch(schema, ids), overwrite=True)
            return
        if kind == "add column":
            self.warehouse.add_column("t", self.columns.added(), "long")
            return
        if kind == "rename column":
            self.warehouse.rename_column("t", *self.columns.renamed(rng))
            return
        if kind == "drop column":
            self.warehouse.drop_column("t", self.columns.dropped(rng))
            return
        table = self.warehouse.open("t")
        table.refresh()
        current = table.current_snapshot_id()
        assert current is not None
        if kind == "expire":  # every snapshot but the current (Paimon's own expiry rules)
            table.expire_snapshots(sorted(table.snapshot_ids() - {current}))
            return
        live = table.live_files(current)
        if kind == "delete part":
            part = (("part", part_of(rng.randrange(PARTS))),)
            doomed = {f.path for f in live if f.partition.values == part}
        elif kind == "delete files":
            doomed = {f.path for f in live if rng.random() < 0.2}
        else:
            raise AssertionError(kind)
        if doomed:
            self.warehouse.delete_files("t", lambda f: f.path in doomed)

    def live_rows(self) -> pa.Table:
        return self.warehouse.read("t")


HISTORIES: dict[str, Callable[[Path], DeltaHistory | PaimonHistory]] = {
    "delta": DeltaHistory,
    "delta, column mapping": partial(DeltaHistory, column_mapping=True),
    "paimon": PaimonHistory,
}


@pytest.mark.parametrize("seed", [1])
@pytest.mark.parametrize("table", list(HISTORIES))
def test_random_commits_in_a_daemon_agree_with_a_from_scratch_run_and_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, seed: int
) -> None:
    monkeypatch.setattr(store_module, "MAX_SEGMENT_DELTAS", 2)
    monkeypatch.setattr("lakestats.store.segments.SEGMENT_ROW_GROUP_BYTES", 256)
    rng = random.Random(seed)
    history = HISTORIES[table](tmp_path)
    history.append(list(range(4 * PARTS)))  # one file per partition
    state = tmp_path / "state"
    config = metadata_only_config(state)
    opened = open_table(history.location, config)
    analyze_table(opened, config=config)
    next_id = 10_000
    done: list[str] = []
    for kind in _plan(history.kinds(), rng):
        ids = list(range(next_id, next_id + rng.randrange(1, 40)))
        next_id += 100
        if kind == "append":
            history.append(ids)
        elif kind == "compact":
            compact(opened, _few_segments(config))
        else:
            history.commit(kind, rng, ids)
        if kind.endswith(" column"):
            # a schema change alone makes no snapshot: the current snapshot's stats keep
            # the schema it was written with, so the rows are compared after the next one
            history.append(ids)
        done.append(kind)
        analyze_table(opened, config=config)
        _assert_agrees(history, opened, tmp_path, done)


def _plan(kinds: dict[str, int], rng: random.Random) -> list[str]:
    """Every kind once and ``STEPS`` more drawn by weight, shuffled, with lakestats' own
    store compaction after every fourth."""
    drawn = list(kinds) + rng.choices(list(kinds), weights=list(kinds.values()), k=STEPS)
    rng.shuffle(drawn)
    return [
        k for i, kind in enumerate(drawn) for k in ([kind, "compact"] if i % 4 == 3 else [kind])
    ]


def _knowing_what_the_log_forgot(
    doc: dict[str, Any], scratch: dict[str, Any], done: list[str]
) -> dict[str, Any]:
    """``scratch`` with the columns the incremental run knows better taken from ``doc``:
    after a Delta log cleanup a from-scratch run starts from the checkpoint, which does not
    say which files were written before a column was added, so their null counts of it
    are unknown there (``docs/delta.md``). The incremental run saw each file's commit; its
    counts are checked against the rows by the caller."""
    if "cleanup" not in done:
        return scratch
    columns = dict(scratch["columns"])
    for name, column in scratch["columns"].items():
        known = doc["columns"][name]
        if column["null_count"] is None and known["null_count"] is not None:
            assert (column["min"], column["max"]) == (known["min"], known["max"]), name
            columns[name] = known
    return {**scratch, "columns": columns}


def _few_segments(config: Config) -> Config:
    few = {"max_segments": 2, "segment_target_files": 8}
    return config.model_copy(update={"maintenance": config.maintenance.model_copy(update=few)})


def _assert_agrees(
    history: DeltaHistory | PaimonHistory, opened: OpenedTable, tmp: Path, done: list[str]
) -> None:
    config = metadata_only_config(tmp / f"scratch-{len(done)}")
    scratch = open_configured(
        TableConfig(name="t", location=history.location, publish=False), config
    )
    analyze_table(scratch, config=config)
    doc = stats(opened)
    assert doc == _knowing_what_the_log_forgot(doc, stats(scratch), done), done
    data = history.live_rows()
    assert_describes_live_rows(
        doc,
        data,
        ndv=False,
        partition="part",
        table_format=history.table_format,
    )
