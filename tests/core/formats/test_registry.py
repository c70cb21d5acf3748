"""The format registry: lazy entries, layout detection, missing dependencies, catalogs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from delta_tables import DeltaWriter
from lakestats.exceptions import ConfigError, FormatUnavailableError, TableNotFoundError
from lakestats.formats.base import WatchSpec
from lakestats.formats.iceberg import IcebergTable
from lakestats.formats.memory import MemoryTable
from lakestats.formats.registry import (
    ENTRIES,
    FormatEntry,
    FormatRegistry,
    detect_format,
    open_table,
    watch_spec,
)
from lakestats.locations import TableLocation
from lakestats.testing import IcebergWarehouse

NOT_A_TABLE = (
    "is not a table: found no metadata/*.metadata.json (Iceberg), _delta_log/ (Delta) "
    "or schema/schema-N (Paimon)"
)


@pytest.fixture
def iceberg_location(tmp_path: Path) -> str:
    warehouse = IcebergWarehouse(tmp_path / "wh")
    warehouse.create_table("t", pa.schema([("id", "int64")]))
    warehouse.append("t", {"id": [1, 2]})
    return warehouse.location("t")


@pytest.fixture
def format_modules(tmp_path: Path) -> Iterator[Path]:
    """A directory on ``sys.path`` where a test writes format modules of its own."""
    root = tmp_path / "modules"
    root.mkdir()
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m.startswith("fake_format_")]:
        del sys.modules[name]


def always(location: TableLocation) -> bool:
    return True


def fake_entry(module: str, *, catalogs: bool = False) -> FormatEntry:
    return FormatEntry(
        name="fake",
        title="Fake",
        layout="fake/",
        detect=always,
        module=module,
        watch=WatchSpec(directories=("fake",), markers=(".fake",)),
        extra="fake",
        catalogs=catalogs,
    )


class TestLazyLoading:
    def test_detecting_and_watching_an_iceberg_table_does_not_import_pyiceberg(
        self, iceberg_location: str
    ) -> None:
        script = textwrap.dedent(
            """
            import sys
            from lakestats.formats.registry import detect_format, watch_spec

            print(detect_format(sys.argv[1]), watch_spec("iceberg").directories)
            loaded = sorted(m for m in sys.modules if m.split(".")[0] == "pyiceberg")
            print("pyiceberg modules:", loaded)
            assert not loaded, loaded
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script, iceberg_location],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "iceberg ('metadata',)" in result.stdout
        assert "pyiceberg modules: []" in result.stdout

    def test_opening_imports_the_format_module_and_gives_its_table(
        self, iceberg_location: str
    ) -> None:
        opened = open_table(iceberg_location)
        assert isinstance(opened, IcebergTable)
        assert opened.current_snapshot_id() is not None
        assert isinstance(open_table(iceberg_location, format="iceberg"), IcebergTable)

    def test_a_new_format_is_one_entry(self, format_modules: Path, tmp_path: Path) -> None:
        (format_modules / "fake_format_ok.py").write_text(
            textwrap.dedent(
                """
                from lakestats.formats.memory import MemoryTable

                def open_location(location):
                    return MemoryTable([("id", "long")], name=location.rsplit("/", 1)[-1])

                def open_catalog(catalog_name, catalog_properties, identifier):
                    return MemoryTable([("id", "long")], name=identifier)
                """
            )
        )
        registry = FormatRegistry([fake_entry("fake_format_ok", catalogs=True)])

        by_location = registry.open_location(str(tmp_path))
        by_catalog = registry.open_catalog("cat", {}, "db.x", "fake")

        assert isinstance(by_location, MemoryTable)
        assert by_location.location == f"memory://{tmp_path.name}"
        assert isinstance(by_catalog, MemoryTable)
        assert by_catalog.location == "memory://db.x"
        assert registry.detect(str(tmp_path)) == "fake"
        assert registry.watch_spec("fake") == WatchSpec(("fake",), (".fake",))


class TestMissingDependency:
    def test_a_missing_dependency_says_which_extra_to_install(
        self, format_modules: Path, tmp_path: Path
    ) -> None:
        (format_modules / "fake_format_missing.py").write_text(
            "import lakestats_test_no_such_dependency\n"
        )
        registry = FormatRegistry([fake_entry("fake_format_missing", catalogs=True)])

        with pytest.raises(FormatUnavailableError) as by_location:
            registry.open_location(str(tmp_path))
        with pytest.raises(FormatUnavailableError) as by_catalog:
            registry.open_catalog("cat", {}, "db.x", "fake")

        for raised in (by_location, by_catalog):
            message = str(raised.value)
            assert "\n" not in message
            assert "install the `lakestats[fake]` extra" in message
            assert "lakestats_test_no_such_dependency" in message
            assert message.startswith("reading Fake tables needs")
        # detection needs no dependency: the layout alone answers
        assert registry.detect(str(tmp_path)) == "fake"

    def test_a_missing_module_of_lakestats_itself_is_a_bug_not_a_missing_extra(
        self, tmp_path: Path
    ) -> None:
        registry = FormatRegistry([fake_entry("lakestats.formats.no_such_format")])
        with pytest.raises(ModuleNotFoundError):
            registry.open_location(str(tmp_path))


class TestDetection:
    def test_delta_layout_is_detected_and_an_empty_log_is_no_table(self, tmp_path: Path) -> None:
        (tmp_path / "_delta_log").mkdir()
        assert detect_format(str(tmp_path)) == "delta"
        with pytest.raises(TableNotFoundError, match=r"is not a Delta table: _delta_log/ is empty"):
            open_table(str(tmp_path))

    def test_paimon_schema_files_are_a_paimon_table(self, tmp_path: Path) -> None:
        # Paimon is built (issue 12): a table is its schema/schema-N files, snapshots or not
        (tmp_path / "snapshot").mkdir()
        (tmp_path / "schema").mkdir()
        with pytest.raises(TableNotFoundError, match=r"found no .*schema/schema-N \(Paimon\)"):
            detect_format(str(tmp_path))
        (tmp_path / "schema" / "schema-0").write_text("{}")
        assert detect_format(str(tmp_path)) == "paimon"

    def test_half_a_paimon_layout_is_no_table(self, tmp_path: Path) -> None:
        (tmp_path / "snapshot").mkdir()
        with pytest.raises(TableNotFoundError) as raised:
            detect_format(str(tmp_path))
        assert str(raised.value) == f"{tmp_path} {NOT_A_TABLE}"

    def test_metadata_without_metadata_json_is_no_table(self, tmp_path: Path) -> None:
        (tmp_path / "metadata").mkdir()
        (tmp_path / "metadata" / "snap-1.avro").write_bytes(b"x")
        with pytest.raises(TableNotFoundError, match=r"found no metadata/\*\.metadata\.json"):
            detect_format(str(tmp_path))

    def test_no_table_says_which_table_the_path_is_in_or_holds(self, tmp_path: Path) -> None:
        """A user who gives a table's log or metadata folder, or a partition folder, is
        told the table; one who gives the warehouse folder, the tables it holds."""
        warehouse = tmp_path / "wh"
        delta = DeltaWriter(warehouse / "events")
        delta.create([("id", "long"), ("day", "string")], partition_by=["day"])
        delta.append({"id": [1], "day": ["d1"]})
        iceberg = IcebergWarehouse(tmp_path / "ice")
        iceberg.create_table("t", pa.schema([("id", "int64")]))
        iceberg.append("t", {"id": [1]})
        iceberg_location = iceberg.location("t")
        for inside, table, title in (
            (warehouse / "events" / "_delta_log", warehouse / "events", "Delta"),
            (warehouse / "events" / "day=d1", warehouse / "events", "Delta"),
            (Path(iceberg_location) / "metadata", Path(iceberg_location), "Iceberg"),
        ):
            with pytest.raises(TableNotFoundError) as raised:
                detect_format(str(inside))
            assert (
                str(raised.value)
                == f"{inside} {NOT_A_TABLE}; it is inside the {title} table {table}"
            )
        (warehouse / "notes").mkdir()
        DeltaWriter(warehouse / "clicks").create([("id", "long")])
        with pytest.raises(TableNotFoundError) as raised:
            detect_format(str(warehouse))
        assert str(raised.value).endswith("; it holds tables: clicks, events (give one)")

    def test_a_file_and_a_missing_path_are_no_tables(self, tmp_path: Path) -> None:
        file = tmp_path / "f.txt"
        file.write_text("x")
        with pytest.raises(TableNotFoundError, match="it is a file, not a table directory"):
            detect_format(str(file))
        with pytest.raises(TableNotFoundError, match="does not exist"):
            detect_format(str(tmp_path / "nope"))

    def test_iceberg_is_detected(self, iceberg_location: str) -> None:
        assert detect_format(iceberg_location) == "iceberg"
        assert detect_format(Path(iceberg_location).as_uri()) == "iceberg"


class TestCatalogsAndFormats:
    def test_catalog_tables_of_a_format_without_catalogs_say_so(self) -> None:
        with pytest.raises(
            ConfigError, match=r"^Delta tables cannot be opened through a catalog: give the"
        ):
            open_table(catalog="c", catalog_properties={}, identifier="db.t", format="delta")

    def test_an_unknown_format_is_named(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="unknown table format 'orc'"):
            open_table(catalog="c", identifier="db.t", format="orc")
        with pytest.raises(ConfigError, match="known: iceberg, delta, paimon"):
            open_table(str(tmp_path), format="orc")

    def test_a_format_without_catalogs_says_so_in_one_line(self) -> None:
        # the module is never imported: the entry alone knows it has no catalogs
        registry = FormatRegistry([fake_entry("fake_format_never_imported", catalogs=False)])
        with pytest.raises(ConfigError) as raised:
            registry.open_catalog("cat", {}, "db.x", "fake")
        assert str(raised.value) == (
            "Fake tables cannot be opened through a catalog: give the table's location instead"
        )
        assert "fake_format_never_imported" not in sys.modules

    def test_iceberg_is_the_default_catalog_format(self, tmp_path: Path) -> None:
        warehouse = IcebergWarehouse(tmp_path)
        warehouse.create_table("c", pa.schema([("id", "int64")]))
        catalog, properties, identifier = warehouse.catalog_args("c")
        opened = open_table(catalog=catalog, catalog_properties=properties, identifier=identifier)
        assert isinstance(opened, IcebergTable)
        assert opened.format_name == "iceberg"


class TestWatchSpecs:
    def test_iceberg_watches_its_metadata_directory(self) -> None:
        assert watch_spec("iceberg") == WatchSpec(
            directories=("metadata",), markers=(".metadata.json", "version-hint.text")
        )

    def test_delta_watches_its_log_for_commit_files(self) -> None:
        assert watch_spec("delta") == WatchSpec(directories=("_delta_log",), markers=(".json",))

    def test_formats_not_built_or_unknown_have_no_watch_spec(self) -> None:
        for name in ("nope",):  # Delta and Paimon are built (issues 11, 12)
            with pytest.raises(KeyError):
                watch_spec(name)

    def test_paimon_watches_its_snapshot_directory(self) -> None:
        assert watch_spec("paimon") == WatchSpec(directories=("snapshot",), markers=("LATEST",))

    def test_every_built_entry_has_a_watch_spec_and_an_extra(self) -> None:
        for entry in ENTRIES:
            if entry.built:
                assert entry.watch is not None and entry.extra, entry.name
