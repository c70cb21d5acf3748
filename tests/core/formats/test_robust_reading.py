"""Damaged history does not block the current snapshot; stale manifest lengths are read.

Engines read only the current snapshot: a historical manifest list that is lost makes
lakestats start from a baseline (as with expired history) and say so, naming the file. A
manifest whose length in the manifest list is stale is read when the Avro file itself is
complete; a truncated manifest is still refused.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list, write_manifest_list
from pyiceberg.table.snapshots import Snapshot
from structlog.testing import capture_logs

from lakestats.cli import main
from lakestats.exceptions import MetadataError
from lakestats.formats.iceberg import open_iceberg_location
from lakestats.locations import local_path
from lakestats.model import BASELINE_OPERATION
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([("id", pa.int64())])
# positions in pyiceberg's ManifestFile record (its properties have no setters)
_LENGTH = 1
_ADDED_FILES_COUNT = 7


def local(path: str) -> Path:
    found = local_path(path)
    assert found is not None
    return found


def snapshots(wh: IcebergWarehouse) -> list[Snapshot]:
    table = wh.table("t")
    chain = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        chain.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return chain[::-1]


def appended(tmp_path: Path, batches: int) -> IcebergWarehouse:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(batches):
        wh.append("t", {"id": [i * 10 + j for j in range(i + 1)]})
    return wh


def cli(*args: str) -> str:
    out = io.StringIO()
    code = main(list(args), out=out)
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_an_unreadable_historical_manifest_list_starts_a_baseline_after_it(
    tmp_path: Path, damage: str
) -> None:
    wh = appended(tmp_path, 4)  # 1 + 2 + 3 + 4 rows
    chain = snapshots(wh)
    lost = local(chain[1].manifest_list)
    if damage == "missing":
        lost.unlink()
    else:
        lost.write_bytes(b"not avro")

    with capture_logs() as logs:
        commits = open_iceberg_location(wh.location("t")).commits_since(None)

    assert [c.snapshot_id for c in commits] == [chain[2].snapshot_id, chain[3].snapshot_id]
    assert commits[0].operation == BASELINE_OPERATION
    # the baseline holds every live file of the oldest readable snapshot after the loss
    assert sum(f.record_count for f in commits[0].added_files) == 1 + 2 + 3
    (warning,) = [e for e in logs if e["event"] == "history_unreadable"]
    assert warning["log_level"] == "warning"
    assert warning["manifest_list"] == chain[1].manifest_list
    assert warning["baseline_snapshot_id"] == chain[2].snapshot_id


def test_the_current_manifest_list_must_be_readable(tmp_path: Path) -> None:
    wh = appended(tmp_path, 2)
    current = snapshots(wh)[-1]
    local(current.manifest_list).unlink()
    with pytest.raises(MetadataError, match=r"manifest list .* does not exist"):
        open_iceberg_location(wh.location("t")).commits_since(None)


def test_analyze_after_a_lost_manifest_list_starts_over_and_is_exact(tmp_path: Path) -> None:
    wh = appended(tmp_path, 2)
    loc, state = wh.location("t"), str(tmp_path / "stats")
    cli("analyze", loc, "--state-dir", state, "--no-sketches", "-q")
    wh.append("t", {"id": [100, 101, 102]})
    wh.append("t", {"id": [200]})
    # the snapshot after the processed one is lost: its changes are unknowable
    local(snapshots(wh)[2].manifest_list).unlink()

    cli("analyze", loc, "--state-dir", state, "--no-sketches", "-q")

    doc = json.loads(cli("show", loc, "--state-dir", state, "--json"))
    assert doc["snapshot_id"] == snapshots(wh)[-1].snapshot_id
    assert doc["record_count"] == 1 + 2 + 3 + 1
    assert (doc["columns"]["id"]["min"], doc["columns"]["id"]["max"]) == (0, 200)
    commits = json.loads(cli("commits", loc, "--state-dir", state, "--json"))
    lost_id, last_id = snapshots(wh)[2].snapshot_id, snapshots(wh)[3].snapshot_id
    # stats of the snapshots processed before stay; the lost one has none
    assert [(c["snapshot_id"], c["operation"]) for c in commits][-1] == (
        last_id,
        BASELINE_OPERATION,
    )
    assert lost_id not in {c["snapshot_id"] for c in commits}


def _rewrite_manifest_lengths(snapshot: Snapshot, change: Any) -> None:
    """Rewrite a snapshot's manifest list with ``change(manifest)`` as each length."""
    io_ = PyArrowFileIO()
    manifests = list(read_manifest_list(io_.new_input(snapshot.manifest_list)))
    output = io_.new_output(snapshot.manifest_list)
    with write_manifest_list(
        2,
        output,
        snapshot.snapshot_id,
        snapshot.parent_snapshot_id,
        snapshot.sequence_number,
        "null",
    ) as writer:
        for manifest in manifests:
            manifest[_LENGTH] = change(manifest)
        writer.add_manifests(manifests)


def test_a_stale_manifest_length_is_read_when_the_file_is_complete(tmp_path: Path) -> None:
    wh = appended(tmp_path, 2)
    for snapshot in snapshots(wh):
        _rewrite_manifest_lengths(snapshot, lambda m: m.manifest_length + 123)
    commits = open_iceberg_location(wh.location("t")).commits_since(None)
    assert [sum(f.record_count for f in c.added_files) for c in commits] == [1, 2]


def test_a_truncated_manifest_is_still_refused_whatever_its_length_says(
    tmp_path: Path,
) -> None:
    wh = appended(tmp_path, 1)
    (snapshot,) = snapshots(wh)
    (manifest,) = read_manifest_list(PyArrowFileIO().new_input(snapshot.manifest_list))
    path = local(manifest.manifest_path)
    path.write_bytes(path.read_bytes()[:-40])
    _rewrite_manifest_lengths(snapshot, lambda m: path.stat().st_size)  # a "fresh" length
    with pytest.raises(MetadataError, match="truncated") as raised:
        open_iceberg_location(wh.location("t")).commits_since(None)
    assert str(path) in str(raised.value)


def test_a_manifest_missing_entries_the_list_counts_is_refused(tmp_path: Path) -> None:
    # a cut at an Avro block boundary leaves a valid container: the counts catch it
    wh = appended(tmp_path, 1)
    (snapshot,) = snapshots(wh)

    def overcount(manifest: Any) -> int:
        manifest[_ADDED_FILES_COUNT] += 1
        return int(manifest.manifest_length)

    _rewrite_manifest_lengths(snapshot, overcount)
    with pytest.raises(MetadataError, match=r"has 1 entries but the manifest list counts 2"):
        open_iceberg_location(wh.location("t")).commits_since(None)
