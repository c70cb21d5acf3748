"""A state dir that is full, read-only or not a directory, and unreadable tables: named
errors, never "unexpected", never a traceback, and no daemon-wide unreadiness.

Running as root (as this machine's CI does) bypasses file permissions, so the chmod cases
are skipped there; a state dir whose parent is a *file* fails for every user and stands
in for "cannot write here".
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from lakestats.cli import main as lakestats_main
from lakestats.exceptions import ConfigError, TableNotFoundError
from lakestats.testing import IcebergWarehouse
from lakestatsd.backend import ApiBackend
from lakestatsd.cli import main as lakestatsd_main
from lakestatsd.config import ServiceConfig, load_service_config
from lakestatsd.scheduler import STORAGE, StopCheck, TableQueue, error_kind
from lakestatsd.wiring import Service, core_fns

ROOT = os.geteuid() == 0


def test_a_state_dir_that_is_a_file_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "taken").write_text("not a directory")
    config = tmp_path / "lakestats.toml"
    config.write_text(f'state_dir = "{tmp_path / "taken" / "state"}"\n')
    with pytest.raises(ConfigError, match="state_dir"):
        load_service_config(config)
    assert lakestatsd_main(["--config", str(config), "--check-config"]) == 2
    assert lakestats_main(["analyze", "--config", str(config), "/nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("is a file, not a directory" in line for line in err)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), STORAGE),
        (OSError(errno.EROFS, "Read-only file system"), STORAGE),
        (PermissionError(errno.EACCES, "Permission denied"), STORAGE),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory"), STORAGE),
        (TableNotFoundError("gone"), "TableNotFoundError"),
        (KeyError("x"), "unexpected"),
    ],
)
def test_storage_problems_are_not_bugs(exc: BaseException, kind: str) -> None:
    assert error_kind(exc) == kind


def test_a_table_failing_on_storage_is_retried_once_the_state_dir_is_writable() -> None:
    """After a full disk the table waits for its backoff (up to backoff_max_s); the poll
    tick that finds the state dir writable again cuts it short."""
    runs: list[bool] = []

    def full_then_fine(name: str, should_stop: StopCheck) -> bool:
        runs.append(True)
        if len(runs) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return True

    queue = TableQueue(
        ["t"],
        full_then_fine,
        debounce_s=0,
        max_concurrent=1,
        backoff_initial_s=600,
        backoff_max_s=600,
    )
    queue.start()
    try:
        queue.hint("t", "poll")
        while not runs or queue.status()["t"].state.value == "running":
            time.sleep(0.01)
        status = queue.status()["t"]
        assert status.last_error_kind == STORAGE and (status.retry_in_s or 0) > 500
        assert queue.retry_now(STORAGE) == 1
        deadline = time.monotonic() + 5
        while not queue.status()["t"].healthy:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert len(runs) == 2
    finally:
        assert queue.stop(5)


def test_an_unwritable_state_dir_does_not_make_the_daemon_unready(tmp_path: Path) -> None:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1]})
    config = ServiceConfig.model_validate(
        {
            "state_dir": str(tmp_path / "sd" / "state"),
            "sketch": {"enabled": False},
            "table": [{"name": "t", "location": wh.location("t")}],
        }
    )
    (tmp_path / "sd").write_text("the state dir's parent became a file")  # unwritable
    service = Service(config, core_fns(config))
    service.queue.start()
    try:
        ready, detail = ApiBackend(service).readiness()
        assert not detail["checks"]["state_dir"]["ok"]
        assert ready  # reported, but the API keeps serving what it can
        with pytest.raises(OSError) as failed:
            service.runtime.process("t", lambda: False)
        assert error_kind(failed.value) == STORAGE
    finally:
        assert service.queue.stop(5)


def test_an_unreadable_table_says_permission_denied(tmp_path: Path) -> None:
    """Checked through the CLI in a child process. As root (CI), the child runs without the
    capabilities that let root ignore permission bits (``setpriv`` from util-linux), so a
    ``chmod 000`` table is as unreadable to it as to any service account."""
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table("t", pa.schema([("id", pa.int64())]))
    wh.append("t", {"id": [1]})
    location = Path(wh.location("t"))
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if ROOT else []
    command = [*drop, sys.executable, "-m", "lakestats.cli", "analyze", str(location)]
    command += ["--no-sketches", "--state-dir", str(tmp_path / "state")]
    location.chmod(0)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    finally:
        location.chmod(0o755)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()  # one line, no traceback
    assert "permission denied" in line.lower(), line
    assert "not a table" not in line
