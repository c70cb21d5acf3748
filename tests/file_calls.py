"""A local file system that records what pyarrow asks of it, for tests that count a
poll's requests without an object store.

pyarrow calls fsspec's local file system once per file-info request (``info``) or listing
(``ls``) and twice per open (``isfile``, then ``open``): on S3 these are a HEAD, a LIST, and
a HEAD then the GET. Each call is recorded as ``"<kind> <file name>"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem
from pyarrow import fs as pafs


def counting_filesystem(calls: list[str]) -> pafs.FileSystem:
    """The local file system as pyarrow sees it, each call appended to ``calls``."""

    class Counting(LocalFileSystem):  # type: ignore[misc]
        def info(self, path: str, **kwargs: Any) -> Any:
            calls.append(f"info {Path(path).name}")
            return super().info(path, **kwargs)

        def isfile(self, path: str) -> bool:
            calls.append(f"isfile {Path(path).name}")
            return bool(super().isfile(path))

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
            calls.append(f"ls {Path(path).name}")
            return super().ls(path, detail=detail, **kwargs)

        def _open(self, path: str, *args: Any, **kwargs: Any) -> Any:
            calls.append(f"open {Path(path).name}")
            return super()._open(path, *args, **kwargs)

    return pafs.PyFileSystem(pafs.FSSpecHandler(Counting()))
