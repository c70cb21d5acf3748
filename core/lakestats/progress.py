"""Progress of ``lakestats analyze`` for people and for log collectors.

On a terminal, a ``rich`` progress bar per table: batch n of m, files and rows sketched, an
estimate of the time left (rich's, from the rows done so far), advanced inside a Spark job
by its finished tasks. Anywhere else (a pipe, CI, a log shipper), one JSON line per event
on stderr: ``analyze_progress`` before and after each batch's job, ``spark_started``, and
``commit_processed`` per commit, so nothing is silent for long and nothing needs a terminal.

Per-commit timings say what they are: a commit's ``sketch`` time is its share (by added
files) of the Spark job that sketched its whole batch, and Spark's start-up is reported on
its own, never folded into the first commit.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from lakestats.analyze import BatchProgress, CommitReport
    from lakestats.pipeline import JobProgress


def commit_line(report: CommitReport) -> str:
    """One human line per commit, honest about shared batch time."""
    seconds = sum(report.timings.values())
    sketch = report.timings.get("sketch", 0.0)
    shared = (
        f"; sketch {sketch:.2f}s = share of a {report.batch_sketch_s:.2f}s Spark job over "
        f"{report.batch_commits} commits"
        if report.batch_commits > 1 and report.batch_sketch_s
        else ""
    )
    reread = (
        f", {report.deletes_reread_files} re-read for row-level deletes "
        f"({report.deletes_reread_rows} rows)"
        if report.deletes_reread_files
        else ""
    )
    return (
        f"  snapshot {report.snapshot_id} ({report.operation}): "
        f"+{report.added_files} / -{report.removed_files} files, "
        f"{report.added_records} rows added, {report.sketched_files} sketched{reread} "
        f"[{seconds:.2f}s{shared}]"
    )


class AnalyzeProgress:
    """The listener ``analyze`` hands to core (``on_progress``, ``on_commit``) and to the
    sketcher (``on_job``)."""

    def __init__(self, err: TextIO, *, quiet: bool = False, rich: bool | None = None) -> None:
        self._err = err
        self._quiet = quiet
        use_rich = err.isatty() if rich is None else rich
        self._rich: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._current: BatchProgress | None = None
        self._started = time.monotonic()
        if use_rich and not quiet:
            from rich.console import Console  # noqa: PLC0415 - only on a terminal
            from rich.progress import (  # noqa: PLC0415
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("rows"),
                TextColumn("{task.fields[files]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(file=err),
                transient=False,
            )

    def __enter__(self) -> AnalyzeProgress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    # -- events ------------------------------------------------------------------------

    def batch(self, event: BatchProgress) -> None:
        if self._quiet:
            return
        self._current = event
        if event.sketched and event.spark_start_s:
            self._say(
                "spark_started",
                f"Spark started in {event.spark_start_s:.1f}s",
                table=event.table,
                seconds=round(event.spark_start_s, 3),
            )
        if self._rich is not None:
            self._update_bar(event, event.rows_done)
            return
        self._log("analyze_progress", **event.log_fields(), eta_s=self._eta(event))

    def job(self, event: JobProgress) -> None:
        """Tasks of the running Spark job: moves the bar inside a batch."""
        batch = self._current
        if self._quiet or self._rich is None or batch is None or batch.sketched:
            return
        share = batch.rows * event.tasks_done / max(1, event.tasks_total)
        self._update_bar(batch, batch.rows_done + share)

    def commit(self, report: CommitReport) -> None:
        if self._quiet:
            return
        if self._rich is not None:
            self._rich.console.print(commit_line(report), highlight=False)
            return
        self._log("commit_processed", **report.log_fields())

    # -- output --------------------------------------------------------------------------

    def _eta(self, event: BatchProgress) -> float | None:
        elapsed = time.monotonic() - self._started
        if not event.rows_done or event.rows_done >= event.rows_total:
            return None if event.rows_done < event.rows_total else 0.0
        return round(elapsed / event.rows_done * (event.rows_total - event.rows_done), 1)

    def _update_bar(self, event: BatchProgress, completed: float) -> None:
        assert self._rich is not None
        description = f"{event.table}: batch {event.batch}/{event.batches}"
        files = f"files {event.files_done}/{event.files_total}"
        task = self._tasks.get(event.table)
        if task is None:
            task = self._rich.add_task(description, total=max(1, event.rows_total), files=files)
            self._tasks[event.table] = task
        self._rich.update(task, description=description, completed=completed, files=files)

    def _say(self, event: str, text: str, **fields: Any) -> None:
        if self._rich is not None:
            self._rich.console.print(text, highlight=False)
        else:
            self._log(event, **fields)

    def _log(self, event: str, **fields: Any) -> None:
        print(json.dumps({"event": event, **fields}), file=self._err, flush=True)
