"""Finding a table's newest commit on every poll, with a big log: listing against asking
for names.

1. Delta: a full listing of ``_delta_log/`` against probing for the commits after the
   newest by name (``lakestats.formats.delta.log.probe_log``). A Delta table of
   ``--commits`` delta-rs appends (delta-rs' default checkpoint every 100 commits):
   ``refresh()`` when nothing changed and after one new commit, median of ``--repeat``,
   with listing forced (``probe_above_entries`` above the log's size: what every refresh
   did before) and with probing (the default past 1,000 files).
2. Iceberg by location (a Hadoop table: ``vN.metadata.json`` and ``version-hint.text``):
   ``current_metadata_file`` listing ``metadata/`` (which also holds every manifest list
   and manifest) against following the hint by name. ``--commits`` metadata files and two
   manifest files per commit; the files are stand-ins (only their names are looked at).
3. Paimon: ``refresh()`` listing ``snapshot/`` against asking for the oldest, newest and
   next snapshot by name (``MetaFiles.probe_snapshots``), as for Delta. A pypaimon table
   of one commit whose ``snapshot-1`` is copied to ``--commits`` snapshot files (stand-ins:
   a refresh looks at names, sizes and mtimes only; a new commit is one more copy).

All three locally and on an S3 server on 127.0.0.1 (moto, as the tests use: a real HTTP
server speaking the S3 API, with none of AWS's latency — on S3 itself every request costs
tens of milliseconds, so the request counts printed beside matter more than these times).
Requests are counted at the server (its request log: by HTTP method, a GET with
``list-type`` as a LIST), per refresh.

    .venv/bin/python tests/bench/log_refresh.py          # ~8 min
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: S3 server, pypaimon

from deltalake import write_deltalake

from lakestats.formats.delta.table import DeltaLakeTable
from lakestats.formats.iceberg.metadata_files import (
    current_metadata_file,
    list_metadata_files,
    metadata_version,
)
from lakestats.formats.paimon import PaimonTable
from lakestats.locations import TableLocation, resolve_location
from object_store import RequestLog, S3Server, export_environment
from paimon_tables import PaimonWarehouse


def build(path: Path, commits: int) -> None:
    if (path / "_delta_log").is_dir() and len(
        list((path / "_delta_log").glob("*.json"))
    ) >= commits:
        return  # built before (earlier runs add their timed commits: a few more)
    shutil.rmtree(path, ignore_errors=True)
    started = time.monotonic()
    for i in range(commits):
        data = pa.table({"id": pa.array([i], pa.int64()), "name": pa.array([f"n{i}"])})
        write_deltalake(str(path), data, mode="append")
        if (i + 1) % 500 == 0:
            print(f"  {i + 1}/{commits} commits ({time.monotonic() - started:.0f} s)", flush=True)


def main() -> int:
    with contextlib.ExitStack() as stack:
        return run(stack)


def run(stack: contextlib.ExitStack) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--work-dir", default=".bench/delta-log")
    args = parser.parse_args()
    work = Path(args.work_dir).resolve()
    local = work / f"t{args.commits}"
    print(f"building a Delta table of {args.commits} delta-rs commits in {local}", flush=True)
    build(local, args.commits)
    export_environment()
    server = S3Server()
    stack.callback(server.stop)
    uri = f"{server.new_bucket()}/t"
    server.sync(local, uri)
    extra = [0]

    def commit_local() -> None:
        extra[0] += 1
        data = pa.table({"id": pa.array([10**9 + extra[0]], pa.int64()), "name": ["x"]})
        write_deltalake(str(local), data, mode="append")

    uploaded = {path for path in local.rglob("*") if path.is_file()}

    def upload_new() -> None:
        # the new files only (a whole sync compares every file: minutes at this size)
        for path in sorted(set(local.rglob("*")) - uploaded):
            if path.is_file():
                key = f"{uri.removeprefix('s3://')}/{path.relative_to(local).as_posix()}"
                with server.filesystem.open_output_stream(key) as out:
                    out.write(path.read_bytes())
                uploaded.add(path)

    def commit_s3() -> None:
        commit_local()
        upload_new()

    requests = stack.enter_context(server.request_log())
    print(f"\n{_HEADER.format(files='log files', by_name='probing')}\n{_RULE}")
    for where, location, commit in (("local", str(local), commit_local), ("S3", uri, commit_s3)):
        upload_new()  # the local round's commits too, before the S3 tables open
        listing = DeltaLakeTable(resolve_location(location), probe_above_entries=10**9)
        probing = DeltaLakeTable(resolve_location(location))
        entries = probing._snapshot().entries
        for case, before in (("nothing new", None), ("one new commit", commit)):
            # a commit before each timed refresh goes to both tables in turn
            listed = _measure(listing.refresh, args.repeat, requests, before)
            probed = _measure(probing.refresh, args.repeat, requests, before)
            print(_row(where, entries, case, listed, probed), flush=True)
    iceberg_hint(work / f"iceberg{args.commits}", args.commits, args.repeat, server, requests)
    paimon_probe(work / f"paimon{args.commits}", args.commits, args.repeat, server, requests)
    return 0


def iceberg_hint(
    root: Path, commits: int, repeat: int, server: S3Server, requests: RequestLog
) -> None:
    metadata = root / "metadata"
    if not (metadata / f"v{commits}.metadata.json").exists():
        shutil.rmtree(root, ignore_errors=True)
        metadata.mkdir(parents=True)
        for v in range(1, commits + 1):
            (metadata / f"v{v}.metadata.json").write_text("{}")
            for kind in ("snap", "m0"):
                (metadata / f"{kind}-{v}-{v:08d}.avro").write_bytes(b"")
    (metadata / "version-hint.text").write_text(str(commits))
    uri = f"{server.new_bucket()}/iceberg"
    server.sync(root, uri)
    files = len(list(metadata.iterdir()))
    print(f"\n{_HEADER.format(files='metadata/ files', by_name='hint')}\n{_RULE}")
    for where, location in (("local", str(root)), ("S3", uri)):
        located = resolve_location(location)

        def hinted(loc: TableLocation = located) -> object:
            return current_metadata_file(loc)

        def listed(loc: TableLocation = located) -> object:
            return max((metadata_version(n) or 0, n) for n in list_metadata_files(loc))

        row = _row(
            where,
            files,
            "nothing new",
            _measure(listed, repeat, requests),
            _measure(hinted, repeat, requests),
        )
        print(row, flush=True)


def paimon_probe(
    root: Path, commits: int, repeat: int, server: S3Server, requests: RequestLog
) -> None:
    shutil.rmtree(root, ignore_errors=True)
    warehouse = PaimonWarehouse(root)
    warehouse.create("t", [("id", "long")])
    warehouse.write("t", {"id": [0]})
    local = warehouse.location("t")
    snapshots = local / "snapshot"
    first = (snapshots / "snapshot-1").read_bytes()
    for i in range(2, commits + 1):
        (snapshots / f"snapshot-{i}").write_bytes(first)
    (snapshots / "LATEST").write_text(str(commits))
    uri = f"{server.new_bucket()}/paimon"
    server.sync(local, uri)
    newest = [commits]

    def one_more() -> None:
        # to both copies, so that each one's snapshots stay consecutive
        newest[0] += 1
        name = f"snapshot-{newest[0]}"
        (snapshots / name).write_bytes(first)
        with server.filesystem.open_output_stream(
            f"{uri.removeprefix('s3://')}/snapshot/{name}"
        ) as out:
            out.write(first)

    files = len(list(snapshots.iterdir()))
    print(f"\n{_HEADER.format(files='snapshot/ files', by_name='probing')}\n{_RULE}")
    for where, location in (("local", str(local)), ("S3", uri)):
        listing = PaimonTable(resolve_location(location), probe_above_entries=10**9)
        probing = PaimonTable(resolve_location(location))
        for case, before in (("nothing new", None), ("one new commit", one_more)):
            listed = _measure(listing.refresh, repeat, requests, before)
            probed = _measure(probing.refresh, repeat, requests, before)
            print(_row(where, files, case, listed, probed), flush=True)


_HEADER = (
    "| where | {files} | refresh | listing | {by_name} | listing / {by_name} "
    "| S3 requests per refresh: listing / {by_name} |"
)
_RULE = "|---|---|---|---|---|---|---|"


def _measure(
    call: Callable[[], object],
    repeat: int,
    requests: RequestLog,
    before: Callable[[], None] | None = None,
) -> tuple[float, dict[str, float]]:
    """The median time of ``call`` and the S3 requests it made per call, by kind (the
    server's log; none for a local table)."""
    call()  # caught up with the commits made for the other table's rounds: not measured
    times = []
    counted: Counter[str] = Counter()
    for _ in range(repeat):
        if before is not None:
            before()
        requests.take()  # not the commit's uploads
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
        counted.update(requests.take()[0])
    return statistics.median(times), {kind: n / repeat for kind, n in counted.items()}


def _row(
    where: str,
    files: int,
    case: str,
    listed: tuple[float, dict[str, float]],
    probed: tuple[float, dict[str, float]],
) -> str:
    (t_list, n_list), (t_probe, n_probe) = listed, probed
    kinds = " / ".join(
        " + ".join(f"{n[k]:g} {k}" for k in sorted(n)) or "none" for n in (n_list, n_probe)
    )
    return (
        f"| {where} | {files:,} | {case} | {t_list * 1000:.1f} ms | {t_probe * 1000:.2f} ms "
        f"| {t_list / t_probe:.1f}× | {kinds if where == 'S3' else '–'} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
