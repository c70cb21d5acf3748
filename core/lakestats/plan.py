"""Planning the commit path: pure functions from commits (and what the store knows) to plans.

Nothing here reads or writes a file. ``plan_batches`` cuts the unprocessed commits into
batches whose new data files fit one Spark job and says which columns the job must scan
for min/max; ``plan_commit`` turns one commit, its sketches and the segments that hold the
files it removes into a ``CommitPlan`` that the store step executes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from lakestats.exceptions import StoreError
from lakestats.model import (
    KEY_SKETCH_TYPE,
    ColumnMetrics,
    ColumnSketch,
    Commit,
    DataFile,
    SegmentEntry,
    TableSchema,
    constant_metrics,
)

Sketches = Mapping[str, Mapping[int, ColumnSketch]]
"""Block sketches of a batch: data file path → field id → sketch."""


@dataclass(frozen=True)
class LiveRead:
    """A data file one commit re-added with row-level deletes, read with them applied."""

    sketches: Mapping[int, ColumnSketch]
    live_rows: int
    data_read: bool = True  # False: counted from position deletes alone (no sketches)


class BatchSketches(dict[str, Mapping[int, ColumnSketch]]):
    """A batch's sketches (path-keyed, as ``Sketches``) plus the files read with their
    deletes applied, keyed by (snapshot id, path): one batch may hold the same path
    twice (added, then re-added with deletes by a later commit)."""

    def __init__(
        self,
        sketches: Sketches | None = None,
        live: Mapping[tuple[int, str], LiveRead] | None = None,
    ) -> None:
        super().__init__(sketches or {})
        self.live: dict[tuple[int, str], LiveRead] = dict(live or {})


@dataclass(frozen=True)
class BatchPlan:
    """Consecutive commits whose added data files are sketched by one Spark job."""

    commits: tuple[Commit, ...]
    paths: tuple[str, ...]  # data files to sketch, in commit order
    bounds_for: frozenset[int]  # field ids whose min/max the job must scan

    @property
    def file_count(self) -> int:
        return len(self.paths)


@dataclass(frozen=True)
class CommitPlan:
    """What the store step does for one commit."""

    commit: Commit
    schema: TableSchema  # the schema the commit was written with
    # field id → type and name; the commit's own schema wins (its files' bounds are encoded
    # in the types they were written with), the current schema fills in the rest
    types: Mapping[int, str]
    names: Mapping[int, str]
    added: tuple[DataFile, ...]  # new data files (with their sketches), then delete files
    removed: tuple[DataFile, ...]  # removed data files, then delete files
    # segment path → files of that segment this commit removes (its new tombstones)
    tombstones: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def full_merge(self) -> bool:
        """Re-merge the table from segment aggregates: a removal or a baseline changes
        what the previous merged view holds, so it cannot be extended incrementally."""
        return bool(self.tombstones) or self.commit.is_baseline


def bounds_needed(files: Sequence[DataFile]) -> frozenset[int]:
    """Field ids whose min/max some file's metadata lacks or may have cut: only those
    need a scan.

    String and binary bounds are always scanned: whether a writer cut them depends on the
    metrics mode the file was written under (Iceberg's ``write.metadata.metrics.*``,
    Paimon's ``stats-mode``, a Delta writer's prefix length), which the table states only
    as it is now, and a cut max (``zzz{``) is not a value of the column."""
    needed: set[int] = set()
    for f in files:
        for field_id in f.field_ids:
            metrics = f.columns.get(field_id)
            if (
                metrics is None
                or metrics.lower is None
                or metrics.upper is None
                or metrics.bounds_may_be_truncated
                or isinstance(metrics.lower, str | bytes)
            ):
                needed.add(field_id)
    return frozenset(needed)


def plan_batches(commits: Sequence[Commit], max_files: int) -> tuple[BatchPlan, ...]:
    """Consecutive commits whose added data files fit one Spark job (≥ 1 commit each):
    ``next_batch`` without a limit on commits or bytes."""
    batches: list[BatchPlan] = []
    start = 0
    while start < len(commits):
        batch = next_batch(
            commits, start, max_commits=len(commits), max_files=max_files, max_bytes=sys.maxsize
        )
        batches.append(batch)
        start += len(batch.commits)
    return tuple(batches)


def next_batch(
    commits: Sequence[Commit],
    start: int,
    *,
    max_commits: int,
    max_files: int,
    max_bytes: int,
) -> BatchPlan:
    """The batch that starts at ``commits[start]``: consecutive commits, at most
    ``max_commits`` of them, whose added data files number at most ``max_files`` and
    weigh at most ``max_bytes`` (always ≥ 1 commit, however big), that add a file
    with column files (``DataFile.column_files``) at most once, and that share a schema:
    a job reads its files with the schema of their commits, as they were written."""
    taken: list[Commit] = []
    files = size = 0
    added: set[str] = set()  # paths the batch adds
    assembled: set[str] = set()  # those of them with column files
    for commit in commits[start:]:
        n = len(commit.added_files)
        b = sum(f.file_size_bytes for f in commit.added_files)
        if taken and (len(taken) >= max_commits or files + n > max_files or size + b > max_bytes):
            break
        if taken and commit.schema_id != taken[0].schema_id:
            break
        # a file added again with other column files is other rows under the same path:
        # the sketches of one batch are by path, so it starts the next batch
        paths = {f.path for f in commit.added_files}
        own = {f.path for f in commit.added_files if f.column_files}
        if taken and (own & added or paths & assembled):
            break
        added |= paths
        assembled |= own
        taken.append(commit)
        files += n
        size += b
    return _batch(taken)


@dataclass
class BatchSizer:
    """Sizes one run's batches so that each one commits soon, whatever the backlog.

    Nothing of a batch is registered before its Spark job ends, so a process killed more
    often than one batch takes would never advance. The first batch of a run is therefore
    a single commit (a run going on from one that gave way in the same process starts at
    the size that one reached); while batches finish within half of ``target_s`` the next one holds
    twice as many commits, and a batch slower than ``target_s`` shrinks the next in
    proportion — always within ``max_files`` data files and ``max_bytes``.
    """

    max_files: int
    max_bytes: int
    target_s: float
    max_commits: int = 1

    def next(self, commits: Sequence[Commit], start: int) -> BatchPlan:
        return next_batch(
            commits,
            start,
            max_commits=self.max_commits,
            max_files=self.max_files,
            max_bytes=self.max_bytes,
        )

    def batches_for(self, commits: int) -> int:
        """How many more batches ``commits`` commits take at the current size (an estimate:
        the size adapts, and the file and byte limits may cut batches shorter)."""
        return -(-commits // self.max_commits)

    def observe(self, batch: BatchPlan, seconds: float) -> None:
        """Adapt the next batch to how long ``batch`` took (its job, store and publish)."""
        size = max(1, len(batch.commits))
        if seconds > self.target_s:
            self.max_commits = max(1, int(size * self.target_s / seconds))
        elif seconds <= self.target_s / 2 and size >= self.max_commits:
            self.max_commits = min(_MAX_BATCH_COMMITS, self.max_commits * 2)


_MAX_BATCH_COMMITS = 1 << 20


def _batch(commits: Sequence[Commit]) -> BatchPlan:
    files = [f for c in commits for f in c.added_files]
    return BatchPlan(
        commits=tuple(commits),
        paths=tuple(f.path for f in files),
        bounds_for=bounds_needed(files),
    )


def schema_types(*schemas: TableSchema) -> dict[int, str]:
    """field id → type; later schemas win (a promoted type replaces the old one). A
    schema's key sketches (``model.KeySketch``) are typed too, so the store keeps them."""
    types: dict[int, str] = {}
    for schema in schemas:
        types.update({c.field_id: c.type for c in schema.columns})
        if schema.key is not None:
            types.update(dict.fromkeys(schema.key.sketch_ids, KEY_SKETCH_TYPE))
    return types


def attach_sketches(
    files: Sequence[DataFile], sketches: Sketches, snapshot_id: int | None = None
) -> tuple[DataFile, ...]:
    """The files with their block sketches. Columns added after a file was written read as
    null in Spark: they are absent from the file, not all-null values of it, so dropped.

    A file with deletes read live (``BatchSketches.live``) gets its live row count and
    metrics of its live rows (``live_metrics``); one with only deletion vectors gets its
    exact live row count even without sketches."""
    from lakestats.deletes.plan import vector_only_live_rows  # noqa: PLC0415 - import cycle

    live = sketches.live if isinstance(sketches, BatchSketches) else {}
    out = []
    for f in files:
        read = live.get((snapshot_id, f.path)) if snapshot_id is not None else None
        if read is not None:
            kept = _kept(read.sketches, f)
            out.append(
                replace(
                    f,
                    sketches=kept,
                    live_record_count=read.live_rows,
                    columns=live_metrics(f, kept, read.live_rows),
                )
            )
            continue
        if f.deletes:
            counted = vector_only_live_rows(f)
            # deletes not applied to its sketches: counted rows only when nothing is sketched
            if counted is not None and f.path not in sketches:
                out.append(
                    replace(f, live_record_count=counted, columns=live_metrics(f, {}, counted))
                )
                continue
            f = replace(f, live_rows_unknown=True)  # noqa: PLW2901 - the file, marked
        per_file = sketches.get(f.path)
        if per_file is None:
            out.append(f)
            continue
        out.append(replace(f, sketches=_kept(per_file, f)))
    return tuple(out)


def _kept(sketches: Mapping[int, ColumnSketch], data_file: DataFile) -> dict[int, ColumnSketch]:
    """The sketches of columns the file has, and its key sketches (negative ids: of the
    file's rows, not of one column)."""
    return {fid: s for fid, s in sketches.items() if fid in data_file.field_ids or fid < 0}


def plan_commit(
    commit: Commit,
    *,
    schema: TableSchema,
    current_schema: TableSchema,
    sketches: Sketches,
    located: Mapping[str, SegmentEntry],
) -> CommitPlan:
    """The plan of one commit. ``located`` maps each removed file's path to the live
    segment that added it (``StatsStore.locate``); a removed file no segment holds means
    the store missed a commit, which is an error, never a silent skip."""
    removed = (*commit.removed_files, *commit.removed_delete_files)
    tombstones: dict[str, set[str]] = {}
    for f in removed:
        segment = located.get(f.path)
        if segment is None:
            raise StoreError(
                f"file {f.path} removed by this commit was never recorded in the stats "
                "store; run `lakestats analyze --rebuild` to recompute from the table's files"
            )
        tombstones.setdefault(segment.path, set()).add(f.path)
    names = {c.field_id: c.name for c in current_schema.columns}
    names.update({c.field_id: c.name for c in schema.columns})
    types = schema_types(current_schema, schema)
    return CommitPlan(
        commit=commit,
        schema=schema,
        types=types,
        names=names,
        added=(
            *_typed_fields_only(
                attach_sketches(commit.added_files, sketches, commit.snapshot_id), types
            ),
            *commit.added_delete_files,
        ),
        removed=removed,
        tombstones={path: frozenset(files) for path, files in tombstones.items()},
    )


def _typed_fields_only(files: Sequence[DataFile], types: Mapping[int, str]) -> tuple[DataFile, ...]:
    """The files without the fields neither the commit's schema nor the current one has.

    A baseline lists files written long before it, with the metrics of the schema each
    was written under (Paimon's entries, Iceberg's and Delta's writer schemas): a column
    dropped since is in them and in no schema of the commit. It is in no output either,
    and the store could not encode its bounds (their type is gone)."""
    out = []
    for f in files:
        fields = set(f.field_ids) | set(f.columns) | set(f.sketches) | set(f.constants)
        if fields <= types.keys():
            out.append(f)
            continue
        out.append(
            replace(
                f,
                field_ids=frozenset(i for i in f.field_ids if i in types),
                columns={i: m for i, m in f.columns.items() if i in types},
                sketches={i: k for i, k in f.sketches.items() if i in types},
                constants={i: v for i, v in f.constants.items() if i in types},
            )
        )
    return tuple(out)


def live_metrics(
    data_file: DataFile, sketches: Mapping[int, ColumnSketch], live_rows: int
) -> dict[int, ColumnMetrics]:
    """The file's column metrics for its live rows: counts and bounds from the live read
    (its sketch scanned min/max of every column); on-disk sizes stay the manifest's. A
    column the read could not sketch keeps only its size (the manifest's counts and
    bounds described deleted rows too), unless it is a partition constant, which every
    live row holds."""
    out: dict[int, ColumnMetrics] = {}
    for field_id in set(data_file.columns) | set(sketches):
        size = data_file.columns.get(field_id, ColumnMetrics()).column_size
        sketch = sketches.get(field_id)
        if sketch is None and field_id in data_file.constants:
            out[field_id] = constant_metrics(data_file.constants[field_id], live_rows, size)
            continue
        if sketch is None:
            out[field_id] = ColumnMetrics(column_size=size)
            continue
        out[field_id] = ColumnMetrics(
            column_size=size,
            value_count=live_rows,
            null_count=sketch.null_count,
            nan_count=sketch.nan_count,
            lower=sketch.min,
            upper=sketch.max,
        )
    return out
