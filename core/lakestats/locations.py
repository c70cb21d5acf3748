"""The one parser of "a local path or a URI": table locations, data file paths, state dirs.

Formats, the store, the sketch pipeline and the daemon all meet paths written by someone
else (a manifest's ``file:///x/y.parquet``, a config's ``./warehouse``, Spark's
``file:/x/y.parquet``, an ``s3://`` location). Each question about such a path is answered
here once:

* ``is_local`` — on this machine's file system (plain path, ``file:`` URI, Windows drive)?
* ``local_path`` — the local ``Path`` it names, or ``None`` for a remote URI;
* ``resolve_location`` — a ``TableLocation``: the pyarrow file system to list it with, the
  path inside that file system, and the URI to hand to format libraries;
* ``filesystem_from_uri`` — pyarrow's file system for a remote URI, with bounded retries;
* ``LocationMap`` — prefixes written in a table's metadata → where its files really are.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from lakestats.exceptions import TableNotFoundError, first_line

if TYPE_CHECKING:
    from pyarrow import fs as pafs

# pyarrow's GCS client retries a failing request for 15 minutes by default — also when no
# credentials can be found at all, so one table on gs:// without them held a daemon worker
# for a quarter of an hour per attempt. A minute still rides out transient errors.
GCS_RETRY_LIMIT_S = 60.0
# object stores the stats store can live on (``store/objectstore.py``), and the extra it needs
STORE_SCHEMES = ("s3",)
STORE_EXTRA = "s3"


def filesystem_from_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """``pyarrow.fs.FileSystem.from_uri``, with GCS retries bounded by ``GCS_RETRY_LIMIT_S``
    (unless the URI sets ``retry_limit_seconds`` itself)."""
    scheme = urlsplit(uri).scheme.lower()
    if scheme in ("gs", "gcs") and "retry_limit_seconds=" not in uri:
        joiner = "&" if "?" in uri else "?"
        uri = f"{uri}{joiner}retry_limit_seconds={GCS_RETRY_LIMIT_S:g}"
    from pyarrow import fs as pafs  # noqa: PLC0415 - a config or a hook loads no pyarrow

    filesystem, path = pafs.FileSystem.from_uri(uri)
    return filesystem, str(path)


def _is_local_scheme(scheme: str) -> bool:
    return scheme in ("", "file") or len(scheme) == 1  # one letter: a Windows drive


def is_local(path: str | Path) -> bool:
    """Whether ``path`` names something on the local file system."""
    if isinstance(path, Path):
        return True
    return _is_local_scheme(urlsplit(path).scheme)


def local_path(path: str | Path, *, percent_encoded: bool = True) -> Path | None:
    """The local ``Path`` of a plain path or ``file:`` URI; ``None`` for a remote URI.

    A ``file://host/...`` URI with a host other than ``localhost`` is remote. URIs a user or
    a config wrote are percent-decoded; data file paths listed by table formats are not
    (``percent_encoded=False``): Hadoop reads ``file:///a%20b.parquet`` as the file named
    ``a%20b.parquet``.
    """
    if isinstance(path, Path):
        return path
    scheme = urlsplit(path).scheme
    if not _is_local_scheme(scheme):
        return None
    if scheme != "file":
        return Path(path)
    host, local = _file_uri_parts(path)
    if host not in ("", "localhost"):
        return None
    return Path(unquote(local) if percent_encoded else local)


def _file_uri_parts(uri: str) -> tuple[str, str]:
    """(host, path) of a ``file:`` URI, the path taken as written to its end.

    Not ``urlsplit``'s: it ends a path at ``?`` or ``#``, but the ``file:`` URIs tables
    list, and lakestats' own, are not percent-encoded — ``file:///w/a#b/x.parquet`` is a file
    under the folder ``a#b``, not ``/w/a`` with a fragment (which put a table's stats in
    another table's folder).
    """
    rest = uri[len("file:") :]
    if not rest.startswith("//"):
        return "", rest
    host, slash, tail = rest[2:].partition("/")
    return host, slash + tail


def location_key(location: str) -> str:
    """One spelling of a table location for comparing: a ``file:`` URI as its plain path,
    no trailing slash."""
    local = local_path(location)
    return str(local) if local is not None else location.rstrip("/")


def same_location(a: str, b: str) -> bool:
    """Whether two spellings of a table location name one place (``location_key``)."""
    return location_key(a) == location_key(b)


def without_file_system(path: str) -> str | None:
    """The path of a remote URI without its scheme and authority (``hdfs://nn:8020/w/x``
    → ``/w/x``); ``None`` for a local path or one that is not absolute.

    Hadoop writers name one file either way — a path without a file system is on the
    default one: Impala's manifests say ``/test-warehouse/x``, the rows of its
    position-delete files ``hdfs://localhost:20500/test-warehouse/x``.
    """
    parts = urlsplit(path)
    if _is_local_scheme(parts.scheme) or not parts.path.startswith("/"):
        return None
    return parts.path


def path_spellings(path: str) -> tuple[str, ...]:
    """``path`` as written, then without its file system where it has one
    (``without_file_system``): the names a data file may go by in a delete file's rows."""
    bare = without_file_system(path)
    return (path,) if bare is None else (path, bare)


def looks_like_location(text: str) -> bool:
    """Whether a user's argument is meant as a path or URI rather than a table name."""
    return "/" in text or "://" in text or text.startswith(".") or Path(text).exists()


@dataclass(frozen=True)
class TableLocation:
    """A table directory on some filesystem: what to list with, and how to name its files."""

    filesystem: pafs.FileSystem
    root: str  # path within ``filesystem``, no trailing slash
    uri: str  # the form to hand to format libraries (plain local path or a URI)

    def join(self, *parts: str) -> str:
        return "/".join((self.uri.rstrip("/"), *parts))

    def fs_path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    @property
    def local_root(self) -> Path | None:
        """The directory on the local file system, ``None`` for remote locations."""
        from pyarrow import fs as pafs  # noqa: PLC0415 - see filesystem_from_uri

        return Path(self.root) if isinstance(self.filesystem, pafs.LocalFileSystem) else None

    def file_type(self, *parts: str) -> pafs.FileType:
        """What is at ``parts`` under the root (``NotFound`` when unreadable or absent)."""
        from pyarrow import fs as pafs  # noqa: PLC0415 - see filesystem_from_uri

        try:
            return self.filesystem.get_file_info(self.fs_path(*parts)).type
        except OSError:
            return pafs.FileType.NotFound

    def files(self, folder: str, names: Sequence[str]) -> list[pafs.FileInfo | None]:
        """Each file ``folder/<name>`` that exists, ``None`` for one that does not: asked for
        by name (a file-info request each, a HEAD on object storage), no listing. ``OSError``
        when they cannot be asked for."""
        from pyarrow import fs as pafs  # noqa: PLC0415 - see filesystem_from_uri

        infos = self.filesystem.get_file_info([self.fs_path(folder, name) for name in names])
        return [info if info.type == pafs.FileType.File else None for info in infos]

    def present(self, folder: str, name: str) -> bool:
        """Whether the file ``folder/<name>`` exists, asked by opening it: on object
        storage a missing key costs one HEAD this way, where a file-info request for it adds
        a LIST (pyarrow looks for a directory of that name). ``OSError`` when it cannot be
        asked."""
        try:
            self.filesystem.open_input_file(self.fs_path(folder, name)).close()
        except FileNotFoundError:
            return False
        return True

    def is_dir(self, *parts: str) -> bool:
        from pyarrow import fs as pafs  # noqa: PLC0415 - see filesystem_from_uri

        return bool(self.file_type(*parts) == pafs.FileType.Directory)


def resolve_location(path: str) -> TableLocation:
    """A local path, ``file://`` URI or filesystem URI as a ``TableLocation``.

    Raises ``TableNotFoundError`` when the scheme has no filesystem.
    """
    from pyarrow import fs as pafs  # noqa: PLC0415 - see filesystem_from_uri

    local = local_path(path)
    if local is not None:
        root = str(local.expanduser().resolve())
        return TableLocation(pafs.LocalFileSystem(), root, root)
    try:
        filesystem, root = filesystem_from_uri(path)
    except (ValueError, OSError) as exc:
        raise TableNotFoundError(f"{path}: cannot open this location ({first_line(exc)})") from exc
    return TableLocation(filesystem, root.rstrip("/"), path.rstrip("/"))


@dataclass(frozen=True)
class LocationMap:
    """Path prefixes written in a table's metadata → where the files really are.

    For tables copied between clusters, restored from a backup, or written on another
    machine: the metadata still names ``hdfs://nn:8020/warehouse/...`` while the files are
    under ``/mnt/copy/...``. Mapping is by plain string prefix, the longest matching prefix
    wins, and a path no prefix matches is left as written. Paths stored in the stats keep
    their spelling in the metadata (the mapping only decides where bytes are read), so
    changing the mapping never changes which files the stats describe.
    """

    prefixes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, str] | None) -> LocationMap:
        items = dict(mapping or {})
        for source, target in items.items():
            if not source or not target:
                raise ValueError(f"location mapping {source!r} → {target!r}: empty prefix")
        # longest first, so /warehouse/db/ wins over /warehouse/
        ordered = sorted(items.items(), key=lambda item: len(item[0]), reverse=True)
        return cls(tuple(ordered))

    def __bool__(self) -> bool:
        return bool(self.prefixes)

    def as_dict(self) -> dict[str, str]:
        return dict(self.prefixes)

    def apply(self, path: str) -> str:
        """Where ``path`` (as written in the metadata) really is."""
        for source, target in self.prefixes:
            if path.startswith(source):
                return target + path[len(source) :]
        return path


def parse_location_mapping(text: str) -> tuple[str, str]:
    """``FROM=TO`` (a CLI ``--map-location`` value) → ``(FROM, TO)``; ``ValueError`` if not."""
    source, sep, target = text.partition("=")
    if not sep or not source.strip() or not target.strip():
        raise ValueError(f"location mapping {text!r} is not FROM=TO (two path prefixes)")
    return source.strip(), target.strip()


def check_state_dir(uri: str) -> None:
    """``ValueError`` saying why ``uri`` (a remote URI) cannot hold the stats store (here,
    not in ``lakestats.store``: loading a config checks it and must stay light)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in STORE_SCHEMES:
        raise ValueError(
            f"the stats store cannot live on {scheme}:// ({uri}): it needs an exclusive create, "
            "which lakestats has on a file system (a path, file://, NFS) and on s3:// "
            "(conditional writes)"
        )
    if not parts.netloc:
        raise ValueError(f"{uri} names no bucket")
    if parts.query or parts.fragment:
        raise ValueError(
            f"{uri}: a state_dir URI takes no options; configure the S3 client through the "
            "AWS environment (AWS_ENDPOINT_URL, AWS_REGION, credentials)"
        )
    if not _has_boto3():
        raise ValueError(
            f"a state_dir on s3:// needs boto3: install the `lakestats[{STORE_EXTRA}]` extra"
        )


def _has_boto3() -> bool:
    try:
        return importlib.util.find_spec("boto3") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False
