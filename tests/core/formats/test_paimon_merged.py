"""Paimon's ``mergedRecordCount`` of an append-only table: taken from the stats (the rows
of every live file, which they count already), not from a pass over the snapshot's live
manifest entries on every commit. The two agree on every snapshot of a history with
appends, partition overwrites and whole files deleted, and row-level deletes (deletion
vectors), and with what pypaimon reads."""

from __future__ import annotations

from pathlib import Path

from lakestats.analyze import analyze_table
from lakestats.formats.paimon.merged import EXACT, merged_record_count
from lakestats.read import read_stats
from lakestats.tables import open_configured
from paimon_tables import DATA_EVOLUTION, PaimonWarehouse, one_table_config


def test_an_append_only_count_from_the_stats_equals_the_live_entries(tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", [("id", "long"), ("p", "string")], partition_keys=["p"])
    for i in range(4):
        ids = list(range(i * 10, i * 10 + 3 + i))
        warehouse.write("t", {"id": ids, "p": ["a", "b", "c", "a", "b", "c"][: len(ids)]})
        warehouse.write("t", {"id": [100 + i, 200 + i], "p": ["b", f"x{i}"]})
    warehouse.write("t", {"id": [7], "p": ["a"]}, overwrite=True)  # drops every file
    warehouse.write("t", {"id": [1, 2, 3], "p": ["a", "b", "b"]})
    table = warehouse.open("t")
    doomed = {f.path for f in table.live_files(table.current_snapshot_id() or 0)[:1]}
    warehouse.delete_files("t", lambda f: f.path in doomed)
    warehouse.write("t", {"id": [4], "p": ["c"]})

    config = one_table_config("t", location, tmp_path / "state", sketches=False)
    analyze_table(open_configured(config.table[0], config), config=config, sketcher=None)
    table = warehouse.open("t")
    snapshot_ids = sorted(table.snapshot_ids())
    assert len(snapshot_ids) == 12
    for snapshot_id in snapshot_ids:
        terms = read_stats("t", snapshot_id, config=config)["paimon"]
        from_entries = merged_record_count(table, snapshot_id)  # no stats: the entries
        assert from_entries.how == EXACT
        assert (terms["merged_record_count"], terms["merged_record_count_is"]) == (
            from_entries.value,
            EXACT,
        ), snapshot_id
    assert terms["merged_record_count"] == warehouse.read("t").num_rows


def test_an_append_only_count_subtracts_the_rows_deletion_vectors_delete(
    tmp_path: Path,
) -> None:
    """pypaimon's row-level deletes on an append-only table (deletion vectors, the data
    files unchanged): from the stats and from the entries, each snapshot's count is the
    rows pypaimon reads at that snapshot, and says why."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create(
        "t", [("id", "long"), ("p", "string")], partition_keys=["p"], options=DATA_EVOLUTION
    )
    counts: dict[int, int] = {}
    for start in (0, 40):
        ids = list(range(start, start + 40))
        snapshot_id = warehouse.write("t", {"id": ids, "p": [f"p{i % 2}" for i in ids]})
        counts[snapshot_id] = warehouse.read("t").num_rows
    row_ids = warehouse.row_ids("t", "id")
    for doomed in ([row_ids[3], row_ids[4], row_ids[50]], [row_ids[5], row_ids[60]]):
        snapshot_id = warehouse.delete_rows("t", doomed)
        counts[snapshot_id] = warehouse.read("t").num_rows
    snapshot_id = warehouse.delete_where("t", lambda where: where.less_than("id", 3))
    counts[snapshot_id] = warehouse.read("t").num_rows
    assert list(counts.values()) == [40, 80, 77, 75, 72]

    config = one_table_config("t", location, tmp_path / "state", sketches=False)
    analyze_table(open_configured(config.table[0], config), config=config, sketcher=None)
    table = warehouse.open("t")
    for snapshot_id, count in counts.items():
        terms = read_stats("t", snapshot_id, config=config)["paimon"]
        from_entries = merged_record_count(table, snapshot_id)
        assert (from_entries.value, from_entries.how) == (count, EXACT), snapshot_id
        assert (terms["merged_record_count"], terms["merged_record_count_is"]) == (count, EXACT)
        deletes = count < 80 and snapshot_id > 2
        assert ("deletion-vector" in terms["merged_record_count_why"]) == deletes
