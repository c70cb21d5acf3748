"""Paimon ``mergedRecordCount`` of a composite primary key: estimated from the theta sketch
of the key (``model.KeySketch``) made in the one Spark job, minus retracted keys.

A real pypaimon 2.1 table with a two-column key, updates and deletes (``rowkind.field``:
pypaimon writes -D rows into the files), more distinct keys than a lg_k 12 sketch holds
exactly. The oracle is pypaimon's own merge-on-read (its reader); the key bytes the job
hashes are checked against ``sketches/key.key_bytes`` hash for hash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datasketches import compact_theta_sketch

from lakestats.analyze import analyze_table
from lakestats.config import Config
from lakestats.formats.paimon.types import parse_schema
from lakestats.model import KEY_SKETCH_ID, RETRACTED_KEY_SKETCH_ID
from lakestats.read import read_stats
from lakestats.render import render_stats
from lakestats.sketches.hashing import THETA_SEED, theta_hash
from lakestats.sketches.key import key_bytes
from lakestats.sketching import SparkSketcher
from lakestats.store.segments import read_segment
from lakestats.tables import open_configured
from paimon_fixtures import fixture, needs_paimon_fixtures
from paimon_tables import (
    NameSketcher,
    PaimonWarehouse,
    compact_fully,
    one_table_config,
    parsed_schema,
)

pytestmark = pytest.mark.spark

COLUMNS = [("k1", "long"), ("k2", "string"), ("v", "double"), ("op", "string")]
OPTIONS = {"metadata.stats-mode": "full", "rowkind.field": "op", "bucket": "2"}
THETA_RSE = 1 / 64  # lg_k 12


def rows(keys: list[tuple[int, str]], op: str, v: float) -> dict[str, list[Any]]:
    return {
        "k1": [k for k, _ in keys],
        "k2": [s for _, s in keys],
        "v": [v] * len(keys),
        "op": [op] * len(keys),
    }


def config_for(location: Path, state: Path, **table: Any) -> Config:
    """``key_merge = "estimate"``: files sketched as stored, the count from the key sketch
    (with the default "apply" it is exact: ``test_paimon_key_merge.py``)."""
    table.setdefault("key_merge", "estimate")
    return one_table_config("t", location, state, **table)


def analyze(config: Config, sketcher: Any = None) -> dict[str, Any]:
    table = open_configured(config.table[0], config)
    analyze_table(table, config=config, sketcher=sketcher or SparkSketcher(config))
    return read_stats("t", config=config)


def merged_rows(warehouse: PaimonWarehouse) -> int:
    """What readers see: pypaimon's merge by primary key."""
    read = warehouse.table("t").new_read_builder()
    return int(read.new_read().to_arrow(read.new_scan().plan().splits()).num_rows)


def key_of(k1: int, k2: str) -> bytes:
    """``key_bytes`` of (BIGINT, STRING): 8 big-endian bytes, then the UTF-8 bytes."""
    return key_bytes([k1.to_bytes(8, "big", signed=True), k2.encode()])


KEYS = [(i, s) for i in range(2000) for s in "abc"]  # 6000 keys: a sketch in estimation mode


@pytest.fixture(scope="module")
def built(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The table after inserts, updates + new keys, deletes; analyzed after the first and
    the last commit (incremental) and once from scratch with publishing on."""
    root = tmp_path_factory.mktemp("keys")
    warehouse = PaimonWarehouse(root / "wh")
    location = warehouse.create("t", COLUMNS, primary_keys=["k1", "k2"], options=OPTIONS)
    incremental = config_for(location, root / "inc")
    docs = []
    warehouse.write("t", rows(KEYS, "+I", 1.0))
    docs.append(analyze(incremental))
    updated = KEYS[:1000] + [(i, s) for i in range(2000, 2400) for s in "abc"]
    warehouse.write("t", rows(updated, "+U", 2.0))
    deleted = KEYS[500:1300]  # 500 of them were updated, 300 not
    warehouse.write("t", rows(deleted, "-D", 3.0))
    docs.append(analyze(incremental))
    exact = merged_rows(warehouse)
    scratch = analyze(config_for(location, root / "scratch", publish=True))
    return {
        "warehouse": warehouse,
        "location": location,
        "incremental": incremental,
        "docs": docs,
        "scratch": scratch,
        "exact": exact,
        "scratch_state": root / "scratch",
    }


def test_a_composite_key_is_estimated_within_the_theta_bound(built: dict[str, Any]) -> None:
    exact = built["exact"]
    assert exact == 6000 + 1200 - 800  # pypaimon's merge: the oracle
    doc = built["docs"][-1]
    assert doc["record_count"] == 6000 + 2200 + 800  # every version, as the files hold them
    terms = doc["paimon"]
    assert terms["merged_record_count_is"] == "estimated"
    assert "minus retracted keys" in terms["merged_record_count_why"]
    low, high = terms["merged_record_count_bounds"]
    assert low <= exact <= high
    assert abs(terms["merged_record_count"] - exact) <= 3 * THETA_RSE * exact
    shown = f"mergedRecordCount {terms['merged_record_count']} (~95 % within {low}-{high})"
    assert shown in render_stats(doc)
    assert doc["merged_record_count"] == doc["record_count"]  # no row-level deletes applied
    # the first step is an estimate of its own merged count (6000 keys inserted)
    first = built["docs"][0]["paimon"]
    assert first["merged_record_count_is"] == "estimated"
    assert abs(first["merged_record_count"] - 6000) <= 3 * THETA_RSE * 6000
    # the key sketch is no column of the document
    assert set(doc["columns"]) == {"k1", "k2", "v", "op"}
    assert set(doc["commit"]["added"]["columns"]) == {"k1", "k2", "v", "op"}


def test_incremental_equals_from_scratch(built: dict[str, Any]) -> None:
    step, scratch = built["docs"][-1]["paimon"], built["scratch"]["paimon"]
    for key in ("merged_record_count", "merged_record_count_is", "merged_record_count_bounds"):
        assert step[key] == scratch[key], key


def test_the_published_statistics_file_carries_the_estimate(built: dict[str, Any]) -> None:
    location, warehouse = built["location"], built["warehouse"]
    latest = warehouse.table("t").snapshot_manager().get_latest_snapshot()
    assert latest.commit_kind == "ANALYZE" and latest.statistics  # pypaimon reads it
    stats = json.loads((location / "statistics" / latest.statistics).read_text())
    shown = built["scratch"]
    assert stats["mergedRecordCount"] == shown["paimon"]["merged_record_count"]
    assert stats == shown["paimon"]["statistics"]
    assert "-1" not in stats["colStats"] and set(stats["colStats"]) == {"k1", "k2", "v", "op"}
    assert merged_rows(warehouse) == built["exact"]  # the ANALYZE snapshot has the same rows


def test_the_job_hashes_the_key_bytes_and_retractions_apart(built: dict[str, Any]) -> None:
    """Each file's key sketches, as the store keeps them (one segment per commit)."""
    schema = built["warehouse"].open("t").schema()
    assert schema.key is not None and schema.key.field_ids == (0, 1)
    stored = [
        f
        for segment in sorted((built["scratch_state"]).glob("*/segments/*.parquet"))
        for f in read_segment(segment)
    ]
    assert len(stored) == 6  # three commits, two buckets
    for data_file in stored:
        path, sketches = data_file.path, data_file.sketches
        data = pq.read_table(path.removeprefix("file:"))
        kinds = data.column("_VALUE_KIND").to_pylist()
        keys = [
            theta_hash(key_of(k1, k2))
            for k1, k2 in zip(data["k1"].to_pylist(), data["k2"].to_pylist(), strict=True)
        ]
        for sketch_id, wanted in (
            (KEY_SKETCH_ID, {h for h, k in zip(keys, kinds, strict=True) if k not in (1, 3)}),
            (RETRACTED_KEY_SKETCH_ID, {h for h, k in zip(keys, kinds, strict=True) if k == 3}),
        ):
            blob = sketches[sketch_id].theta
            assert blob is not None
            sketch = compact_theta_sketch.deserialize(blob, THETA_SEED)
            theta = sketch.theta64
            assert set(sketch) == {h for h in wanted if h is not None and h < theta}, path


def test_removed_files_re_merge_the_key_sketches_of_the_live_files(built: dict[str, Any]) -> None:
    warehouse = built["warehouse"]
    # drop the files of the updates (snapshot 2: +U rows of 2,200 keys, 1,200 of them new)
    table = warehouse.open("t")
    table.set_key_merge(False)  # the files the commit wrote (a merge lists its buckets')
    updates = {f.path for f in table.commits_since(1)[0].added_files}
    warehouse.delete_files("t", lambda f: f.path in updates)
    doc = analyze(built["incremental"])
    exact = merged_rows(warehouse)
    terms = doc["paimon"]
    assert terms["merged_record_count_is"] == "estimated"
    low, high = terms["merged_record_count_bounds"]
    assert low <= exact <= high
    assert exact == 6000 - 800


def test_files_without_key_sketches_leave_the_count_unknown_not_low(
    spark: Any, tmp_path: Path
) -> None:
    """A store from before key sketches (here: a sketcher that makes none) is read as it
    is; files sketched since cannot give an estimate alone (``analyze --rebuild`` does)."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", COLUMNS, primary_keys=["k1", "k2"], options=OPTIONS)
    config = config_for(location, tmp_path / "state")
    warehouse.write("t", rows(KEYS[:30], "+I", 1.0))
    old = analyze(config, NameSketcher())
    assert old["paimon"]["merged_record_count_is"] == "unknown"
    assert "composite key" in old["paimon"]["merged_record_count_why"]
    warehouse.write("t", rows(KEYS[20:40], "+U", 2.0))
    mixed = analyze(config)["paimon"]
    assert (mixed["merged_record_count"], mixed["merged_record_count_is"]) == (None, "unknown")
    assert merged_rows(warehouse) == 40  # what an estimate from the new file alone misses


@pytest.mark.parametrize(
    ("options", "retracting"),
    [
        ({}, (1, 3)),  # deduplicate: a key whose newest row is -U or -D is gone
        ({"ignore-delete": "true"}, ()),
        ({"deduplicate.ignore-delete": "true"}, ()),
        ({"merge-engine": "first-row"}, ()),
        ({"merge-engine": "partial-update"}, ()),  # a -D retracts nothing (or fails)
        (
            {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
            (3,),
        ),
        ({"merge-engine": "aggregation"}, ()),  # a -D retracts field values, not the key
        ({"merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true"}, (3,)),
    ],
)
def test_which_rows_retract_their_key_follows_the_merge_engine(
    options: dict[str, str], retracting: tuple[int, ...]
) -> None:
    fields = [("a", "INT NOT NULL"), ("b", "STRING NOT NULL"), ("v", "DOUBLE")]
    schema = parsed_schema(fields, primary_keys=["b", "a"], options=options)
    key = schema.table_schema.key
    assert key is not None and key.field_ids == (1, 0)  # in key order
    assert key.retract_kinds == retracting
    assert key.sketch_ids == ((KEY_SKETCH_ID, RETRACTED_KEY_SKETCH_ID) if retracting else (-1,))
    assert parse_schema({"id": 0, "fields": []}).table_schema.key is None  # append-only


@needs_paimon_fixtures
def test_a_java_written_composite_key_table_estimates_its_readme_rows(
    spark: Any, tmp_path: Path
) -> None:
    """``pk_table_partial_update`` (Java Paimon: key (k0, k1), partial-update, -D rows
    ignored on read): the README's recall is 4 rows. The key (2, 2) only ever had a -D
    row: it adds no key. Few keys, so the sketch is exact."""
    config = config_for(fixture("pk_table_partial_update"), tmp_path / "state")
    doc = analyze(config)
    assert doc["record_count"] == 8  # file rows: every version, -D rows included
    terms = doc["paimon"]
    assert (terms["merged_record_count"], terms["merged_record_count_is"]) == (4, "estimated")
    assert terms["statistics"]["mergedRecordCount"] == 4


def test_a_full_compaction_makes_the_merged_count_exact(tmp_path: Path) -> None:
    """Before: not exact (metadata only here, so not estimated either); after a full
    compaction (one top-level file per bucket, no retractions: ``compact_fully``, as Java
    writes it): exact from the manifests alone, equal to pypaimon's merge read before and
    after; a later write makes it inexact again."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create("t", COLUMNS, primary_keys=["k1", "k2"], options=OPTIONS)
    config = config_for(location, tmp_path / "state", sketches=False)
    warehouse.write("t", rows(KEYS[:60], "+I", 1.0))
    warehouse.write("t", rows(KEYS[40:80], "+U", 2.0))
    warehouse.write("t", rows(KEYS[10:20], "-D", 3.0))
    before = analyze_metadata(config)["paimon"]
    exact = merged_rows(warehouse)
    assert exact == 80 - 10
    assert (before["merged_record_count"], before["merged_record_count_is"]) == (None, "unknown")

    compact_fully(warehouse, "t")
    assert merged_rows(warehouse) == exact  # pypaimon reads the compacted table alike
    after = analyze_metadata(config)
    assert after["record_count"] == exact  # one row per live key in the files now
    terms = after["paimon"]
    assert (terms["merged_record_count"], terms["merged_record_count_is"]) == (70, "exact")
    assert "fully compacted" in terms["merged_record_count_why"]
    assert after["commit"]["operation"] == "replace"
    assert terms["statistics"]["mergedRecordCount"] == 70

    warehouse.write("t", rows(KEYS[100:103], "+I", 4.0))
    again = analyze_metadata(config)["paimon"]
    assert again["merged_record_count_is"] == "unknown"
    assert merged_rows(warehouse) == 73


def analyze_metadata(config: Config) -> dict[str, Any]:
    analyze_table(open_configured(config.table[0], config), config=config, sketcher=None)
    return read_stats("t", config=config)
