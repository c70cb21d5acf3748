"""V2 checkpoints (Delta PROTOCOL.md, "V2 Spec", "UUID-named checkpoint", "Sidecar Files")
built from a real delta-rs checkpoint, for the tests.

delta-rs 1.6 writes the *content* of a v2-spec checkpoint on a table with the
``v2Checkpoint`` feature (a ``checkpointMetadata`` action) but always under the classic name
``<v>.checkpoint.parquet`` with the file actions inline; it cannot write a UUID-named one
nor sidecars (checked: ``create_checkpoint()`` takes no options, ``delta.checkpointPolicy
= v2`` changes nothing). ``split_into_v2`` turns that classic checkpoint into the layout
Spark and Databricks write: every file action (``add``, ``remove``) in one sidecar Parquet
file under ``_delta_log/_sidecars/``, the non-file actions and one ``sidecar`` action per
sidecar in ``<v>.checkpoint.<uuid>.json|parquet``, and ``_last_checkpoint`` naming it.
Nothing else is hand-made: the actions are the ones delta-rs wrote.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_tables import DeltaWriter

SIDECARS = "_sidecars"
_FILE_ACTIONS = ("add", "remove")
_STATS_TYPES: Mapping[str, pa.DataType] = {
    "long": pa.int64(),
    "integer": pa.int32(),
    "string": pa.string(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
}


@dataclass(frozen=True)
class V2Checkpoint:
    version: int
    checkpoint: Path  # <v>.checkpoint.<uuid>.json|parquet
    sidecar: Path  # _delta_log/_sidecars/<uuid>.parquet
    adds: int


def split_into_v2(
    writer: DeltaWriter,
    *,
    file_format: Literal["json", "parquet"],
    stats_parsed_only: bool = False,
) -> V2Checkpoint:
    """A UUID-named v2 checkpoint of the current version, with its file actions in one
    sidecar. ``stats_parsed_only``: the sidecar's adds carry the typed ``stats_parsed``
    struct and no JSON ``stats`` (``delta.checkpoint.writeStatsAsJson = false``)."""
    version = writer.version()
    columns = _stats_columns(writer)
    writer.checkpoint()
    classic = writer.log / f"{version:020d}.checkpoint.parquet"
    actions = pq.read_table(classic)
    classic.unlink()
    is_file_action = pc.or_(pc.is_valid(actions["add"]), pc.is_valid(actions["remove"]))
    files = actions.filter(is_file_action).select(list(_FILE_ACTIONS))
    if stats_parsed_only:
        files = _with_stats_parsed_only(files, columns)
    (writer.log / SIDECARS).mkdir(exist_ok=True)
    sidecar = writer.log / SIDECARS / f"{uuid.uuid4()}.parquet"
    pq.write_table(files, sidecar)
    sidecar_action = {
        "path": sidecar.name,
        "sizeInBytes": sidecar.stat().st_size,
        "modificationTime": int(sidecar.stat().st_mtime * 1000),
        "tags": {},
    }
    others = actions.filter(pc.invert(is_file_action)).drop_columns(list(_FILE_ACTIONS))
    # delta-rs wrote a v2-spec checkpoint: it has the checkpointMetadata action
    assert {"sidecar", "checkpointMetadata"} <= set(others.column_names)
    assert pc.sum(pc.is_valid(others["checkpointMetadata"])).as_py() == 1
    name = f"{version:020d}.checkpoint.{uuid.uuid4()}.{file_format}"
    checkpoint = writer.log / name
    if file_format == "parquet":
        row = dict.fromkeys(others.column_names) | {"sidecar": sidecar_action}
        pq.write_table(
            pa.concat_tables([others, pa.Table.from_pylist([row], others.schema)]), checkpoint
        )
    else:
        lines = [
            {column: _plain(value)}
            for record in others.to_pylist()
            for column, value in record.items()
            if value is not None
        ]
        lines.append({"sidecar": sidecar_action})
        checkpoint.write_text("".join(json.dumps(line) + "\n" for line in lines))
    adds = int(pc.sum(pc.is_valid(files["add"])).as_py())
    hint = {
        "version": version,
        "size": others.num_rows + 1 + files.num_rows,
        "sizeInBytes": checkpoint.stat().st_size,
        "numOfAddFiles": adds,
        "v2Checkpoint": {
            "path": name,
            "sizeInBytes": checkpoint.stat().st_size,
            "modificationTime": int(checkpoint.stat().st_mtime * 1000),
        },
    }
    (writer.log / "_last_checkpoint").write_text(json.dumps(hint))
    return V2Checkpoint(version, checkpoint, sidecar, adds)


def drop_log_before(writer: DeltaWriter, version: int) -> None:
    """What Delta's metadata cleanup does with the checkpoint at ``version`` as its cutoff:
    commits, checkpoints and checksums before it go, and the sidecars no kept checkpoint
    references."""
    for entry in writer.log.iterdir():
        head = entry.name.split(".")[0]
        if entry.is_file() and head.isdigit() and int(head) < version:
            entry.unlink()
    referenced: set[str] = set()
    for checkpoint in writer.log.glob("*.checkpoint.*"):
        referenced |= _sidecars_of(checkpoint)
    for sidecar in (writer.log / SIDECARS).glob("*.parquet"):
        if sidecar.name not in referenced:
            sidecar.unlink()


def _sidecars_of(checkpoint: Path) -> set[str]:
    if checkpoint.suffix == ".json":
        lines = [json.loads(line) for line in checkpoint.read_text().splitlines() if line]
        return {line["sidecar"]["path"] for line in lines if "sidecar" in line}
    if "sidecar" not in pq.read_schema(checkpoint).names:
        return set()
    column = pq.read_table(checkpoint, columns=["sidecar"])["sidecar"]
    return {s["path"] for s in column.to_pylist() if s is not None}


def _plain(value: Any) -> Any:
    """A Parquet value as Delta's JSON has it (maps come back as lists of pairs)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(v, tuple) for v in value):
        return {k: _plain(v) for k, v in value}  # an empty list is an empty map too
    return value


def _stats_columns(writer: DeltaWriter) -> dict[str, pa.DataType]:
    fields = json.loads(writer.table().schema().to_json())["fields"]
    partitions = set(writer.table().metadata().partition_columns)
    return {f["name"]: _STATS_TYPES[f["type"]] for f in fields if f["name"] not in partitions}


def _with_stats_parsed_only(files: pa.Table, columns: Mapping[str, pa.DataType]) -> pa.Table:
    """The adds with ``stats`` parsed into the typed ``stats_parsed`` struct, ``stats`` null."""
    bounds = pa.struct([pa.field(name, t) for name, t in columns.items()])
    counts = pa.struct([pa.field(name, pa.int64()) for name in columns])
    parsed_type = pa.struct(
        [
            pa.field("numRecords", pa.int64()),
            pa.field("minValues", bounds),
            pa.field("maxValues", bounds),
            pa.field("nullCount", counts),
        ]
    )
    add_type = files.schema.field("add").type
    fields = [add_type.field(i) for i in range(add_type.num_fields)]
    new_type = pa.struct([*fields, pa.field("stats_parsed", parsed_type)])
    adds = [
        add
        if add is None
        else {
            **add,
            "stats": None,
            "stats_parsed": {k: json.loads(add["stats"]).get(k) for k in parsed_type.names},
        }
        for add in files["add"].to_pylist()
    ]
    return files.set_column(0, "add", pa.array(adds, new_type))
