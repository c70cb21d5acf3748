"""The typed, frozen data model shared by every part of lakestats.

Nothing here does I/O or imports pyarrow/pyspark: formats produce these objects, the store
persists them, ``merge`` combines them. Values of a column (bounds, partition values) are
plain Python values of the column's type (``int``, ``float``, ``str``, ``bytes``,
``Decimal``, ``date``, ``datetime``, ``time``, ``UUID``, ``bool``); types are spelled as
Iceberg spells them (``"long"``, ``"decimal(10, 2)"``, ``"timestamptz"``, ``"fixed[16]"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

JsonScalar = str | int | float | bool | None


class FileContent(StrEnum):
    """What a file listed by the table format holds."""

    DATA = "data"
    POSITION_DELETES = "position_deletes"
    EQUALITY_DELETES = "equality_deletes"


@dataclass(frozen=True)
class Column:
    """A primitive (leaf) column of a table schema, identified by its stable field id."""

    field_id: int
    name: str  # dotted path for nested struct fields, e.g. "address.city"
    type: str  # Iceberg type string
    # Field ids of the structs above a nested column, outermost first, where the format
    # has them (Iceberg; Delta with column mapping): files are read by them, so a struct
    # renamed since a file was written is still found in it. Empty for top-level columns.
    parent_ids: tuple[int, ...] = ()
    # The schema's names from the outermost struct to the leaf: files without field ids
    # are read by them. A name may itself hold dots (a Delta column "event.ts", flattened
    # from JSON), so the dotted ``name`` cannot be split back into them; empty: ``name``
    # split at its dots.
    path: tuple[str, ...] = ()

    @property
    def parts(self) -> tuple[str, ...]:
        """The names a reader follows to the leaf (``path``)."""
        return self.path or tuple(self.name.split("."))


# Field ids below zero name sketches of no single column: the sketch job makes them from
# several columns (``KeySketch``). Real field ids are never negative in any format.
KEY_SKETCH_ID = -1  # the primary key of every row that adds it (not -U/-D), as one value
RETRACTED_KEY_SKETCH_ID = -2  # the primary keys of rows that retract their key
KEY_SKETCH_TYPE = "binary"  # the type the store records for them (no bounds)


@dataclass(frozen=True)
class KeySketch:
    """A primary key the sketch job sketches as one value per row (theta, ``KEY_SKETCH_ID``).

    Each row's key is its columns' hash inputs (``sketches/hashing.py``), each prefixed by
    its length, concatenated into one binary value: a theta sketch of it counts distinct
    keys, however many columns the key has. Where files mark each row's kind (Paimon's
    ``_VALUE_KIND``), rows of ``non_add_kinds`` (-U/-D) put no key in that sketch, and
    ``RETRACTED_KEY_SKETCH_ID`` sketches the keys of rows of ``retract_kinds`` (the rows
    that remove their key, by the table's rules).
    """

    field_ids: tuple[int, ...]
    row_kind_column: str | None = None  # read by name, or by ``row_kind_field_id``
    row_kind_field_id: int | None = None
    non_add_kinds: tuple[int, ...] = ()
    retract_kinds: tuple[int, ...] = ()

    @property
    def sketch_ids(self) -> tuple[int, ...]:
        retracts = self.row_kind_column is not None and bool(self.retract_kinds)
        return (KEY_SKETCH_ID, RETRACTED_KEY_SKETCH_ID) if retracts else (KEY_SKETCH_ID,)


@dataclass(frozen=True)
class TableSchema:
    schema_id: int
    columns: tuple[Column, ...]  # leaf primitive columns, in schema order
    key: KeySketch | None = None  # a primary key to sketch as one value (Paimon)

    def by_id(self) -> dict[int, Column]:
        return {c.field_id: c for c in self.columns}

    def retypes(self, earlier: TableSchema) -> bool:
        """Whether a column of both schemas has another type here than in ``earlier`` (a
        type promotion or widening: files written under ``earlier`` hold sketches hashed
        as values of the old type)."""
        before = {c.field_id: c.type for c in earlier.columns}
        return any(before.get(c.field_id, c.type) != c.type for c in self.columns)


@dataclass(frozen=True)
class PartitionField:
    """One field of a partition spec: its stable id and the type of its (transformed) values.

    Iceberg: the partition field id (1000 and up) and the transform's result type; formats
    whose partitions are plain columns use the column's id and type.
    """

    field_id: int
    type: str  # Iceberg type string of the partition value


def signed_order(value: Any) -> Any:
    """``value`` as Iceberg compares it: a number with its sign, so -0.0 sorts below 0.0
    and equals it no more — Python's ``-0.0 == 0.0`` would make two partitions one, and
    ``min``/``max`` keep whichever came first (Iceberg, Delta and Paimon keep them apart:
    their bits differ). Ints too: a widened column (Delta int → double) mixes them with
    floats. Other values are themselves."""
    return (value, math.copysign(1.0, value)) if isinstance(value, int | float) else value


@dataclass(frozen=True, eq=False)
class PartitionKey:
    """A partition: ``(name, value)`` pairs in the spec's field order, values typed.

    ``fields`` gives each value's field id and type, in the same order; it is empty for
    keys read back from aggregate files and from segments written before lakestats kept
    it (their values are the JSON scalars that were stored). An unpartitioned table has
    ``spec_id`` 0 and no values. Values become JSON only when rendered (``as_dict``,
    ``values.to_json``).

    Equality and hashing compare the values as rendered (``values.to_json``): a NaN
    partition value groups, and a key read back without ``fields`` (its values the stored
    JSON scalars) is the same key as the typed one it was written from. -0.0 and 0.0 are
    two partitions, as the formats keep them (``signed_order``).
    """

    spec_id: int
    values: tuple[tuple[str, Any], ...] = ()
    fields: tuple[PartitionField, ...] = ()

    def __post_init__(self) -> None:
        if self.fields and len(self.fields) != len(self.values):
            raise ValueError("a partition key needs one field per value")

    @property
    def rendered(self) -> tuple[tuple[str, JsonScalar], ...]:
        """``(name, value)`` pairs with the values as ``values.to_json`` renders them: what
        equality, hashing and ``merge.partition_sort_key`` compare."""
        rendered: tuple[tuple[str, JsonScalar], ...] | None = self.__dict__.get("_rendered")
        if rendered is None:  # once per key: merges group thousands of partitions per commit
            from lakestats.values import to_json  # noqa: PLC0415 - values imports the model

            rendered = tuple((name, to_json(value)) for name, value in self.values)
            object.__setattr__(self, "_rendered", rendered)
        return rendered

    def _identity(self) -> tuple[Any, ...]:
        identity: tuple[Any, ...] | None = self.__dict__.get("_identity_cache")
        if identity is None:
            identity = (
                self.spec_id,
                tuple((name, signed_order(value)) for name, value in self.rendered),
            )
            object.__setattr__(self, "_identity_cache", identity)
            object.__setattr__(self, "_hash_cache", hash(identity))
        return identity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartitionKey):
            return NotImplemented
        return self is other or self._identity() == other._identity()

    def __hash__(self) -> int:
        cached: int | None = self.__dict__.get("_hash_cache")
        if cached is None:
            self._identity()
            cached = self.__dict__["_hash_cache"]
        return cached

    @property
    def field_ids(self) -> tuple[int, ...] | None:
        """Field ids of the values, ``None`` when unknown (keys from older stores)."""
        return tuple(f.field_id for f in self.fields) if self.fields else None

    def as_dict(self) -> dict[str, JsonScalar]:
        """Field name → value rendered as the ``show --json`` contract says."""
        from lakestats.values import to_json  # noqa: PLC0415 - values imports the model

        return {name: to_json(value) for name, value in self.values}


UNPARTITIONED = PartitionKey(spec_id=0)


@dataclass(frozen=True)
class ColumnMetrics:
    """What a file's metadata says about one column. ``None`` means "not recorded"."""

    column_size: int | None = None
    value_count: int | None = None  # includes nulls and NaNs, as in Iceberg
    null_count: int | None = None
    nan_count: int | None = None
    lower: Any = None  # decoded bound, a Python value of the column's type
    upper: Any = None
    bounds_may_be_truncated: bool = False  # string/binary bounds cut by the writer


def constant_metrics(value: Any, rows: int, column_size: int | None = None) -> ColumnMetrics:
    """A column holding ``value`` in every one of ``rows`` rows (an identity partition's
    column): exact whatever rows are deleted, since every live row holds it too."""
    is_nan = isinstance(value, float) and math.isnan(value)
    valued = value is not None and not is_nan and rows > 0
    return ColumnMetrics(
        column_size=column_size,
        value_count=rows,
        null_count=rows if value is None else 0,
        nan_count=rows if is_nan else (0 if isinstance(value, float) else None),
        lower=value if valued else None,
        upper=value if valued else None,
    )


@dataclass(frozen=True)
class ColumnSketch:
    """Block-level statistics computed by reading one data file (the sketch pipeline).

    Every field is optional: which ones exist depends on the column type.
    """

    theta: bytes | None = None  # compact theta sketch, Iceberg-Puffin-compatible hashing
    kll: bytes | None = None  # KLL doubles sketch
    null_count: int | None = None
    nan_count: int | None = None
    min: Any = None
    max: Any = None
    len_sum: int | None = None  # total length of non-null string/binary values
    len_max: int | None = None
    true_count: int | None = None
    false_count: int | None = None
    # tuple sketch: the theta keys with their KLL value (``sketches.value_sample``); None in
    # stores written before issue 14 item 2 (then bucket NDVs are apportioned)
    value_sample: bytes | None = None
    # frequent-items sketch of the KLL value (``sketches.frequent``); None in older stores
    frequent_items: bytes | None = None


@dataclass(frozen=True)
class PositionDeletes:
    """A delete file of ``(file_path, pos)`` rows: the rows naming the data file are deleted.

    Positions are 0-based row indexes in the data file (Iceberg position deletes).
    """

    path: str  # as the format lists it; location mapping applies
    file_format: str  # "PARQUET", "ORC", "AVRO"
    # the one data file every row names, as the metadata says (Iceberg's
    # ``referenced_data_file``, or equal ``file_path`` bounds): the rows are that file's
    # however they spell its path (Impala's name ``hdfs://host:port/…`` where its
    # manifests say ``/…``). ``None``: each row's ``file_path`` says.
    target: str | None = None


@dataclass(frozen=True)
class EqualityDeletes:
    """A delete file whose rows delete every data row equal on ``field_ids`` (Iceberg)."""

    path: str
    file_format: str
    field_ids: tuple[int, ...]


@dataclass(frozen=True)
class DeletionVector:
    """Deleted row positions of one data file, decoded by the format.

    ``bitmap`` is a portable 64-bit roaring bitmap of 0-based row indexes (the bytes of
    ``pyroaring.BitMap64.serialize()``), whatever the format stored it as (Iceberg v3
    Puffin ``deletion-vector-v1``, Delta ``deletionVector``, Paimon deletion-vector index).
    """

    bitmap: bytes
    cardinality: int


@dataclass(frozen=True)
class MergeInput:
    """One file of a ``KeyMerge``; ``written_as`` as ``DataFile.written_as``."""

    path: str  # as the format lists it; location mapping applies
    written_as: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class KeyMerge:
    """The file's rows are what a primary-key merge of ``inputs`` attributes to it (Paimon
    merge-on-read: a bucket's live files, this one included, each row a version of a key).

    Rows of one key are ordered by ``sequence_field_ids`` (columns), then the file's own
    ``sequence_column``; the merged row of a key belongs to the file holding its
    highest-ordered row (``first-row``: its lowest +I row). ``engine`` says how it is made:
    ``deduplicate`` (that row, dropped when its ``row_kind_column`` is -U/-D),
    ``first-row``, ``partial-update`` (each column's last non-null value) or ``aggregation``
    (``functions``: field id → Paimon aggregate function). Retracting rows (-U/-D) are
    skipped under ``ignore_delete``; ``remove_record_on_delete`` makes a -D forget what came
    before it. Values are those of the live rows, not the file's: the core reads ``inputs``
    (like Iceberg equality-delete files) and merges inside the sketch job.
    """

    inputs: tuple[MergeInput, ...]
    key_field_ids: tuple[int, ...]
    engine: str = "deduplicate"
    functions: tuple[tuple[int, str], ...] = ()
    sequence_field_ids: tuple[int, ...] = ()
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    sequence_column: str = "_SEQUENCE_NUMBER"
    sequence_field_id: int | None = None  # the column's Parquet field id, when files have ids
    row_kind_column: str = "_VALUE_KIND"
    row_kind_field_id: int | None = None


# What makes rows of a data file dead. A format attaches to a data file every delete that
# applies to it (after its own rules: Iceberg sequence numbers and partition scope, Delta's
# one vector per file, Paimon's index) so the core never needs those rules.
DeleteSource = PositionDeletes | EqualityDeletes | DeletionVector | KeyMerge


@dataclass(frozen=True)
class ColumnFile:
    """Another file holding some columns of a data file's rows: the same rows in the same
    order, for ``field_ids`` (Paimon data evolution: an in-place update writes the updated
    columns of a row range as a file of their own). ``written_as`` as
    ``DataFile.written_as``."""

    path: str  # as the format lists it; location mapping applies
    field_ids: tuple[int, ...]
    written_as: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class DataFile:
    """One file listed by the format, with the metrics its manifest entry already holds."""

    path: str  # exactly as the format lists it (e.g. "file:///wh/db/t/data/x.parquet")
    content: FileContent
    file_format: str  # "PARQUET", "ORC", "AVRO"
    record_count: int
    file_size_bytes: int
    partition: PartitionKey
    columns: Mapping[int, ColumnMetrics] = field(default_factory=dict)
    # field ids the file was written with (the commit's schema); fields missing here read
    # as null in this file.
    field_ids: frozenset[int] = frozenset()
    sketches: Mapping[int, ColumnSketch] = field(default_factory=dict)
    # identity-partition columns: field id → the partition value every row of the file
    # holds. Readers take it from the partition tuple, not the file (which may not even
    # store the column: tables migrated from Hive), and so do the stats.
    constants: Mapping[int, Any] = field(default_factory=dict)
    # a position delete file's one target data file (``referenced_data_file``, or equal
    # file_path bounds); ``None`` when it may name several. A delete whose target is not a
    # live data file applies to nothing (left dangling by compactions).
    referenced_path: str | None = None
    # Row-level deletes that apply to this data file as of the commit that lists it, all
    # of them (not only the commit's new ones). Non-empty means the file's stats describe
    # its live rows: the core re-sketches it with these applied. Empty for delete files.
    deletes: tuple[DeleteSource, ...] = ()
    # Rows of the file that survive ``deletes`` (counted by the sketch pass, or from deletion
    # vectors alone); ``None`` when not computed. When set, ``columns`` and ``sketches``
    # describe the live rows only; ``record_count`` stays the rows the file holds.
    live_record_count: int | None = None
    # The file has row-level deletes whose effect was not computed (sketching off, ORC
    # row positions, equality deletes reported as approximate): its stats include
    # deleted rows. Kept by the store, where ``deletes`` itself is not.
    live_rows_unknown: bool = False
    # (field id, name, type) as the file was written, for each column whose name or type
    # differs from the table's current one (Paimon after a type change or a rename; Iceberg
    # after a rename, for files without field ids): the core reads the file with those and
    # casts and renames them to the current ones (``written_types``; a file with field ids
    # needs only its other types). Empty for Delta.
    written_as: tuple[tuple[int, str, str], ...] = ()
    # Columns whose values are another file's (``ColumnFile``), for this file's rows: its
    # stats describe the rows readers assemble, each column sketched from the file that
    # holds it. Empty for every format but Paimon's data evolution.
    column_files: tuple[ColumnFile, ...] = ()

    @property
    def live_rows(self) -> int:
        """Rows left after applied deletes (all rows when none were applied)."""
        return self.record_count if self.live_record_count is None else self.live_record_count

    @property
    def deletes_unknown(self) -> bool:
        """Whether deletes apply to this file that its stats do not reflect."""
        return self.live_rows_unknown or (bool(self.deletes) and self.live_record_count is None)


@dataclass(frozen=True)
class Commit:
    """One snapshot of the main branch and the files it changed.

    A commit that changes which rows of an existing data file are live (new position
    deletes or a deletion vector touching it) lists that file in ``removed_files`` as it
    was and again in ``added_files`` with its complete new ``deletes``: the core then
    tombstones the old stats and sketches the file's live rows, like any replaced file.
    """

    snapshot_id: int
    parent_id: int | None
    sequence_number: int
    timestamp_ms: int
    operation: str  # "append", "overwrite", "delete", "replace", or "baseline"
    schema_id: int
    added_files: tuple[DataFile, ...] = ()
    removed_files: tuple[DataFile, ...] = ()
    added_delete_files: tuple[DataFile, ...] = ()
    removed_delete_files: tuple[DataFile, ...] = ()
    # What tells this commit apart from another one that got the same id later (Delta and
    # Paimon reuse ids after a rollback): ``SupportsCommitFingerprint``. None: the format
    # keeps no such thing (Iceberg's random ids need none).
    fingerprint: str | None = None

    @property
    def is_baseline(self) -> bool:
        """A baseline lists every live file of the snapshot as added (history unavailable)."""
        return self.operation == BASELINE_OPERATION


BASELINE_OPERATION = "baseline"


@dataclass(frozen=True)
class SketchSettings:
    """Sketch parameters; validated by ``lakestats.config``. The defaults here are the bare
    sketches (theta, KLL): a table's configuration (``config.SketchConfig``) adds value
    samples and frequent items by default."""

    # k 1481 is what the default error rate needs (``sketches.spec.kll_k_for_error``)
    kll_k: int = 1481
    theta_lg_k: int = 12
    histogram_buckets: int = 100
    quantiles: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
    # the KLL bucket-mass error ``kll_k`` was derived from (config ``sketch.kll_error_rate``,
    # by default a quarter of a bucket's share); None: k was given directly
    kll_error_rate: float | None = None
    # frequent values: items a file's frequent-items sketch tracks (0: none); 256 is the
    # configuration's default, measured in docs/benchmarks.md ("Making value samples and
    # frequent items cheap")
    frequent_items: int = 0
    # per-bucket NDV: a value sample per file and column (carries the theta sketch too)
    value_samples: bool = False


@dataclass(frozen=True)
class ColumnAggregate:
    """One column merged over a set of files (a segment's partition, a partition, a table).

    Counts are ``None`` when some file did not record them. ``files``/``records`` count
    only files that carry the column: rows of files written before the column existed are
    nulls the merge adds at read time (see ``merge``).
    """

    field_id: int
    type: str
    files: int = 0
    records: int = 0
    value_count: int | None = 0
    null_count: int | None = 0
    nan_count: int | None = 0
    column_size: int | None = 0
    lower: Any = None
    upper: Any = None
    bounds_complete: bool = True  # every file with non-null values had both bounds
    bounds_may_be_truncated: bool = False
    # block-level sketch merges (sketch pipeline); None when no file carried one
    sketched_files: int = 0  # files whose sketches are merged in below
    theta: bytes | None = None
    kll: bytes | None = None
    len_sum: int | None = None
    len_max: int | None = None
    true_count: int | None = None
    false_count: int | None = None
    # merged value samples; None when some sketched file has none (an older store)
    value_sample: bytes | None = None
    # merged frequent-items sketches; None as for value_sample
    frequent_items: bytes | None = None


@dataclass(frozen=True)
class PartitionAggregate:
    """Totals of one partition over a set of live files, with per-column aggregates."""

    partition: PartitionKey
    record_count: int = 0
    file_count: int = 0
    total_size_bytes: int = 0
    position_delete_files: int = 0
    position_delete_records: int = 0
    equality_delete_files: int = 0
    equality_delete_records: int = 0
    columns: Mapping[int, ColumnAggregate] = field(default_factory=dict)
    # Row-level deletes applied to data files (``DataFile.live_record_count``): rows they
    # removed from ``record_count``, files whose live rows were counted, and files with
    # deletes whose effect is unknown (their stats include deleted rows).
    deleted_records: int = 0
    deletes_applied_files: int = 0
    deletes_unknown_files: int = 0

    @property
    def live_record_count(self) -> int:
        """``record_count`` minus the rows applied deletes removed."""
        return self.record_count - self.deleted_records


@dataclass(frozen=True)
class HeldFile:
    """A file whose stats the store holds, as a run that starts over matches it against
    what the table lists now (``lakestats.lineage``)."""

    content: FileContent
    record_count: int
    file_size_bytes: int
    # the stored stats describe every row the file holds: a data file with no row-level
    # deletes applied to them and none left unapplied
    whole: bool
    segment: str = ""  # the segment holding them, relative to the table's state folder
    # removed by a later commit: tombstoned in its segment, or in a retired segment
    dead: bool = False

    def describes(self, data_file: DataFile) -> bool:
        """Whether these stats are ``data_file``'s as the table lists it now, every row of
        it live. Data files are never rewritten in place, so the same path with the same
        rows and bytes is the same file."""
        return (
            self.whole
            and self.content == FileContent.DATA == data_file.content
            and not data_file.deletes
            and not data_file.column_files  # the same anchor may take other columns now
            and self.record_count == data_file.record_count
            and self.file_size_bytes == data_file.file_size_bytes
        )


@dataclass(frozen=True)
class AggregateDelta:
    """One link of an aggregate chain (a segment's aggregate or the merged view): an
    aggregate file holding the partitions one commit changed (their merged values; a
    partition it emptied as an all-zero entry), which replace the chain's earlier
    entries for those partitions."""

    path: str  # relative to the table's state folder
    partitions: int  # how many partitions it holds (bounds the chain without reading it)


@dataclass(frozen=True)
class SegmentEntry:
    """A live segment: the files one commit added, minus tombstones."""

    snapshot_id: int
    path: str  # relative to the table's state folder
    aggregate_path: str  # the segment's merged aggregate over its live files
    file_count: int
    dead_files: frozenset[str] = frozenset()  # tombstones: removed by later commits
    # The partitions removals re-merged since ``aggregate_path`` was written, applied in
    # order (``store.StatsStore.segment_aggregate``): a removal in a segment of thousands
    # of partitions writes the few it changed, not the whole aggregate again.
    aggregate_deltas: tuple[AggregateDelta, ...] = ()
    # The parent of the newest commit that tombstoned files here: the last snapshot that
    # listed them. None: no tombstone, or written before it was recorded.
    last_listed: int | None = None

    @property
    def live_file_count(self) -> int:
        return self.file_count - len(self.dead_files)

    @property
    def aggregate_files(self) -> tuple[str, ...]:
        """Every file the segment's aggregate is read from: the base, then its deltas."""
        return (self.aggregate_path, *(d.path for d in self.aggregate_deltas))


@dataclass(frozen=True)
class RetiredSegment:
    """A segment file holding the stats and sketches of removed data files that a live
    snapshot may still list: out of every merge, kept for a rollback to such a snapshot,
    which adds the files again and takes their sketches from here instead of reading them
    (``docs/architecture.md``, "Lineage"). Dropped once none of ``listed_by`` is live."""

    path: str  # relative to the table's state folder
    # snapshots that listed some of its files last (removing commits' parents)
    listed_by: frozenset[int]


@dataclass(frozen=True)
class MergedView:
    """The merge of every live segment's aggregate: per partition (sorted by key) and for
    the whole table. A commit that touches a few partitions updates those and merges its
    own files into ``table``, so its work does not grow with the table's partitions.

    ``partitions`` hold their totals only, no columns (``merge.counts_only``): partition
    outputs use nothing else, and every partition's columns would cost memory and store
    bytes in proportion to the partition count (~35 KiB of KLL and ~32–54 KiB of theta per
    column of a saturated partition). Only ``table`` has columns; a removal re-merges it
    from the live segments' aggregates.

    ``groups``: the partitions merged in ``merge.TABLE_GROUPS`` groups by key hash, with
    their columns (``merge.group_of``), which ``table`` is the merge of. Kept in memory only
    (never stored), from the first removal that re-merges the table on: later removals
    re-merge the groups their partitions are in and the table from the groups, not every
    partition. ``None``: not kept (a view read from the store, an unpartitioned table)."""

    partitions: tuple[PartitionAggregate, ...]
    table: PartitionAggregate
    groups: tuple[PartitionAggregate, ...] | None = None


@dataclass(frozen=True)
class StateVersion:
    """One version of a table's state log. Immutable; the next commit writes version + 1."""

    version: int
    table_id: str
    format: str
    location: str
    last_snapshot_id: int | None
    segments: tuple[SegmentEntry, ...] = ()
    stats: Mapping[int, str] = field(default_factory=dict)  # snapshot id → stats JSON path
    created_at_ms: int = 0
    published: Mapping[str, Any] = field(default_factory=dict)  # publishers' bookkeeping
    # snapshots whose stats were dropped because the table expired them: snapshot id → when
    # lakestats noticed (ms). Bounded (``expiry.EXPIRED_MEMORY``); lets ``show`` say "expired"
    # rather than "unknown".
    expired: Mapping[int, int] = field(default_factory=dict)
    # The merge of every live segment's aggregate (an aggregate file), so a commit merges
    # one new segment into it instead of re-reading them all. ``merged_key`` names the
    # segments it was made from (``store.merge_key``); it is ignored when they differ.
    merged_path: str | None = None
    merged_key: str | None = None
    # The rest of the merged view, both optional (versions written before them have
    # neither): the whole-table aggregate (an aggregate file of one entry; recomputed from
    # the partitions when absent) and the chain of partitions changed since
    # ``merged_path`` was written, applied in order (``store.StatsStore.merged_view``).
    merged_table_path: str | None = None
    merged_deltas: tuple[AggregateDelta, ...] = ()
    # Whether the merged view's partition entries hold totals only, no columns (written
    # since ``MergedView`` keeps columns for the table alone). Older views hold every
    # partition's columns with their sketches.
    merged_counts_only: bool = False
    # ``Commit.fingerprint`` of ``last_snapshot_id`` as processed: a run that finds the
    # format naming another fingerprint for that id (rolled back, then as many commits
    # again) starts over (``lakestats.lineage``). None: unknown (older stores, Iceberg).
    last_fingerprint: str | None = None
    # Segments of removed files a live snapshot may still list (``RetiredSegment``): never
    # merged, read only by a walk that starts over. Optional (older versions have none).
    retired: tuple[RetiredSegment, ...] = ()


@dataclass(frozen=True)
class SnapshotInfo:
    """What snapshot expiry planning needs to know about one snapshot of a table."""

    snapshot_id: int
    timestamp_ms: int
    # on the current main-branch lineage (the current snapshot and its ancestors)
    in_main_lineage: bool = False
    # a branch or tag points at it: table formats never expire those
    is_ref_head: bool = False
