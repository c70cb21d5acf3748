"""How often one process sweeps a table's stray published files.

A stray is a stats file a run wrote into the table's folders and never registered (the
run was killed in between). The sweep deletes strays older than the grace period, so a
sweep more often than once per grace period can only delete what the next one would
delete a little later, and each one costs a fresh load of the table's metadata and a
listing of its metadata folder: on a big Iceberg table thousands of manifests, on S3
pages of LISTs, before every registration of a daemon that processes commit after
commit. A process therefore sweeps a table at most once per grace period (a grace of 0:
every run, as before); a new process (a CLI run, an on-commit hook) sweeps at its first run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

_last_swept: dict[str, float] = {}  # table key -> monotonic time of this process's sweep
_lock = threading.Lock()


def sweep_due(key: str, grace_s: float, *, clock: Callable[[], float] = time.monotonic) -> bool:
    """Whether the table ``key`` should be swept now; if so, the sweep is recorded as done
    (a failed sweep waits for the next period like a done one: it is retried by then)."""
    now = clock()
    with _lock:
        last = _last_swept.get(key)
        if last is not None and now - last < grace_s:
            return False
        _last_swept[key] = now
        return True
