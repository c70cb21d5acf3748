"""Rows spilled to local disk by a hash of their key, for work too big for a task's memory.

A task whose rows of one kind would not fit in memory at once (a primary-key bucket's merge,
an equality-delete set) splits them by ``arrays.key_hashes`` of their key columns into
shares, as a grace hash join does: every row of a key lands in the same share, so each share
can be worked on alone and exactly. The shares are Arrow IPC files under the first of
``SPARK_LOCAL_DIRS`` (Spark's block-manager folder, deleted when Spark stops, where PySpark
spills too; the system's temporary folder outside Spark), in a folder removed when the work
ends, failed or not. A folder that cannot be made or written leaves the work to the SQL job
(``Declined``): Spark's shuffle spills by its own means.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakestats.arrow_sketch.arrays import key_hashes
from lakestats.arrow_sketch.file_sketch import Declined

# what a task's share of such work may hold at once: a 16-million-row bucket's key merge
# peaked 2.2 GiB at once, 0.26 GiB in shares of this size, in the same time (smaller sorts
# are faster; docs/benchmarks.md, "A primary-key bucket's merge against its rows")
SHARE_BYTES = 128 << 20
# each share has a spill file open while the rows are written: well under a worker's
# descriptor limit; work past this many shares has bigger shares
MAX_SHARES = 256


def share_count(estimate: int, share_bytes: int) -> int:
    """Shares that keep each one's work within ``share_bytes`` when the whole would take
    ``estimate`` bytes; 1: all at once."""
    return min(MAX_SHARES, max(1, -(-estimate // max(1, share_bytes))))


@contextmanager
def spill_folder(what: str) -> Iterator[Path]:
    """A fresh folder for ``what``'s shares (named in its prefix and in a ``Declined``),
    removed on leaving."""
    local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
    prefix = f"lakestats-{what.replace(' ', '-')}-"
    try:
        folder = tempfile.TemporaryDirectory(prefix=prefix, dir=local)
    except OSError as exc:
        raise Declined(f"no room for the {what}'s spill: {exc}") from None
    with folder as path:
        yield Path(path)


def spill_by_key(
    tables: Iterable[pa.Table],
    keys: Sequence[str],
    shares: int,
    folder: Path,
    name: str,
) -> list[Path | None]:
    """Every row of ``tables`` (one schema) written to the share of its ``keys`` columns'
    hash, ``<folder>/<name>-<share>.arrow``; each share's file (``None``: no row). A disk
    that fails to take them raises ``Declined`` (the rows' own errors pass through: reading
    them is the caller's, and its read failures are not ``OSError``)."""
    writers: list[pa.ipc.RecordBatchFileWriter | None] = [None] * shares
    try:
        try:
            for table in tables:
                share = key_hashes([table.column(k) for k in keys]) % np.uint64(shares)
                order = np.argsort(share, kind="stable")
                bounds = np.searchsorted(share[order], np.arange(shares + 1))
                ordered = table.take(pa.array(order))
                for i in range(shares):
                    if bounds[i] == bounds[i + 1]:
                        continue
                    writer = writers[i]
                    if writer is None:
                        target = str(folder / f"{name}-{i}.arrow")
                        writer = writers[i] = pa.ipc.new_file(target, ordered.schema)
                    writer.write_table(ordered.slice(bounds[i], bounds[i + 1] - bounds[i]))
        finally:
            for writer in writers:
                if writer is not None:
                    writer.close()
    except OSError as exc:  # a full or failing disk, writing or closing
        raise Declined(f"cannot spill to {folder}: {exc}") from None
    return [None if w is None else folder / f"{name}-{i}.arrow" for i, w in enumerate(writers)]


def read_share(path: Path) -> pa.Table:
    """A share's rows, the file removed (its pages stay mapped while the table lives)."""
    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
    path.unlink()
    return table


def share_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """A share's rows a written batch at a time, the file removed after the last. Read, not
    mapped: a mapping's pages stay resident as the reader walks the file."""
    with pa.OSFile(str(path)) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)
    path.unlink()
