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
from lakestats.locations import filesystem_from_uri, without_file_system
from object_store import S3Server


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


def test_whether_a_file_is_there_is_asked_by_opening_it(tmp_path: Path) -> None:
    """``TableLocation.present``: what the probes ask of the next commit file."""
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "a.json").write_bytes(b"12345")
    (tmp_path / "log" / "sub").mkdir()
    location = locations.resolve_location(str(tmp_path))
    assert location.present("log", "a.json")
    assert not location.present("log", "b.json")
    assert not location.present("nowhere", "a.json")
    with pytest.raises(OSError):  # a folder: the probe lists instead
        location.present("log", "sub")


def test_on_s3_a_missing_file_costs_one_head_when_opened(s3_server: S3Server) -> None:
    """Why the probes open the next commit file instead of asking for its file info:
    pyarrow answers a file-info request for a missing key with a HEAD and then a LIST (it
    looks for a directory of that name), and S3 Standard bills a LIST as a PUT, 12.5 HEADs.
    Counted at the server."""
    uri = f"{s3_server.new_bucket()}/t"
    s3_server.write(f"{uri}/log/a.json", b"12345")
    location = locations.resolve_location(uri)
    with s3_server.request_log() as requests:
        assert location.present("log", "a.json")
        assert requests.take()[0] == {"HEAD": 1}
        assert not location.present("log", "b.json")
        assert requests.take()[0] == {"HEAD": 1}
        assert location.files("log", ["b.json"]) == [None]
        assert requests.take()[0] == {"HEAD": 1, "LIST": 1}


@pytest.mark.parametrize(
    ("path", "bare"),
    [
        ("hdfs://localhost:20500/test-warehouse/x.parquet", "/test-warehouse/x.parquet"),
        ("s3://bucket/w/x.parquet", "/w/x.parquet"),
        ("/test-warehouse/x.parquet", None),  # local already
        ("file:///w/x.parquet", None),
        ("hdfs://nn", None),  # no path
    ],
)
def test_a_path_without_its_file_system(path: str, bare: str | None) -> None:
    assert without_file_system(path) == bare


@pytest.mark.parametrize(
    ("uri", "encoded", "path"),
    [
        # what tables list and lakestats writes: not percent-encoded, to the end
        ("file:///w/a#b/x.parquet", False, "/w/a#b/x.parquet"),
        ("file:///w/a?b=1/x.parquet", False, "/w/a?b=1/x.parquet"),
        ("file:///w/a%20b/x.parquet", False, "/w/a%20b/x.parquet"),
        ("file://localhost/w/a#b", False, "/w/a#b"),
        ("file:/w/a#b", False, "/w/a#b"),
        # what a user writes: percent-decoded
        ("file:///w/a%23b", True, "/w/a#b"),
        ("file:///w/a%20b", True, "/w/a b"),
        ("/w/a#b?c%20d", True, "/w/a#b?c%20d"),  # a plain path is a path
    ],
)
def test_a_file_uri_is_a_path_to_its_end(uri: str, encoded: bool, path: str) -> None:
    """``#`` and ``?`` in a folder's name are characters, not a fragment or a query: read
    as those, ``file:///w/t#b`` was ``/w/t`` — another table."""
    assert locations.local_path(uri, percent_encoded=encoded) == Path(path)


def test_a_file_uri_on_another_host_is_remote() -> None:
    assert locations.local_path("file://nas/w/a#b") is None
