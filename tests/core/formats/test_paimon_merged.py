"""Paimon's ``mergedRecordCount`` of an append-only table: taken from the stats (the rows
of every live file, which they count already), not from a pass over the snapshot's live
manifest entries on every commit. The two agree on every snapshot of a history with
appends, partition overwrites and whole files deleted, and with what pypaimon reads. An
append-only table with deletion vectors enabled (not read yet) says so when opened."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from lakestats.analyze import analyze_table
from lakestats.formats.paimon.merged import EXACT, merged_record_count
from lakestats.read import read_stats
from lakestats.tables import open_configured
from paimon_tables import FULL_STATS, PaimonWarehouse, one_table_config


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


def test_an_append_table_with_deletion_vectors_enabled_says_they_are_not_read(
    tmp_path: Path,
) -> None:
    """lakestats reads deletion vectors of primary-key tables only (docs/paimon.md): on an
    append-only table with them enabled, the rows they delete would be counted, so
    opening one says so rather than leave ``exact`` unexplained."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    options = {**FULL_STATS, "deletion-vectors.enabled": "true"}
    warehouse.create("dv", [("id", "long")], options=options)
    warehouse.write("dv", {"id": [1, 2]})
    warehouse.create("plain", [("id", "long")])
    warehouse.write("plain", {"id": [1, 2]})
    with capture_logs() as logs:
        warehouse.open("dv")
        warehouse.open("plain")
    warned = [e for e in logs if e["event"] == "paimon_append_deletion_vectors_not_read"]
    assert [e["log_level"] for e in warned] == ["warning"]
    assert str(warehouse.location("dv")) in warned[0]["table"]
