"""Timing, peak memory and machine facts.

Peak memory is read per phase: Linux lets a process reset its own peak resident set size
(``VmHWM``) by writing ``5`` to ``/proc/<pid>/clear_refs``, so each phase's peak is the
high-water mark between its reset and its end, for the Python process and the Spark
driver JVM alike. Where that is not possible the peak is since process start (flagged).
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
MIB = 1024 * 1024


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


@dataclass(frozen=True)
class Peak:
    """Peak RSS in bytes of one process during one phase; ``since_start`` if not resettable."""

    rss_bytes: int | None
    since_start: bool = False

    def mib(self) -> str:
        if self.rss_bytes is None:
            return "n/a"
        return f"{self.rss_bytes / MIB:,.0f} MiB" + (" (since start)" if self.since_start else "")


class PeakMemory:
    """Per-phase peak RSS of this process and (once known) the Spark driver JVM."""

    def __init__(self) -> None:
        self.jvm_pid: int | None = None
        self.phases: dict[str, tuple[Peak, Peak]] = {}  # phase -> (python, jvm)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        resettable = {pid: _reset_peak(pid) for pid in self._pids()}
        try:
            yield
        finally:
            python = _peak(os.getpid(), resettable.get(os.getpid(), False))
            jvm = (
                _peak(self.jvm_pid, resettable.get(self.jvm_pid, False))
                if self.jvm_pid is not None
                else Peak(None)
            )
            self.phases[name] = (python, jvm)

    def _pids(self) -> list[int]:
        return [os.getpid()] + ([self.jvm_pid] if self.jvm_pid is not None else [])


def _reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak(pid: int, was_reset: bool) -> Peak:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return Peak(int(line.split()[1]) * 1024, since_start=not was_reset)
    except OSError:
        pass
    if pid == os.getpid():  # not Linux: ru_maxrss is KiB on Linux, bytes on macOS
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        scale = 1 if platform.system() == "Darwin" else 1024
        return Peak(maxrss * scale, since_start=True)
    return Peak(None)


def cpus() -> int:
    """CPUs this process may run on (what ``nproc`` says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_average() -> float:
    """1-minute load average: other work on the machine skews every timing."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / MIB:.1f} GiB"
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": str(cpus()),
        "memory": mem,
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
