"""VACUUM'd files lose their block sketches (issue 11, item 6), through the commands users
run: ``lakestats analyze`` tombstones the files a delta-rs DELETE removes, deltalake's
``vacuum`` deletes them from storage, ``lakestats compact`` drops their rows from the
current state and, once the retention has passed, deletes every store file that held them.
The table's stats stay those of the live rows (deltalake's own query engine) throughout,
and equal a run from scratch after later commits re-merge the compacted segments."""

from __future__ import annotations

import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_tables import (
    ID_NAME_PART,
    NO_LOG_RETENTION,
    DeltaWriter,
    assert_describes_live_rows,
    fixture_path,
    id_name_part,
    live_rows,
    needs_fixtures,
)
from lakestats.analyze import analyze_table
from lakestats.cli import main
from lakestats.config import TableConfig, load_config
from lakestats.exceptions import LineageError
from lakestats.formats.delta.dv import relative_dv_path
from lakestats.formats.registry import open_table
from lakestats.read import read_stats
from lakestats.store import StatsStore
from lakestats.store.store import SEGMENTS_DIR
from lakestats.tables import open_configured

COLUMNS = ID_NAME_PART
GRACE_S = 1.0


def cli(config: Path, *args: str) -> str:
    out = io.StringIO()
    code = main([*args, "--config", str(config)], out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


def batch(ids: range, part: str) -> dict[str, list[Any]]:
    return id_name_part(ids, part, null_every=9, names="n{}", distinct=37)


def current_rows(store: StatsStore) -> dict[str, tuple[bool, int]]:
    """Every per-file row of the current state: path → (tombstoned, columns sketched)."""
    state = store.current()
    assert state is not None
    return {
        f.path: (f.path in segment.dead_files, len(f.sketches))
        for segment in state.segments
        for f in store.read_segment(segment.path)
    }


def paths_in_every_segment_file(store: StatsStore) -> set[str]:
    """Data file paths held by any segment file on disk, referenced or not."""
    return {
        path
        for stored in store.files()
        if stored.path.startswith(f"{SEGMENTS_DIR}/")
        for path in store.segment_paths(stored.path)
    }


def assert_exact(doc: dict[str, Any], data: pa.Table) -> None:
    assert_describes_live_rows(doc, data, ndv=True)


@pytest.fixture(scope="module")
def vacuumed(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("delta-vacuum")
    writer = DeltaWriter(root / "t")
    writer.create(COLUMNS, partition_by=["part"])
    config = root / "lakestats.toml"
    config.write_text(
        f'state_dir = "{root / "state"}"\n'
        f'[maintenance]\ngrace_period = "{GRACE_S}s"\nmin_log_versions = 1\n'
    )
    table = open_table(writer.path)
    store = StatsStore(root / "state", table.table_id)

    def show() -> dict[str, Any]:
        return dict(json.loads(cli(config, "show", writer.path, "--json")))

    a, b = batch(range(0, 300), "a"), batch(range(300, 500), "b")
    writer.append({k: a[k] + b[k] for k in a})  # one commit, one segment, two files
    cli(config, "analyze", writer.path, "-q")
    first = current_rows(store)
    writer.delete("id < 100")  # copy-on-write: part a's file is removed, a rewrite added
    cli(config, "analyze", writer.path, "-q")
    tombstoned = current_rows(store)
    doc, live_at_doc = show(), live_rows(writer.path)
    vacuum_removed = writer.vacuum()
    compact_output = cli(config, "compact", writer.path)
    compacted = current_rows(store)
    doc_after_compact = show()
    time.sleep(GRACE_S + 0.2)  # past the grace period and the state log retention
    cli(config, "compact", writer.path)
    on_disk = paths_in_every_segment_file(store)
    # later commits re-merge from the compacted segment
    writer.delete("id >= 450")
    writer.append(batch(range(600, 650), "c"))
    cli(config, "analyze", writer.path, "-q")
    scratch = root / "scratch.toml"
    scratch.write_text(f'state_dir = "{root / "scratch"}"\n')
    cli(scratch, "analyze", writer.path, "-q")
    yield {
        "writer": writer,
        "first": first,
        "tombstoned": tombstoned,
        "doc": doc,
        "live_at_doc": live_at_doc,
        "vacuum_removed": vacuum_removed,
        "compact_output": compact_output,
        "compacted": compacted,
        "doc_after_compact": doc_after_compact,
        "on_disk": on_disk,
        "incremental": show(),
        "live": live_rows(writer.path),
        "scratch": json.loads(cli(scratch, "show", writer.path, "--json")),
    }


@pytest.mark.spark
def test_vacuumed_files_lose_their_rows_and_the_store_files_that_held_them(
    vacuumed: dict[str, Any],
) -> None:
    first, tombstoned, compacted = (
        vacuumed["first"],
        vacuumed["tombstoned"],
        vacuumed["compacted"],
    )
    # before: one sketched row per live file
    assert len(first) == 2 and all(not dead and sketched == 3 for dead, sketched in first.values())
    # the DELETE tombstoned part a's file; VACUUM deleted exactly that file
    (gone,) = [path for path, (dead, _) in tombstoned.items() if dead]
    assert gone in first
    assert [vacuumed["writer"].path + "/" + p for p in vacuumed["vacuum_removed"]] == [
        gone.removeprefix("file://")
    ]
    # compact dropped its row; every other row is there, sketched
    assert "drop rows of 1 dead file(s)" in vacuumed["compact_output"]
    assert gone not in compacted
    assert set(compacted) == set(tombstoned) - {gone}
    assert all(not dead and sketched == 3 for dead, sketched in compacted.values())
    # after the retention no store file holds it at all
    assert gone not in vacuumed["on_disk"]
    assert vacuumed["on_disk"] == set(compacted)


@pytest.mark.spark
def test_the_stats_stay_those_of_the_live_rows(vacuumed: dict[str, Any]) -> None:
    assert vacuumed["doc_after_compact"] == vacuumed["doc"]
    assert_exact(vacuumed["doc"], vacuumed["live_at_doc"])
    incremental, scratch = vacuumed["incremental"], vacuumed["scratch"]
    assert_exact(incremental, vacuumed["live"])
    volatile = {"computed_at_ms", "commit", "published", "columns"}
    assert {k: v for k, v in incremental.items() if k not in volatile} == {
        k: v for k, v in scratch.items() if k not in volatile
    }
    for name, column in incremental["columns"].items():
        other = scratch["columns"][name]
        for key in ("null_count", "min", "max", "ndv", "value_count"):
            assert column.get(key) == other.get(key), (name, key)


def test_versions_whose_files_were_vacuumed_are_not_followed(tmp_path: Path) -> None:
    """Metadata only: a run from scratch starts at a baseline after the newest removal of
    a vacuumed file; a store that processed an older version starts over there."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create(COLUMNS, partition_by=["part"])
    first = writer.append(batch(range(0, 10), "a"))
    transient = writer.append(batch(range(10, 20), "b"))
    removed = writer.delete("part = 'b'")  # the file `transient` added is removed
    rewritten = writer.delete("id < 5")  # part a's file rewritten
    last = writer.append(batch(range(20, 30), "c"))
    table = open_table(writer.path)
    before = [(c.snapshot_id, c.operation) for c in table.commits_since(None)]
    assert before == [
        (first, "append"),
        (transient, "append"),
        (removed, "delete"),
        (rewritten, "overwrite"),
        (last, "append"),
    ]
    assert len(writer.vacuum()) == 2

    table = open_table(writer.path)
    commits = table.commits_since(None)
    with pytest.raises(LineageError, match=f"after version {first} were removed and vacuumed"):
        table.commits_since(first)

    # both vacuumed files are gone once `rewritten` is: the baseline is there
    assert [(c.snapshot_id, c.operation) for c in commits] == [
        (rewritten, "baseline"),
        (last, "append"),
    ]
    assert [Path(f.path.removeprefix("file://")).exists() for f in commits[0].added_files] == [True]
    assert table.commits_since(rewritten)[0].snapshot_id == last  # nothing vacuumed after it
    assert (
        sum(f.record_count for c in commits for f in c.added_files)
        == live_rows(writer.path).num_rows
    )


@pytest.mark.parametrize("column_mapping", [False, True])
def test_a_baseline_reads_each_file_with_the_schema_it_was_written_under(
    tmp_path: Path, column_mapping: bool
) -> None:
    """Metadata only: a baseline after a VACUUM, whose log still holds every commit, knows
    which files were written before a column was added (all null there: counted, as an
    incremental run counts them) and keeps no stats of a column dropped since."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create(COLUMNS, partition_by=["part"], column_mapping=column_mapping)
    writer.append(batch(range(0, 10), "a"))
    writer.append(batch(range(10, 20), "b"))
    writer.add_column("extra", "long")
    writer.append({**batch(range(20, 25), "c"), "extra": [1, None, 3, 4, 5]})
    writer.delete("part = 'b'")
    if column_mapping:  # delta-rs drops columns of column-mapping tables only
        writer.drop_column("name")
        writer.append({"id": [30], "part": ["d"], "extra": [9]})
    assert len(writer.vacuum()) == 1
    table = open_table(writer.path)
    baseline = table.commits_since(None)[0]
    assert baseline.operation == "baseline"
    extra = next(c.field_id for c in table.schema().columns if c.name == "extra")
    written_before = [f for f in baseline.added_files if extra not in f.field_ids]
    assert len(written_before) == 1  # part a's file: 10 rows without the column
    assert all(set(f.columns) <= set(f.field_ids) for f in baseline.added_files)

    state = tmp_path / "state"
    config = tmp_path / "lakestats.toml"
    config.write_text(f'state_dir = "{state}"\n')
    cli(config, "analyze", writer.path, "-q", "--no-sketches")
    doc = json.loads(cli(config, "show", writer.path, "--json"))
    data = live_rows(writer.path)
    assert doc["columns"]["extra"]["null_count"] == data.column("extra").null_count == 11
    assert_describes_live_rows(doc, data, ndv=False, partition="part")


@pytest.mark.spark
def test_a_log_cleanup_past_the_processed_version_sketches_only_what_changed(
    tmp_path: Path, spark: Any
) -> None:
    """The processed version is cut by log cleanup (a VACUUM's commits and a checkpoint
    after it): the run starts over from the checkpoint, but the files the store holds keep
    their sketches; only the file added since is sketched, the one removed since leaves,
    and the stats equal a run from scratch and the live rows."""
    writer = DeltaWriter(tmp_path / "t")
    writer.create(COLUMNS, partition_by=["part"], configuration=NO_LOG_RETENTION)
    writer.append(batch(range(0, 300), "a"))
    writer.append(batch(range(300, 500), "b"))
    config = load_config(None).model_copy(update={"state_dir": tmp_path / "state"})
    opened = open_configured(TableConfig(name="t", location=writer.path), config)
    first = analyze_table(opened, config=config)
    assert sum(r.sketched_files for r in first.commits) == 2
    processed = first.last_snapshot_id
    writer.append(batch(range(600, 650), "c"))
    writer.delete("part = 'b'")
    writer.vacuum()
    writer.cleanup()  # a checkpoint of the current version; every commit before it goes
    with pytest.raises(LineageError):
        open_table(writer.path).commits_since(processed)

    (baseline,) = analyze_table(opened, config=config).commits
    assert baseline.operation == "baseline"
    assert (baseline.added_files, baseline.removed_files, baseline.sketched_files) == (1, 1, 1)
    scratch_config = config.model_copy(update={"state_dir": tmp_path / "scratch"})
    scratch = open_configured(
        TableConfig(name="t", location=writer.path, publish=False), scratch_config
    )
    (whole,) = analyze_table(scratch, config=scratch_config).commits
    assert whole.sketched_files == 2  # from scratch, both live files are read
    doc = read_stats(opened)
    assert_describes_live_rows(doc, live_rows(writer.path), ndv=True, partition="part")
    volatile = {"computed_at_ms", "published", "commit", "columns"}
    fresh = read_stats(scratch)
    assert {k: v for k, v in doc.items() if k not in volatile} == {
        k: v for k, v in fresh.items() if k not in volatile
    }
    for name, column in doc["columns"].items():
        assert column["ndv"] == fresh["columns"][name]["ndv"], name  # theta: order-free


@needs_fixtures
def test_a_vacuumed_deletion_vector_file_ends_the_versions_that_need_it(tmp_path: Path) -> None:
    """Spark's DELETE at version 3 gave the file a vector that version 4 replaced: VACUUM
    may delete that vector's file, and a store at version 0 cannot follow through 3."""
    copy = tmp_path / "t"
    shutil.copytree(fixture_path("delta-rs/table_with_deletion_logs"), copy)
    assert [c.snapshot_id for c in open_table(str(copy)).commits_since(0)] == [3, 4]
    replaced = copy / relative_dv_path("J.Dy=B})x<YARTP5LcO1")  # version 3's vector
    replaced.unlink()

    table = open_table(str(copy))

    with pytest.raises(LineageError, match="after version 0 were removed and vacuumed"):
        table.commits_since(0)
    assert table.current_snapshot_id() == 4
    # a store at version 3 has read that vector already: it follows on
    assert [c.snapshot_id for c in table.commits_since(3)] == [4]
    commits = table.commits_since(None)  # the checkpoint at 20: a baseline of live files
    assert [c.operation for c in commits] == ["baseline"]
    (live,) = commits[0].added_files
    assert live.record_count - sum(d.cardinality for d in live.deletes) == 98  # type: ignore[union-attr]
