"""Remote file systems: bounded GCS retries (``locations.filesystem_from_uri``).

No GCS server can run here (only the package registries are reachable), so these tests
check the file system pyarrow is given and what a table on gs:// without credentials does:
fail fast with one line, where pyarrow's default retried for 15 minutes.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from lakestats import locations
from lakestats.exceptions import TableNotFoundError
from lakestats.formats.registry import open_table
from lakestats.locations import filesystem_from_uri


def gcs_options(filesystem: pafs.FileSystem) -> dict[str, object]:
    assert isinstance(filesystem, pafs.GcsFileSystem)
    _, (options,) = filesystem.__reduce__()  # what the file system is rebuilt from
    return dict(options)


def test_gcs_retries_are_bounded() -> None:
    filesystem, path = filesystem_from_uri("gs://bucket/warehouse/db/t")
    assert path == "bucket/warehouse/db/t"
    limit = dt.timedelta(seconds=locations.GCS_RETRY_LIMIT_S)
    assert gcs_options(filesystem)["retry_time_limit"] == limit
    # a limit the URI sets itself is kept
    filesystem, path = filesystem_from_uri("gs://bucket/t?retry_limit_seconds=5")
    assert path == "bucket/t"
    assert gcs_options(filesystem)["retry_time_limit"] == dt.timedelta(seconds=5)


def test_other_schemes_are_pyarrows_own() -> None:
    filesystem, path = filesystem_from_uri("s3://bucket/t")
    assert isinstance(filesystem, pafs.S3FileSystem) and path == "bucket/t"


def test_a_table_on_gcs_without_credentials_fails_fast_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(locations, "GCS_RETRY_LIMIT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(TableNotFoundError, match="cannot read this location") as caught:
        open_table("gs://lakestats-no-such-bucket-for-tests/warehouse/t")
    assert time.monotonic() - started < 60
    assert "\n" not in str(caught.value).strip()


def test_files_are_asked_for_by_name(tmp_path: Path) -> None:
    """``TableLocation.files``: what Delta's log probe and Iceberg's hint reader ask."""
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "a.json").write_bytes(b"12345")
    (tmp_path / "log" / "sub").mkdir()
    location = locations.resolve_location(str(tmp_path))
    found, missing, folder = location.files("log", ["a.json", "b.json", "sub"])
    assert found is not None and found.size == 5 and found.base_name == "a.json"
    assert missing is None and folder is None  # a folder is not a file
    assert location.files("nowhere", ["a.json"]) == [None]
