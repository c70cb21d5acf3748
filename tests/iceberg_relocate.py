"""A relocated copy of an Iceberg table written elsewhere: the tests' independent oracle.

Every path prefix in the metadata JSON, manifest lists, manifests and the ``file_path``
column of position-delete files is rewritten to the copy's directory (manifest lengths
recomputed), so a reader that knows nothing of location mapping — DuckDB's iceberg
extension — reads the copy as the table's writers meant it. Test code only: lakestats
itself never rewrites a table (it maps locations while reading, ``LocationMap``).
v1 metadata also gets the ``schemas``/``current-schema-id`` fields DuckDB requires.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

_DELETE_FILE_PATH_FIELD_ID = 2147483546  # Iceberg's reserved id of the file_path column
_POSITION_DELETES = 1


def relocate(source: Path, target: Path, prefixes: Sequence[str]) -> Path:
    """Copy ``source`` to ``target`` with every path under ``prefixes`` moved there."""

    def moved(path: str) -> str:
        for prefix in prefixes:
            if path.startswith(prefix):
                return str(target) + path[len(prefix) :]
        return path

    def rewrite(value: Any) -> Any:
        if isinstance(value, str):
            return moved(value)
        if isinstance(value, dict):
            return {k: rewrite(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        return value

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    metadata = target / "metadata"
    manifest_lists = sorted(metadata.glob("snap-*.avro"))
    manifests = sorted(set(metadata.glob("*.avro")) - set(manifest_lists))
    for manifest in manifests:
        entries = []
        schema, meta, codec = _read_avro(manifest, entries)
        for entry in entries:
            data_file = entry["data_file"]
            if data_file.get("content") == _POSITION_DELETES:
                delete_file = Path(moved(data_file["file_path"]))
                _relocate_delete_file(delete_file, moved)
                data_file["file_size_in_bytes"] = delete_file.stat().st_size
                for bounds in ("lower_bounds", "upper_bounds"):
                    data_file[bounds] = [
                        {**b, "value": moved(b["value"].decode()).encode()}
                        if b["key"] == _DELETE_FILE_PATH_FIELD_ID
                        else b
                        for b in data_file.get(bounds) or []
                    ] or data_file.get(bounds)
        _write_avro(manifest, schema, meta, codec, [rewrite(e) for e in entries])
    for manifest_list in manifest_lists:
        entries = []
        schema, meta, codec = _read_avro(manifest_list, entries)
        rewritten = [rewrite(e) for e in entries]
        for entry in rewritten:
            entry["manifest_length"] = Path(entry["manifest_path"]).stat().st_size
        _write_avro(manifest_list, schema, meta, codec, rewritten)
    for metadata_file in metadata.glob("*.metadata.json"):
        doc = rewrite(json.loads(metadata_file.read_text()))
        if "schemas" not in doc and "schema" in doc:  # v1: what DuckDB requires
            doc["schemas"] = [{**doc["schema"], "schema-id": doc["schema"].get("schema-id", 0)}]
            doc["current-schema-id"] = doc["schemas"][0]["schema-id"]
        metadata_file.write_text(json.dumps(doc))
    return target


def newest_metadata_file(table: Path) -> Path:
    """The highest ``vN.metadata.json`` (the fixtures' version hints are unreliable)."""
    versions = [
        (int(p.name[1:].split(".")[0]), p) for p in (table / "metadata").glob("v*.metadata.json")
    ]
    return max(versions)[1]


def _read_avro(path: Path, into: list[Any]) -> tuple[Any, dict[str, Any], str]:
    with path.open("rb") as handle:
        reader = fastavro.reader(handle)
        schema = json.loads(reader.metadata["avro.schema"])
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        into.extend(reader)
        return schema, meta, reader.codec


def _write_avro(
    path: Path, schema: Any, meta: dict[str, Any], codec: str, records: list[Any]
) -> None:
    with path.open("wb") as handle:
        fastavro.writer(handle, schema, records, metadata=meta, codec=codec)


def _relocate_delete_file(path: Path, moved: Any) -> None:
    with pafs.LocalFileSystem().open_input_file(str(path)) as handle:
        table = pq.ParquetFile(handle).read()
    index = table.schema.get_field_index("file_path")
    column = pa.array([moved(p) for p in table.column(index).to_pylist()], pa.string())
    table = table.set_column(index, table.schema.field(index), column)
    pq.write_table(table, str(path))


def without_delete_targets(source: Path, target: Path) -> Path:
    """Copy ``source`` with its position-delete files tied to no data file: their
    ``referenced_data_file`` and ``file_path`` bounds dropped from the manifests (as a
    writer leaves them for a delete file that names several data files), so a reader
    learns which files they delete from their rows alone. Manifest lengths recomputed."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    metadata = target / "metadata"
    manifest_lists = sorted(metadata.glob("snap-*.avro"))
    changed = 0
    for manifest in sorted(set(metadata.glob("*.avro")) - set(manifest_lists)):
        entries: list[Any] = []
        schema, meta, codec = _read_avro(manifest, entries)
        for entry in entries:
            data_file = entry["data_file"]
            if data_file.get("content") != _POSITION_DELETES:
                continue
            changed += 1
            if "referenced_data_file" in data_file:  # v3 manifests
                data_file["referenced_data_file"] = None
            for bounds in ("lower_bounds", "upper_bounds"):
                if data_file.get(bounds):
                    data_file[bounds] = [
                        b for b in data_file[bounds] if b["key"] != _DELETE_FILE_PATH_FIELD_ID
                    ]
        _write_avro(manifest, schema, meta, codec, entries)
    assert changed, f"{source} has no position-delete files"
    for manifest_list in manifest_lists:
        entries = []
        schema, meta, codec = _read_avro(manifest_list, entries)
        for entry in entries:
            local = str(entry["manifest_path"]).rsplit("/metadata/", 1)[1]
            entry["manifest_length"] = (metadata / local).stat().st_size
        _write_avro(manifest_list, schema, meta, codec, entries)
    return target
