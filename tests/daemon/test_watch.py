"""Watching: commit markers only, local paths only, real watchdog events become hints;
what is watched is the table format's answer (its ``WatchSpec``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from watchdog.events import FileCreatedEvent, FileModifiedEvent, FileMovedEvent

from lakestats.config import SketchConfig
from lakestats.formats.base import WatchSpec
from lakestats.formats.registry import watch_spec
from lakestats.locations import local_path
from lakestats.tables import open_configured
from lakestats.testing import IcebergWarehouse
from lakestatsd.config import ServiceConfig, ServiceTableConfig
from lakestatsd.watch import MetadataWatcher, WatchTarget, is_commit_event, local_metadata_dir
from lakestatsd.wiring import CoreFns, Service

ICEBERG = watch_spec("iceberg")


def iceberg_targets(locations: dict[str, str]) -> Callable[[str], WatchTarget | None]:
    targets = {name: WatchTarget(location, "iceberg") for name, location in locations.items()}
    return targets.get


def test_commit_markers() -> None:
    assert is_commit_event(FileCreatedEvent("/t/metadata/00003-ab.metadata.json"), ICEBERG)
    assert is_commit_event(
        FileMovedEvent("/t/metadata/x.tmp", "/t/metadata/version-hint.text"), ICEBERG
    )
    assert not is_commit_event(FileCreatedEvent("/t/metadata/snap-1-0-ab.avro"), ICEBERG)
    assert not is_commit_event(FileModifiedEvent("/t/metadata/.00003.metadata.json"), ICEBERG)


def test_local_metadata_dir() -> None:
    assert local_metadata_dir("/data/t", ICEBERG.directories[0]) == Path("/data/t/metadata")
    assert local_metadata_dir("file:///data/my%20t", ICEBERG.directories[0]) == Path(
        "/data/my t/metadata"
    )
    assert local_metadata_dir("s3://bucket/t", ICEBERG.directories[0]) is None


def test_events_become_hints_and_missing_dirs_are_retried(tmp_path: Path) -> None:
    hints: list[tuple[str, str]] = []
    lock = threading.Lock()

    def hint(table: str, source: str) -> None:
        with lock:
            hints.append((table, source))

    (tmp_path / "a" / "metadata").mkdir(parents=True)
    locations = {"a": str(tmp_path / "a"), "late": str(tmp_path / "late"), "s3": "s3://b/t"}
    watcher = MetadataWatcher(("a", "late", "s3"), hint, iceberg_targets(locations))
    watcher.start()
    try:
        assert set(watcher.watched()) == {"a"}
        (tmp_path / "a" / "metadata" / "snap-1.avro").write_text("x")
        (tmp_path / "a" / "metadata" / "00001-x.metadata.json").write_text("{}")
        (tmp_path / "late" / "metadata").mkdir(parents=True)
        watcher.ensure_watches()  # what each poll tick does
        assert set(watcher.watched()) == {"a", "late"}
        (tmp_path / "late" / "metadata" / "00001-y.metadata.json").write_text("{}")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with lock:
                if ("late", "watch") in hints and hints.count(("a", "watch")) >= 2:
                    break
            time.sleep(0.02)
        with lock:
            # one hint on watch start (a commit may have landed before it) + the commit
            assert hints.count(("a", "watch")) >= 2
            assert ("late", "watch") in hints
            assert all(t != "s3" for t, _ in hints)
    finally:
        watcher.stop()


def test_reading_metadata_is_not_a_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon reads metadata.json on every run: those reads must not hint again, nor
    reach Python at all (the kernel is asked for writes only: a daemon slowed by load had
    72k read events queued in watchdog)."""
    from lakestatsd import watch

    seen: list[str] = []
    handle = watch._Handler.on_any_event

    def spy(self: Any, event: Any) -> None:  # records, then handles as ever
        seen.append(event.event_type)
        handle(self, event)

    monkeypatch.setattr(watch._Handler, "on_any_event", spy)
    hints: list[str] = []
    metadata = tmp_path / "t" / "metadata"
    metadata.mkdir(parents=True)
    current = metadata / "00001-x.metadata.json"
    current.write_text("{}")
    expired = metadata / "00000-w.metadata.json"
    expired.write_text("{}")
    watcher = MetadataWatcher(
        ("t",),
        lambda table, source: hints.append(source),
        iceberg_targets({"t": str(tmp_path / "t")}),
    )
    watcher.start()
    try:
        time.sleep(0.3)
        before = len(hints)  # the hint every new watch starts with
        for _ in range(5):
            current.read_text()
        expired.unlink()  # expiry's deletions are no commit either, nor reach Python
        time.sleep(0.5)
        assert len(hints) == before
        assert not {"opened", "closed_no_write", "deleted"} & set(seen), seen
        (metadata / "00002-y.metadata.json").write_text("{}")
        deadline = time.monotonic() + 5
        while len(hints) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(hints) > before
    finally:
        watcher.stop()


def wait_until(check: Callable[[], bool], timeout_s: float = 5) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.02)
    return check()


def test_the_format_says_what_to_watch(tmp_path: Path) -> None:
    """A format with other directories and markers (Delta-like, two directories) is watched
    where its spec says, and Iceberg's markers mean nothing for it."""
    log_spec = WatchSpec(directories=("_delta_log", "_delta_log/_staging"), markers=(".json",))
    specs = {"iceberg": ICEBERG, "logged": log_spec}
    hints: list[str] = []
    lock = threading.Lock()

    def hint(table: str, source: str) -> None:
        with lock:
            hints.append(table)

    (tmp_path / "d" / "_delta_log").mkdir(parents=True)
    (tmp_path / "i" / "metadata").mkdir(parents=True)
    targets = {
        "d": WatchTarget(str(tmp_path / "d"), "logged"),
        "i": WatchTarget((tmp_path / "i").as_uri(), "iceberg"),
    }
    watcher = MetadataWatcher(("d", "i"), hint, targets.get, spec_of=specs.__getitem__)
    watcher.start()
    try:
        # "d" waits until every directory of its spec exists
        assert watcher.watched() == {"i": (str(tmp_path / "i" / "metadata"),)}
        (tmp_path / "d" / "_delta_log" / "_staging").mkdir()
        watcher.ensure_watches()
        assert watcher.watched()["d"] == (
            str(tmp_path / "d" / "_delta_log"),
            str(tmp_path / "d" / "_delta_log" / "_staging"),
        )
        assert wait_until(lambda: hints.count("d") >= 1 and hints.count("i") >= 1)
        with lock:
            before = hints.count("d")
        # Iceberg's marker in a logged table's directory is no commit of that format
        (tmp_path / "d" / "_delta_log" / "00001-x.metadata.json.tmp").write_text("{}")
        (tmp_path / "d" / "_delta_log" / "version-hint.text").write_text("1")
        time.sleep(0.3)
        with lock:
            assert hints.count("d") == before
        (tmp_path / "d" / "_delta_log" / "_staging" / "00000000000000000001.json").write_text("{}")
        assert wait_until(lambda: hints.count("d") > before)
    finally:
        watcher.stop()


def test_runtime_names_location_and_format_of_opened_tables(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([pa.field("id", pa.int64())]))
    config = ServiceConfig(
        state_dir=str(tmp_path / "state"),
        sketch=SketchConfig(enabled=False),
        catalog={wh.catalog_name: dict(wh.catalog_properties)},
        table=(
            ServiceTableConfig(name="by_location", location=wh.location("t")),
            ServiceTableConfig(
                name="by_catalog", catalog=wh.catalog_name, identifier=wh.identifier("t")
            ),
            ServiceTableConfig(name="missing", location=str(tmp_path / "nowhere")),
        ),
    )

    def never(*args: object, **kwargs: object) -> Any:
        raise AssertionError("not analyzed in this test")

    service = Service(config, CoreFns(never, never, open_configured, None, None))
    assert service.runtime.watch_target("by_location") == WatchTarget(wh.location("t"), "iceberg")
    by_catalog = service.runtime.watch_target("by_catalog")
    assert by_catalog is not None and by_catalog.format_name == "iceberg"
    assert local_path(by_catalog.location) == local_path(wh.location("t"))
    assert service.runtime.watch_target("missing") is None  # retried at the next poll tick


def test_a_directory_deleted_and_created_again_is_watched_again(tmp_path: Path) -> None:
    """A table dropped and written anew at its path: the old directory's inotify watch died
    with it, silently. The next poll tick sees the directory is another one (or gone) and
    watches it again, so its commits are hinted at once, not at the next poll."""
    import shutil

    hints: list[str] = []
    lock = threading.Lock()

    def hint(table: str, source: str) -> None:
        if source == "watch":
            with lock:
                hints.append(table)

    metadata = tmp_path / "t" / "metadata"
    metadata.mkdir(parents=True)
    watcher = MetadataWatcher(("t",), hint, iceberg_targets({"t": str(tmp_path / "t")}))
    watcher.start()
    try:
        assert watcher.watched() == {"t": (str(metadata),)}
        shutil.rmtree(tmp_path / "t")
        watcher.ensure_watches()  # gone: no longer watched
        assert watcher.watched() == {}
        metadata.mkdir(parents=True)
        watcher.ensure_watches()  # created again: watched again
        assert watcher.watched() == {"t": (str(metadata),)}
        with lock:
            before = len(hints)  # the re-watch itself hints once
        (metadata / "00001-x.metadata.json").write_text("{}")
        assert wait_until(lambda: len(hints) > before)

        # replaced between two ticks, never seen missing (its inode number may come back):
        # the deletion's own event marks the watch lost, and the tick after watches again
        shutil.rmtree(tmp_path / "t")
        metadata.mkdir(parents=True)
        time.sleep(0.5)  # the next poll tick, after the event arrived
        watcher.ensure_watches()
        with lock:
            before = len(hints)
        (metadata / "00002-x.metadata.json").write_text("{}")
        assert wait_until(lambda: len(hints) > before)
    finally:
        watcher.stop()
