"""The behaviour every ``TableFormat`` must have, run over each format through a table driver.

A driver writes a table the way that format's writers do (real pyiceberg commits for
Iceberg, the writer API for ``MemoryTable``) and opens it the way lakestats does. The
tests speak rows and columns only; a new format passes the suite by adding one driver to
``DRIVERS``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import pyarrow.fs as pafs
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from delta_tables import NO_LOG_RETENTION, DeltaWriter
from lakestats.exceptions import (
    ExpiryError,
    LineageError,
    MetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
    UnreadableCommitError,
)
from lakestats.formats.base import (
    KeepsListedFiles,
    SupportsCommitFingerprint,
    SupportsSnapshotExpiry,
    TableFormat,
)
from lakestats.formats.delta.table import DeltaLakeTable
from lakestats.formats.memory import MemoryTable
from lakestats.formats.paimon import PaimonTable
from lakestats.formats.registry import open_table
from lakestats.locations import resolve_location
from lakestats.model import Commit, DataFile, FileContent
from lakestats.testing import IcebergWarehouse
from lakestats.values import parse_type
from object_store import S3Server
from paimon_tables import PaimonWarehouse

Rows = Mapping[str, Sequence[Any]]

COLUMNS = (
    ("id", "long"),
    ("name", "string"),
    ("day", "date"),
    ("price", "decimal(10, 2)"),
    ("ts", "timestamp"),
)


class TableDriver(Protocol):
    """Writes one table of a format and opens it as lakestats does."""

    format_name: str
    can_commit: bool  # False: opened read-only, so expiry through the format must refuse

    def create(self, columns: Sequence[tuple[str, str]]) -> None: ...

    def open(self) -> TableFormat:
        """The table as ``lakestats`` opens it now (a fresh object each time)."""
        ...

    def append(self, rows: Rows) -> int:
        """Append rows as one new data file; the new snapshot id."""
        ...

    def delete_where_id_below(self, limit: int) -> int:
        """Delete the rows with ``id < limit``, whole files only; the new snapshot id."""
        ...

    def add_column(self, name: str, type_str: str) -> None: ...

    def rename_column(self, old: str, new: str) -> None: ...

    def drop_column(self, name: str) -> None: ...

    def expire(self, snapshot_ids: Iterable[int]) -> None:
        """Expire snapshots as the format's own maintenance does."""
        ...

    def rollback(self, snapshot_id: int) -> None: ...

    def corrupt(self) -> str:
        """Make the current metadata unreadable; what the error message must name."""
        ...

    def corrupt_commit(self) -> str:
        """Make the newest commit's own metadata unreadable (its new manifest, its log
        entry), the table's metadata readable; what the error message must name."""
        ...


class IcebergDriver:
    """Real pyiceberg commits through a SQLite catalog; opened by location or by catalog."""

    format_name = "iceberg"

    def __init__(self, root: Path, *, by_catalog: bool, s3: S3Server | None = None) -> None:
        # on S3: pyiceberg writes there directly, with its FileIO's own S3 properties
        self.warehouse = (
            IcebergWarehouse(root)
            if s3 is None
            else IcebergWarehouse(
                root, warehouse=f"{s3.new_bucket()}/wh", io_properties=s3.iceberg_io
            )
        )
        self.by_catalog = by_catalog
        self.can_commit = by_catalog  # a table opened by location is a read-only StaticTable
        self.name = "t"

    def create(self, columns: Sequence[tuple[str, str]]) -> None:
        fields = [
            NestedField(i, name, parse_type(type_str), required=False)
            for i, (name, type_str) in enumerate(columns, start=1)
        ]
        self.warehouse.create_table(self.name, Schema(*fields))
        self.location = self.warehouse.location(self.name)  # asked once: corrupt() breaks it

    def open(self) -> TableFormat:
        if self.by_catalog:
            catalog, properties, identifier = self.warehouse.catalog_args(self.name)
            return open_table(catalog=catalog, catalog_properties=properties, identifier=identifier)
        return open_table(self.location)

    def append(self, rows: Rows) -> int:
        return self.warehouse.append(self.name, rows)

    def delete_where_id_below(self, limit: int) -> int:
        snapshot_id = self.warehouse.delete(self.name, f"id < {limit}")
        assert snapshot_id is not None
        return snapshot_id

    def add_column(self, name: str, type_str: str) -> None:
        self.warehouse.add_column(self.name, name, parse_type(type_str))

    def rename_column(self, old: str, new: str) -> None:
        self.warehouse.rename_column(self.name, old, new)

    def drop_column(self, name: str) -> None:
        self.warehouse.drop_column(self.name, name)

    def expire(self, snapshot_ids: Iterable[int]) -> None:
        self.warehouse.expire_snapshots(self.name, snapshot_ids)

    def rollback(self, snapshot_id: int) -> None:
        self.warehouse.rollback(self.name, snapshot_id)

    def corrupt(self) -> str:
        metadata_file = self.warehouse.table(self.name).metadata_location
        filesystem, where = pafs.FileSystem.from_uri(metadata_file)
        with filesystem.open_input_stream(where) as source:
            text = source.read()
        with filesystem.open_output_stream(where) as out:
            out.write(text[: len(text) // 2])
        # By location the message names the file; through a catalog, the catalog's table.
        if self.by_catalog:
            return self.warehouse.identifier(self.name)
        return metadata_file.rsplit("/", 1)[-1]

    def corrupt_commit(self) -> str:
        table = self.warehouse.table(self.name)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        (new,) = [
            m for m in snapshot.manifests(table.io) if m.added_snapshot_id == snapshot.snapshot_id
        ]
        filesystem, where = pafs.FileSystem.from_uri(new.manifest_path)
        with filesystem.open_output_stream(where) as out:
            out.write(b"Obj\x01garbage")
        return new.manifest_path.rsplit("/", 1)[-1]


class MemoryDriver:
    """``MemoryTable`` through its writer API; metrics computed from the rows."""

    format_name = "memory"
    can_commit = True

    def __init__(self) -> None:
        self.table: MemoryTable | None = None
        self.files = 0

    @property
    def memory(self) -> MemoryTable:
        assert self.table is not None, "create() first"
        return self.table

    def create(self, columns: Sequence[tuple[str, str]]) -> None:
        self.table = MemoryTable(columns, name="t")

    def open(self) -> TableFormat:
        return self.memory

    def append(self, rows: Rows) -> int:
        self.files += 1
        record_count = len(next(iter(rows.values())))
        present = {name: [v for v in values if v is not None] for name, values in rows.items()}
        data_file = self.memory.data_file(
            f"memory://t/data/{self.files:05d}.parquet",
            record_count,
            bounds={n: (min(v), max(v)) for n, v in present.items() if v},
            null_counts={n: record_count - len(v) for n, v in present.items()},
        )
        return self.memory.append(data_file)

    def delete_where_id_below(self, limit: int) -> int:
        id_field = next(c.field_id for c in self.memory.schema().columns if c.name == "id")
        doomed = [
            f.path
            for f in self.memory.live_files(_current(self.memory))
            if f.columns[id_field].upper < limit
        ]
        return self.memory.remove(*doomed)

    def add_column(self, name: str, type_str: str) -> None:
        self.memory.add_column(name, type_str)

    def rename_column(self, old: str, new: str) -> None:
        self.memory.rename_column(old, new)

    def drop_column(self, name: str) -> None:
        self.memory.drop_column(name)

    def expire(self, snapshot_ids: Iterable[int]) -> None:
        self.memory.expire_snapshots(list(snapshot_ids))

    def rollback(self, snapshot_id: int) -> None:
        self.memory.rollback(snapshot_id)

    def corrupt(self) -> str:
        name = self.memory.metadata_location
        self.memory.make_unreadable("truncated")
        return name

    def corrupt_commit(self) -> str:
        current = self.memory.current_snapshot_id()
        assert current is not None
        self.memory.make_commit_unreadable(current)
        return self.memory.commit_manifest(current)


class PaimonDriver:
    """Real pypaimon 2.1 commits (``metadata.stats-mode=full``), opened by location.

    pypaimon deletes no files by predicate and expires nothing: deletes are lakestats'
    own file-level commits (``tests/paimon_tables.py``) and expiry is the adapter's.
    """

    format_name = "paimon"
    can_commit = True

    def __init__(self, root: Path) -> None:
        self.warehouse = PaimonWarehouse(root)
        self.name = "t"

    def create(self, columns: Sequence[tuple[str, str]]) -> None:
        self.location = self.warehouse.create(self.name, columns)

    def open(self) -> TableFormat:
        return open_table(str(self.location))

    def append(self, rows: Rows) -> int:
        return self.warehouse.write(self.name, rows)

    def delete_where_id_below(self, limit: int) -> int:
        id_field = field_id(self.open(), "id")
        return self.warehouse.delete_files(self.name, lambda f: f.columns[id_field].upper < limit)

    def add_column(self, name: str, type_str: str) -> None:
        self.warehouse.add_column(self.name, name, type_str)

    def rename_column(self, old: str, new: str) -> None:
        self.warehouse.rename_column(self.name, old, new)

    def drop_column(self, name: str) -> None:
        self.warehouse.drop_column(self.name, name)

    def expire(self, snapshot_ids: Iterable[int]) -> None:
        opened = self.open()
        assert isinstance(opened, SupportsSnapshotExpiry)
        opened.expire_snapshots(list(snapshot_ids))

    def rollback(self, snapshot_id: int) -> None:
        self.warehouse.rollback(self.name, snapshot_id)

    def corrupt(self) -> str:
        snapshot = self.location / "snapshot" / f"snapshot-{self.warehouse.current(self.name)}"
        text = snapshot.read_bytes()
        snapshot.write_bytes(text[: len(text) // 2])
        return snapshot.name

    def corrupt_commit(self) -> str:
        snapshot = self.location / "snapshot" / f"snapshot-{self.warehouse.current(self.name)}"
        delta = self.location / "manifest" / json.loads(snapshot.read_text())["deltaManifestList"]
        delta.write_bytes(b"Obj\x01garbage")
        return delta.name


class DeltaDriver:
    """Real delta-rs commits on a column-mapping table; opened by location (read-only).

    Delta versions that change no file (the creation, schema changes) are not snapshots.
    Expiry is delta-rs' own log cleanup (checkpoint + ``cleanup_metadata``); a rollback
    cuts the log back (Delta's RESTORE is a new commit, not a rollback).
    """

    format_name = "delta"
    can_commit = False

    def __init__(self, root: Path) -> None:
        self.writer = DeltaWriter(root / "t")

    def create(self, columns: Sequence[tuple[str, str]]) -> None:
        self.writer.create(columns, column_mapping=True, configuration=NO_LOG_RETENTION)

    def open(self) -> TableFormat:
        return open_table(self.writer.path)

    def append(self, rows: Rows) -> int:
        return self.writer.append(rows)

    def delete_where_id_below(self, limit: int) -> int:
        return self.writer.delete(f"id < {limit}")

    def add_column(self, name: str, type_str: str) -> None:
        self.writer.add_column(name, type_str)

    def rename_column(self, old: str, new: str) -> None:
        self.writer.rename_column(old, new)

    def drop_column(self, name: str) -> None:
        self.writer.drop_column(name)

    def expire(self, snapshot_ids: Iterable[int]) -> None:
        current = self.writer.version()
        assert all(v < current for v in snapshot_ids), "Delta expires the oldest versions only"
        self.writer.cleanup()

    def rollback(self, snapshot_id: int) -> None:
        self.writer.cut_log_after(snapshot_id)

    def corrupt(self) -> str:
        commit = self.writer.log / f"{self.writer.version():020d}.json"
        text = commit.read_bytes()
        commit.write_bytes(text[: len(text) // 2])
        return commit.name

    def corrupt_commit(self) -> str:
        # the newest log entry is the table's state too (read to open it): its add's
        # statistics are the commit's own, read when the commit is listed
        commit = self.writer.log / f"{self.writer.version():020d}.json"
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line]
        for action in actions:
            if "add" in action:
                action["add"]["stats"] = '{"numRecords": 1, "minValues": {'
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
        return commit.name


class ProbingDeltaDriver(DeltaDriver):
    """The same table, refreshed by probing for new commits by name (``log.probe_log``)
    from the first refresh on, as a log of more than 1,000 files is."""

    def open(self) -> TableFormat:
        return DeltaLakeTable(resolve_location(self.writer.path), probe_above_entries=0)


class ProbingPaimonDriver(PaimonDriver):
    """The same table, refreshed by asking for snapshot files by name
    (``MetaFiles.probe_snapshots``) from the first refresh on, as a ``snapshot/`` of more
    than 1,000 files is."""

    def open(self) -> TableFormat:
        return PaimonTable(resolve_location(str(self.location)), probe_above_entries=0)


class OnS3:
    """A Delta or Paimon driver's table on S3, opened by its ``s3://`` location.

    The inner driver writes it locally and every change is then copied to a bucket
    (``S3Server.sync``): both formats name their files relative to the table, so the
    bucket holds what a writer on S3 leaves there. lakestats reads it, never writes it:
    expiry through the format is refused, as on any table it cannot commit to.
    """

    can_commit = False

    def __init__(self, inner: DeltaDriver | PaimonDriver, s3: S3Server) -> None:
        self.inner = inner
        self.format_name = inner.format_name
        self.s3 = s3
        self.uri = f"{s3.new_bucket()}/t"

    def _sync(self) -> None:
        local = Path(
            self.inner.writer.path if isinstance(self.inner, DeltaDriver) else self.inner.location
        )
        self.s3.sync(local, self.uri)

    def create(self, columns: Sequence[tuple[str, str]]) -> None:
        self.inner.create(columns)
        self._sync()

    def open(self) -> TableFormat:
        return open_table(self.uri)

    def append(self, rows: Rows) -> int:
        snapshot_id = self.inner.append(rows)
        self._sync()
        return snapshot_id

    def delete_where_id_below(self, limit: int) -> int:
        snapshot_id = self.inner.delete_where_id_below(limit)
        self._sync()
        return snapshot_id

    def add_column(self, name: str, type_str: str) -> None:
        self.inner.add_column(name, type_str)
        self._sync()

    def rename_column(self, old: str, new: str) -> None:
        self.inner.rename_column(old, new)
        self._sync()

    def drop_column(self, name: str) -> None:
        self.inner.drop_column(name)
        self._sync()

    def expire(self, snapshot_ids: Iterable[int]) -> None:
        self.inner.expire(snapshot_ids)
        self._sync()

    def rollback(self, snapshot_id: int) -> None:
        self.inner.rollback(snapshot_id)
        self._sync()

    def corrupt(self) -> str:
        named = self.inner.corrupt()
        self._sync()
        return named

    def corrupt_commit(self) -> str:
        named = self.inner.corrupt_commit()
        self._sync()
        return named


DRIVERS: dict[str, Callable[[Path], TableDriver]] = {
    "delta": DeltaDriver,
    "delta-probing": ProbingDeltaDriver,
    "paimon": PaimonDriver,
    "paimon-probing": ProbingPaimonDriver,
    "iceberg-location": lambda root: IcebergDriver(root, by_catalog=False),
    "iceberg-catalog": lambda root: IcebergDriver(root, by_catalog=True),
    "memory": lambda root: MemoryDriver(),
}
# the same formats on object storage (tests/object_store.py: an S3 server on 127.0.0.1)
S3_DRIVERS: dict[str, Callable[[Path, S3Server], TableDriver]] = {
    "delta-s3": lambda root, s3: OnS3(DeltaDriver(root), s3),
    "paimon-s3": lambda root, s3: OnS3(PaimonDriver(root), s3),
    "iceberg-s3-location": lambda root, s3: IcebergDriver(root, by_catalog=False, s3=s3),
    "iceberg-s3-catalog": lambda root, s3: IcebergDriver(root, by_catalog=True, s3=s3),
}


@pytest.fixture(params=sorted(DRIVERS) + sorted(S3_DRIVERS))
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> TableDriver:
    if request.param in S3_DRIVERS:
        made = S3_DRIVERS[request.param](tmp_path, request.getfixturevalue("s3_server"))
    else:
        made = DRIVERS[request.param](tmp_path)
    made.create(COLUMNS)
    return made


def rows(ids: Sequence[int], *, day: dt.date = dt.date(2024, 3, 1)) -> dict[str, list[Any]]:
    return {
        "id": list(ids),
        "name": [f"n{i}" if i % 3 else None for i in ids],
        "day": [day + dt.timedelta(days=i) for i in ids],
        "price": [Decimal(f"{i}.25") for i in ids],
        "ts": [dt.datetime(2024, 3, 1, 12) + dt.timedelta(minutes=i) for i in ids],
    }


def _current(table: TableFormat) -> int:
    snapshot_id = table.current_snapshot_id()
    assert snapshot_id is not None
    return snapshot_id


def paths(files: Iterable[DataFile]) -> set[str]:
    return {f.path for f in files}


def added_paths(commit: Commit) -> set[str]:
    return paths(commit.added_files)


def field_id(table: TableFormat, name: str, schema_id: int | None = None) -> int:
    return next(c.field_id for c in table.schema(schema_id).columns if c.name == name)


class TestLineage:
    def test_is_a_table_format_with_a_stable_id(self, driver: TableDriver) -> None:
        opened = driver.open()
        assert isinstance(opened, TableFormat)
        assert opened.format_name == driver.format_name
        assert opened.current_snapshot_id() is None
        assert opened.commits_since(None) == []
        driver.append(rows([1]))
        assert driver.open().table_id == opened.table_id

    def test_only_formats_whose_expiry_deletes_files_with_their_snapshots_keep_them(
        self, driver: TableDriver
    ) -> None:
        """``KeepsListedFiles``: a rollback finds every file a snapshot in the metadata
        lists. Not Delta: VACUUM deletes removed files while the log lists them."""
        opened = driver.open()
        keeps = isinstance(opened, KeepsListedFiles) and opened.keeps_listed_files()
        assert keeps == (driver.format_name != "delta")

    def test_commits_since_lists_commits_oldest_first_up_to_the_current_one(
        self, driver: TableDriver
    ) -> None:
        snapshots = [driver.append(rows([i, i + 1])) for i in (1, 3, 5)]
        opened = driver.open()

        commits = opened.commits_since(None)

        assert [c.snapshot_id for c in commits] == snapshots
        assert [c.parent_id for c in commits] == [None, *snapshots[:-1]]
        assert [c.operation for c in commits] == ["append"] * 3
        sequence = [c.sequence_number for c in commits]
        assert sequence == sorted(sequence) and len(set(sequence)) == 3
        stamps = [c.timestamp_ms for c in commits]
        assert stamps == sorted(stamps)
        assert all(len(c.added_files) == 1 and not c.removed_files for c in commits)
        assert len(set.union(*(added_paths(c) for c in commits))) == 3
        assert opened.current_snapshot_id() == snapshots[-1]
        assert opened.snapshot_ids() == frozenset(snapshots)
        assert [c.snapshot_id for c in opened.commits_since(snapshots[0])] == snapshots[1:]

    def test_nothing_after_the_last_commit(self, driver: TableDriver) -> None:
        driver.append(rows([1]))
        last = driver.append(rows([2]))
        assert driver.open().commits_since(last) == []

    def test_refresh_sees_later_commits(self, driver: TableDriver) -> None:
        first = driver.append(rows([1]))
        opened = driver.open()
        second = driver.append(rows([2]))

        opened.refresh()

        assert opened.current_snapshot_id() == second
        assert [c.snapshot_id for c in opened.commits_since(first)] == [second]

    def test_a_delete_lists_the_removed_file_and_live_files_follow(
        self, driver: TableDriver
    ) -> None:
        first = driver.append(rows([1, 2]))
        second = driver.append(rows([5, 6]))
        deleted = driver.delete_where_id_below(3)
        opened = driver.open()

        *_, delete = opened.commits_since(second)
        (first_commit, second_commit) = opened.commits_since(None)[:2]

        assert delete.snapshot_id == deleted
        assert delete.operation == "delete"
        assert paths(delete.removed_files) == added_paths(first_commit)
        assert not delete.added_files
        assert paths(opened.live_files(deleted)) == added_paths(second_commit)
        assert paths(opened.live_files(first)) == added_paths(first_commit)
        assert all(f.content is FileContent.DATA for f in opened.live_files(second))
        assert len(opened.live_files(second)) == 2

    def test_after_a_rollback_the_abandoned_snapshot_is_no_ancestor(
        self, driver: TableDriver
    ) -> None:
        first = driver.append(rows([1]))
        abandoned = driver.append(rows([2]))
        driver.rollback(first)
        opened = driver.open()

        with pytest.raises(LineageError, match=str(abandoned)):
            opened.commits_since(abandoned)

        after = driver.append(rows([3]))
        opened.refresh()
        assert [c.snapshot_id for c in opened.commits_since(first)] == [after]
        assert [c.parent_id for c in opened.commits_since(first)] == [first]

    def test_an_id_given_again_after_a_rollback_names_another_commit(
        self, driver: TableDriver
    ) -> None:
        first = driver.append(rows([1]))
        abandoned = driver.append(rows([2]))
        opened = driver.open()  # one handle throughout, as the daemon keeps it
        (before,) = opened.commits_since(first)
        fingerprints = isinstance(opened, SupportsCommitFingerprint)
        if fingerprints:
            assert before.fingerprint is not None
            assert opened.commit_fingerprint(abandoned) == before.fingerprint

        driver.rollback(first)
        again = driver.append(rows([3]))
        opened.refresh()
        (after,) = opened.commits_since(first)

        assert after.snapshot_id == again
        assert added_paths(after).isdisjoint(added_paths(before))
        if again != abandoned:  # Iceberg's random ids (and MemoryTable's) are never reused
            with pytest.raises(LineageError):
                opened.commits_since(abandoned)
            return
        # Delta and Paimon give the id again: only the fingerprint tells the commits apart
        assert fingerprints
        assert after.fingerprint not in (None, before.fingerprint)
        assert opened.commit_fingerprint(again) == after.fingerprint


class TestExpiry:
    def test_history_cut_by_expiry_starts_with_a_baseline_of_every_live_file(
        self, driver: TableDriver
    ) -> None:
        first = driver.append(rows([1, 2]))
        second = driver.append(rows([5, 6]))
        deleted = driver.delete_where_id_below(3)
        last = driver.append(rows([7]))
        driver.expire([first, second, deleted])
        opened = driver.open()

        (baseline,) = opened.commits_since(None)

        assert opened.snapshot_ids() == frozenset({last})
        assert baseline.snapshot_id == last
        assert baseline.is_baseline and baseline.operation == "baseline"
        assert not baseline.removed_files
        assert added_paths(baseline) == paths(opened.live_files(last))
        assert len(baseline.added_files) == 2  # the second and the last append's files
        assert opened.commits_since(last) == []

    def test_commits_after_the_baseline_are_ordinary(self, driver: TableDriver) -> None:
        first = driver.append(rows([1]))
        second = driver.append(rows([2]))
        driver.expire([first])
        third = driver.append(rows([3]))
        opened = driver.open()

        baseline, appended = opened.commits_since(None)

        assert (baseline.snapshot_id, baseline.operation) == (second, "baseline")
        assert len(baseline.added_files) == 2
        assert (appended.snapshot_id, appended.operation) == (third, "append")
        assert len(appended.added_files) == 1


class TestSchemas:
    def test_evolution_keeps_field_ids_and_each_commit_names_its_schema(
        self, driver: TableDriver
    ) -> None:
        driver.append(rows([1]))
        driver.add_column("note", "string")
        driver.append({**rows([2]), "note": ["x"]})
        driver.rename_column("name", "label")
        renamed = {("label" if k == "name" else k): v for k, v in rows([3]).items()}
        driver.append({**renamed, "note": ["y"]})
        driver.drop_column("day")
        driver.append({k: v for k, v in renamed.items() if k != "day"} | {"note": ["z"]})
        opened = driver.open()

        commits = opened.commits_since(None)
        schemas = [opened.schema(c.schema_id) for c in commits]

        names = [[c.name for c in s.columns] for s in schemas]
        assert names == [
            ["id", "name", "day", "price", "ts"],
            ["id", "name", "day", "price", "ts", "note"],
            ["id", "label", "day", "price", "ts", "note"],
            ["id", "label", "price", "ts", "note"],
        ]
        assert len({s.schema_id for s in schemas}) == 4
        assert opened.schema() == schemas[-1]
        name_id = field_id(opened, "name", commits[0].schema_id)
        assert field_id(opened, "label") == name_id
        day_id = field_id(opened, "day", commits[0].schema_id)
        note_id = field_id(opened, "note")
        assert note_id not in {c.field_id for c in schemas[0].columns}
        assert day_id not in {c.field_id for c in opened.schema().columns}
        for commit, schema in zip(commits, schemas, strict=True):
            (data_file,) = commit.added_files
            assert data_file.field_ids == frozenset(c.field_id for c in schema.columns)

    def test_an_unknown_schema_id_is_a_metadata_error(self, driver: TableDriver) -> None:
        with pytest.raises(MetadataError, match="no schema with id 99"):
            driver.open().schema(99)


class TestFiles:
    def test_bounds_decode_to_python_values_of_the_column_type(self, driver: TableDriver) -> None:
        written = rows([4, 1, 2, 3])
        driver.append(written)
        opened = driver.open()

        ((data_file,),) = (c.added_files for c in opened.commits_since(None))
        by_name = {c.name: c.field_id for c in opened.schema().columns}

        assert data_file.record_count == 4
        assert data_file.content is FileContent.DATA
        expected = {
            "id": (1, 4),
            "name": ("n1", "n4"),
            "day": (dt.date(2024, 3, 2), dt.date(2024, 3, 5)),
            "price": (Decimal("1.25"), Decimal("4.25")),
            "ts": (dt.datetime(2024, 3, 1, 12, 1), dt.datetime(2024, 3, 1, 12, 4)),
        }
        for name, (lower, upper) in expected.items():
            metrics = data_file.columns[by_name[name]]
            assert (metrics.lower, metrics.upper) == (lower, upper), name
            assert type(metrics.lower) is type(lower) and type(metrics.upper) is type(upper)
            assert metrics.value_count == 4
        assert data_file.columns[by_name["name"]].null_count == 1  # id 3
        assert data_file.columns[by_name["id"]].null_count == 0

    def test_live_files_of_an_unknown_snapshot_is_an_error(self, driver: TableDriver) -> None:
        driver.append(rows([1]))
        with pytest.raises(SnapshotNotFoundError, match="123456789"):
            driver.open().live_files(123456789)


class TestBadMetadata:
    def test_unreadable_metadata_is_one_line_naming_the_file(self, driver: TableDriver) -> None:
        driver.append(rows([1]))
        named = driver.corrupt()

        with pytest.raises((MetadataError, TableNotFoundError)) as raised:
            opened = driver.open()
            opened.refresh()
            opened.commits_since(None)

        message = str(raised.value)
        assert named in message
        assert "\n" not in message

    def test_an_unreadable_commit_stops_the_walk_after_the_ones_before_it(
        self, driver: TableDriver
    ) -> None:
        first = driver.append(rows([1]))
        second = driver.append(rows([2]))
        third = driver.append(rows([3]))
        named = driver.corrupt_commit()

        with pytest.raises(UnreadableCommitError) as raised:
            opened = driver.open()
            opened.refresh()
            opened.commits_since(None)
        message = str(raised.value)
        assert named in message and str(third) in message and "\n" not in message
        assert [c.snapshot_id for c in raised.value.readable] == [first, second]
        # nothing readable before it: the walk has nothing to give
        with pytest.raises(UnreadableCommitError) as raised:
            driver.open().commits_since(second)
        assert raised.value.readable == ()


class TestSnapshotExpiryCapability:
    def test_expiry_through_the_format_drops_snapshots(self, driver: TableDriver) -> None:
        first = driver.append(rows([1]))
        second = driver.append(rows([2]))
        opened = driver.open()
        assert isinstance(opened, SupportsSnapshotExpiry)
        infos = {i.snapshot_id: i for i in opened.snapshot_infos()}
        assert set(infos) == {first, second}
        assert all(i.in_main_lineage for i in infos.values())
        assert infos[first].timestamp_ms <= infos[second].timestamp_ms
        if not driver.can_commit:
            with pytest.raises(ExpiryError, match="read-only"):
                opened.expire_snapshots([first])
            return

        opened.expire_snapshots([first])

        assert opened.snapshot_ids() == frozenset({second})
        assert opened.commits_since(None)[0].is_baseline
