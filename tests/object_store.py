"""An S3 server on 127.0.0.1 for tests of tables on object storage.

AWS S3 cannot exist here; moto's server stands in for it: a real HTTP server speaking the
S3 API (ListObjectsV2, ranged GETs, multipart uploads), which pyarrow, pyiceberg and
delta-rs reach through their own S3 clients exactly as they would reach S3, MinIO or Ceph.

Every client finds it through the standard AWS environment (``AWS_ENDPOINT_URL`` …),
which ``export_environment`` sets when ``tests/conftest.py`` is imported — before the
session's Spark starts, so the Python workers the Arrow engine runs in inherit it too.
The server itself starts on first use (``S3Server.start``). Each test takes a bucket of
its own (``new_bucket``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs

REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def export_environment() -> str:
    """Point every S3 client of this process and its children at the test server's port
    (chosen now, bound on first use); the endpoint. Keeps settings already exported."""
    endpoint = f"http://127.0.0.1:{_free_port()}"
    for key, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "lakestats-test",
        "AWS_SECRET_ACCESS_KEY": "lakestats-test",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",  # delta-rs refuses plain HTTP endpoints otherwise
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata lookups from the SDKs
    }.items():
        os.environ.setdefault(key, value)
    return os.environ["AWS_ENDPOINT_URL"]


_REQUEST = re.compile(r'"(?P<method>[A-Z]+) (?P<target>\S+) HTTP/')
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours some lines


class RequestLog(logging.Handler):
    """The server's requests, from werkzeug's one log line per request: by kind (the HTTP
    method; a GET with ``list-type`` is a LIST), as S3 bills them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: Counter[str] = Counter()
        self.lines: list[str] = []
        self._taking = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        match = _REQUEST.search(_COLOUR.sub("", record.getMessage()))
        if match is None:
            return
        kind = match["method"]
        if kind == "GET" and "list-type=" in match["target"]:
            kind = "LIST"
        with self._taking:
            self.counts[kind] += 1
            self.lines.append(f"{kind} {match['target']}")

    def take(self) -> tuple[Counter[str], list[str]]:
        """The requests since the last take: counts by kind, and each request's line."""
        with self._taking:
            taken = self.counts, self.lines
            self.counts, self.lines = Counter(), []
        return taken


class S3Server:
    """moto's S3 server, in this process, on the exported port."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # slow to import: only when a test needs it

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request else
        self.endpoint = os.environ["AWS_ENDPOINT_URL"]
        port = int(self.endpoint.rsplit(":", 1)[1])
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        self.filesystem = pafs.S3FileSystem(
            endpoint_override=self.endpoint,
            scheme="http",
            region=REGION,
            allow_bucket_creation=True,
        )
        # what a pyiceberg catalog's configuration says for this server
        self.iceberg_io = {
            "s3.endpoint": self.endpoint,
            "s3.region": REGION,
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        }

    def stop(self) -> None:
        self._server.stop()

    @contextlib.contextmanager
    def request_log(self) -> Iterator[RequestLog]:
        """This server's requests while the block runs (werkzeug's request log, counted
        instead of printed; put back as it was after)."""
        log = RequestLog()
        werkzeug = logging.getLogger("werkzeug")
        saved = (list(werkzeug.handlers), werkzeug.propagate, werkzeug.level)
        werkzeug.handlers[:] = [log]
        werkzeug.propagate = False
        werkzeug.setLevel(logging.INFO)
        try:
            yield log
        finally:
            werkzeug.handlers[:], werkzeug.propagate = saved[0], saved[1]
            werkzeug.setLevel(saved[2])

    def new_bucket(self) -> str:
        """A fresh, empty bucket; its ``s3://`` URI (no trailing slash)."""
        name = f"t-{uuid.uuid4().hex[:20]}"
        self.filesystem.create_dir(name)
        return f"s3://{name}"

    def sync(self, local: Path, uri: str) -> None:
        """Make ``uri`` hold exactly the files under ``local``: copy new and changed ones,
        delete the ones gone (what a writer on S3 would have left there)."""
        root = uri.removeprefix("s3://").rstrip("/")
        wanted: dict[str, Path] = {
            f"{root}/{path.relative_to(local).as_posix()}": path
            for path in local.rglob("*")
            if path.is_file()
        }
        present = {
            info.path: info.size
            for info in self.filesystem.get_file_info(
                pafs.FileSelector(root, recursive=True, allow_not_found=True)
            )
            if info.type == pafs.FileType.File
        }
        for key in present.keys() - wanted.keys():
            self.filesystem.delete_file(key)
        for key, path in wanted.items():
            data = path.read_bytes()
            if present.get(key) == len(data) and self.read(key) == data:
                continue
            with self.filesystem.open_output_stream(key) as out:
                out.write(data)

    def read(self, key_or_uri: str) -> bytes:
        with self.filesystem.open_input_stream(key_or_uri.removeprefix("s3://")) as source:
            return bytes(source.read())

    def write(self, key_or_uri: str, data: bytes) -> None:
        with self.filesystem.open_output_stream(key_or_uri.removeprefix("s3://")) as out:
            out.write(data)

    def delete(self, key_or_uri: str) -> None:
        """Delete an object if it is there."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_file(key_or_uri.removeprefix("s3://"))

    def keys(self, uri: str) -> list[str]:
        """Every object under ``uri``, as ``s3://`` URIs, sorted."""
        root = uri.removeprefix("s3://").rstrip("/")
        selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
        return sorted(
            f"s3://{info.path}"
            for info in self.filesystem.get_file_info(selector)
            if info.type == pafs.FileType.File
        )
