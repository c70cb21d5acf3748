"""Watching: commit markers only, local paths only, real watchdog events become hints."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileCreatedEvent, FileModifiedEvent, FileMovedEvent

from lakestats.formats.registry import watch_spec
from lakestatsd.watch import MetadataWatcher, WatchTarget, is_commit_event, local_metadata_dir

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


def test_reading_metadata_is_not_a_commit(tmp_path: Path) -> None:
    """The daemon reads metadata.json on every run: those reads must not hint again."""
    hints: list[str] = []
    metadata = tmp_path / "t" / "metadata"
    metadata.mkdir(parents=True)
    current = metadata / "00001-x.metadata.json"
    current.write_text("{}")
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
        time.sleep(0.5)
        assert len(hints) == before
        (metadata / "00002-y.metadata.json").write_text("{}")
        deadline = time.monotonic() + 5
        while len(hints) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(hints) > before
    finally:
        watcher.stop()
