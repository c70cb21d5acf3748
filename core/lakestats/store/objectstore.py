"""The store's primitives on S3: what ``atomic`` does with files, done with objects.

An object appears whole or not at all once its PUT returns, so a write needs no temporary
name and no fsync, and a reader never sees a partial file. What a plain PUT lacks is the
exclusive create that decides between two writers of one table's next state version
(``statelog``). S3 has it as a conditional write (``If-None-Match: *``: AWS since 2024-08,
MinIO, Ceph RGW), which pyarrow cannot send, so PUTs go through boto3 (the ``s3`` extra;
plain ones too: one request where pyarrow's output stream makes three); reads, listings
and deletes use pyarrow's S3 client. Both are configured like every other S3 client here,
by the standard AWS environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``, credentials).
Other object stores (gs://, abfs://) have no conditional create pyarrow or a dependency of
ours can send, so a state dir there is refused at config load
(``locations.check_state_dir``) rather than left without its arbiter.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from lakestats.locations import STORE_SCHEMES, filesystem_from_uri

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _storage_errors(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """pyarrow reports every S3 failure (no such bucket, access denied, no route) as a bare
    ``OSError``; give it ``EIO`` so the daemon files it as storage trouble, not a bug, and
    keep ``FileNotFoundError`` (a missing file is the store's own business)."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return func(*args, **kwargs)
        except (FileNotFoundError, PermissionError):
            raise
        except OSError as exc:
            if exc.errno is not None:
                raise
            raise OSError(errno.EIO, str(exc)) from exc

    return wrapper


def is_object_store(uri: str) -> bool:
    return urlsplit(uri).scheme.lower() in STORE_SCHEMES


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def _split(uri: str) -> tuple[str, str]:
    """(bucket, key) of an ``s3://bucket/key`` URI."""
    parts = urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


@functools.lru_cache(maxsize=16)
def _filesystem(bucket: str) -> pafs.FileSystem:
    # from_uri resolves the bucket's region (a request): once per bucket, not per file
    filesystem, _ = filesystem_from_uri(f"s3://{bucket}")
    return filesystem


def _fs_path(uri: str) -> tuple[pafs.FileSystem, str]:
    bucket, key = _split(uri)
    return _filesystem(bucket), f"{bucket}/{key}".rstrip("/")


@functools.lru_cache(maxsize=16)
def _client(region: str | None) -> Any:
    import boto3  # noqa: PLC0415 - the s3 extra; check_state_dir said so at config load
    from botocore.config import Config  # noqa: PLC0415

    return boto3.client(
        "s3", region_name=region or None, config=Config(retries={"mode": "standard"})
    )


def _request(uri: str, operation: str, *, conditional: bool = False, **params: Any) -> bool:
    """One boto3 request on ``uri``'s object; ``False`` when a ``conditional`` one's
    condition failed. Errors as the store's: ``PermissionError`` or ``OSError(EIO)``."""
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    bucket, key = _split(uri)
    client = _client(getattr(_filesystem(bucket), "region", None))
    try:
        getattr(client, operation)(Bucket=bucket, Key=key, **params)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if conditional and code in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        message = f"{code}: " + str(exc.response.get("Error", {}).get("Message", "") or exc)
        if code == "AccessDenied":
            raise PermissionError(errno.EACCES, f"{uri}: {message}") from exc
        raise OSError(errno.EIO, f"{uri}: {message}") from exc
    except BotoCoreError as exc:  # no route, no credentials, a timeout
        raise OSError(errno.EIO, f"{uri}: {exc}") from exc
    return True


def _put(uri: str, data: bytes, **conditions: str) -> bool:
    """One PutObject (pyarrow's output streams take three requests, a multipart upload,
    for even a small file); ``False`` when a condition failed."""
    return _request(uri, "put_object", conditional=bool(conditions), Body=data, **conditions)


@_storage_errors
def write(uri: str, data: bytes) -> None:
    _put(uri, data)


@_storage_errors
def create_exclusive(uri: str, data: bytes) -> bool:
    """PUT ``data`` unless the object exists; ``False`` when it did.

    Also ``False`` when another conditional write of the key was in flight (S3's 409: one
    of them wins) and when a retry of our own PUT, whose first attempt landed but whose
    answer was lost, finds our object: either way the caller re-reads the log and redoes
    its work on top of what it finds, which processing makes idempotent.
    """
    return _put(uri, data, IfNoneMatch="*")


@_storage_errors
def read_bytes(uri: str) -> bytes:
    filesystem, path = _fs_path(uri)
    with filesystem.open_input_stream(path) as source:
        return bytes(source.read())


@_storage_errors
def open_input(uri: str) -> pa.NativeFile:
    filesystem, path = _fs_path(uri)
    return filesystem.open_input_file(path)


def _info(uri: str) -> pafs.FileInfo:
    filesystem, path = _fs_path(uri)
    return filesystem.get_file_info(path)


@_storage_errors
def exists(uri: str) -> bool:
    return bool(_info(uri).type == pafs.FileType.File)


@_storage_errors
def size(uri: str) -> int | None:
    """One HEAD: opened, not looked up (a file-info request for a missing key adds a LIST,
    pyarrow looking for a directory of that name)."""
    filesystem, path = _fs_path(uri)
    try:
        with filesystem.open_input_file(path) as source:
            return int(source.size())
    except FileNotFoundError:
        return None


@_storage_errors
def mtime_ms(uri: str) -> int:
    info = _info(uri)
    if info.type != pafs.FileType.File or info.mtime_ns is None:
        raise FileNotFoundError(uri)
    return int(info.mtime_ns // 1_000_000)


def _below(uri: str, *, recursive: bool) -> list[pafs.FileInfo]:
    filesystem, path = _fs_path(uri)
    selector = pafs.FileSelector(path, recursive=recursive, allow_not_found=True)
    return list(filesystem.get_file_info(selector))


@_storage_errors
def check_reachable(uri: str) -> None:
    """``OSError`` unless ``uri``'s bucket exists and these credentials may see it (one
    request): what readiness can learn without writing."""
    bucket, _ = _split(uri)
    if _filesystem(bucket).get_file_info(bucket).type != pafs.FileType.Directory:
        raise FileNotFoundError(errno.ENOENT, f"bucket {bucket!r} does not exist", uri)


@_storage_errors
def list_dir(uri: str) -> list[str]:
    return sorted(
        info.base_name for info in _below(uri, recursive=False) if info.type == pafs.FileType.File
    )


@_storage_errors
def list_subdirs(uri: str) -> list[str]:
    return sorted(
        info.base_name
        for info in _below(uri, recursive=False)
        if info.type == pafs.FileType.Directory
    )


@_storage_errors
def stat_tree(uri: str) -> list[tuple[str, int, int]]:
    """``(relative path, mtime in ms, size)`` of every object below ``uri``."""
    _, root = _fs_path(uri)
    found = [
        (info.path[len(root) + 1 :], int((info.mtime_ns or 0) // 1_000_000), int(info.size or 0))
        for info in _below(uri, recursive=True)
        if info.type == pafs.FileType.File
    ]
    return sorted(found)


@_storage_errors
def remove(uri: str) -> bool:
    """A HEAD, then a DeleteObject; ``False`` when there was nothing to delete.

    Not pyarrow's ``delete_file``: after deleting it makes sure the parent "directory"
    still exists, with a LIST and, when the folder is now empty, a PUT of an empty
    ``folder/`` marker object — markers that then list as folders of their own (a table
    folder deleted whole would still be listed) and two or three requests more per file.
    """
    if size(uri) is None:
        return False
    return _request(uri, "delete_object")


@_storage_errors
def remove_folder_markers(uri: str) -> None:
    """Delete the empty ``folder/`` marker objects under ``uri`` and its own: pyarrow's
    ``delete_file`` (used before ``remove``) left one after each delete, and a marker
    lists as a folder after its files are gone. A DeleteObject of a key that is not
    there succeeds, so implicit folders cost a request and change nothing."""
    _, root = _fs_path(uri)
    folders = [
        info.path for info in _below(uri, recursive=True) if info.type == pafs.FileType.Directory
    ]
    for path in [*sorted(folders, reverse=True), root]:
        _request(f"s3://{path}/", "delete_object")
