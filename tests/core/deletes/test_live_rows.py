"""Live rows per data file: deletes applied inside the real Spark job, end to end.

A real table's files (Parquet with field ids, written by pyarrow) carry every kind of
row-level delete the model has: a position-delete file whose ``file_path`` values use the
metadata's foreign prefix (location mapping must apply to its contents) and also name a
file it is not attached to, a deletion vector, and an equality-delete file with a NULL
key. The format is the in-memory one (it attaches the deletes as the model says: the
changed files removed and re-added with their complete deletes). Every number is compared
with the live rows computed independently with pyarrow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from lakestats.analyze import CommitReport, analyze_table
from lakestats.config import Config, TableConfig
from lakestats.formats.memory import MemoryTable
from lakestats.model import (
    DataFile,
    DeletionVector,
    EqualityDeletes,
    FileContent,
    PositionDeletes,
)
from lakestats.read import read_stats
from lakestats.sketches.merge import kll_normalized_rank_error
from lakestats.sketching import SparkSketcher
from lakestats.store import StatsStore
from lakestats.tables import OpenedTable

pytestmark = pytest.mark.spark

FOREIGN = "hdfs://elsewhere:8020/wh/t/data/"
COLUMNS = [("id", "long"), ("k", "string"), ("v", "double"), ("flag", "boolean")]
A_POSITIONS = [0, 5, 17, 400, 999]
B_FOREIGN_POSITIONS = [1, 2]  # rows naming file B inside the position file (not attached to B)
B_VECTOR = [0, 10, 499]
EQUALITY_KEYS = ["k3", None]
RANK_ERROR = kll_normalized_rank_error(200)


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, metadata={b"PARQUET:field_id": str(field_id).encode()})


DATA_SCHEMA = pa.schema(
    [
        _field("id", pa.int64(), 1),
        _field("k", pa.string(), 2),
        _field("v", pa.float64(), 3),
        _field("flag", pa.bool_(), 4),
    ]
)


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "k": [None if i % 7 == 0 else f"k{i % 11}" for i in ids],
            "v": [float(i % 97) / 3 for i in ids],
            "flag": [i % 3 == 0 for i in ids],
        },
        schema=DATA_SCHEMA,
    )


class Table:
    """The files on disk, the memory table naming them with the foreign prefix."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "data").mkdir(parents=True)
        self.a, self.b = _rows(0, 1000), _rows(1000, 500)
        pq.write_table(self.a, root / "data" / "a.parquet")
        pq.write_table(self.b, root / "data" / "b.parquet")
        pq.write_table(
            pa.table(
                {
                    "file_path": [FOREIGN + "a.parquet"] * len(A_POSITIONS)
                    + [FOREIGN + "b.parquet"] * len(B_FOREIGN_POSITIONS)
                    + [FOREIGN + "gone.parquet"],
                    "pos": [*A_POSITIONS, *B_FOREIGN_POSITIONS, 3],
                },
                schema=pa.schema(
                    [
                        _field("file_path", pa.string(), 2147483546),
                        _field("pos", pa.int64(), 2147483545),
                    ]
                ),
            ),
            root / "data" / "pos.parquet",
        )
        pq.write_table(
            pa.table({"k": EQUALITY_KEYS}, schema=pa.schema([_field("k", pa.string(), 2)])),
            root / "data" / "eq.parquet",
        )
        self.memory = MemoryTable(COLUMNS, name="live")
        self.first = self.memory.append(self._file("a", self.a), self._file("b", self.b))

    def _file(self, name: str, rows: pa.Table, **kw: Any) -> DataFile:
        made = self.memory.data_file(
            FOREIGN + f"{name}.parquet",
            rows.num_rows,
            bounds={"id": (pc.min(rows["id"]).as_py(), pc.max(rows["id"]).as_py())},
            null_counts={"k": rows["k"].null_count},
        )
        from dataclasses import replace

        return replace(made, **kw)

    @property
    def deletes_a(self) -> tuple[Any, ...]:
        return (
            PositionDeletes(FOREIGN + "pos.parquet", "PARQUET"),
            EqualityDeletes(FOREIGN + "eq.parquet", "PARQUET", (2,)),
        )

    @property
    def deletes_b(self) -> tuple[Any, ...]:
        return (DeletionVector(BitMap64(B_VECTOR).serialize(), len(B_VECTOR)),)

    def delete_rows(self) -> int:
        """Commit the deletes: both data files removed and re-added with them."""
        delete_files = [
            self.memory.data_file(FOREIGN + "pos.parquet", 8, content=FileContent.POSITION_DELETES),
            self.memory.data_file(FOREIGN + "eq.parquet", 2, content=FileContent.EQUALITY_DELETES),
        ]
        return self.memory.commit(
            removed=[FOREIGN + "a.parquet", FOREIGN + "b.parquet"],
            added=[
                self._file("a", self.a, deletes=self.deletes_a),
                self._file("b", self.b, deletes=self.deletes_b),
                *delete_files,
            ],
            operation="overwrite",
        )

    def live_a(self) -> pa.Table:
        keep = [i not in A_POSITIONS for i in range(self.a.num_rows)]
        rows = self.a.filter(pa.array(keep))
        dead_key = pc.or_kleene(pc.equal(rows["k"], "k3"), pc.is_null(rows["k"]))
        return rows.filter(pc.invert(pc.fill_null(dead_key, False)))

    def live_b(self) -> pa.Table:
        return self.b.filter(pa.array([i not in B_VECTOR for i in range(self.b.num_rows)]))

    def opened(self, state: Path) -> OpenedTable:
        config = TableConfig(
            name="live",
            location=str(self.root),
            location_map={FOREIGN: str(self.root / "data") + "/"},
        )
        return OpenedTable(
            config=config,
            table=self.memory,  # type: ignore[arg-type]
            store=StatsStore(str(state), self.memory.table_id),
        )


def _analyze(table: Table, state: Path, reports: list[CommitReport] | None = None) -> Any:
    config = Config(state_dir=str(state))
    opened = table.opened(state)
    analyze_table(
        opened,
        config=config,
        sketcher=SparkSketcher(config),
        on_commit=None if reports is None else reports.append,
    )
    return read_stats(opened, config=config)


def _expected(live: pa.Table) -> dict[str, Any]:
    return {
        "rows": live.num_rows,
        "id": (pc.min(live["id"]).as_py(), pc.max(live["id"]).as_py()),
        "id_ndv": len(pc.unique(live["id"])),
        "k_nulls": live["k"].null_count,
        "k_ndv": len(pc.unique(live["k"].drop_null())),
        "v": (pc.min(live["v"]).as_py(), pc.max(live["v"]).as_py()),
        "true": pc.sum(live["flag"].cast(pa.int64())).as_py(),
        "false": live.num_rows - pc.sum(live["flag"].cast(pa.int64())).as_py(),
    }


def _observed(doc: dict[str, Any]) -> dict[str, Any]:
    cols = doc["columns"]
    return {
        "rows": doc["merged_record_count"],
        "id": (cols["id"]["min"], cols["id"]["max"]),
        "id_ndv": cols["id"]["ndv"],
        "k_nulls": cols["k"]["null_count"],
        "k_ndv": cols["k"]["ndv"],
        "v": (cols["v"]["min"], cols["v"]["max"]),
        "true": cols["flag"]["true_count"],
        "false": cols["flag"]["false_count"],
    }


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return Table(tmp_path_factory.mktemp("live") / "t")


@pytest.fixture(scope="module")
def incremental(
    spark: Any, table: Table, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], dict[str, Any], list[CommitReport], Path]:
    """Stats after the append, then after the deletes (one run each)."""
    state = tmp_path_factory.mktemp("state")
    before = _analyze(table, state)
    table.delete_rows()
    reports: list[CommitReport] = []
    after = _analyze(table, state, reports)
    return before, after, reports, state


def test_the_live_rows_of_every_file_are_exact(
    table: Table, incremental: tuple[dict[str, Any], dict[str, Any], list[CommitReport], Path]
) -> None:
    before, after, _, _ = incremental
    assert before["merged_record_count"] == 1500
    live = pa.concat_tables([table.live_a(), table.live_b()])
    # position deletes (mapped contents, filtered to the attached file), the deletion
    # vector and the equality deletes with their NULL key: all applied, nothing else
    assert live.num_rows == 1500 - 5 - 3 - (table.a.num_rows - 5 - table.live_a().num_rows)
    assert after["record_count"] == 1500  # keeps its meaning: rows in the data files
    assert _observed(after) == _expected(live)
    assert after["row_deletes"] == {
        "applied_files": 2,
        "deleted_records": 1500 - live.num_rows,
        "unapplied_files": 0,
        "exact": True,
    }
    (partition,) = after["partitions"]
    assert partition["merged_record_count"] == live.num_rows
    assert partition["record_count"] == 1500


def test_the_commit_report_says_what_was_re_read(
    table: Table, incremental: tuple[dict[str, Any], dict[str, Any], list[CommitReport], Path]
) -> None:
    _, _, reports, _ = incremental
    (report,) = reports
    assert report.deletes_reread_files == 2
    assert report.deletes_reread_rows == 1500
    fields = report.log_fields()
    assert fields["deletes_reread_files"] == 2
    assert fields["deletes_reread_rows"] == 1500


def _without_kll(columns: dict[str, Any]) -> dict[str, Any]:
    """KLL compaction is randomised: quantiles/histograms are compared by rank instead."""
    return {
        name: {k: v for k, v in col.items() if k not in ("quantiles", "histogram")}
        for name, col in columns.items()
    }


def _quantiles_within_rank_error(doc: dict[str, Any], live: pa.Table) -> None:
    ids = sorted(live["id"].to_pylist())
    for q, value in doc["columns"]["id"]["quantiles"].items():
        rank = sum(1 for i in ids if i < value) / len(ids)
        assert abs(rank - float(q)) <= 2 * RANK_ERROR, (q, value, rank)


def test_incremental_equals_from_scratch(
    table: Table,
    incremental: tuple[dict[str, Any], dict[str, Any], list[CommitReport], Path],
    tmp_path: Path,
) -> None:
    _, after, _, _ = incremental
    scratch = _analyze(table, tmp_path / "scratch")
    for key in ("merged_record_count", "record_count", "partitions", "row_deletes"):
        assert scratch[key] == after[key], key
    assert _without_kll(scratch["columns"]) == _without_kll(after["columns"])
    live = pa.concat_tables([table.live_a(), table.live_b()])
    _quantiles_within_rank_error(scratch, live)
    _quantiles_within_rank_error(after, live)


def test_removing_a_re_added_file_later_removes_its_live_rows(spark: Any, tmp_path: Path) -> None:
    """The store tombstones the re-added copy (not the first one, already dead)."""
    table = Table(tmp_path / "t")
    state = tmp_path / "state"
    _analyze(table, state)
    table.delete_rows()
    _analyze(table, state)
    table.memory.remove(FOREIGN + "a.parquet")
    doc = _analyze(table, state)
    assert _observed(doc) == _expected(table.live_b())
    assert doc["record_count"] == 500
    assert doc["row_deletes"]["applied_files"] == 1


def test_without_sketches_only_deletion_vectors_count_exactly(
    table: Table, incremental: Any, tmp_path: Path
) -> None:
    """Metadata-only: a vector's rows are counted without reading data; a position or
    equality delete needs the data, so the live count is unknown and says so. (The
    deletes are the ones ``incremental`` commits: asked for, so the test runs alone too.)"""
    opened = table.opened(tmp_path / "state")
    config = Config(state_dir=str(tmp_path / "state"))
    analyze_table(opened, config=config, sketcher=None)
    doc = read_stats(opened, config=config)
    assert doc["merged_record_count"] is None
    assert doc["row_deletes"] == {
        "applied_files": 1,
        "deleted_records": len(B_VECTOR),
        "unapplied_files": 1,
        "exact": False,
    }
