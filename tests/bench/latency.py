"""Commit-to-fresh-stats latency of ``lakestatsd`` (issue 4, DESIGN §11: p50 ≤ 2 s).

A real daemon (a subprocess, warm SparkSession) keeps a fresh table's stats up to date
while this script commits small appends to it, one at a time, and measures how long each
commit takes to become visible over HTTP. ``--format`` picks the table: an Iceberg table
written by pyiceberg (the default), a Delta table written by delta-rs or a Paimon table
written by pypaimon (``latency_tables.py``). Two paths:

* ``watch``: watch events only. t0 = ``append`` returned; t1 = the first
  ``GET /v1/tables/{name}/stats`` (polled every ``--poll-ms``) whose ``snapshot_id`` is the
  new snapshot;
* ``hook``: the on-commit hook. Right after ``append``, ``POST …/commits?wait=true``;
  t1 = it returned 200 (then one GET confirms the snapshot). Watching stays on, as in a
  real deployment (``--no-watch`` turns it off and skips the ``watch`` path).

The daemon's stdout (JSON lines) is captured to ``<work-dir>/lakestatsd.log``; its
``commit_processed`` and ``table_run_done`` events give a per-phase breakdown. Then, with
the daemon stopped, the same Spark settings are timed in this process (``--direct``): one
``sketch_files`` call on one small file, a one-file Parquet count, an empty job, and the
table metadata refresh, to separate Spark time from daemon overhead.

    .venv/bin/python tests/bench/latency.py [--format delta] [--commits 50] [--rows 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

try:
    from latency_tables import FORMATS, LatencyTable, latency_table, toml_str

    from lakestats.config import Config
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats ({exc}): run `make bench` first") from exc

REPO = Path(__file__).resolve().parents[2]
TABLE = "latency"
SPARK_MASTER = "local[2]"
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("price", pa.float64()),
        ("day", pa.date32()),
        ("qty", pa.int32()),
    ]
)
COMMIT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 120.0
SHUTDOWN_TIMEOUT_S = 20.0


@dataclass
class Sample:
    path: str
    snapshot_id: int
    t0_wall: float  # time.time() right after append returned
    latency_s: float
    writer_s: float  # how long the append itself took


@dataclass
class PathResult:
    name: str
    samples: list[Sample] = field(default_factory=list)
    note: str | None = None  # why the path stopped early, if it did


# -- data and config -----------------------------------------------------------------------


def batch(i: int, rows: int) -> pa.Table:
    base = i * rows
    ids = range(base, base + rows)
    return pa.table(
        {
            "id": list(ids),
            "name": [f"customer-{k % 997}" for k in ids],
            "price": [round((k * 7919 % 100_000) / 100, 2) for k in ids],
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=k % 366) for k in ids],
            "qty": [k % 50 for k in ids],
        },
        schema=SCHEMA,
    )


def config_text(
    table: LatencyTable,
    state_dir: Path,
    *,
    sketches: bool,
    watch: bool,
    debounce_s: float | None,
) -> str:
    spark_conf = "\n".join(f"{toml_str(k)} = {toml_str(v)}" for k, v in SPARK_CONF.items())
    debounce = "" if debounce_s is None else f"debounce_s = {debounce_s}"
    return f"""# written by tests/bench/latency.py
state_dir = {toml_str(str(state_dir))}

[http]
listen = "127.0.0.1:0"
wait_timeout_s = {COMMIT_TIMEOUT_S:g}

[spark]
master = {toml_str(SPARK_MASTER)}

[spark.conf]
{spark_conf}

[sketch]
enabled = {str(sketches).lower()}

[watch]
enabled = {str(watch).lower()}
{debounce}

[daemon]
shutdown_timeout_s = {SHUTDOWN_TIMEOUT_S:g}

{table.config_sections(TABLE)}"""


# -- the daemon ----------------------------------------------------------------------------


class Daemon:
    """``python -m lakestatsd --config FILE`` with stdout (JSON lines) captured to a file."""

    def __init__(self, config: Path, log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKESTATS_")}
        env.pop("NOTIFY_SOCKET", None)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO / "core"), str(REPO / "daemon"), env.get("PYTHONPATH", "")]
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakestatsd", "--config", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(config.parent),
        )
        self.port = 0

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and event.get("event") == name:
                out.append(event)
        return out

    def wait_for(self, what: str, check: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if self.proc.poll() is not None:
                raise RuntimeError(f"lakestatsd exited ({self.proc.returncode}); see {self.log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
            time.sleep(0.05)

    @property
    def log(self) -> str:
        return str(self.log_path)

    def start(self) -> None:
        self.wait_for("http_listening", lambda: bool(self.events("http_listening")), 60)
        self.port = int(self.events("http_listening")[0]["port"])

        def ready() -> bool:
            return self.request("GET", "/readyz")[0] == 200

        self.wait_for("/readyz 200 (Spark warm)", ready, START_TIMEOUT_S)

    def request(self, method: str, path: str, timeout_s: float = 10) -> tuple[int, Any]:
        url = f"http://127.0.0.1:{self.port}{path}"
        req = urllib.request.Request(url, data=b"" if method == "POST" else None, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, None
        except (urllib.error.URLError, ConnectionError):
            return 0, None

    def stats_snapshot(self) -> int | None:
        status, doc = self.request("GET", f"/v1/tables/{TABLE}/stats")
        return int(doc["snapshot_id"]) if status == 200 else None

    def stop(self) -> int:
        """SIGTERM and wait; killed (and -9 returned) if it does not exit in time."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    return self.proc.wait(SHUTDOWN_TIMEOUT_S + 10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
                    return -9
            return self.proc.returncode
        finally:
            self._log.close()


# -- the two paths -------------------------------------------------------------------------


def commit(table: LatencyTable, i: int, rows: int) -> tuple[int, float, float, float]:
    """Append batch ``i``: (snapshot id, t0 wall clock, t0 ``perf_counter``, seconds the
    append took), t0 taken the moment the writer returned."""
    started = time.perf_counter()
    table.write(batch(i, rows))
    t0, t0_wall = time.perf_counter(), time.time()
    return table.newest(), t0_wall, t0, t0 - started


def run_watch(
    daemon: Daemon, table: LatencyTable, first: int, args: argparse.Namespace, deadline: float
) -> PathResult:
    result = PathResult("watch")
    for i in range(first, first + args.commits):
        if time.monotonic() > deadline:
            result.note = f"time budget used up after {len(result.samples)} commits"
            break
        snapshot_id, t0_wall, t0, writer_s = commit(table, i, args.rows)
        give_up = t0 + COMMIT_TIMEOUT_S
        while daemon.stats_snapshot() != snapshot_id:
            if time.perf_counter() > give_up:
                result.note = f"snapshot {snapshot_id} not visible after {COMMIT_TIMEOUT_S:g}s"
                return result
            time.sleep(args.poll_ms / 1000)
        latency = time.perf_counter() - t0
        result.samples.append(Sample("watch", snapshot_id, t0_wall, latency, writer_s))
    return result


def run_hook(
    daemon: Daemon, table: LatencyTable, first: int, args: argparse.Namespace, deadline: float
) -> PathResult:
    result = PathResult("hook")
    path = f"/v1/tables/{TABLE}/commits?wait=true"
    for i in range(first, first + args.commits):
        if time.monotonic() > deadline:
            result.note = f"time budget used up after {len(result.samples)} commits"
            break
        snapshot_id, t0_wall, t0, writer_s = commit(table, i, args.rows)
        status, _ = daemon.request("POST", path, timeout_s=COMMIT_TIMEOUT_S + 5)
        latency = time.perf_counter() - t0
        if status != 200:
            result.note = f"POST {path} answered {status} for snapshot {snapshot_id}"
            return result
        seen = daemon.stats_snapshot()
        if seen != snapshot_id:
            result.note = f"POST returned 200 but stats show {seen}, not {snapshot_id}"
            return result
        result.samples.append(Sample("hook", snapshot_id, t0_wall, latency, writer_s))
    return result


# -- analysis ------------------------------------------------------------------------------


def pct(values: Sequence[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": pct(values, 50),
        "p95": pct(values, 95),
        "p99": pct(values, 99),
        "max": max(values),
    }


def log_time(event: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(str(event["timestamp"])).timestamp()


def breakdown(daemon: Daemon, samples: Sequence[Sample]) -> dict[str, dict[str, float]]:
    """Per-phase seconds of the measured commits, from the daemon's log events.

    Timeline of one commit (t0 = append returned): ``t0 → analyze start`` is the watch or
    hook hint, the debounce delay and the runtime's own metadata look before core runs;
    ``analyze`` is core's run (``table_run_done.seconds``), of which ``sketch``, ``store``,
    ``merge`` and ``commit`` are the logged phases and ``analyze other`` the rest (table
    refresh, manifest reading); ``published → seen`` is the gap between the
    ``commit_processed`` log line and the client seeing the stats.
    """
    processed = {int(e["snapshot_id"]): e for e in daemon.events("commit_processed")}
    runs = {
        int(e["last_snapshot_id"]): e
        for e in daemon.events("table_run_done")
        if e.get("last_snapshot_id") is not None
    }
    rows: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rows.setdefault(key, []).append(value)

    for s in samples:
        event = processed.get(s.snapshot_id)
        run = runs.get(s.snapshot_id)
        if event is None or run is None:
            continue
        add("append (writer, before t0)", s.writer_s)
        run_s = float(run["seconds"])
        analyze_start = log_time(run) - run_s
        add("t0 → analyze start", analyze_start - s.t0_wall)
        add("analyze (table_run_done.seconds)", run_s)
        for phase, seconds in event["timings"].items():
            add(f"  {phase}", float(seconds))
        add("  analyze other (refresh, manifests)", run_s - float(event["seconds"]))
        add("published → seen by client", s.t0_wall + s.latency_s - log_time(event))
        add("daemon commit_to_stats_s", float(event["commit_to_stats_s"]))
    return {key: {"p50": pct(v, 50), "p95": pct(v, 95)} for key, v in rows.items()}


# -- Spark alone, in this process ----------------------------------------------------------


def timed_runs(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    fn()  # warm-up (code generation, class loading)
    fn()
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - started)
    return {"p50": pct(seconds, 50), "p95": pct(seconds, 95), "min": min(seconds)}


def direct(table: LatencyTable, state_dir: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Time the pieces of one small commit's processing without the daemon around them."""
    # imported here: pyspark is slow to import and only this step needs it
    from lakestats.pipeline import sketch_files
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import open_configured

    config = Config.model_validate({"state_dir": str(state_dir), "catalog": table.catalogs()})
    opened = open_configured(table.table_config(TABLE), config)
    fmt = opened.table
    last = fmt.commits_since(None)[-1]
    file = last.added_files[0].path
    schema = fmt.schema()
    settings = config.sketch.settings()
    out = {
        f"table refresh ({table.format_name})": timed_runs(fmt.refresh, repeat),
        "store.current() (state log read)": timed_runs(opened.store.current, repeat),
    }
    spark = get_spark(SparkSettings(master=SPARK_MASTER, conf=SPARK_CONF))
    try:
        out["spark: empty job (range(1).collect)"] = timed_runs(
            lambda: spark.range(1).collect(), repeat
        )
        out["spark: count() of the one Parquet file"] = timed_runs(
            lambda: spark.read.parquet(file).count(), repeat
        )
        out["sketch_files(one file, all columns)"] = timed_runs(
            lambda: sketch_files(spark, [file], schema, settings), repeat
        )
    finally:
        stop_spark()
    return out


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tests/bench/latency.py",
        description="Commit-to-fresh-stats latency of lakestatsd (event → stats over HTTP).",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="iceberg",
        help="the table's format and writer: pyiceberg, delta-rs or pypaimon (default iceberg)",
    )
    parser.add_argument("--commits", type=int, default=50, help="commits per path (default 50)")
    parser.add_argument("--rows", type=int, default=1000, help="rows per commit (default 1000)")
    parser.add_argument(
        "--work-dir", type=Path, default=REPO / ".bench" / "latency", help="default .bench/latency"
    )
    parser.add_argument(
        "--sketches",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="sketch data files with the warm SparkSession (default on)",
    )
    parser.add_argument(
        "--watch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="watch.enabled; --no-watch measures the hook path alone (default on)",
    )
    parser.add_argument(
        "--debounce-s",
        type=float,
        default=None,
        help="watch.debounce_s (default: not set, the daemon's default 0.5 s)",
    )
    parser.add_argument("--poll-ms", type=float, default=20, help="GET poll interval (20)")
    parser.add_argument(
        "--direct",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="afterwards, time Spark and metadata steps in this process (default on)",
    )
    parser.add_argument("--repeat", type=int, default=20, help="runs per direct timing (20)")
    parser.add_argument("--budget-s", type=float, default=300, help="whole-run bound (300)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    return parser.parse_args(argv)


def machine() -> str:
    mem = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) // 1024
    return f"{os.cpu_count()} CPUs, {mem / 1024:.1f} GiB RAM, Python {sys.version.split()[0]}"


def fmt_row(name: str, stats: dict[str, float], keys: Sequence[str]) -> str:
    return f"  {name:<46}" + "".join(f"{k} {stats[k] * 1000:8.1f} ms  " for k in keys)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget_s
    work: Path = args.work_dir.resolve()
    for sub in ("wh", "state"):  # wh: the table, whatever its format
        shutil.rmtree(work / sub, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)

    table = latency_table(args.format, work / "wh", TABLE, SCHEMA)
    table.write(batch(0, args.rows))
    base = table.newest()
    config = work / "lakestatsd.toml"
    config.write_text(
        config_text(
            table,
            work / "state",
            sketches=args.sketches,
            watch=args.watch,
            debounce_s=args.debounce_s,
        )
    )
    print(
        f"lakestatsd latency bench, {args.format} table: {machine()}; work dir {work}", flush=True
    )

    daemon = Daemon(config, work / "lakestatsd.log")
    results: list[PathResult] = []
    exit_code: int | None = None
    try:
        daemon.start()
        print(f"ready on port {daemon.port} after {time.monotonic() - started:.1f}s", flush=True)
        # the first poll tick processes the initial commit; then one warm-up commit
        daemon.wait_for("stats of the initial commit", lambda: daemon.stats_snapshot() == base, 60)
        warm, _, _, _ = commit(table, 1, args.rows)
        daemon.request("POST", f"/v1/tables/{TABLE}/commits?wait=true", COMMIT_TIMEOUT_S)
        daemon.wait_for("the warm-up commit", lambda: daemon.stats_snapshot() == warm, 60)
        next_batch = 2
        paths = [run_watch, run_hook] if args.watch else [run_hook]
        for run in paths:
            result = run(daemon, table, next_batch, args, deadline)
            next_batch += args.commits
            results.append(result)
            print(f"{result.name}: {len(result.samples)} commits measured", flush=True)
    finally:
        exit_code = daemon.stop()
    print(f"daemon stopped: exit code {exit_code} (log: {daemon.log})")
    table.check_newest()

    phases = {r.name: breakdown(daemon, r.samples) for r in results}
    direct_times = (
        direct(table, work / "state", args.repeat)
        if args.direct and args.sketches and time.monotonic() < deadline
        else {}
    )

    debounce = "0.5 (default)" if args.debounce_s is None else f"{args.debounce_s:g}"
    print(
        f"\ncommit-to-fresh-stats latency, {args.format} table: {args.rows} rows/commit, sketches "
        f"{'on' if args.sketches else 'off'}, watch {'on' if args.watch else 'off'}, "
        f"debounce_s {debounce}, Spark {SPARK_MASTER}, GET poll {args.poll_ms:g} ms"
    )
    for r in results:
        lat = [s.latency_s for s in r.samples]
        if lat:
            verdict = "meets" if summary(lat)["p50"] <= 2.0 else "MISSES"
            stats = summary(lat)
            print(fmt_row(f"{r.name} (n={len(lat)}, {verdict} p50 ≤ 2 s)", stats, list(stats)))
        if r.note:
            print(f"  {r.name}: stopped early: {r.note}")
    for name, rows in phases.items():
        print(f"\nphases, {name} path (from the daemon's log):")
        for key, stats in rows.items():
            print(fmt_row(key, stats, ("p50", "p95")))
    if direct_times:
        print(f"\nin this process, warm session, median of {args.repeat}:")
        for key, stats in direct_times.items():
            print(fmt_row(key, stats, ("p50", "p95", "min")))
    print(f"\ntotal {time.monotonic() - started:.0f}s")

    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine(),
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "latency": {r.name: summary([s.latency_s for s in r.samples]) for r in results},
                    "samples": {r.name: [s.latency_s for s in r.samples] for r in results},
                    "notes": {r.name: r.note for r in results},
                    "phases": phases,
                    "direct": direct_times,
                    "daemon_exit_code": exit_code,
                },
                indent=2,
            )
        )
    failed = exit_code != 0 or any(r.note for r in results) or not results
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
