"""Publishing stats where engines read them: Iceberg table metadata.

For every processed snapshot S of a table opened through its catalog:

* a Puffin *table statistics* file with one ``apache-datasketches-theta-v1`` blob per
  column whose NDV sketch covers every file (``ndv`` property = the estimate), registered
  for S with a ``set-statistics`` update;
* a *partition statistics* file (Parquet, the spec's schema and field ids, rows sorted by
  partition, nulls first), computed incrementally from the parent snapshot's file plus the
  commit's added and removed files, registered with ``set-partition-statistics``.

Files are written next to the table's metadata (``lakestats-<snapshot>-<uuid>.stats`` /
``.parquet``) so engines and Iceberg's own orphan-file cleanup treat them as table
metadata. Registrations of a batch of commits go into one catalog commit that requires
only the table's uuid: the catalog applies them to its newest metadata, so a writer's
concurrent commit is never lost (a conflict is retried with backoff). A snapshot that no
longer exists gets nothing, and an entry that a concurrent expiry left dangling is removed
in a follow-up commit. See docs/publishing.md.
"""

from __future__ import annotations

import io
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import StaticTable, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.statistics import (
    BlobMetadata,
    PartitionStatisticsFile,
    StatisticsFile,
)
from pyiceberg.table.update import (
    AssertTableUUID,
    RemovePartitionStatisticsUpdate,
    RemoveStatisticsUpdate,
    SetPartitionStatisticsUpdate,
    SetStatisticsUpdate,
    TableUpdate,
)
from pyiceberg.types import IntegerType, LongType, NestedField, StructType

from lakestats.exceptions import LakestatsError, PublishError
from lakestats.formats.iceberg import IcebergTable
from lakestats.merge import whole_table
from lakestats.model import (
    Commit,
    DataFile,
    FileContent,
    PartitionAggregate,
    PartitionKey,
    SketchSettings,
)
from lakestats.publish.puffin import SPEC_BLOB_TYPES, THETA_BLOB, Blob, write_puffin
from lakestats.sketches.merge import theta_estimate
from lakestats.tables import OpenedTable
from lakestats.values import from_json

_log = structlog.get_logger(__name__)

PUBLISHED_KEY = "iceberg"  # key of this publisher's bookkeeping in StateVersion.published
FILE_PREFIX = "lakestats-"  # every file this module writes into a table's metadata folder
STATS_SUFFIX = ".stats"
PARTITION_STATS_SUFFIX = "-partition-stats.parquet"
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_BACKOFF_S = 0.05
MAX_BACKOFF_S = 5.0
_V3 = 3

_warned_no_catalog: set[str] = set()


def is_ours(path: str) -> bool:
    """Whether a statistics path names a file this module wrote (and may delete)."""
    return PurePosixPath(path.rstrip("/")).name.startswith(FILE_PREFIX)


# --- partition statistics rows ------------------------------------------------------------


@dataclass(frozen=True)
class PartitionStatsRow:
    """One row of a partition statistics file (counts per the Iceberg spec)."""

    spec_id: int
    partition: tuple[Any, ...]  # values in unified-partition-type order (field id order)
    data_record_count: int = 0
    data_file_count: int = 0
    total_data_file_size_in_bytes: int = 0
    position_delete_record_count: int = 0
    position_delete_file_count: int = 0  # position delete files, not deletion vectors
    dv_count: int = 0
    equality_delete_record_count: int = 0
    equality_delete_file_count: int = 0
    last_updated_at: int | None = None
    last_updated_snapshot_id: int | None = None

    @property
    def total_record_count(self) -> int | None:
        """Exact rows after deletes, or ``None`` where that needs a data read (spec)."""
        if self.equality_delete_file_count or self.position_delete_file_count:
            return None
        return self.data_record_count - self.position_delete_record_count  # DVs are exact

    @property
    def is_empty(self) -> bool:
        return not (
            self.data_file_count
            or self.position_delete_file_count
            or self.dv_count
            or self.equality_delete_file_count
        )

    @property
    def is_consistent(self) -> bool:
        return all(
            v >= 0
            for v in (
                self.data_record_count,
                self.data_file_count,
                self.total_data_file_size_in_bytes,
                self.position_delete_record_count,
                self.position_delete_file_count,
                self.dv_count,
                self.equality_delete_record_count,
                self.equality_delete_file_count,
            )
        )


RowKey = tuple[int, tuple[Any, ...]]


@dataclass(frozen=True)
class UnifiedPartitionType:
    """Every partition field any spec of the table ever had, by ascending field id."""

    fields: tuple[NestedField, ...]
    by_spec_name: Mapping[tuple[int, str], int]  # (spec id, partition field name) → field id

    @property
    def is_partitioned(self) -> bool:
        return bool(self.fields)

    def index(self) -> dict[int, int]:
        return {f.field_id: i for i, f in enumerate(self.fields)}

    def values(self, key: PartitionKey) -> tuple[Any, ...]:
        """A file's partition as a unified tuple, matched by partition field id.

        Keys read from stores written before lakestats kept field ids carry JSON-rendered
        values only: those are matched by (spec id, field name) and parsed back.
        """
        out: list[Any] = [None] * len(self.fields)
        position = self.index()
        field_ids = key.field_ids
        for i, (name, raw) in enumerate(key.values):
            if field_ids is not None:
                field_id: int | None = field_ids[i]
            else:
                field_id = self.by_spec_name.get((key.spec_id, name))
            if field_id is None or field_id not in position:
                raise PublishError(f"partition field {name!r} is not in spec {key.spec_id}")
            at = position[field_id]
            value = (
                raw if field_ids is not None else from_json(str(self.fields[at].field_type), raw)
            )
            out[at] = value.bytes if isinstance(value, uuid.UUID) else value
        return tuple(out)


def unified_partition_type(metadata: TableMetadata) -> UnifiedPartitionType:
    schemas = [metadata.schema(), *reversed(metadata.schemas)]
    fields: dict[int, NestedField] = {}
    by_name: dict[tuple[int, str], int] = {}
    for spec in sorted(metadata.partition_specs, key=lambda s: s.spec_id):
        for pf in spec.fields:
            by_name[(spec.spec_id, pf.name)] = pf.field_id
            source = None
            for schema in schemas:
                try:
                    source = schema.find_field(pf.source_id)
                    break
                except ValueError:
                    continue
            if source is None:
                raise PublishError(
                    f"partition field {pf.name!r}: source column {pf.source_id} is in no schema"
                )
            result = pf.transform.result_type(source.field_type)
            # a later spec's name wins (renames); types never change for a field id
            fields[pf.field_id] = NestedField(pf.field_id, pf.name, result, required=False)
    ordered = tuple(fields[i] for i in sorted(fields))
    return UnifiedPartitionType(ordered, by_name)


def partition_stats_schema(unified: UnifiedPartitionType, format_version: int) -> Schema:
    """The spec's partition statistics schema (field ids 1–13) for this table."""
    v3 = format_version >= _V3
    fields = [
        NestedField(1, "partition", StructType(*unified.fields), required=True),
        NestedField(2, "spec_id", IntegerType(), required=True),
        NestedField(3, "data_record_count", LongType(), required=True),
        NestedField(4, "data_file_count", IntegerType(), required=True),
        NestedField(5, "total_data_file_size_in_bytes", LongType(), required=True),
        NestedField(6, "position_delete_record_count", LongType(), required=v3),
        NestedField(7, "position_delete_file_count", IntegerType(), required=v3),
    ]
    if v3:
        fields.append(NestedField(13, "dv_count", IntegerType(), required=True))
    fields += [
        NestedField(8, "equality_delete_record_count", LongType(), required=v3),
        NestedField(9, "equality_delete_file_count", IntegerType(), required=v3),
        NestedField(10, "total_record_count", LongType(), required=False),
        NestedField(11, "last_updated_at", LongType(), required=False),
        NestedField(12, "last_updated_snapshot_id", LongType(), required=False),
    ]
    return Schema(*fields)


def _null_first(value: Any) -> tuple[int, Any]:
    return (0, 0) if value is None else (1, value)


def sort_rows(rows: Iterable[PartitionStatsRow]) -> list[PartitionStatsRow]:
    """Ascending by ``partition`` (field by field, NULL first), as the spec requires."""
    return sorted(rows, key=lambda r: (tuple(_null_first(v) for v in r.partition), r.spec_id))


def apply_files(
    rows: Mapping[RowKey, PartitionStatsRow],
    unified: UnifiedPartitionType,
    files: Iterable[DataFile],
    sign: int,
    touched: set[RowKey],
) -> dict[RowKey, PartitionStatsRow]:
    """Add (``sign`` 1) or subtract (-1) files' counts; records the keys they touch."""
    out = dict(rows)
    for f in files:
        key = (f.partition.spec_id, unified.values(f.partition))
        row = out.get(key) or PartitionStatsRow(spec_id=key[0], partition=key[1])
        n, records = sign, sign * f.record_count
        if f.content == FileContent.DATA:
            row = replace(
                row,
                data_record_count=row.data_record_count + records,
                data_file_count=row.data_file_count + n,
                total_data_file_size_in_bytes=row.total_data_file_size_in_bytes
                + sign * f.file_size_bytes,
            )
        elif f.content == FileContent.POSITION_DELETES:
            is_dv = f.file_format.upper() == "PUFFIN"
            row = replace(
                row,
                position_delete_record_count=row.position_delete_record_count + records,
                position_delete_file_count=row.position_delete_file_count + (0 if is_dv else n),
                dv_count=row.dv_count + (n if is_dv else 0),
            )
        else:
            row = replace(
                row,
                equality_delete_record_count=row.equality_delete_record_count + records,
                equality_delete_file_count=row.equality_delete_file_count + n,
            )
        out[key] = row
        touched.add(key)
    return out


def full_rows(
    unified: UnifiedPartitionType, live: Iterable[DataFile]
) -> dict[RowKey, PartitionStatsRow]:
    """Partition stats of a snapshot from all its live files (no update times known)."""
    return apply_files({}, unified, live, 1, set())


def incremental_rows(
    previous: Mapping[RowKey, PartitionStatsRow], unified: UnifiedPartitionType, commit: Commit
) -> dict[RowKey, PartitionStatsRow] | None:
    """The parent's rows plus the commit's changes; ``None`` if they do not add up (then
    the caller recomputes from the live files)."""
    touched: set[RowKey] = set()
    rows = apply_files(
        previous, unified, [*commit.added_files, *commit.added_delete_files], 1, touched
    )
    rows = apply_files(
        rows, unified, [*commit.removed_files, *commit.removed_delete_files], -1, touched
    )
    for key in touched:
        rows[key] = replace(
            rows[key],
            last_updated_at=commit.timestamp_ms,
            last_updated_snapshot_id=commit.snapshot_id,
        )
    if not all(r.is_consistent for r in rows.values()):
        return None
    return {k: r for k, r in rows.items() if not r.is_empty}


def rows_to_parquet(
    rows: Iterable[PartitionStatsRow], unified: UnifiedPartitionType, format_version: int
) -> bytes:
    schema = schema_to_pyarrow(partition_stats_schema(unified, format_version))
    names = [f.name for f in unified.fields]
    records = []
    for r in sort_rows(rows):
        record: dict[str, Any] = {
            "partition": dict(zip(names, r.partition, strict=True)),
            "spec_id": r.spec_id,
            "data_record_count": r.data_record_count,
            "data_file_count": r.data_file_count,
            "total_data_file_size_in_bytes": r.total_data_file_size_in_bytes,
            "position_delete_record_count": r.position_delete_record_count,
            "position_delete_file_count": r.position_delete_file_count,
            "equality_delete_record_count": r.equality_delete_record_count,
            "equality_delete_file_count": r.equality_delete_file_count,
            "total_record_count": r.total_record_count,
            "last_updated_at": r.last_updated_at,
            "last_updated_snapshot_id": r.last_updated_snapshot_id,
        }
        if format_version >= _V3:
            record["dv_count"] = r.dv_count
        records.append(record)
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(records, schema=schema), buffer)
    return buffer.getvalue()


def rows_from_parquet(
    data: bytes, unified: UnifiedPartitionType
) -> dict[RowKey, PartitionStatsRow]:
    """Read a partition statistics file; partition values are matched by field id."""
    table = pq.read_table(io.BytesIO(data))
    partition_type = table.schema.field("partition").type
    ids = [
        int(partition_type.field(i).metadata[b"PARQUET:field_id"])
        for i in range(partition_type.num_fields)
    ]
    names = [partition_type.field(i).name for i in range(partition_type.num_fields)]
    position = unified.index()
    rows: dict[RowKey, PartitionStatsRow] = {}
    for raw in table.to_pylist():
        values: list[Any] = [None] * len(unified.fields)
        for field_id, name in zip(ids, names, strict=True):
            if field_id in position:
                values[position[field_id]] = raw["partition"][name]
        key = (int(raw["spec_id"]), tuple(values))
        rows[key] = PartitionStatsRow(
            spec_id=key[0],
            partition=key[1],
            data_record_count=raw["data_record_count"],
            data_file_count=raw["data_file_count"],
            total_data_file_size_in_bytes=raw["total_data_file_size_in_bytes"],
            position_delete_record_count=raw.get("position_delete_record_count") or 0,
            position_delete_file_count=raw.get("position_delete_file_count") or 0,
            dv_count=raw.get("dv_count") or 0,
            equality_delete_record_count=raw.get("equality_delete_record_count") or 0,
            equality_delete_file_count=raw.get("equality_delete_file_count") or 0,
            last_updated_at=raw.get("last_updated_at"),
            last_updated_snapshot_id=raw.get("last_updated_snapshot_id"),
        )
    return rows


# --- theta statistics ---------------------------------------------------------------------


def theta_blobs(
    partitions: Sequence[PartitionAggregate],
    field_ids: Sequence[int],
    snapshot_id: int,
    sequence_number: int,
    settings: SketchSettings,
) -> list[Blob]:
    """One theta blob per column whose sketch covers every file holding the column.

    A sketch over only some files (sketching was off for older commits) would understate
    the NDV, so such a column gets no blob rather than a wrong one.
    """
    table = whole_table(partitions, settings)
    blobs = []
    for field_id in field_ids:
        column = table.columns.get(field_id)
        if column is None or column.theta is None or column.sketched_files != column.files:
            continue
        blobs.append(
            Blob(
                type=THETA_BLOB,
                fields=(field_id,),
                snapshot_id=snapshot_id,
                sequence_number=sequence_number,
                payload=column.theta,
                properties={"ndv": str(round(theta_estimate(column.theta)))},
            )
        )
    return blobs


# --- the publisher ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Staged:
    snapshot_id: int
    statistics: StatisticsFile | None
    partition_statistics: PartitionStatisticsFile | None


class IcebergPublisher:
    """Writes and registers the stats of processed snapshots of one catalog table.

    ``stage`` writes a snapshot's files (no catalog call); ``flush`` registers everything
    staged in one catalog commit, removes entries of expired snapshots, deletes the files
    nothing references any more, and returns the new bookkeeping for
    ``StateVersion.published``.
    """

    def __init__(
        self,
        table: IcebergTable,
        settings: SketchSettings,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_s: float = DEFAULT_BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = table
        self._settings = settings
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._sleep = sleep
        self._pending: list[_Staged] = []
        self._last_rows: tuple[int, Mapping[RowKey, PartitionStatsRow]] | None = None

    @property
    def _pyiceberg(self) -> Table:
        return self._table.pyiceberg_table

    def is_published(self, snapshot_id: int, published: Mapping[str, Any]) -> bool:
        if any(s.snapshot_id == snapshot_id for s in self._pending):
            return True
        return str(snapshot_id) in _records(published)

    # -- writing files ---------------------------------------------------------------------

    def _write(self, table: Table, name: str, data: bytes) -> str:
        path = table.location_provider().new_metadata_location(name)
        with table.io.new_output(path).create(overwrite=False) as out:
            out.write(data)
        return path

    def _previous_rows(
        self, parent_id: int | None, published: Mapping[str, Any], unified: UnifiedPartitionType
    ) -> Mapping[RowKey, PartitionStatsRow] | None:
        if parent_id is None:
            return None
        if self._last_rows is not None and self._last_rows[0] == parent_id:
            return self._last_rows[1]
        path = _records(published).get(str(parent_id), {}).get("partition_statistics")
        if not path:
            return None
        try:
            with self._pyiceberg.io.new_input(path).open() as stream:
                return rows_from_parquet(stream.read(), unified)
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            _log.warning("partition_stats_unreadable", path=path, error=str(exc))
            return None

    def stage(
        self,
        snapshot_id: int,
        partitions: Sequence[PartitionAggregate],
        commit: Commit | None,
        published: Mapping[str, Any],
    ) -> None:
        """Write the stats files of ``snapshot_id`` (merged ``partitions``); ``commit`` is
        the commit that produced it, if known (enables the incremental partition stats)."""
        table = self._pyiceberg
        metadata = table.metadata
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return  # expired meanwhile: stats of a snapshot that is gone describe nothing
        sequence_number = snapshot.sequence_number or 0
        schema = self._table.schema(snapshot.schema_id)
        field_ids = [c.field_id for c in schema.columns]
        tag = f"{FILE_PREFIX}{snapshot_id}-{uuid.uuid4()}"

        statistics = None
        blobs = theta_blobs(partitions, field_ids, snapshot_id, sequence_number, self._settings)
        if blobs:
            puffin = write_puffin(blobs)
            path = self._write(table, f"{tag}{STATS_SUFFIX}", puffin.data)
            # Only spec blob types are listed: pyiceberg's metadata model rejects others, so
            # one would make the table unreadable for every pyiceberg user.
            statistics = StatisticsFile.model_validate(
                {
                    "snapshot-id": snapshot_id,
                    "statistics-path": path,
                    "file-size-in-bytes": puffin.file_size,
                    "file-footer-size-in-bytes": puffin.footer_size,
                    "blob-metadata": [
                        BlobMetadata.model_validate(
                            {
                                "type": b.type,
                                "snapshot-id": b.snapshot_id,
                                "sequence-number": b.sequence_number,
                                "fields": list(b.fields),
                                "properties": dict(b.properties),
                            }
                        )
                        for b in puffin.blobs
                        if b.type in SPEC_BLOB_TYPES
                    ],
                }
            )

        partition_statistics = None
        unified = unified_partition_type(metadata)
        if unified.is_partitioned:
            rows = self._partition_rows(snapshot_id, commit, published, unified)
            data = rows_to_parquet(rows.values(), unified, metadata.format_version)
            path = self._write(table, f"{tag}{PARTITION_STATS_SUFFIX}", data)
            partition_statistics = PartitionStatisticsFile.model_validate(
                {
                    "snapshot-id": snapshot_id,
                    "statistics-path": path,
                    "file-size-in-bytes": len(data),
                }
            )
            self._last_rows = (snapshot_id, rows)
        self._pending = [s for s in self._pending if s.snapshot_id != snapshot_id]
        self._pending.append(_Staged(snapshot_id, statistics, partition_statistics))

    def _partition_rows(
        self,
        snapshot_id: int,
        commit: Commit | None,
        published: Mapping[str, Any],
        unified: UnifiedPartitionType,
    ) -> Mapping[RowKey, PartitionStatsRow]:
        if commit is not None and not commit.is_baseline:
            previous = self._previous_rows(commit.parent_id, published, unified)
            if previous is not None or commit.parent_id is None:
                rows = incremental_rows(previous or {}, unified, commit)
                if rows is not None:
                    return rows
        rows = full_rows(unified, self._table.live_files(snapshot_id))
        if commit is not None and not commit.is_baseline:
            touched: set[RowKey] = set()
            changed = [*commit.added_files, *commit.added_delete_files]
            changed += [*commit.removed_files, *commit.removed_delete_files]
            apply_files({}, unified, changed, 1, touched)
            for key in touched & rows.keys():
                rows[key] = replace(
                    rows[key],
                    last_updated_at=commit.timestamp_ms,
                    last_updated_snapshot_id=commit.snapshot_id,
                )
        return rows

    # -- registering -----------------------------------------------------------------------

    def flush(self, published: Mapping[str, Any]) -> dict[str, Any]:
        """Register what was staged, drop entries of expired snapshots, delete files nothing
        references any more. Returns the new ``published`` mapping."""
        pending, self._pending = self._pending, []
        catalog_table = self._pyiceberg
        registered: list[_Staged] = []
        obsolete: set[str] = set()  # our files that no entry will reference
        metadata: TableMetadata | None = None
        for attempt in range(self._max_attempts):
            fresh = catalog_table.catalog.load_table(catalog_table.name())
            metadata = fresh.metadata
            live = {s.snapshot_id for s in metadata.snapshots}
            obsolete.update(_paths(s for s in pending if s.snapshot_id not in live))
            pending = [s for s in pending if s.snapshot_id in live]
            updates = _updates(metadata, pending, live)
            if not updates:
                break
            try:
                response = fresh.catalog.commit_table(
                    fresh, (AssertTableUUID(uuid=metadata.table_uuid),), tuple(updates)
                )
            except CommitFailedException as exc:
                delay = min(self._backoff_s * 2**attempt, MAX_BACKOFF_S)
                _log.info("publish_conflict", attempt=attempt + 1, error=str(exc))
                self._sleep(delay * (1 + random.random() / 10))  # noqa: S311 (jitter, not crypto)
                continue
            obsolete.update(_superseded(metadata, pending))
            registered += pending
            pending = []
            metadata = response.metadata
            # An expiry that landed between our load and the catalog's may have orphaned
            # an entry we just added: the next round removes it (and the file goes below).
            if not _dangling(metadata, {s.snapshot_id for s in metadata.snapshots}):
                break
        else:
            self._delete(p for p in _paths(pending) if is_ours(p))
            raise PublishError(
                f"could not register statistics of table {catalog_table.name()} after "
                f"{self._max_attempts} attempts: the table kept changing"
            )
        assert metadata is not None
        records = _reconcile(_records(published), metadata, registered)
        referenced = {s.statistics_path for s in metadata.statistics}
        referenced |= {p.statistics_path for p in metadata.partition_statistics}
        obsolete.update(_expired_record_paths(published, metadata))
        obsolete.update(_paths(registered))  # only those an entry no longer names go
        self._delete(p for p in obsolete if is_ours(p) and p not in referenced)
        return {**published, PUBLISHED_KEY: {"snapshots": records}}

    def _delete(self, paths: Iterable[str]) -> None:
        for path in sorted(paths):
            try:
                self._pyiceberg.io.delete(path)
            except FileNotFoundError:
                continue
            except OSError as exc:  # a leftover is harmless; orphan cleanup takes it later
                _log.warning("stats_file_not_deleted", path=path, error=str(exc))


def _records(published: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    section = published.get(PUBLISHED_KEY)
    if not isinstance(section, dict):
        return {}
    snapshots = section.get("snapshots")
    return dict(snapshots) if isinstance(snapshots, dict) else {}


def _paths(staged: Iterable[_Staged]) -> set[str]:
    out: set[str] = set()
    for s in staged:
        if s.statistics is not None:
            out.add(s.statistics.statistics_path)
        if s.partition_statistics is not None:
            out.add(s.partition_statistics.statistics_path)
    return out


def _updates(
    metadata: TableMetadata, pending: Sequence[_Staged], live: set[int]
) -> list[TableUpdate]:
    updates: list[TableUpdate] = []
    for s in pending:
        if s.statistics is not None:
            updates.append(SetStatisticsUpdate.model_validate({"statistics": s.statistics}))
        if s.partition_statistics is not None:
            updates.append(
                SetPartitionStatisticsUpdate.model_validate(
                    {"partition-statistics": s.partition_statistics}
                )
            )
    for stale in _dangling(metadata, live):
        updates.append(stale)
    return updates


def _dangling(metadata: TableMetadata, live: set[int]) -> list[TableUpdate]:
    """Removals of entries naming snapshots that no longer exist (pyiceberg's expiry
    leaves partition statistics behind; a concurrent expiry may orphan ours)."""
    out: list[TableUpdate] = [
        RemoveStatisticsUpdate.model_validate({"snapshot-id": s.snapshot_id})
        for s in metadata.statistics
        if s.snapshot_id not in live
    ]
    out += [
        RemovePartitionStatisticsUpdate.model_validate({"snapshot-id": p.snapshot_id})
        for p in metadata.partition_statistics
        if p.snapshot_id not in live
    ]
    return out


def _superseded(before: TableMetadata, registered: Sequence[_Staged]) -> set[str]:
    """Paths of entries our registrations replaced (the same snapshot's older files)."""
    snapshots = {s.snapshot_id for s in registered}
    old = {s.statistics_path for s in before.statistics if s.snapshot_id in snapshots}
    old |= {p.statistics_path for p in before.partition_statistics if p.snapshot_id in snapshots}
    return old - _paths(registered)


def _reconcile(
    records: Mapping[str, dict[str, str]], metadata: TableMetadata, registered: Sequence[_Staged]
) -> dict[str, dict[str, str]]:
    """Bookkeeping = our entries in the table metadata now, for live snapshots.

    Entries registered by a run that crashed before recording them are adopted; snapshots
    with nothing to register (no sketch, unpartitioned) are remembered as done.
    """
    live = {s.snapshot_id for s in metadata.snapshots}
    out: dict[str, dict[str, str]] = {k: {} for k in records if int(k) in live}
    for s in registered:
        out.setdefault(str(s.snapshot_id), {})
    for st in metadata.statistics:
        if is_ours(st.statistics_path) and st.snapshot_id in live:
            out.setdefault(str(st.snapshot_id), {})["statistics"] = st.statistics_path
    for ps in metadata.partition_statistics:
        if is_ours(ps.statistics_path) and ps.snapshot_id in live:
            out.setdefault(str(ps.snapshot_id), {})["partition_statistics"] = ps.statistics_path
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _expired_record_paths(published: Mapping[str, Any], metadata: TableMetadata) -> set[str]:
    live = {s.snapshot_id for s in metadata.snapshots}
    out: set[str] = set()
    for snapshot, entry in _records(published).items():
        if int(snapshot) not in live:
            out.update(p for p in entry.values() if isinstance(p, str))
    return out


# --- entry points for analyze and show ----------------------------------------------------


def unpublishable_reason(opened: OpenedTable) -> str | None:
    """Why this table's stats are not published into its metadata (``None``: they are)."""
    if not opened.config.publish:
        return "publishing is off for this table (publish = false)"
    if opened.table.format_name != "iceberg" or not isinstance(opened.table, IcebergTable):
        return f"no metadata publisher for {opened.table.format_name} tables"
    if isinstance(opened.table.pyiceberg_table, StaticTable) or opened.config.catalog is None:
        return (
            "the table was opened by location, which has no safe commit path; configure "
            "it with catalog + identifier to publish Iceberg statistics"
        )
    return None


def make_publisher(opened: OpenedTable, settings: SketchSettings) -> IcebergPublisher | None:
    """The publisher for a table, or ``None`` (logged once per table when that is because
    the table has no catalog to commit through)."""
    reason = unpublishable_reason(opened)
    if reason is None:
        assert isinstance(opened.table, IcebergTable)
        return IcebergPublisher(opened.table, settings)
    if opened.config.publish and opened.table.table_id not in _warned_no_catalog:
        _warned_no_catalog.add(opened.table.table_id)
        _log.warning("stats_not_published", table=opened.name, reason=reason)
    return None


def published_lines(
    opened: OpenedTable, published: Mapping[str, Any], snapshot_id: int
) -> list[str]:
    """Where a snapshot's stats were published, for ``show`` (human and JSON)."""
    reason = unpublishable_reason(opened)
    if reason is not None:
        return [f"not in table metadata: {reason}"]
    entry = _records(published).get(str(snapshot_id))
    if entry is None:
        return ["not in table metadata yet (registered by the next analyze)"]
    lines = []
    if "statistics" in entry:
        lines.append(f"iceberg statistics (Puffin, theta NDV): {entry['statistics']}")
    if "partition_statistics" in entry:
        lines.append(f"iceberg partition-statistics: {entry['partition_statistics']}")
    return lines or ["nothing to register in table metadata (no sketches, unpartitioned)"]


def publish_errors() -> tuple[type[Exception], ...]:
    """What a failed publish may raise; analyze logs these and keeps the stats it has."""
    return (LakestatsError, OSError, CommitFailedException, pa.ArrowException)
