"""V2 checkpoints (UUID-named, JSON and Parquet, file actions in ``_delta_log/_sidecars/``)
on a real delta-rs table: with every older commit gone, bootstrap must read them, and the
stats equal the live rows (read by deltalake through the same checkpoints) and a run that
followed the whole log. The Parquet one carries only ``stats_parsed`` (no JSON ``stats``).
Metadata only (``--no-sketches``): every compared value is exact."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_checkpoints import SIDECARS, V2Checkpoint, drop_log_before, split_into_v2
from delta_tables import (
    ID_NAME_PART,
    DeltaWriter,
    assert_describes_live_rows,
    id_name_part,
    live_rows,
)
from lakestats.cli import main

COLUMNS = ID_NAME_PART
V2_TABLE = {"delta.checkpointPolicy": "v2"}


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def analyze(writer: DeltaWriter, state: Path) -> dict[str, Any]:
    code, _ = cli("analyze", writer.path, "--state-dir", str(state), "--no-sketches", "-q")
    assert code == 0
    code, out = cli("show", writer.path, "--state-dir", str(state), "--json")
    assert code == 0
    return dict(json.loads(out))


def store_files(state: Path) -> dict[str, str]:
    return {
        str(p.relative_to(state)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(state.rglob("*"))
        if p.is_file()
    }


def batch(ids: range, part: str) -> dict[str, list[Any]]:
    return id_name_part(ids, part, null_every=5, names="name-{:02d}", distinct=13)


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    # the first commit of a bootstrapped store is its baseline; the sidecar names differ
    return {k: v for k, v in doc.items() if k not in {"computed_at_ms", "commit", "published"}}


def assert_exact(doc: dict[str, Any], data: pa.Table) -> None:
    assert_describes_live_rows(doc, data, ndv=False, partition="part")


def sorted_rows(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=lambda row: row["id"])


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One table through a JSON v2 checkpoint and then a Parquet one, each followed by
    Delta's metadata cleanup; ``full`` follows every commit before each cleanup."""
    from deltalake import TableFeatures

    root = tmp_path_factory.mktemp("delta-v2")
    writer = DeltaWriter(root / "t")
    writer.create(COLUMNS, partition_by=["part"], configuration=V2_TABLE)
    writer.table().alter.add_feature(
        TableFeatures.V2Checkpoint, allow_protocol_versions_increase=True
    )
    full = root / "full"
    writer.append(batch(range(0, 40), "a"))
    writer.append(batch(range(40, 70), "b"))
    writer.delete("id < 10")  # copy-on-write: a remove (a checkpoint tombstone) and an add
    writer.update({"name": "'renamed'"}, "id >= 65")
    analyze(writer, full)
    live_before_json = live_rows(writer.path)
    files_before_json = len(writer.table().file_uris())
    json_checkpoint = split_into_v2(writer, file_format="json")
    drop_log_before(writer, json_checkpoint.version)
    writer.append(batch(range(100, 120), "c"))
    after_json = {
        "live": live_rows(writer.path),
        "full": analyze(writer, full),
        "bootstrapped": analyze(writer, root / "from-json"),
    }

    writer.append(batch(range(200, 230), "a"))
    writer.delete("id >= 100 and id < 105")
    analyze(writer, full)  # the whole log, before it goes
    analyze(writer, root / "from-json")  # and the store bootstrapped from the JSON one
    live_before_parquet = live_rows(writer.path)
    files_before_parquet = len(writer.table().file_uris())
    parquet_checkpoint = split_into_v2(writer, file_format="parquet", stats_parsed_only=True)
    drop_log_before(writer, parquet_checkpoint.version)  # the JSON checkpoint goes too
    writer.append(batch(range(300, 310), "d"))
    yield {
        "writer": writer,
        "root": root,
        "json_checkpoint": json_checkpoint,
        "parquet_checkpoint": parquet_checkpoint,
        "live_before_json": live_before_json,
        "files": {"json": files_before_json, "parquet": files_before_parquet},
        "live_before_parquet": live_before_parquet,
        "after_json": after_json,
        "after_parquet": {
            "live": live_rows(writer.path),
            "full": analyze(writer, full),
            "bootstrapped": analyze(writer, root / "from-parquet"),
            # its last version is gone: it starts over from the Parquet checkpoint
            "restarted": analyze(writer, root / "from-json"),
        },
    }


def test_the_checkpoints_follow_the_v2_layout(history: dict[str, Any]) -> None:
    writer: DeltaWriter = history["writer"]
    json_checkpoint: V2Checkpoint = history["json_checkpoint"]
    parquet_checkpoint: V2Checkpoint = history["parquet_checkpoint"]
    assert json_checkpoint.checkpoint.suffix == ".json"
    assert parquet_checkpoint.checkpoint.suffix == ".parquet"
    assert json_checkpoint.adds == history["files"]["json"] == 2
    assert parquet_checkpoint.adds == history["files"]["parquet"] == 4
    # after the cleanups: the Parquet checkpoint, its sidecar, and only commits from it on
    log = {p.name for p in writer.log.iterdir() if p.is_file()}
    assert parquet_checkpoint.checkpoint.name in log
    assert not any(".checkpoint." in n and n != parquet_checkpoint.checkpoint.name for n in log)
    assert min(int(n[:20]) for n in log if n.endswith(".json")) == parquet_checkpoint.version
    assert {p.name for p in (writer.log / SIDECARS).iterdir()} == {parquet_checkpoint.sidecar.name}
    hint = json.loads((writer.log / "_last_checkpoint").read_text())
    assert hint["version"] == parquet_checkpoint.version
    assert hint["v2Checkpoint"]["path"] == parquet_checkpoint.checkpoint.name


def test_deltalake_reads_the_same_rows_through_the_checkpoints(history: dict[str, Any]) -> None:
    """The checkpoints are faithful: deltalake rebuilds the same table from them."""
    after_json, after_parquet = history["after_json"], history["after_parquet"]
    assert sorted_rows(after_json["live"])[: history["live_before_json"].num_rows] == (
        sorted_rows(history["live_before_json"])
    )
    assert after_json["live"].num_rows == history["live_before_json"].num_rows + 20
    assert after_parquet["live"].num_rows == history["live_before_parquet"].num_rows + 10
    assert sorted_rows(history["live_before_parquet"]) == [
        row for row in sorted_rows(after_parquet["live"]) if row["part"] != "d"
    ]


@pytest.mark.parametrize("stage", ["after_json", "after_parquet"])
def test_bootstrap_from_a_v2_checkpoint_equals_the_live_rows_and_the_full_log(
    history: dict[str, Any], stage: str
) -> None:
    run = history[stage]
    checkpoint: V2Checkpoint = history[stage.replace("after_", "") + "_checkpoint"]
    assert run["bootstrapped"]["commit"]["operation"] == "append"
    assert run["bootstrapped"]["snapshot_id"] == checkpoint.version + 1
    assert_exact(run["bootstrapped"], run["live"])
    assert_exact(run["full"], run["live"])
    assert comparable(run["bootstrapped"]) == comparable(run["full"])


def test_a_store_whose_version_was_cleaned_up_starts_over_from_the_parquet_checkpoint(
    history: dict[str, Any],
) -> None:
    run = history["after_parquet"]
    assert_exact(run["restarted"], run["live"])
    assert comparable(run["restarted"]) == comparable(run["full"])


def test_a_missing_sidecar_is_one_clear_line_and_leaves_the_store_unchanged(
    history: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = DeltaWriter(tmp_path / "t")
    shutil.copytree(history["writer"].path, copy.path)
    sidecar = copy.log / SIDECARS / history["parquet_checkpoint"].sidecar.name
    sidecar.unlink()
    state = tmp_path / "state"  # a new store: bootstrap reads the checkpoint
    capsys.readouterr()

    code, _ = cli("analyze", copy.path, "--state-dir", str(state), "--no-sketches")

    assert code != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("lakestats: error: ")
    assert f"checkpoint {history['parquet_checkpoint'].version}" in lines[0]
    assert f"_delta_log/_sidecars/{sidecar.name} is missing" in lines[0]
    assert store_files(state) == {} if state.exists() else True


def test_delta_rs_classic_named_v2_checkpoint(tmp_path: Path) -> None:
    """What deltalake 1.6 writes on a ``v2Checkpoint`` table: v2 content (a
    ``checkpointMetadata`` action) under the classic name, file actions inline."""
    from deltalake import TableFeatures

    writer = DeltaWriter(tmp_path / "t")
    writer.create(COLUMNS, partition_by=["part"], configuration=V2_TABLE)
    writer.table().alter.add_feature(
        TableFeatures.V2Checkpoint, allow_protocol_versions_increase=True
    )
    writer.append(batch(range(0, 30), "a"))
    version = writer.delete("id < 7")
    writer.checkpoint()
    classic = writer.log / f"{version:020d}.checkpoint.parquet"
    assert pq.read_table(classic, columns=["checkpointMetadata"])[
        "checkpointMetadata"
    ].drop_null().to_pylist() == [{"version": version}]
    drop_log_before(writer, version)

    doc = analyze(writer, tmp_path / "state")

    assert doc["commit"]["operation"] == "baseline" and doc["snapshot_id"] == version
    assert_exact(doc, live_rows(writer.path))
