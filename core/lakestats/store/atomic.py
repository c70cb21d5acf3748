"""The store's only filesystem primitives: durable writes, exclusive creates, plain reads.

Everything else in ``lakestats.store`` goes through these functions. A path is a local
``Path`` (a plain path or a ``file://`` URI) or an ``s3://`` URI string, whose primitives are
``objectstore``'s; ``root`` and ``join`` build either kind.

Durability: a write is complete only once the file's data *and* the directory entry that
names it have been fsynced; otherwise a power loss can leave a version file whose name
survived but whose blocks did not, or a fully written file that no directory lists.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pyarrow as pa

from lakestats import locations
from lakestats.store import objectstore

PathLike = str | Path
# what ``root`` and ``join`` return: a local Path, or an object store URI
StorePath = Path | str

TEMP_MARKER = ".tmp-"


def root(state_dir: PathLike) -> StorePath:
    """The store's root: a ``Path`` for a local state dir, the URI for an object store."""
    local = locations.local_path(state_dir)
    if local is not None:
        return local
    text = str(state_dir)
    if not objectstore.is_object_store(text):
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"unsupported state_dir scheme {scheme!r} in {text!r}: the stats store lives on a "
            "file system (a path or a file:// URI) or on s3://"
        )
    return text.rstrip("/")


def join(base: StorePath, *parts: str) -> StorePath:
    return base.joinpath(*parts) if isinstance(base, Path) else objectstore.join(base, *parts)


def local_path(path: PathLike) -> Path | None:
    """The local ``Path`` of a store path; ``None`` for an object store URI."""
    return locations.local_path(root(path))


def temp_name(final_name: str) -> str:
    """Hidden, unique, recognisable: readers skip it, cleanup can find it."""
    return f".{final_name}{TEMP_MARKER}{uuid.uuid4().hex}"


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TEMP_MARKER in name


def _local_dir(directory: PathLike) -> Path:
    local = local_path(directory)
    if local is None:
        raise ValueError(f"{directory}: not a local directory")
    return local


def fsync_dir(directory: PathLike) -> None:
    fd = os.open(_local_dir(directory), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(directory: PathLike) -> None:
    """Make deletions in ``directory`` durable: fsync a local one (if it exists); an object
    store's deletes are durable when they return."""
    local = local_path(directory)
    if local is not None and local.is_dir():
        fsync_dir(local)


def ensure_dir(directory: PathLike) -> Path:
    """Create ``directory`` and missing parents, each made durable in its own parent."""
    target = _local_dir(directory)
    missing: list[Path] = []
    probe = target
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent writer created it first
            created.mkdir()
        fsync_dir(created.parent)
    return target


def _write_temp(directory: Path, final_name: str, data: bytes) -> Path:
    tmp = directory / temp_name(final_name)
    # O_EXCL: a uuid collision or a stale link must never be written through.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    return tmp


def atomic_write(path: PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, whole.

    Creates the parent directory if needed. Returns only once the content is durable.
    """
    target = local_path(path)
    if target is None:
        objectstore.write(str(path), data)  # a PUT is atomic and durable
        return
    directory = ensure_dir(target.parent)
    tmp = _write_temp(directory, target.name, data)
    try:
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(directory)


def create_exclusive(path: PathLike, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; ``False`` if it already did.

    The content is complete and durable under a temporary name before ``link`` publishes
    it: ``link`` is atomic and, unlike ``rename``, fails when the target exists, so exactly
    one of several racing writers wins and nobody ever sees a partial file. On S3 a
    conditional PUT does the same (``objectstore.create_exclusive``).
    """
    target = local_path(path)
    if target is None:
        return objectstore.create_exclusive(str(path), data)
    directory = ensure_dir(target.parent)
    tmp = _write_temp(directory, target.name, data)
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
        fsync_dir(directory)
    return True


def read_bytes(path: PathLike) -> bytes:
    """The whole file; ``OSError`` (e.g. ``FileNotFoundError``) when it cannot be read."""
    local = local_path(path)
    return objectstore.read_bytes(str(path)) if local is None else local.read_bytes()


def open_input(path: PathLike) -> pa.NativeFile:
    """A random-access pyarrow file, so Parquet readers fetch only the columns they need."""
    local = local_path(path)
    return objectstore.open_input(str(path)) if local is None else pa.OSFile(str(local), "r")


def exists(path: PathLike) -> bool:
    local = local_path(path)
    return objectstore.exists(str(path)) if local is None else local.is_file()


def size(path: PathLike) -> int | None:
    """The file's size in bytes (a stat, on S3 a HEAD); ``None`` if it is not there."""
    local = local_path(path)
    if local is None:
        return objectstore.size(str(path))
    try:
        return local.stat().st_size if local.is_file() else None
    except FileNotFoundError:
        return None


def mtime_ms(path: PathLike) -> int:
    """When the file was last written, in ms; ``FileNotFoundError`` if it is not there."""
    local = local_path(path)
    if local is None:
        return objectstore.mtime_ms(str(path))
    return local.stat().st_mtime_ns // 1_000_000


def list_dir(directory: PathLike) -> list[str]:
    """Names of the regular files in ``directory`` (sorted); ``[]`` if it does not exist."""
    target = local_path(directory)
    if target is None:
        return objectstore.list_dir(str(directory))
    try:
        entries = list(os.scandir(target))
    except FileNotFoundError:
        return []
    return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))


def list_subdirs(directory: PathLike) -> list[str]:
    """Names of the folders in ``directory`` (sorted); ``[]`` if it does not exist. A
    symbolic link is not one of them: what it points to lies outside ``directory``, and
    deleting a folder's files must never follow it there."""
    target = local_path(directory)
    if target is None:
        return objectstore.list_subdirs(str(directory))
    if not target.is_dir():
        return []
    return sorted(p.name for p in target.iterdir() if p.is_dir() and not p.is_symlink())


def list_tree(directory: PathLike) -> list[str]:
    """Every regular file below ``directory``, as sorted POSIX paths relative to it."""
    root = local_path(directory)
    if root is None:
        return [rel for rel, _, _ in objectstore.stat_tree(str(directory))]
    if not root.is_dir():
        return []
    found: list[str] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        found.extend((base / name).relative_to(root).as_posix() for name in filenames)
    return sorted(found)


def stat_tree(directory: PathLike) -> list[tuple[str, int, int]]:
    """``(relative POSIX path, mtime in ms, size)`` of every regular file below ``directory``.

    A file that vanishes while the tree is walked (a concurrent cleanup) is left out.
    """
    root = local_path(directory)
    if root is None:
        return objectstore.stat_tree(str(directory))
    found: list[tuple[str, int, int]] = []
    for rel in list_tree(root):
        try:
            st = (root / rel).stat()
        except FileNotFoundError:
            continue
        found.append((rel, st.st_mtime_ns // 1_000_000, st.st_size))
    return found


def remove(path: PathLike) -> bool:
    """Delete a file; ``False`` if it was already gone (deleting is idempotent)."""
    local = local_path(path)
    if local is None:
        return objectstore.remove(str(path))
    try:
        local.unlink()
    except FileNotFoundError:
        return False
    return True


def is_plain_name(name: str) -> bool:
    """Whether ``name`` is one folder name under a root: not empty, no separator or NUL,
    not hidden (so neither ``.`` nor ``..``)."""
    return bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")


def remove_empty_dirs(directory: PathLike) -> None:
    """Remove ``directory`` and the folders below it that are empty (deepest first); on
    an object store, their folder markers. A folder something was written into meanwhile
    stays, with its files."""
    local = local_path(directory)
    if local is None:
        objectstore.remove_folder_markers(str(directory))
        return
    if not local.is_dir():
        return
    for folder in [*sorted((p for p in local.rglob("*") if p.is_dir()), reverse=True), local]:
        with contextlib.suppress(OSError):  # not empty
            folder.rmdir()
    sync_dir(local.parent)
