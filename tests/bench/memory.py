"""Daemon memory against the table's row count (DESIGN §11: "daemon memory independent of
table row count").

For each table size, a fresh pyiceberg table (SQLite catalog) grows the way tables grow —
by files of a fixed size (``--file-rows`` rows each, one append per file) — to
``--sizes`` million rows. A real ``lakestatsd`` (the latency benchmark's: sketches on,
``local[2]``, a subprocess) then builds the table's stats from scratch and processes
``--commits`` small appends (``--commit-rows`` rows each, through the on-commit hook,
``POST …/commits?wait=true``), while a sampler reads ``/proc`` every 100 ms: the memory
(PSS, which counts a page shared by forked processes once in all) of the daemon's Python
process, of its Spark driver JVM, of the Python workers the JVM forks (the Arrow engine's
tasks), and of all of them together. Reported per phase: each one's peak (the sampled
maximum) and, for the daemon's Python process, its RSS once the phase is over.

What should not grow with rows: everything in the small-commit phase, and the daemon's
Python process throughout (it holds sketches and one row per data file of a job). What may:
the full build's JVM, up to its heap cap (``spark.driver.memory``, 1 GiB by default), and
nothing else. A Python worker holds one batch of one data file at a time
(``arrow_sketch/column_stream.py``), whatever the file's size: ``--files 4`` grows the table
by bigger files instead of more. Last, one file of the largest table is sketched alone in a
fresh process per batch size (what one task does), its peak memory above the process's
base and its time printed: the measurement behind the batch size. And one primary-key
bucket (``--key-merge-sizes`` million rows in four sorted runs, Paimon's columns) is merged
as one key-merge task does, in a fresh process, at once and in shares (the default): peak
memory above the base, time, and the dead rows (which must be the same). And the deletion
vectors of 100 files of a million rows, 30 % deleted, are read on the driver into the SQL
job's positions table and into the Arrow engine's ``DeadRows``: peak and what is held.
And one equality-delete task (``--equality-sizes`` million delete rows against a data file
of 4 million, and Flink's upserts: a delete file per checkpoint applying to every older
data file) is looked up at once and in shares, and with ``--before DIR`` by the engine of
that earlier checkout: peak, time, and the dead rows (which must be the same).

    .venv/bin/python tests/bench/memory.py [--sizes 1,4,16] [--file-rows 250000 | --files 4]
    .venv/bin/python tests/bench/memory.py --probes-only [--key-merge-sizes 1,4,16]
        [--equality-sizes 1,4,16] [--before DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency import (  # the latency benchmark's daemon and config
    CATALOG,
    COMMIT_TIMEOUT_S,
    SCHEMA,
    TABLE,
    Daemon,
    config_text,
    machine,
)

try:
    from lakestats.arrow_sketch.column_stream import MAX_BATCH_ROWS, MIN_BATCH_ROWS
    from lakestats.testing import IcebergWarehouse
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats ({exc}): run `make install` first") from exc

SAMPLE_S = 0.1
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def rows_batch(start: int, n: int) -> pa.Table:
    """``n`` rows of the latency benchmark's schema, ids from ``start`` (numpy: millions of
    rows in a second)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    names = pa.array([f"customer-{k}" for k in range(997)], pa.string())
    days = (np.datetime64("2024-01-01") + (ids % 366)).astype("datetime64[D]")
    return pa.table(
        {
            "id": ids,
            "name": names.take(pa.array(ids % 997)),
            "price": np.round((ids * 7919 % 100_000) / 100, 2),
            "day": pa.array(days, pa.date32()),
            "qty": (ids % 50).astype(np.int32),
        },
        schema=SCHEMA,
    )


# -- /proc sampling -------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _rss_mib(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / MIB
    except (OSError, IndexError, ValueError):
        return 0.0


def _pss_mib(pid: int) -> float:
    """Proportional set size: a page shared by n processes counts 1/n in each, so the sum
    over Spark's forked Python workers (which share their parent's pages) is what they
    really take; their RSS would count the shared pages once per worker."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0.0


def _kind(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    return "jvm" if "java" in cmdline.split(" ", 1)[0] else "workers"


@dataclass
class Peaks:
    daemon: float = 0.0
    jvm: float = 0.0
    workers: float = 0.0
    total: float = 0.0
    worker_processes: int = 0
    samples: int = 0

    def observe(self, daemon: float, jvm: float, workers: float, worker_processes: int) -> None:
        self.worker_processes = max(self.worker_processes, worker_processes)
        self.daemon = max(self.daemon, daemon)
        self.jvm = max(self.jvm, jvm)
        self.workers = max(self.workers, workers)
        self.total = max(self.total, daemon + jvm + workers)
        self.samples += 1


class Sampler:
    """RSS of a process tree every ``SAMPLE_S``: the root (the daemon's Python), the JVM it
    starts, everything below the JVM (Spark's Python worker daemon and its forked workers)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def phase(self) -> Peaks:
        """The peaks since the last call; starts a new phase."""
        with self._lock:
            done, self.peaks = self.peaks, Peaks()
        return done

    def _loop(self) -> None:
        while not self._stop.is_set():
            tree = _children()
            jvm = workers = 0.0
            count = 0
            stack = list(tree.get(self.root, []))
            while stack:
                pid = stack.pop()
                stack.extend(tree.get(pid, []))
                if _kind(pid) == "jvm":
                    jvm += _pss_mib(pid)
                else:
                    workers += _pss_mib(pid)
                    count += 1
            with self._lock:
                self.peaks.observe(_pss_mib(self.root), jvm, workers, count)
            time.sleep(SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# -- one size -------------------------------------------------------------------------------


@dataclass
class SizeResult:
    rows: int
    files: int
    build_s: float
    commit_p50_s: float
    build: Peaks
    commits: Peaks
    daemon_after_build: float
    daemon_after_commits: float
    notes: list[str] = field(default_factory=list)


def measure(size_rows: int, args: argparse.Namespace, work: Path) -> SizeResult:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    wh = IcebergWarehouse(work / "wh", catalog_name=CATALOG)
    wh.create_table(TABLE, SCHEMA)
    if args.files:
        files, file_rows = args.files, max(1, size_rows // args.files)
    else:
        files, file_rows = max(1, size_rows // args.file_rows), args.file_rows
    written = time.perf_counter()
    last = 0
    for i in range(files):
        last = wh.append(TABLE, rows_batch(i * file_rows, file_rows))
    print(
        f"  {files * file_rows:,} rows in {files} files written in "
        f"{time.perf_counter() - written:.1f} s",
        flush=True,
    )
    config = work / "lakestatsd.toml"
    config.write_text(config_text(wh, work / "state", sketches=True, watch=False, debounce_s=None))
    started = time.perf_counter()  # the daemon starts on the table at once: start + build
    daemon = Daemon(config, work / "lakestatsd.log")
    sampler = Sampler(daemon.proc.pid)
    try:
        daemon.start()
        daemon.request("POST", f"/v1/tables/{TABLE}/commits", timeout_s=10)
        daemon.wait_for(
            "the full build", lambda: daemon.stats_snapshot() == last, args.build_timeout_s
        )
        build_s = time.perf_counter() - started
        build = sampler.phase()
        after_build = _rss_mib(daemon.proc.pid)
        latencies = []
        base = files * file_rows
        for c in range(args.commits):
            snapshot = wh.append(TABLE, rows_batch(base + c * args.commit_rows, args.commit_rows))
            t0 = time.perf_counter()
            status, _ = daemon.request(
                "POST", f"/v1/tables/{TABLE}/commits?wait=true", timeout_s=COMMIT_TIMEOUT_S + 5
            )
            if status != 200 or daemon.stats_snapshot() != snapshot:
                raise RuntimeError(f"commit {c}: POST answered {status}; see {daemon.log}")
            latencies.append(time.perf_counter() - t0)
        commits = sampler.phase()
        after_commits = _rss_mib(daemon.proc.pid)
    finally:
        sampler.stop()
        code = daemon.stop()
    result = SizeResult(
        rows=files * file_rows,
        files=files,
        build_s=build_s,
        commit_p50_s=sorted(latencies)[len(latencies) // 2],
        build=build,
        commits=commits,
        daemon_after_build=after_build,
        daemon_after_commits=after_commits,
    )
    if code != 0:
        result.notes.append(f"daemon exit {code}")
    return result


# -- one file's sketching against the batch size ---------------------------------------------

# what each probe (a ``python -c`` script) runs first: its peak memory, from a reset
_MEASURE = """
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
def start_measuring():
    base = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak (VmHWM) starts again from now: imports are not counted
    return base
def peak_mib(base):
    return (status("VmHWM") - base) / 1024
"""

_PROBE = (
    _MEASURE
    + """
import sys, time
from dataclasses import replace
from lakestats.arrow_sketch.engine import arrow_job
from lakestats.arrow_sketch.file_sketch import sketch_file
from lakestats.model import Column, SketchSettings
from lakestats.sketches.spec import type_spec
path, batch = sys.argv[1], int(sys.argv[2])
names = [("id", "long"), ("name", "string"), ("price", "double"), ("day", "date"), ("qty", "int")]
columns = [(Column(i + 1, n, t), type_spec(t), True) for i, (n, t) in enumerate(names)]
settings = SketchSettings(kll_k=1481, frequent_items=256, value_samples=True)  # the defaults
job = arrow_job(columns, settings, "name")
base = start_measuring()
started = time.perf_counter()
_, rows = sketch_file(path, replace(job, batch_rows=batch), None)
seconds = time.perf_counter() - started
print(rows, peak_mib(base), seconds)
"""
)


def batch_probe(path: Path, sizes: Sequence[int]) -> list[tuple[int, int, float, float]]:
    """``(batch rows, rows, MiB above the process's base, seconds)`` of ``sketch_file`` on
    ``path`` (what one Arrow-engine task does for one file), each in a fresh process."""
    out = []
    for size in sizes:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path), str(size)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        rows, mib, seconds = done.stdout.split()
        out.append((size, int(rows), float(mib), float(seconds)))
    return out


# -- one primary-key bucket's merge against its rows ------------------------------------------

_KEY_MERGE_PROBE = (
    _MEASURE
    + """
import sys, time
from lakestats.arrow_sketch import key_winners
from lakestats.arrow_sketch.file_sketch import ArrowColumn
from lakestats.sketches.spec import type_spec
paths = sys.argv[2:]
shares = int(sys.argv[1]) or None
def column(field_id, name, type_str):
    return ArrowColumn(field_id, (name,), type_spec(type_str), False)
group = key_winners.WinnerGroup(
    inputs=tuple(paths), requested=tuple(paths),
    keys=(column(1, "id", "long"), column(2, "name", "string")),
    order=(column(99, "_SEQUENCE_NUMBER", "long"),), kind=column(98, "_VALUE_KIND", "int"),
    first_row=False, ignore_delete=False, remove_record_on_delete=False,
)
base = start_measuring()
started = time.perf_counter()
dead = key_winners.dead_rows(group, shares=shares)
seconds = time.perf_counter() - started
peak = peak_mib(base)
digest = sum(int(d.to_positions().sum()) for d in dead.values())
sent = sum(d.nbytes for d in dead.values())  # what the task sends the driver
print(sum(len(d) for d in dead.values()), digest, peak, seconds, sent)
"""
)


def write_bucket(folder: Path, rows: int, files: int = 4) -> list[Path]:
    """A primary-key bucket of ``rows`` rows in ``files`` sorted runs, as Paimon writes
    them (each file sorted by key; ``_SEQUENCE_NUMBER``, ``_VALUE_KIND`` int8): keys
    (``id`` long, ``name`` string) drawn from ``rows / 2``, so most have two versions and
    some one or three, 1 % of rows deletes. Written once per size, reused."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"run-{i}.parquet" for i in range(files)]
    if all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(rows)
    per = rows // files

    def field(name: str, kind: pa.DataType, field_id: int) -> pa.Field:
        return pa.field(name, kind, metadata={b"PARQUET:field_id": str(field_id).encode()})

    schema = pa.schema(
        [
            field("id", pa.int64(), 1),
            field("name", pa.string(), 2),
            field("_SEQUENCE_NUMBER", pa.int64(), 99),
            field("_VALUE_KIND", pa.int8(), 98),
            field("amount", pa.float64(), 3),
        ]
    )
    for i, path in enumerate(paths):
        ids = np.sort(rng.integers(0, rows // 2, per))
        names = pa.array([f"customer-{k % 100_000:06d}" for k in ids.tolist()])
        kinds = np.where(rng.random(per) < 0.01, 3, 0).astype(np.int8)
        table = pa.Table.from_arrays(
            [
                pa.array(ids),
                names,
                pa.array(np.arange(per, dtype=np.int64) + i * per),
                pa.array(kinds),
                pa.array(rng.random(per)),
            ],
            schema=schema,
        )
        pq.write_table(table, path, row_group_size=1 << 20)
    return paths


def key_merge_probe(paths: Sequence[Path], shares: int) -> tuple[int, int, float, float, int]:
    """``(dead rows, checksum of their positions, MiB above the base, seconds, bytes of
    the DeadRows sent to the driver)`` of one bucket's merge (``key_winners.dead_rows``:
    what one key-merge task does) in a fresh process; ``shares``: 1 merges at once (as
    before shares), 0 as the default."""
    done = subprocess.run(
        [sys.executable, "-c", _KEY_MERGE_PROBE, str(shares), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    dead, digest, mib, seconds, sent = done.stdout.split()
    return int(dead), int(digest), float(mib), float(seconds), int(sent)


# -- deletion vectors' dead rows on the driver ---------------------------------------------

_DEAD_ROWS_PROBE = (
    _MEASURE
    + """
import sys, time
import numpy as np
from pyroaring import BitMap64
from lakestats.deletes.plan import plan_live_read
from lakestats.deletes.positions import dead_rows_by_file, positions_table
from lakestats.locations import LocationMap
from lakestats.model import DeletionVector
how, files, rows, share = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
rng = np.random.default_rng(1)
deletes = {}
for i in range(files):
    bitmap = BitMap64(np.flatnonzero(rng.random(rows) < share).tolist())
    deletes[f"file:///t/{i}.parquet"] = (DeletionVector(bitmap.serialize(), len(bitmap)),)
plan = plan_live_read(deletes)
base = start_measuring()
started = time.perf_counter()
if how == "table":  # the SQL job's table of every (file, position)
    held = positions_table(plan, LocationMap()).nbytes
else:  # the Arrow engine's: each file's DeadRows, one vector at a time
    held = sum(d.nbytes for d in dead_rows_by_file(plan, LocationMap())[0])
seconds = time.perf_counter() - started
print(peak_mib(base), held, seconds)
"""
)


def dead_rows_report(files: int = 100, rows: int = 1_000_000, share: float = 0.3) -> None:
    """What the driver holds for a job's deletion vectors (``files`` files of ``rows`` rows,
    ``share`` of each deleted): the SQL job's positions table, and the Arrow engine's
    ``DeadRows`` per file, each built in a fresh process."""
    print(
        f"\nDeletion vectors on the driver: {files} files of {rows:,} rows, "
        f"{share:.0%} of each deleted ({int(files * rows * share):,} rows):"
    )
    print("| form | peak above the base | held until the sketch job ends | seconds |")
    print("|---|---|---|---|")
    forms = (("table", "positions table (the SQL job's)"), ("rows", "`DeadRows` per file"))
    for how, label in forms:
        done = subprocess.run(
            [sys.executable, "-c", _DEAD_ROWS_PROBE, how, str(files), str(rows), str(share)],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        )
        mib, held, seconds = done.stdout.split()
        held_mib = int(held) / MIB
        print(f"| {label} | {float(mib):.0f} MiB | {held_mib:.1f} MiB | {float(seconds):.2f} |")


# -- one equality-delete task against its delete set ----------------------------------------

_EQUALITY_PROBE = (
    _MEASURE
    + """
import json, sys, time
from lakestats.arrow_sketch import equality
from lakestats.arrow_sketch.equality import EqualityTask
from lakestats.arrow_sketch.file_sketch import ArrowColumn
from lakestats.sketches.spec import type_spec
budget, plan = int(sys.argv[1]), json.loads(sys.argv[2])
def column(field_id, name, type_str):
    return ArrowColumn(field_id, (name,), type_spec(type_str), False)
columns = (column(1, "id", "long"), column(2, "name", "string"))
tasks = [EqualityTask(path, ((columns, tuple(deletes)),)) for path, deletes in plan]
base = start_measuring()
started = time.perf_counter()
if budget < 0:  # an earlier checkout's engine (on PYTHONPATH): no budget to pass
    found = list(equality.equality_partition("field_id", iter(tasks)))
else:
    budget = budget or equality.SHARE_BYTES
    found = list(equality.equality_partition("field_id", iter(tasks), budget))
seconds = time.perf_counter() - started
peak = peak_mib(base)
assert all(status == "ok" for _, status, _ in found), found
digest = sum(int(d.to_positions().sum()) for _, _, d in found)
print(sum(len(d) for _, _, d in found), digest, peak, seconds)
"""
)

EQ_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("name", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    ]
)


def _write_keys(path: Path, ids: np.ndarray) -> None:
    """Rows of ``ids`` with their names (the keys of the equality-delete probes)."""
    import pyarrow.parquet as pq

    names = pa.array([f"customer-{k % 100_000:06d}" for k in ids.tolist()])
    pq.write_table(pa.Table.from_arrays([pa.array(ids), names], schema=EQ_SCHEMA), path)


def equality_plans(work: Path, sizes: Sequence[float]) -> list[tuple[str, list[object]]]:
    """The probes' tasks, each ``(label, [(data file, [its delete files])])``, written once:
    one data file of 4 M rows (even keys) against one delete file per size (millions of
    rows, distinct keys of twice as many: each data row dies with odds 1/2), and Flink's
    upserts — 20 checkpoints, each a data file of 200 k rows and a delete file of 200 k
    keys that applies to every earlier data file."""
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(17)
    data = work / "data.parquet"
    if not data.exists():
        _write_keys(data, rng.permutation(4_000_000).astype(np.int64) * 2)
    plans: list[tuple[str, list[object]]] = []
    for size in sizes:
        rows = int(size * 1_000_000)
        deletes = work / f"deletes-{rows}.parquet"
        if not deletes.exists():
            keys = rng.choice(max(8_000_000, 2 * rows), rows, replace=False)
            _write_keys(deletes, keys.astype(np.int64))
        plans.append(
            (f"1 data file of 4,000,000 rows, {rows:,} delete rows", [(str(data), [str(deletes)])])
        )
    checkpoints = 20
    flink = work / "flink"
    flink.mkdir(exist_ok=True)
    for i in range(checkpoints):
        if not (flink / f"deletes-{i}.parquet").exists():
            _write_keys(flink / f"data-{i}.parquet", rng.integers(0, 2_000_000, 200_000))
            _write_keys(flink / f"deletes-{i}.parquet", rng.integers(0, 2_000_000, 200_000))
    upserts = [
        (
            str(flink / f"data-{i}.parquet"),
            [str(flink / f"deletes-{j}.parquet") for j in range(i + 1, checkpoints)],
        )
        for i in range(checkpoints - 1)
    ]
    plans.append(
        (
            f"Flink upserts: {checkpoints - 1} data files of 200,000 rows, "
            "each file killed by every later delete file",
            upserts,
        )
    )
    return plans


def equality_probe(
    plan: list[object], budget: int, before: Path | None = None
) -> tuple[int, int, float, float]:
    """``(dead rows, checksum, MiB above the base, seconds)`` of one equality task
    (``equality_partition``) in a fresh process; ``budget`` its share budget (0: the
    default), or with ``before`` the engine of that earlier checkout."""
    import json

    env = dict(os.environ)
    if before is not None:
        env["PYTHONPATH"] = str(before / "core")
        budget = -1
    done = subprocess.run(
        [sys.executable, "-c", _EQUALITY_PROBE, str(budget), json.dumps(plan)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    dead, digest, mib, seconds = done.stdout.split()
    return int(dead), int(digest), float(mib), float(seconds)


def equality_report(sizes: Sequence[float], work: Path, before: Path | None) -> None:
    print("\nOne equality-delete task against its delete set:")
    columns = "| task | dead rows | looked up at once | in shares (the default) |"
    print(columns[:-1] + ("| the checkout's engine |" if before else ""))
    print("|---|---|---|---|" + ("---|" if before else ""))
    for label, plan in equality_plans(work, sizes):
        dead, digest, whole_mib, whole_s = equality_probe(plan, 1 << 50)
        dead2, digest2, mib, seconds = equality_probe(plan, 0)
        if (dead, digest) != (dead2, digest2):
            raise SystemExit(f"{label}: the shares found other dead rows than the lookup")
        row = f"| {label} | {dead:,} | {whole_mib:.0f} MiB, {whole_s:.1f} s "
        row += f"| {mib:.0f} MiB, {seconds:.1f} s |"
        if before:
            dead3, digest3, old_mib, old_s = equality_probe(plan, -1, before)
            if (dead3, digest3) != (dead, digest):
                raise SystemExit(f"{label}: the module before found other dead rows")
            row += f" {old_mib:.0f} MiB, {old_s:.1f} s |"
        print(row, flush=True)


# -- report ---------------------------------------------------------------------------------


def report(results: Sequence[SizeResult]) -> None:
    print("\nPeak PSS (MiB) from the daemon's start until the table's stats are built:")
    print(
        "| rows | files | start + build | daemon (Python) | Spark driver JVM "
        "| Python workers (processes) | all |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        b = r.build
        print(
            f"| {r.rows:,} | {r.files} | {r.build_s:.1f} s | {b.daemon:.0f} | {b.jvm:.0f} | "
            f"{b.workers:.0f} ({b.worker_processes}) | {b.total:.0f} |"
        )
    print("\nPeak PSS (MiB) over the small commits after it:")
    print(
        "| rows | commit p50 | daemon (Python) | Spark driver JVM "
        "| Python workers (processes) | all |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        c = r.commits
        print(
            f"| {r.rows:,} | {r.commit_p50_s:.2f} s | {c.daemon:.0f} | {c.jvm:.0f} | "
            f"{c.workers:.0f} ({c.worker_processes}) | {c.total:.0f} |"
        )
    print("\nDaemon (Python) RSS after each phase (MiB):")
    for r in results:
        print(
            f"  {r.rows:>12,} rows: after the build {r.daemon_after_build:.0f}, "
            f"after the commits {r.daemon_after_commits:.0f}"
            + (f"  ({'; '.join(r.notes)})" if r.notes else "")
        )
    small, big = results[0], results[-1]
    if big is not small:
        growth = big.rows / small.rows
        print(f"\n{big.rows / small.rows:.0f}× the rows ({small.rows:,} → {big.rows:,}):")
        for name, a, b in (
            ("small commits, all processes", small.commits.total, big.commits.total),
            ("small commits, daemon (Python)", small.commits.daemon, big.commits.daemon),
            ("full build, daemon (Python)", small.build.daemon, big.build.daemon),
            ("full build, Python workers", small.build.workers, big.build.workers),
            ("full build, Spark driver JVM", small.build.jvm, big.build.jvm),
        ):
            print(f"  {name:<32} {a:7.0f} → {b:7.0f} MiB  ({b / a:.2f}×; rows {growth:.0f}×)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1,4,16",
        type=lambda s: [float(x) for x in s.split(",") if x.strip()],
        help="table sizes in millions of rows (default 1,4,16)",
    )
    parser.add_argument("--file-rows", type=int, default=250_000, help="rows per data file")
    parser.add_argument(
        "--files",
        type=int,
        default=0,
        help="a fixed number of files instead, each of size / files rows (the table grows by "
        "bigger files: what a Python worker holds grows with them)",
    )
    parser.add_argument("--commits", type=int, default=10, help="small commits after the build")
    parser.add_argument("--commit-rows", type=int, default=1_000)
    parser.add_argument("--build-timeout-s", type=float, default=1800.0)
    parser.add_argument("--work-dir", type=Path, default=Path(".bench/memory"))
    parser.add_argument(
        "--key-merge-sizes",
        default="1,4,16",
        type=lambda s: [float(x) for x in s.split(",") if x.strip()],
        help="primary-key bucket sizes in millions of rows for the key-merge probe "
        '(default 1,4,16; "" for neither probe)',
    )
    parser.add_argument(
        "--equality-sizes",
        default="1,4,16",
        type=lambda s: [float(x) for x in s.split(",") if x.strip()],
        help="equality-delete set sizes in millions of rows (default 1,4,16)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of an earlier commit whose equality-delete task to probe beside "
        "(e.g. `git worktree add /tmp/before 9f85060`)",
    )
    parser.add_argument(
        "--probes-only",
        action="store_true",
        help="only the key-merge, deletion-vector and equality-delete probes (~3 min)",
    )
    args = parser.parse_args(argv)
    if not args.sizes or any(s <= 0 for s in args.sizes):
        parser.error("--sizes: positive numbers of millions of rows, e.g. 1,4,16")
    if args.file_rows < 1 or args.files < 0 or args.commits < 1 or args.commit_rows < 1:
        parser.error("--file-rows, --commits and --commit-rows must be at least 1")
    return args


def key_merge_report(sizes: Sequence[float], work: Path) -> None:
    print("\nOne primary-key bucket's merge (a key-merge task) against its rows:")
    print(
        "| bucket rows | dead rows | merged at once | in shares (the default) "
        "| sent to the driver: positions → DeadRows |"
    )
    print("|---|---|---|---|---|")
    for size in sizes:
        rows = int(size * 1_000_000)
        paths = write_bucket(work / f"{rows}", rows)
        dead, digest, whole_mib, whole_s, _ = key_merge_probe(paths, 1)
        dead2, digest2, mib, seconds, sent = key_merge_probe(paths, 0)
        if (dead, digest) != (dead2, digest2):
            raise SystemExit(f"{rows:,} rows: the shares found other dead rows than the merge")
        print(
            f"| {rows:,} | {dead:,} | {whole_mib:.0f} MiB, {whole_s:.1f} s "
            f"| {mib:.0f} MiB, {seconds:.1f} s | {dead * 8 / MIB:.1f} → {sent / MIB:.1f} MiB |",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"memory.py {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {machine()}", flush=True)
    if args.probes_only:
        key_merge_report(args.key_merge_sizes, args.work_dir.resolve() / "key-merge")
        dead_rows_report()
        equality_report(args.equality_sizes, args.work_dir.resolve() / "equality", args.before)
        return 0
    results = []
    for size in args.sizes:
        rows = int(size * 1_000_000)
        print(f"table of {rows:,} rows:", flush=True)
        results.append(measure(rows, args, args.work_dir.resolve() / f"{rows}"))
    report(results)
    largest = max(
        (args.work_dir.resolve() / f"{int(args.sizes[-1] * 1_000_000)}" / "wh").rglob(
            "data/*.parquet"
        ),
        key=lambda p: p.stat().st_size,
    )
    sizes = [1 << 30, 1 << 20, 1 << 19, 1 << 18, MAX_BATCH_ROWS, MIN_BATCH_ROWS]
    print(f"\nOne file's sketch (the defaults) against the batch size: {largest.name}")
    print("| batch rows | rows | peak above the base | seconds |")
    print("|---|---|---|---|")
    for size, rows, mib, seconds in batch_probe(largest, sizes):
        label = "the whole file" if size >= rows else f"{size:,}"
        print(f"| {label} | {rows:,} | {mib:.0f} MiB | {seconds:.2f} |")
    if args.key_merge_sizes:
        key_merge_report(args.key_merge_sizes, args.work_dir.resolve() / "key-merge")
        dead_rows_report()
        equality_report(args.equality_sizes, args.work_dir.resolve() / "equality", args.before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
