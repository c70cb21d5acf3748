"""The process's one cache budget (``lakestats.cache``): entries weigh what they hold, the
least recently used go first, and the stores and formats that cache through it read
correctly whatever it keeps."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

import lakestats
from lakestats import cache
from lakestats.cache import CacheView, MemoryCache
from lakestats.config import Config, load_config
from lakestats.exceptions import ConfigError
from lakestats.formats.iceberg.manifests import (
    ENTRY_BYTES_PER_AVRO_BYTE,
    ManifestReader,
    list_weight,
)
from lakestats.testing import IcebergWarehouse


def test_entries_stay_within_the_budget_least_recently_used_first() -> None:
    memory = MemoryCache(100)
    memory.put("a", 1, 40)
    memory.put("b", 2, 40)
    assert memory.get("a") == 1  # a is now the most recently used
    memory.put("c", 3, 40)  # 120 > 100: b goes
    assert (memory.get("a"), memory.get("b"), memory.get("c")) == (1, None, 3)
    assert memory.held_bytes == 80 and len(memory) == 2
    memory.put("big", 4, 101)  # heavier than the budget alone: not kept, nothing dropped
    assert memory.get("big") is None and memory.held_bytes == 80
    memory.put("a", 5, 10)  # replaced: its old weight is given back
    assert memory.get("a") == 5 and memory.held_bytes == 50
    memory.resize(45)  # the least recently used go until the rest fit
    assert memory.get("c") is None and memory.get("a") == 5 and memory.held_bytes == 10
    memory.resize(0)
    assert len(memory) == 0 and memory.held_bytes == 0


def test_views_keep_their_owners_apart_and_kinds_are_counted() -> None:
    memory = MemoryCache(1_000)
    first: CacheView[str] = CacheView(memory, "manifests", len)
    second: CacheView[str] = CacheView(memory, "manifests", len)  # another handle's
    other: CacheView[str] = CacheView(memory, "commits", len)
    first.put("k", "value")
    other.put("k", "xy")
    assert first.get("k") == "value" and second.get("k") is None and other.get("k") == "xy"
    second.put("k", "abc")
    assert memory.held_bytes == 10
    assert memory.held_by_kind() == {"manifests": 8, "commits": 2}


def test_threads_leave_the_weights_consistent() -> None:
    memory = MemoryCache(10_000)

    def fill(offset: int) -> None:
        for i in range(2_000):
            memory.put((offset, i % 300), i, 7 + i % 13)
            memory.get((offset, (i * 7) % 300))

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 0 < memory.held_bytes <= 10_000
    held = sum(7 + memory.get(key) % 13 for key in list(memory._items))
    assert held == memory.held_bytes


def test_the_budget_is_configured_as_a_size(tmp_path: Path) -> None:
    assert Config().cache_size == cache.DEFAULT_BYTES == 512 * 2**20
    path = tmp_path / "lakestats.toml"
    path.write_text('cache_size = "64MiB"\n')
    assert load_config(path).cache_size == 64 * 2**20
    path.write_text("cache_size = -1\n")
    with pytest.raises(ConfigError, match="cache_size"):
        load_config(path)


@pytest.fixture
def small_process_cache() -> object:
    before = cache.process_cache().max_bytes
    cache.configure(64 * 1024)
    yield cache.process_cache()
    cache.configure(before)


def test_tables_read_right_whatever_the_cache_keeps(
    tmp_path: Path, small_process_cache: MemoryCache
) -> None:
    """Three tables through one 64 KiB budget: each table's stats (built, then read by a
    second handle, as the daemon's reader does) are what a process with room for every
    entry computes; the cache never holds more than its budget."""
    warehouse = IcebergWarehouse(tmp_path / "wh")
    locations = []
    for t in range(3):
        name = f"t{t}"
        warehouse.create_table(name, pa.schema([("id", pa.int64()), ("name", pa.string())]))
        for c in range(4):
            ids = list(range(c * 100 + t, c * 100 + t + 50))
            warehouse.append(name, {"id": ids, "name": [f"n{i % 7}" for i in ids]})
        locations.append(warehouse.location(name))
    tight = Config(state_dir=str(tmp_path / "tight"))
    roomy = Config(state_dir=str(tmp_path / "roomy"))
    for location in locations:
        worker = lakestats.open_table(location, tight)
        lakestats.analyze_table(worker, config=tight, sketcher=None)
        assert small_process_cache.held_bytes <= 64 * 1024
    docs = [
        lakestats.read_stats(lakestats.open_table(loc, tight), config=tight) for loc in locations
    ]
    cache.configure(1 << 30)
    for location in locations:
        lakestats.analyze_table(location, config=roomy, sketcher=None)
    expected = [lakestats.read_stats(loc, config=roomy) for loc in locations]
    assert cache.process_cache().held_bytes > 64 * 1024  # the tight budget did not fit it
    for doc, want in zip(docs, expected, strict=True):
        assert doc["record_count"] == want["record_count"] == 200
        assert doc["file_count"] == want["file_count"] == 4
        assert doc["columns"] == want["columns"] and doc["partitions"] == want["partitions"]


def test_manifests_weigh_their_files_times_the_expansion(tmp_path: Path) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    warehouse = IcebergWarehouse(tmp_path / "wh")
    warehouse.create_table("t", pa.schema([("id", pa.int64())]))
    warehouse.append("t", {"id": [1, 2, 3]})
    snapshot = warehouse.table("t").current_snapshot()
    assert snapshot is not None
    memory = MemoryCache(1 << 30)
    reader = ManifestReader(PyArrowFileIO(), memory)
    (manifest,) = reader.manifests(snapshot)
    assert len(reader.entries(manifest)) == 1
    list_bytes = Path(snapshot.manifest_list.removeprefix("file://")).stat().st_size
    manifest_bytes = Path(manifest.manifest_path.removeprefix("file://")).stat().st_size
    # a manifest by its Avro size; a list by what its entries hold decoded (its Avro entries
    # are ~44 bytes, decoded ~900: weighed by Avro size, lists held 2.3× their weight)
    assert list_bytes * ENTRY_BYTES_PER_AVRO_BYTE != list_weight((manifest,))
    assert memory.held_bytes == ENTRY_BYTES_PER_AVRO_BYTE * manifest_bytes + list_weight(
        (manifest,)
    )
    # no room: read again each time, the same entries
    empty = ManifestReader(PyArrowFileIO(), MemoryCache(0))
    assert empty.entries(manifest) == reader.entries(manifest)


def test_manifest_lists_weigh_what_they_hold_and_share_their_entries(tmp_path: Path) -> None:
    """A table of many small appends (the memory hunt's soak): each list names every
    manifest so far. Decoded on its own a list takes about its weight (not 2.3× it, as
    when weighed by Avro size); read one after another, lists share the entries they have
    in common, so the cache holds far less than the weights it counts."""
    import gc
    import tracemalloc

    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.transforms import IdentityTransform

    warehouse = IcebergWarehouse(tmp_path / "wh")
    schema = pa.schema([("id", pa.int64()), ("cat", pa.string())])
    warehouse.create_table("t", schema, partition_by=[("cat", IdentityTransform())])
    for i in range(30):
        warehouse.append("t", {"id": [i], "cat": [f"c{i % 3}"]})
    snapshots = warehouse.table("t").snapshots()

    def decoded(reader: ManifestReader, wanted: list[Snapshot]) -> tuple[int, int]:
        """(bytes the lists' objects take, their weights)"""
        reader.manifests(snapshots[0])  # pyiceberg's readers are built: not counted
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            lists = [reader.manifests(s) for s in wanted]
            gc.collect()
            used = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        return used, sum(list_weight(m) for m in lists)

    alone = [
        decoded(ManifestReader(PyArrowFileIO(), MemoryCache(1 << 30)), [s]) for s in snapshots[-5:]
    ]
    for used, weight in alone:
        assert 0.5 * weight <= used <= 1.2 * weight, (used, weight)
    reader = ManifestReader(PyArrowFileIO(), MemoryCache(1 << 30))
    used, weight = decoded(reader, snapshots[1:])
    assert used < 0.25 * weight, (used, weight)
    older, newer = reader.manifests(snapshots[-2]), reader.manifests(snapshots[-1])
    assert {id(m) for m in older} <= {id(m) for m in newer}  # the same objects


def test_a_delta_checkpoint_is_kept_within_the_budget(
    tmp_path: Path, small_process_cache: MemoryCache
) -> None:
    """A Delta table's checkpoint (its actions: ~2 KB a file) is cached like the rest: with
    no room it is read again when needed, and the stats are those built with room."""
    from deltalake import DeltaTable, write_deltalake

    location = tmp_path / "delta"
    for commit in range(3):
        ids = list(range(commit * 200, commit * 200 + 200))
        data = pa.table({"id": ids, "part": [i % 40 for i in ids]})
        write_deltalake(str(location), data, partition_by=["part"], mode="append")
        if commit == 1:
            DeltaTable(str(location)).create_checkpoint()
    cache.configure(0)  # nothing kept
    tight = Config(state_dir=str(tmp_path / "tight"))
    lakestats.analyze_table(str(location), config=tight, sketcher=None)
    doc = lakestats.read_stats(str(location), config=tight)
    assert cache.process_cache().held_bytes == 0
    cache.configure(1 << 30)
    roomy = Config(state_dir=str(tmp_path / "roomy"))
    opened = lakestats.open_table(str(location), roomy)
    lakestats.analyze_table(opened, config=roomy, sketcher=None)
    want = lakestats.read_stats(opened, config=roomy)
    for key in ("snapshot_id", "record_count", "file_count", "columns", "partitions"):
        assert doc[key] == want[key], key
    assert doc["record_count"] == 600 and doc["file_count"] == 120
    # the checkpoint's 80 files, weighed as measured
    assert cache.process_cache().held_by_kind()["delta_checkpoints"] >= 80 * 1850


def test_position_delete_targets_are_cached_within_the_budget(
    tmp_path: Path, small_process_cache: MemoryCache
) -> None:
    """The data files a position-delete file names (read from the file when its bounds do
    not say) are cached by delete path; with no room they are read again, same counts."""
    from lakestats.formats.iceberg.deletes import TargetCache
    from lakestats.formats.iceberg.testing_deletes import add_position_deletes

    memory = MemoryCache(10_000)
    targets = TargetCache(memory)
    paths = frozenset({"file:///wh/a/1.parquet", "file:///wh/a/2.parquet"})
    targets.put("file:///wh/a/pos-1.parquet", paths)
    assert targets.get("file:///wh/a/pos-1.parquet") == paths and targets.files_read == 1
    weight = 256 + sum(len(p) + 120 for p in paths)
    assert memory.held_by_kind() == {"iceberg_delete_targets": weight}

    warehouse = IcebergWarehouse(tmp_path / "wh")
    warehouse.create_table("t", pa.schema([("id", pa.int64())]))
    warehouse.append("t", {"id": list(range(100))})
    warehouse.append("t", {"id": list(range(100, 150))})
    files = [t.file.file_path for t in warehouse.table("t").scan().plan_files()]
    # one delete file naming both data files: its targets must be read from it
    add_position_deletes(warehouse.table("t"), {files[0]: [1, 2], files[1]: [3]}, one_file=True)
    counts = []
    for budget, state in ((0, "tight"), (1 << 30, "roomy")):
        cache.configure(budget)
        config = Config(state_dir=str(tmp_path / state))
        lakestats.analyze_table(warehouse.location("t"), config=config, sketcher=None)
        counts.append(lakestats.read_stats(warehouse.location("t"), config=config))
        held = cache.process_cache().held_by_kind()
        assert ("iceberg_delete_targets" in held) == bool(budget)
    assert [d["merged_record_count"] for d in counts] == [147, 147]


def test_a_store_keeps_only_its_newest_merged_view_cached(tmp_path: Path) -> None:
    """Each commit makes a new merged view; the one it replaced is never read again by
    this store, and no longer holds room in the cache (a daemon's soak filled 64 MB of the
    budget with such views, pushing its manifests out)."""
    before = cache.process_cache().max_bytes
    cache.configure(0)  # empty it: only this test's entries below
    cache.configure(1 << 30)
    try:
        warehouse = IcebergWarehouse(tmp_path / "wh")
        warehouse.create_table("t", pa.schema([("id", pa.int64())]))
        config = Config(state_dir=str(tmp_path / "state"))
        held: list[int] = []
        for c in range(6):
            warehouse.append("t", {"id": list(range(c * 10, c * 10 + 10))})
            if c == 0:
                worker = lakestats.open_table(warehouse.location("t"), config)
            lakestats.analyze_table(worker, config=config, sketcher=None)
            held.append(cache.process_cache().held_by_kind().get("store_merged_views", 0))
        assert held[0] > 0
        assert held[-1] < 2 * held[0], held  # one view, not six
    finally:
        cache.configure(before)
