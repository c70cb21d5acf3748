"""A Delta partition column renamed (column mapping; Spark's ``RENAME COLUMN``): partitions
are keyed by name, so the first data commit after the rename lists every live file again
under the new name, and files added before and after it are one partition of a value, not
two. The oracle is deltalake's read of the table, counted with pyarrow.compute;
incremental runs must equal a from-scratch one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from cli_runs import analyzed_stats
from delta_tables import DeltaWriter, live_rows
from lakestats.formats.delta import open_location

pytestmark = pytest.mark.spark


def partitions(doc: dict[str, Any]) -> dict[tuple[tuple[str, Any], ...], int]:
    return {tuple(p["partition"].items()): p["record_count"] for p in doc["partitions"]}


def test_a_renamed_partition_column_keeps_one_partition_a_value(spark: Any, tmp_path: Path) -> None:
    table = DeltaWriter(tmp_path / "t")
    table.create(
        [("id", "long"), ("v", "int"), ("part", "string")],
        column_mapping=True,
        partition_by=["part"],
    )
    parts = ["abc"[i % 3] for i in range(60)]
    table.append({"id": list(range(60)), "v": [i % 13 for i in range(60)], "part": parts})
    location = table.path
    analyzed_stats(location, tmp_path / "inc")
    renamed = table.rename_column("part", "region")
    regions = ["bd"[i % 2] for i in range(40)]
    table.append({"id": list(range(100, 140)), "v": list(range(40)), "region": regions})

    # the data commit after the rename lists the files written before it again
    first, second = open_location(location).commits_since(None)
    assert second.snapshot_id > renamed
    assert {f.path for f in second.removed_files} == {f.path for f in first.added_files}
    assert {name for f in second.added_files for name, _ in f.partition.values} == {"region"}

    after = analyzed_stats(location, tmp_path / "inc")
    scratch = analyzed_stats(location, tmp_path / "scratch")
    counts = pc.value_counts(live_rows(location).column("region")).to_pylist()
    exact = {(("region", c["values"]),): c["counts"] for c in counts}
    assert len(exact) == 4
    assert partitions(after) == partitions(scratch) == exact
