"""Merge-on-read deletes for test tables: what pyiceberg's public API cannot write.

pyiceberg writes copy-on-write deletes only. These helpers write Iceberg delete files with
pyarrow (Parquet, with the spec's field ids) and commit them in a new snapshot through
pyiceberg's own snapshot producer, with a manifest whose content is ``deletes``: the table
then reads as Spark or Flink would have left it (v2 position and equality deletes).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record

_FILE_PATH_ID = 2147483546
_POS_ID = 2147483545


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _CommitDeleteFiles(_FastAppendFiles):
    """A fast append whose new manifest lists delete files instead of data files."""

    def __init__(self, delete_files: Sequence[DataFile], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._delete_files = list(delete_files)

    def _manifests(self) -> list[ManifestFile]:
        existing = super()._manifests()
        metadata = self._transaction.table_metadata
        by_spec: dict[int, list[DataFile]] = {}
        for delete_file in self._delete_files:
            by_spec.setdefault(delete_file.spec_id, []).append(delete_file)
        written = []
        for spec_id, files in by_spec.items():
            writer = _DeleteManifestWriter(
                metadata.specs()[spec_id],
                self.schema(),
                self.new_manifest_output(),
                self._snapshot_id,
                self._compression,
            )
            with writer:
                for delete_file in files:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=delete_file,
                        )
                    )
            written.append(writer.to_manifest_file())
        return [*written, *existing]


def _field(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(
        name, type_, nullable=False, metadata={b"PARQUET:field_id": str(field_id).encode()}
    )


def _local(path: str) -> str:
    return path.removeprefix("file://")


def _commit(table: Table, files: Sequence[DataFile]) -> int:
    with table.transaction() as transaction:
        _CommitDeleteFiles(
            files,
            operation=Operation.OVERWRITE,
            transaction=transaction,
            io=table.io,
        ).commit()
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def _data_files(table: Table) -> dict[str, DataFile]:
    return {task.file.file_path: task.file for task in table.scan().plan_files()}


def add_position_deletes(
    table: Table, positions: Mapping[str, Sequence[int]], *, one_file: bool = False
) -> int:
    """Commit position deletes: data file path → 0-based positions to delete. One delete
    file per data file (its ``file_path`` bounds name it), or with ``one_file`` a single
    file for all of them (data files of one partition; readers must read its
    ``file_path`` column to know its targets). Returns the new snapshot id."""
    live = _data_files(table)
    groups = [dict(positions)] if one_file else [{p: v} for p, v in positions.items()]
    files = []
    for group in groups:
        rows = sorted((path, pos) for path, values in group.items() for pos in values)
        location = f"{table.location()}/data/pos-deletes-{uuid.uuid4().hex}.parquet"
        pq.write_table(
            pa.table(
                [[r[0] for r in rows], [r[1] for r in rows]],
                schema=pa.schema(
                    [
                        _field("file_path", pa.string(), _FILE_PATH_ID),
                        _field("pos", pa.int64(), _POS_ID),
                    ]
                ),
            ),
            _local(location),
        )
        target = live[rows[0][0]]
        paths = sorted(group)
        files.append(
            DataFile.from_args(
                content=DataFileContent.POSITION_DELETES,
                file_path=location,
                file_format=FileFormat.PARQUET,
                partition=target.partition,
                record_count=len(rows),
                file_size_in_bytes=pq.ParquetFile(_local(location)).metadata.serialized_size,
                lower_bounds={_FILE_PATH_ID: paths[0].encode()},
                upper_bounds={_FILE_PATH_ID: paths[-1].encode()},
            )
        )
        files[-1].spec_id = target.spec_id
    return _commit(table, files)


def add_equality_deletes(
    table: Table,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    partition_of: str | None = None,
) -> int:
    """Commit one equality-delete file on ``columns`` holding ``rows`` (values by column;
    ``None`` deletes rows whose value is NULL). ``partition_of``: a data file whose
    partition the delete file belongs to (else it is global: spec of the table with no
    partition values, for unpartitioned tables). Returns the new snapshot id."""
    schema = table.schema()
    fields = [schema.find_field(c) for c in columns]
    arrow = schema.as_arrow()
    location = f"{table.location()}/data/eq-deletes-{uuid.uuid4().hex}.parquet"
    pq.write_table(
        pa.table(
            [list(values) for values in zip(*rows, strict=True)],
            schema=pa.schema(
                [
                    pa.field(
                        f.name,
                        arrow.field(f.name).type,
                        metadata={b"PARQUET:field_id": str(f.field_id).encode()},
                    )
                    for f in fields
                ]
            ),
        ),
        _local(location),
    )
    target = _data_files(table)[partition_of] if partition_of is not None else None
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=target.partition if target is not None else Record(),
        record_count=len(rows),
        file_size_in_bytes=pq.ParquetFile(_local(location)).metadata.serialized_size,
        equality_ids=[f.field_id for f in fields],
    )
    delete_file.spec_id = target.spec_id if target is not None else 0
    return _commit(table, [delete_file])
