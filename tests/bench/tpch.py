"""TPC-H ``lineitem`` as an Iceberg table: generation (tpchgen-cli) and loading (pyiceberg).

The cache under ``<work-dir>/sf<SF>-c<COMMITS>/`` holds:

* ``parts/lineitem/lineitem.<i>.parquet``: ``commits + 1`` parts of lineitem at the scale
  factor. Parts 1..commits are loaded, one pyiceberg ``append`` commit each; the last part
  (1/commits of the loaded rows, i.e. 1 % at 100 commits) is the fresh append the
  incremental update is measured on.
* ``catalog.db`` + ``warehouse/``: the loaded table (SQLite ``SqlCatalog``), exactly the
  ``commits`` snapshots, never modified by a measured run (see ``RunTable``).
* ``READY``: written last; a cache without it is incomplete and rebuilt.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

NAMESPACE = "bench"
TABLE = "lineitem"
IDENTIFIER = f"{NAMESPACE}.{TABLE}"
_READY = "READY"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Dataset:
    """A loaded, cached lineitem table and the extra part kept back for the append."""

    root: Path
    scale_factor: float
    commits: int
    metadata_location: str  # the table after exactly ``commits`` appends
    append_part: Path
    generate_seconds: float | None  # None: taken from the cache
    load_seconds: float | None

    @property
    def loaded_from_cache(self) -> bool:
        return self.load_seconds is None


def cache_dir(work_dir: Path, scale_factor: float, commits: int) -> Path:
    return work_dir / f"sf{scale_factor:g}-c{commits}"


def tpchgen_version() -> str:
    out = subprocess.run(
        [_tpchgen(), "--version"], check=True, capture_output=True, text=True
    ).stdout
    return out.strip()


def prepare(
    work_dir: Path, scale_factor: float, commits: int, *, reuse: bool, progress: Progress
) -> Dataset:
    """The cached dataset if ``reuse`` and complete, else a freshly generated and loaded one."""
    root = cache_dir(work_dir, scale_factor, commits)
    ready = root / _READY
    if reuse and ready.is_file():
        info = json.loads(ready.read_text())
        progress(f"reusing generated data and table in {root}")
        return Dataset(
            root=root,
            scale_factor=scale_factor,
            commits=commits,
            metadata_location=info["metadata_location"],
            append_part=_part_path(root, commits + 1),
            generate_seconds=None,
            load_seconds=None,
        )
    started = time.perf_counter()
    reused_parts = reuse and _parts_complete(root, commits + 1)
    if reused_parts:
        # generated parts without a loaded table (e.g. linked from another checkout, whose
        # table's absolute paths name that checkout): load them, do not generate again
        progress(f"reusing the generated parts in {root / 'parts'}")
        for stale in (root / "catalog.db", root / "warehouse"):
            if stale.is_dir():
                shutil.rmtree(stale)
            elif stale.exists():
                stale.unlink()
    else:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        progress(f"generating lineitem SF {scale_factor:g} in {commits + 1} parts (tpchgen-cli)")
        generate(root / "parts", scale_factor, commits + 1)
    generated = time.perf_counter()

    progress(f"loading {commits} parts as {commits} pyiceberg append commits")
    metadata_location = load(root, commits, progress)
    loaded = time.perf_counter()
    ready.write_text(json.dumps({"metadata_location": metadata_location}))
    return Dataset(
        root=root,
        scale_factor=scale_factor,
        commits=commits,
        metadata_location=metadata_location,
        append_part=_part_path(root, commits + 1),
        generate_seconds=None if reused_parts else generated - started,
        load_seconds=loaded - generated,
    )


def generate(out_dir: Path, scale_factor: float, parts: int) -> None:
    subprocess.run(
        [
            _tpchgen(),
            "parquet",
            f"--scale-factor={scale_factor:g}",
            "--tables=lineitem",
            f"--parts={parts}",
            f"--output-dir={out_dir}",
            "--quiet",
        ],
        check=True,
    )


def load(root: Path, commits: int, progress: Progress) -> str:
    """Create the table and append parts 1..commits, one commit each; its metadata file."""
    catalog = _catalog(root)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    first = read_part(_part_path(root, 1))
    table = catalog.create_table(IDENTIFIER, schema=first.schema)
    for i in range(1, commits + 1):
        data = first if i == 1 else read_part(_part_path(root, i))
        table.append(data)
        if i % 10 == 0 or i == commits:
            progress(f"  committed {i}/{commits}")
    return str(table.metadata_location)


def read_part(path: Path) -> pa.Table:
    """A generated part, with string views as plain strings (what pyiceberg writes)."""
    data = pq.read_table(path)
    fields = [
        pa.field(f.name, pa.string(), f.nullable) if pa.types.is_string_view(f.type) else f
        for f in data.schema
    ]
    # The generator's field ids (1..16) match the ids the table assigns; drop them anyway
    # so the table, not the file, decides.
    schema = pa.schema([f.remove_metadata() for f in fields])
    return data.cast(schema)


class RunTable:
    """The cached table, registered in a per-run catalog so the run can append to it.

    Appends write new data and metadata files into the cached table's directory (Iceberg
    paths are absolute); ``cleanup`` deletes every file the run added there, so the cache
    keeps exactly the loaded snapshots.
    """

    def __init__(self, dataset: Dataset, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.catalog_properties = {
            "type": "sql",
            "uri": f"sqlite:///{run_dir / 'catalog.db'}",
            "warehouse": (run_dir / "warehouse").as_uri(),
        }
        self.catalog = SqlCatalog("bench", **self.catalog_properties)
        self.catalog.create_namespace_if_not_exists(NAMESPACE)
        if self.catalog.table_exists(IDENTIFIER):
            self.catalog.drop_table(IDENTIFIER)  # a stale run catalog: registration is cheap
        table = self.catalog.register_table(IDENTIFIER, dataset.metadata_location)
        self.location = Path(local_path(table.metadata.location))
        self._before = set(_files_under(self.location))

    def table(self) -> Table:
        return self.catalog.load_table(IDENTIFIER)

    def live_files(self) -> list[str]:
        """Local paths of the current snapshot's data files."""
        return [local_path(task.file.file_path) for task in self.table().scan().plan_files()]

    def append(self, path: Path) -> None:
        self.table().append(read_part(path))

    def cleanup(self) -> None:
        for path in set(_files_under(self.location)) - self._before:
            path.unlink()


def local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _catalog(root: Path) -> SqlCatalog:
    return SqlCatalog(
        "bench_load",
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=(root / "warehouse").as_uri(),
    )


def _parts_complete(root: Path, parts: int) -> bool:
    """Every part is there with a readable Parquet footer (an interrupted run leaves none)."""
    try:
        for part in range(1, parts + 1):
            pq.read_metadata(_part_path(root, part))
    except (OSError, pa.ArrowException):
        return False
    return True


def _part_path(root: Path, part: int) -> Path:
    return root / "parts" / "lineitem" / f"lineitem.{part}.parquet"


def _tpchgen() -> str:
    """The tpchgen-cli next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    if beside.is_file():
        return str(beside)
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise SystemExit("tpchgen-cli not found: pip install -e '.[bench]' (make bench does)")
    return found
