"""A real standalone Spark cluster (master + worker from pyspark's own ``bin/``) on
127.0.0.1: lakestats gives the same numbers as in local mode, and the daemon survives
Spark failures by itself (issue 13).

Bounds stated and asserted (the settings below: ``spark.executor_wait_s = 4s``,
``daemon.spark_check_interval_s = 0.5s``, ``daemon.spark_retry_max_s = 1s``), in the order
the one test goes through them:

* master down at start → ``lakestats analyze`` fails in one line; /readyz 503 naming the
  unreachable master at once, /healthz 503 after ``spark_unavailable_timeout_s`` (4 s);
  master and worker up → stats current (and equal to local mode's);
* worker killed in the middle of a sketch job (a 3-million-row commit) → the table's run
  fails with the cause (not a hang); worker back → the daemon processes that commit
  again, no restart;
* master and worker both restarted → stats current again, no restart.

"Not a hang" and every recovery wait are bounded by ``RECOVERY_S`` (3 minutes): a bound
that tells a hang from a recovery on a loaded 2-core machine (a quiet one recovers in
seconds; 60 s bounds failed at load 7-12), not a speed: speed is measured in benchmarks.

The SparkSession of this test process is process-wide (the session fixture), so every
lakestats that talks to the cluster runs in a subprocess (the CLI and real daemons). Every
JVM started here runs in its own process group and is killed with it, on failure too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakestatsd_harness import PYTHONPATH, DaemonProcess, past

from lakestats.analyze import analyze_table, read_stats
from lakestats.config import Config, TableConfig
from lakestats.tables import open_configured
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
# 50 rows per file and 150 per table stay below KLL's k (200): no randomized compaction,
# so quantiles and histograms must match exactly too
ROWS = 50
CLUSTER_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
}

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# rows of the commit whose job the worker dies in: enough for seconds of sketching on the
# one executor core, so the kill lands mid-job (the test asserts it did)
BIG_ROWS = 3_000_000
RECOVERY_S = 180  # tells a hang from a recovery under load (module docstring)


def big_rows(first_id: int, count: int) -> pa.Table:
    ids = pa.array(range(first_id, first_id + count), pa.int64())
    names = pc.binary_join_element_wise("n", pc.cast(pc.bit_wise_and(ids, 7), pa.string()), "")
    scores = pc.add(pc.cast(pc.bit_wise_and(ids, 1023), pa.float64()), 0.25)
    return pa.Table.from_arrays([ids, names, scores], schema=SCHEMA)


def sketching(daemon: DaemonProcess, rows: int) -> bool:
    """The daemon started the Spark job of a batch holding ``rows`` rows."""
    events = daemon.events("analyze_progress")
    return any(e["phase"] == "sketching" and e["rows"] == rows for e in events)


def rows(i: int) -> dict[str, list[Any]]:
    return {
        "id": [i * ROWS + k for k in range(ROWS)],
        "name": [f"n{(i * ROWS + k) % 7}" for k in range(ROWS)],
        "score": [float((i * 31 + k) % 13) + 0.25 for k in range(ROWS)],
    }


class Cluster:
    """A standalone master and worker as subprocesses, each in its own process group."""

    def __init__(self, work: Path) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.work = work
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1",
            # no REST server on the fixed port 6066, no web UI on fixed ports
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.work / f"{name}.log").open("ab")
        return subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: executors die with it
        )

    def start_master(self) -> None:
        self.master = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--webui-port", str(free_port()),
        )  # fmt: skip

    def start_worker(self) -> None:
        self.worker = self._spawn(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host", "127.0.0.1",
            "--cores", "2",  # one for the daemon's application, one for the CLI's
            "--memory", "1g",
            "--webui-port", "0",
            "--work-dir", str(self.work / "worker"),
        )  # fmt: skip

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None:
            return
        # the whole group, even if the launcher already exited: executors live in it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def wait_until_up(self, workers: int = 1, timeout_s: float = RECOVERY_S) -> None:
        """The master accepts connections and ``workers`` registrations were logged."""
        started = time.monotonic()
        log = self.work / "master.log"
        while not past(started, timeout_s):
            text = log.read_text(errors="replace") if log.exists() else ""
            if text.count("Registering worker") >= workers:
                return
            time.sleep(0.2)
        raise AssertionError(f"cluster not up within {timeout_s}s:\n{text[-3000:]}")

    def kill_worker(self) -> None:
        self._kill(self.worker)
        self.worker = None

    def close(self) -> None:
        self._kill(self.worker)
        self._kill(self.master)
        self.worker = self.master = None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    work = tmp_path / "cluster"
    work.mkdir()
    started = Cluster(work)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Callable[[str, str], DaemonProcess]]:
    started: list[DaemonProcess] = []

    def run(name: str, text: str) -> DaemonProcess:
        config = tmp_path / f"{name}.toml"
        config.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKESTATS_")}
        env.pop("NOTIFY_SOCKET", None)
        env["PYTHONPATH"] = PYTHONPATH
        daemon = DaemonProcess(config, tmp_path / f"{name}.log", env)
        started.append(daemon)
        daemon.port = int(daemon.wait_event("http_listening", 60)[0]["port"])
        return daemon

    yield run
    for daemon in started:
        daemon.close()


def daemon_config(state_dir: Path, location: str, master: str, extra: str = "") -> str:
    conf = "\n".join(f'"{k}" = "{v}"' for k, v in CLUSTER_CONF.items())
    return f"""
state_dir = "{state_dir}"
[http]
listen = "127.0.0.1:0"
[spark]
master = "{master}"
executor_wait_s = "4s"
job_timeout_s = "120s"
[spark.conf]
{conf}
[watch]
poll_interval_s = 1
debounce_s = 0.2
backoff_initial_s = 0.5
backoff_max_s = 1
[daemon]
shutdown_timeout_s = 10
spark_check_interval_s = 0.5
spark_retry_max_s = 1
{extra}
[[table]]
name = "t"
location = "{location}"
"""


def local_stats(location: str, state_dir: Path) -> dict[str, Any]:
    """The reference: the same table analyzed in local mode (this process's session)."""
    config = Config.model_validate({"state_dir": str(state_dir)})
    opened = open_configured(TableConfig(name="t", location=location), config)
    analyze_table(opened, config=config)
    return read_stats(opened)


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in {"computed_at_ms", "published", "table"}}


def wait_for(
    predicate: Callable[[], bool], timeout_s: float, what: str, daemon: DaemonProcess
) -> float:
    started = time.monotonic()
    while not predicate():
        if daemon.proc.poll() is not None or past(started, timeout_s):
            raise AssertionError(f"{what}: not within {timeout_s}s\n{daemon.tail(60)}")
        time.sleep(0.25)
    return time.monotonic() - started


def table_entry(daemon: DaemonProcess) -> dict[str, Any]:
    tables: list[dict[str, Any]] = daemon.get_json("/v1/tables")["tables"]
    return tables[0]


def stats_at(daemon: DaemonProcess) -> int | None:
    resp = daemon.request("GET", "/v1/tables/t/stats")
    return int(resp.json()["snapshot_id"]) if resp.status == 200 else None


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAKESTATS_")}
    environ.update(PYTHONPATH=PYTHONPATH, **env)
    return subprocess.run(
        [sys.executable, "-m", "lakestats.cli", *args],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_spark_cluster_down_up_lost_and_restarted(
    spark: Any,
    tmp_path: Path,
    cluster: Cluster,
    daemons: Callable[[str, str], DaemonProcess],
) -> None:
    """One cluster, one daemon, every failure of the issue in turn (one test: each JVM
    start costs seconds)."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", SCHEMA)
    for i in range(3):
        wh.append("t", rows(i))
    location = wh.location("t")
    want = comparable(local_stats(location, tmp_path / "local-state"))
    assert want["record_count"] == 3 * ROWS and want["columns"]["id"]["ndv"] == 3 * ROWS
    cli_state = ("--state-dir", str(tmp_path / "cli-state"))
    cluster_env = {f"LAKESTATS_SPARK__CONF__{k}": v for k, v in CLUSTER_CONF.items()}

    # -- the master is down at start ----------------------------------------------------
    # the CLI: one line naming the cause, at once (it used to take 70 s and a Java stack)
    started = time.monotonic()
    done = run_cli("analyze", location, *cli_state, "--spark-master", cluster.url, "-q")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"lakestats: error: Spark master {cluster.url} is unreachable "
        f"(127.0.0.1:{cluster.port}: Connection refused)"
    ]
    assert time.monotonic() - started < 60  # not a minute of Spark's own retries
    # the daemon: not ready, with the cause; not alive once past the limit
    text = daemon_config(
        tmp_path / "d-state", location, cluster.url, "spark_unavailable_timeout_s = 4"
    )
    daemon = daemons("daemon", text)
    daemon.wait_event("ready", 60)
    ready = daemon.request("GET", "/readyz")
    assert ready.status == 503
    error = ready.json()["checks"]["spark"]["error"]
    assert f"Spark master {cluster.url} is unreachable" in error and "Java" not in error
    (event,) = daemon.events("spark_unavailable")
    assert "unreachable" in event["error"]
    wait_for(lambda: daemon.request("GET", "/healthz").status == 503, 20, "liveness", daemon)
    assert "Spark unusable" in daemon.request("GET", "/healthz").json()["spark"]

    # -- the master and a worker come up: recovery, and the numbers of local mode ---------
    cluster.start_master()
    cluster.start_worker()
    current = wh.lineage("t")[-1]
    up = wait_for(lambda: stats_at(daemon) == current, RECOVERY_S, "master up", daemon)
    wait_for(lambda: daemon.request("GET", "/readyz").status == 200, 30, "ready", daemon)
    assert daemon.request("GET", "/healthz").status == 200
    assert comparable(daemon.get_json("/v1/tables/t/stats")) == want
    done = run_cli("analyze", location, *cli_state, "--spark-master", cluster.url, **cluster_env)
    assert done.returncode == 0, done.stderr[-3000:]
    # not a terminal: progress is JSON lines on stderr, and the JVM's output has a file of
    # its own, so none of its plain-text lines lands among them
    progress_lines = done.stderr.splitlines()
    assert progress_lines and all(isinstance(json.loads(line), dict) for line in progress_lines)
    assert (tmp_path / "cli-state" / "lakestats-spark.log").is_file()
    shown = run_cli("show", location, *cli_state, "--json")
    assert comparable(json.loads(shown.stdout)) == want

    # -- the worker dies in the middle of a job: the run fails with the cause (not a hang) -
    newest = wh.append("t", big_rows(3 * ROWS + 2 * ROWS, BIG_ROWS))
    wait_for(lambda: sketching(daemon, BIG_ROWS), RECOVERY_S, "the big job to start", daemon)
    cluster.kill_worker()
    lost = wait_for(
        lambda: "executor" in (table_entry(daemon)["last_error"] or ""),
        RECOVERY_S,
        "lost workers",
        daemon,
    )
    # the kill came while the job ran: it never finished, and the stats did not move
    assert not [e for e in daemon.events("analyze_progress") if e["phase"] == "sketched"
                and e["rows"] == BIG_ROWS]  # fmt: skip
    assert stats_at(daemon) != newest
    entry = table_entry(daemon)
    assert not entry["healthy"] and entry["last_error_kind"] == "SparkUnavailableError"
    wait_for(lambda: daemon.request("GET", "/readyz").status == 503, 30, "not ready", daemon)
    ready = daemon.request("GET", "/readyz").json()
    assert ready["checks"]["spark"]["state"] == "failed" and ready["checks"]["spark"]["error"]
    assert daemon.metric("lakestats_spark_up") == 0.0
    assert len(daemon.events("spark_unavailable")) == 2  # one event per outage

    # -- the worker comes back: the daemon recovers by itself and finishes that commit -----
    cluster.start_worker()
    back = wait_for(lambda: stats_at(daemon) == newest, RECOVERY_S, "worker back", daemon)
    recovered = daemon.get_json("/v1/tables/t/stats")
    assert recovered["record_count"] == 3 * ROWS + BIG_ROWS
    assert recovered["columns"]["id"]["max"] == 3 * ROWS + 2 * ROWS + BIG_ROWS - 1
    assert recovered["columns"]["id"]["null_count"] == 0
    wait_for(lambda: daemon.request("GET", "/readyz").status == 200, 30, "ready again", daemon)
    assert table_entry(daemon)["healthy"] and table_entry(daemon)["last_error"] is None
    assert len(daemon.events("spark_recovered")) == 2
    assert daemon.metric("lakestats_spark_up") == 1.0

    # -- master and worker both restarted: the new master does not know the application,
    # so the daemon registers a new one by itself (it used to need a restart) -------------
    cluster.close()
    later = wh.append("t", rows(4))
    cluster.start_master()
    cluster.start_worker()
    both = wait_for(lambda: stats_at(daemon) == later, RECOVERY_S, "new master", daemon)
    assert table_entry(daemon)["healthy"]
    progress = daemon.events("analyze_progress")
    assert progress and progress[-1]["phase"] == "sketched"
    assert daemon.terminate() == 0

    # the daemon's stdout stayed JSON lines; the JVM wrote to its own file
    lines = [line for line in daemon.log_path.read_text().splitlines() if line.strip()]
    assert all(isinstance(json.loads(line), dict) for line in lines)
    assert (tmp_path / "d-state" / "lakestatsd-spark.log").stat().st_size > 0
    print(
        f"\nrecovered {up:.1f}s after master+worker started; lost worker reported after "
        f"{lost:.1f}s; recovered {back:.1f}s after the worker restarted, {both:.1f}s after "
        "master and worker restarted"
    )
