"""A Delta table written by delta-rs through every kind of commit, analyzed after each
commit and once from scratch: both equal the exact statistics of the live rows (read by
deltalake's own query engine), NDV within the theta sketch's bound."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from delta_tables import (
    NO_LOG_RETENTION,
    DeltaWriter,
    assert_describes_live_rows,
    id_name_part,
    live_rows,
)
from lakestats.cli import main

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COLUMNS = (("id", "long"), ("name", "string"), ("price", "decimal(10, 2)"), ("part", "string"))


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def batch(ids: range, part: str) -> dict[str, list[Any]]:
    from decimal import Decimal

    rows = id_name_part(ids, part, null_every=7, names="name-{}", distinct=50)
    return {**rows, "price": [Decimal(i % 300) / 4 for i in ids]}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("delta-e2e")
    writer = DeltaWriter(root / "t")
    writer.create(COLUMNS, partition_by=["part"], configuration=NO_LOG_RETENTION)
    incremental = root / "incremental"

    def step() -> None:
        cli("analyze", writer.path, "--state-dir", str(incremental), "-q")

    # analyzed after every second commit or so: each run is a Spark job (time-bounded)
    writer.append(batch(range(0, 400), "a"))
    writer.append(batch(range(400, 700), "b"))
    step()
    writer.append(batch(range(1000, 1200), "a"), mode="overwrite")  # replaces every file
    writer.append(batch(range(2000, 2300), "c"))
    writer.delete("id < 1050")  # copy-on-write: partition a rewritten
    step()
    writer.update({"name": "'updated'"}, "id >= 2250")
    source = pa.table(batch(range(2280, 2400), "c"), schema=writer.arrow_schema())
    (
        writer.table()
        .merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    step()
    writer.checkpoint()
    writer.table().optimize.compact()  # dataChange=false: rewrites rows it keeps
    writer.vacuum()
    writer.append(batch(range(5000, 5100), "d"))
    step()
    scratch = root / "scratch"
    cli("analyze", writer.path, "--state-dir", str(scratch), "-q")
    yield {
        "writer": writer,
        "incremental": json.loads(
            cli("show", writer.path, "--state-dir", str(incremental), "--json")
        ),
        "scratch": json.loads(cli("show", writer.path, "--state-dir", str(scratch), "--json")),
    }


_ORDER_DEPENDENT = {"quantiles", "histogram"}  # KLL merges depend on order: checked by rank


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    # "published" names the sidecar document each store wrote (their names differ)
    volatile = {"computed_at_ms", "commit", "columns", "published"}
    kept = {k: v for k, v in doc.items() if k not in volatile}
    kept["columns"] = {
        name: {k: v for k, v in column.items() if k not in _ORDER_DEPENDENT}
        for name, column in doc["columns"].items()
    }
    return kept


def test_incremental_equals_from_scratch(history: dict[str, Any]) -> None:
    assert _comparable(history["incremental"]) == _comparable(history["scratch"])
    assert history["incremental"]["snapshot_id"] == history["writer"].version()


@pytest.mark.parametrize("which", ["incremental", "scratch"])
def test_quantiles_are_within_the_kll_rank_error(history: dict[str, Any], which: str) -> None:
    data = live_rows(history["writer"].path)
    column = history[which]["columns"]["id"]
    values = sorted(data.column("id").to_pylist())
    error = column["sketch"]["quantiles"]["normalized_rank_error"]
    for q, value in column["quantiles"].items():
        rank = sum(1 for v in values if v <= value) / len(values)
        assert abs(rank - float(q)) <= 2 * error + 1 / len(values), q


def test_stats_equal_the_live_rows(history: dict[str, Any]) -> None:
    data = live_rows(history["writer"].path)
    assert_describes_live_rows(history["incremental"], data, ndv=True, partition="part")
