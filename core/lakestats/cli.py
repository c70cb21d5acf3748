"""``lakestats``: analyze a table, show its stats, estimate predicates from them, list
per-commit aggregates, notify a daemon, expire and compact its stats, forget the stats of
a table no longer configured.

Expected failures (bad config, no such table, corrupt metadata, a missing data file) print
one line naming the problem and exit non-zero; the stats store is never left half-written.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TextIO

from lakestats import __version__, cache
from lakestats.config import Config, TableConfig, checked_state_dir, load_config
from lakestats.exceptions import ConfigError, LakestatsError
from lakestats.render import (
    byte_size,
    column_names,
    described_rows,
    render_commits,
    render_estimates,
    render_histogram,
    render_stats,
    render_table,
)

if TYPE_CHECKING:
    from lakestats.analyze import CommitReport
    from lakestats.store.folders import StoreFolder

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what `cat` and `git` exit with under `| head`


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get("LAKESTATS_CONFIG"),
        help="TOML config file (default: $LAKESTATS_CONFIG, else built-in defaults)",
    )
    common.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where stats are kept (overrides the config file; default ./.lakestats)",
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    common.add_argument(
        "--map-location",
        metavar="FROM=TO",
        action="append",
        default=[],
        help="read files the table's metadata names under prefix FROM from prefix TO "
        "instead (tables copied or restored elsewhere); repeatable",
    )

    parser = argparse.ArgumentParser(
        prog="lakestats",
        description=(
            "Incremental statistics for lakehouse tables "
            "(Apache Iceberg, Delta Lake, Apache Paimon)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"lakestats {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    analyze = sub.add_parser(
        "analyze", parents=[common], help="process every unprocessed commit, then exit"
    )
    analyze.add_argument(
        "table", metavar="TABLE", nargs="?", help="configured table name or table path"
    )
    analyze.add_argument(
        "--all",
        action="store_true",
        help="every configured table; one failing table does not stop the others",
    )
    analyze.add_argument(
        "--no-sketches",
        action="store_true",
        help="metadata-only stats: read no data file (no NDV, quantiles, histograms)",
    )
    analyze.add_argument("--spark-master", metavar="URL", help="override spark.master")
    analyze.add_argument(
        "--rebuild",
        action="store_true",
        help="recompute from the table's history, ignoring stored segments",
    )
    analyze.add_argument("--quiet", "-q", action="store_true", help="no progress lines")

    show = sub.add_parser("show", parents=[common], help="print a snapshot's stats")
    show.add_argument("table", metavar="TABLE")
    show.add_argument("--snapshot", metavar="ID", type=int, help="a snapshot id (default: current)")
    show.add_argument("--json", action="store_true", help="machine-readable JSON")
    show.add_argument(
        "--histogram",
        metavar="COLUMN",
        action="append",
        default=[],
        help="also draw this column's histogram bucket by bucket (repeatable)",
    )

    status = sub.add_parser(
        "status",
        parents=[common],
        help="every configured table: last processed snapshot, commits behind, errors",
    )
    status.add_argument("--json", action="store_true", help="machine-readable JSON")

    commits = sub.add_parser("commits", parents=[common], help="list per-commit aggregates")
    commits.add_argument("table", metavar="TABLE")
    commits.add_argument("--json", action="store_true", help="machine-readable JSON")

    expire = sub.add_parser(
        "expire",
        parents=[common],
        help="expire snapshots per the table's policy, drop stats of expired snapshots",
    )
    expire.add_argument("table", metavar="TABLE")
    expire.add_argument("--dry-run", action="store_true", help="list what would go, change nothing")

    compact = sub.add_parser(
        "compact",
        parents=[common],
        help="merge small segments, drop dead rows, delete old versions and orphan files",
    )
    compact.add_argument("table", metavar="TABLE")
    compact.add_argument(
        "--dry-run", action="store_true", help="list what would go, change nothing"
    )

    forget = sub.add_parser(
        "forget",
        parents=[common],
        help="delete a stats folder no configured table uses (`status` lists them)",
    )
    forget.add_argument("folder", metavar="FOLDER", help="a folder name `lakestats status` lists")
    forget.add_argument("--dry-run", action="store_true", help="list what would go, change nothing")

    advise = sub.add_parser(
        "advise",
        parents=[common],
        help="data-skipping advice per column from the stored stats (docs/advisor.md)",
    )
    advise.add_argument("table", metavar="TABLE")
    advise.add_argument(
        "--column",
        action="append",
        metavar="C",
        help="a column to analyse (repeatable; default: every column)",
    )
    advise.add_argument("--json", action="store_true", help="machine-readable JSON")
    advise.add_argument(
        "--per-partition", action="store_true", help="also print each partition's summary"
    )

    estimate = sub.add_parser(
        "estimate",
        parents=[common],
        help="estimated rows matching a predicate, from the stored stats (no data read)",
    )
    estimate.add_argument("table", metavar="TABLE")
    estimate.add_argument(
        "predicate",
        metavar="PREDICATE",
        nargs="+",
        help='columns compared with constants, joined by AND, e.g. "price BETWEEN 10 AND '
        "20\", \"day < '2024-02-01' AND mode IN ('AIR', 'RAIL')\", \"note IS NULL\"; "
        "each PREDICATE estimated on its own",
    )
    estimate.add_argument(
        "--snapshot", metavar="ID", type=int, help="a snapshot id (default: current)"
    )
    estimate.add_argument("--json", action="store_true", help="machine-readable JSON")

    notify = sub.add_parser(
        "notify", parents=[common], help="tell a running lakestatsd that a commit landed"
    )
    notify.add_argument("table", metavar="TABLE", help="a table name configured in the daemon")
    notify.add_argument("--wait", action="store_true", help="return once stats are fresh")
    notify.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="how long to wait: at most http.wait_timeout_s (the daemon's cap, and the default)",
    )
    notify.add_argument(
        "--fallback-analyze",
        action="store_true",
        help="if the daemon cannot be reached, run `analyze` in this process instead",
    )
    shards = sub.add_parser(
        "shards",
        parents=[common],
        help="which daemon replica ([shards]) keeps each configured table",
    )
    shards.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="also show the split among N replicas and the tables that would move",
    )
    shards.add_argument("--json", action="store_true", help="machine-readable JSON")
    return parser


def _load(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    updates: dict[str, Any] = {}
    if args.state_dir is not None:
        try:
            updates["state_dir"] = checked_state_dir(args.state_dir)
        except ValueError as exc:
            raise ConfigError(f"--state-dir: {exc}") from None
    if getattr(args, "spark_master", None):
        updates["spark"] = config.spark.model_copy(update={"master": args.spark_master})
    if getattr(args, "no_sketches", False):
        updates["sketch"] = config.sketch.model_copy(update={"enabled": False})
    return config.model_copy(update=updates) if updates else config


def _table_config(
    args: argparse.Namespace, config: Config, table: TableConfig | None = None
) -> TableConfig:
    """The table argument's config entry (or ``table``), with the ``--map-location``
    prefixes added."""
    from lakestats.locations import parse_location_mapping  # noqa: PLC0415
    from lakestats.tables import resolve_table  # noqa: PLC0415

    if table is None:
        table = resolve_table(args.table, config)
    if not args.map_location:
        return table
    try:
        extra = dict(parse_location_mapping(text) for text in args.map_location)
    except ValueError as exc:
        raise ConfigError(f"--map-location: {exc}") from None
    return table.model_copy(update={"location_map": {**table.location_map, **extra}})


def _spark_log_path(config: Config) -> str | None:
    """The JVM's own output (log4j lines, Java stacks) goes to ``<state_dir>/lakestats-spark.log``
    so it never interleaves with the progress lines on stderr; errors still reach the user
    as one line naming the cause. A remote state dir leaves it on stderr."""
    from lakestats.locations import local_path  # noqa: PLC0415

    directory = local_path(config.state_dir)
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    return str(directory / "lakestats-spark.log")


def _analyzed_line(table: str, commits: int, snapshot_id: int | None) -> str:
    return f"{table}: analyzed {commits} commit(s); stats are at snapshot {snapshot_id}"


def _cmd_analyze(args: argparse.Namespace, config: Config, out: TextIO, err: TextIO) -> int:
    from lakestats.analyze import analyze_table  # noqa: PLC0415
    from lakestats.progress import AnalyzeProgress  # noqa: PLC0415
    from lakestats.sketching import SparkSketcher  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    every = bool(getattr(args, "all", False))
    if every == bool(args.table):
        raise ConfigError("analyze: give one TABLE or --all (every configured table)")
    if every and not config.table:
        raise ConfigError("analyze --all: no tables configured (add [[table]] sections)")
    targets = (
        [_table_config(args, config, t) for t in config.table]
        if every
        else [_table_config(args, config)]
    )
    for warning in config.warnings():
        print(f"lakestats: warning: {warning}", file=err)
    sketcher = (
        SparkSketcher(config, jvm_log_path=_spark_log_path(config), log_level="WARN")
        if config.sketch.enabled
        else None
    )
    failed: list[str] = []
    with AnalyzeProgress(err, quiet=args.quiet) as progress:
        if sketcher is not None:
            sketcher.on_progress = progress.job
        for table in targets:
            done: list[CommitReport] = []

            def on_commit(report: CommitReport, done: list[CommitReport] = done) -> None:
                done.append(report)
                progress.commit(report)

            try:
                opened = open_configured(table, config)
                result = analyze_table(
                    opened,
                    config=config,
                    sketcher=sketcher,
                    on_commit=on_commit,
                    on_progress=progress.batch,
                    rebuild=args.rebuild,
                )
            except LakestatsError as exc:
                if done:  # a walk stopped at an unreadable commit keeps the ones before it
                    print(_analyzed_line(opened.name, len(done), done[-1].snapshot_id), file=out)
                if not every:
                    raise
                # one failing table must not stop the others
                failed.append(table.name)
                print(f"lakestats: error: {table.name}: {exc}", file=err, flush=True)
                continue
            if result.commits:
                line = _analyzed_line(opened.name, len(result.commits), result.last_snapshot_id)
                print(line, file=out, flush=True)
            elif result.last_snapshot_id is None:
                print(f"{opened.name}: no commits yet, nothing to analyze", file=out)
            else:
                print(f"{opened.name}: up to date (snapshot {result.last_snapshot_id})", file=out)
    if every:
        print(
            f"analyzed {len(targets) - len(failed)} of {len(targets)} table(s)"
            + (f"; failed: {', '.join(failed)}" if failed else ""),
            file=out,
        )
    return EXIT_ERROR if failed else EXIT_OK


def _cmd_show(args: argparse.Namespace, config: Config, out: TextIO, err: TextIO) -> int:
    from lakestats.tables import open_configured  # noqa: PLC0415

    opened = open_configured(_table_config(args, config), config)
    doc = _read_stats(args, opened)
    behind = _staleness(opened, args.snapshot, _analyze_command(args))
    if args.json:
        json.dump(doc, out, indent=2, allow_nan=False)
        out.write("\n")
        if behind:  # stdout stays the show --json contract
            print(f"lakestats: warning: {behind}", file=err)
    else:
        for name in args.histogram:  # before any output: an error, not the stats and one
            if name not in doc["columns"]:
                raise LakestatsError(
                    f"no column {name!r} in the stats of {doc['table']} "
                    f"(columns: {column_names(list(doc['columns']))})"
                )
        kept = [
            kind
            for kind, on in (
                ("frequent_items", config.sketch.frequent_items > 0),
                ("value_sample", config.sketch.value_samples),
            )
            if on and config.sketch.enabled
        ]
        out.write(render_stats(doc, behind=behind, kept=kept))
        for name in args.histogram:
            out.write("\n" + render_histogram(name, doc["columns"][name]))
    return EXIT_OK


def _cmd_estimate(args: argparse.Namespace, config: Config, out: TextIO, err: TextIO) -> int:
    from lakestats.estimates import estimate_json  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    opened = open_configured(_table_config(args, config), config)
    doc = _read_stats(args, opened)
    estimates = [estimate_json(doc, text) for text in args.predicate]
    if args.json:
        report = {
            "table": doc["table"],
            "snapshot_id": doc["snapshot_id"],
            "table_rows": described_rows(doc),
            "estimates": estimates,
        }
        json.dump(report, out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        out.write(render_estimates(doc, estimates))
    behind = _staleness(opened, args.snapshot, _analyze_command(args))
    if behind:  # stdout stays the estimates
        print(f"lakestats: warning: {behind}", file=err)
    return EXIT_OK


def _read_stats(args: argparse.Namespace, opened: Any) -> dict[str, Any]:
    from lakestats.analyze import read_stats  # noqa: PLC0415
    from lakestats.exceptions import NotAnalyzedError, SnapshotNotFoundError  # noqa: PLC0415

    try:
        return read_stats(opened, args.snapshot)
    except NotAnalyzedError:
        raise SnapshotNotFoundError(
            f"no stats for table {opened.name} yet: run `{_analyze_command(args)}`"
        ) from None


def _analyze_command(args: argparse.Namespace) -> str:
    """The ``lakestats analyze`` command line that makes the stats this command reads: the
    table as the user named it (a path is not a configured name), with the options that
    override the config on where they are kept and where its files are (the config file
    is the user's context, as the environment is)."""
    words = ["lakestats", "analyze", args.table]
    if args.state_dir is not None:
        words += ["--state-dir", args.state_dir]
    for mapping in args.map_location:
        words += ["--map-location", mapping]
    return shlex.join(words)


def _staleness(opened: Any, snapshot_id: int | None, command: str) -> str | None:
    """A note when the stats read for ``snapshot_id`` (None: the current ones) do not
    describe the table as it is: commits not processed yet, or a commit since replaced;
    ``command`` is what to run about it."""
    from lakestats.freshness import freshness  # noqa: PLC0415

    if snapshot_id is not None:
        return replaced_note(opened, snapshot_id, command)
    try:
        fresh = freshness(opened)
    except LakestatsError:  # the stats are still worth showing
        return None
    return behind_note(fresh, command) if fresh.commits_behind else None


def behind_note(fresh: Any, command: str) -> str:
    from lakestats.freshness import describe_age  # noqa: PLC0415

    return (
        f"stats are {fresh.commits_behind} commit(s) behind the table (stats at snapshot "
        f"{fresh.last_snapshot_id}, table at {fresh.current_snapshot_id}; oldest missing "
        f"commit {describe_age(fresh.oldest_unprocessed_age_s)} old): run `{command}`"
        + (f" ({fresh.starts_over})" if fresh.starts_over else "")
    )


def replaced_note(opened: Any, snapshot_id: int, command: str) -> str | None:
    """A note when ``snapshot_id`` is the processed snapshot and its id names another
    commit now (Delta, Paimon: rolled back and committed again; ``lakestats.lineage``)."""
    from lakestats.lineage import replaced_commit  # noqa: PLC0415

    state = opened.store.current()
    if state is None or state.last_snapshot_id != snapshot_id:
        return None
    try:
        reason = replaced_commit(opened.table, state)
    except LakestatsError:  # the stats are still worth showing
        return None
    if reason is None:
        return None
    return f"these stats describe an earlier commit: {reason}: run `{command}`"


def _cmd_status(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.freshness import describe_age, table_status  # noqa: PLC0415
    from lakestats.unclaimed import (  # noqa: PLC0415
        claims_from,
        daemon_claims,
        daemon_reports,
        unclaimed_folders,
    )

    statuses = [table_status(t, config) for t in config.table]
    reports = daemon_reports(config)
    claims = claims_from(
        ((f.name, f.store_folder, f.last_error) for f in statuses), daemon_claims(reports)
    )
    unclaimed = unclaimed_folders(config.state_dir, claims)
    # a folder whose stats name a configured table that cannot be opened now may be that
    # table's current one: listed (nothing says it is not), but `forget` refuses it
    maybe_in_use = {
        f.name: f.table for f in unclaimed if f.table is not None and f.table in claims.unopened
    }
    from_daemon = _daemon_errors(config, reports)
    docs = []
    for fresh in statuses:
        doc = fresh.as_json()
        if fresh.last_error is None and from_daemon is not None:
            doc["last_error"] = from_daemon.get(fresh.name)
            doc["up_to_date"] = doc["up_to_date"] and doc["last_error"] is None
        docs.append(doc)
    if args.json:
        json.dump(
            {
                "tables": docs,
                "daemon_reachable": from_daemon is not None,
                "unclaimed_folders": [
                    asdict(f) | {"may_be_stats_of": maybe_in_use.get(f.name)} for f in unclaimed
                ],
            },
            out,
            indent=2,
            allow_nan=False,
        )
        out.write("\n")
    elif not docs:
        print("no tables configured (add [[table]] sections to the config)", file=out)
    else:
        rows = [
            [
                d["name"],
                d["format"],
                d["last_snapshot_id"],
                d["current_snapshot_id"],
                d["commits_behind"],
                describe_age(d["newest_unprocessed_age_s"]),
                describe_age(d["oldest_unprocessed_age_s"]),
                d["last_error"] or "",
            ]
            for d in docs
        ]
        headers = ["table", "format", "stats at", "table at", "behind", "newest", "oldest"]
        out.write(render_table([*headers, "last error"], rows, wide_last=True, wide_first=True))
    if unclaimed and not args.json:
        _print_unclaimed(unclaimed, out, configured=bool(config.table))
        for folder, table in sorted(maybe_in_use.items()):
            print(
                f"{folder} may hold the current stats of configured table {table}, which "
                "cannot be opened now: `forget` refuses it until the table can be opened",
                file=out,
            )
    return EXIT_ERROR if any(d["last_error"] for d in docs) else EXIT_OK


def _print_unclaimed(folders: Sequence[StoreFolder], out: TextIO, *, configured: bool) -> None:
    from lakestats.freshness import describe_age  # noqa: PLC0415

    now_ms = time.time() * 1000
    rows = [
        [
            f.name,
            f.table,
            f.format,
            f.last_snapshot_id,
            f.files,
            byte_size(f.bytes),
            describe_age(None if f.newest_file_ms is None else (now_ms - f.newest_file_ms) / 1e3),
            f.location or _no_location(f),
        ]
        for f in folders
    ]
    why = (
        "stats folders no configured table uses (a table moved or left the config)"
        if configured
        # by-path use: nothing claims a folder, so this lists tables still in use too
        else "stats folders (no table is configured: tables analyzed by path are listed too)"
    )
    print(f"\n{why};\n`lakestats forget FOLDER` deletes one:", file=out)
    headers = ["folder", "table", "format", "stats at", "files", "size", "written", "location"]
    out.write(render_table(headers, rows, wide_last=True, wide_first=True))


def _no_location(folder: StoreFolder) -> str:
    if folder.foreign_files:
        return f"not a stats folder: {folder.foreign_files} other file(s)"
    return f"unreadable: {folder.unreadable}" if folder.unreadable else "no state"


def _daemon_errors(
    config: Config, reports: dict[str, list[dict[str, Any]] | None]
) -> dict[str, str | None] | None:
    """Each table's ``last_error`` from the daemon replicas' ``reports``; None unless
    every replica answered."""
    if not config.table or any(tables is None for tables in reports.values()):
        return None
    return {
        str(t["name"]): t.get("last_error") for tables in reports.values() for t in tables or ()
    }


def _cmd_shards(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.shards import MAX_SHARDS, shard_of  # noqa: PLC0415

    if args.count is not None and not 1 <= args.count <= MAX_SHARDS:
        raise ConfigError(f"--count: must be 1 … {MAX_SHARDS}, got {args.count}")
    count = config.shards.count
    rows = []
    for table in config.table:
        row: dict[str, Any] = {"table": table.name, "shard": shard_of(table.name, count)}
        if args.count is not None:
            row["shard_after"] = shard_of(table.name, args.count)
            row["moves"] = row["shard_after"] != row["shard"]
        rows.append(row)
    if args.json:
        doc: dict[str, Any] = {"count": count, "tables": rows}
        if args.count is not None:
            doc["count_after"] = args.count
        json.dump(doc, out, indent=2)
        out.write("\n")
        return EXIT_OK
    if not rows:
        print("no tables configured (add [[table]] sections to the config)", file=out)
        return EXIT_OK
    headers = ["table", f"shard of {count}"]
    if args.count is not None:
        headers += [f"shard of {args.count}", "moves"]
    cells = [
        [r["table"], r["shard"]]
        + ([r["shard_after"], "yes" if r["moves"] else ""] if args.count is not None else [])
        for r in rows
    ]
    out.write(render_table(headers, cells, wide_first=True))
    per_shard = [sum(1 for r in rows if r["shard"] == i) for i in range(count)]
    summary = ", ".join(f"{i}: {n}" for i, n in enumerate(per_shard))
    print(f"{len(rows)} tables over {count} shard(s) (tables per shard {summary})", file=out)
    if args.count is not None:
        moved = sum(1 for r in rows if r["moves"])
        print(f"with {args.count} shard(s): {moved} of {len(rows)} tables move", file=out)
    return EXIT_OK


def _cmd_commits(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.analyze import list_commit_docs  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    opened = open_configured(_table_config(args, config), config)
    docs = list_commit_docs(opened)
    if args.json:
        json.dump(docs, out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        out.write(render_commits(opened.name, docs))
    return EXIT_OK


def _print_cleanup(report: Any, out: TextIO) -> None:
    verb = "would delete" if report.dry_run else "deleted"
    cleaned = report.cleanup
    for version in cleaned.versions_deleted:
        print(f"  {verb} state version {version}", file=out)
    for path in cleaned.files_deleted:
        print(f"  {verb} {path}", file=out)
    if cleaned.waiting:
        print(
            f"  {len(cleaned.waiting)} unreferenced file(s) wait for the grace period",
            file=out,
        )


def _cmd_expire(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.maintenance import expire  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    opened = open_configured(_table_config(args, config), config)
    report = expire(opened, config, dry_run=args.dry_run)
    would = "would " if report.dry_run else ""
    if opened.config.expire is None:
        print(f"{opened.name}: no expire policy: only stats of snapshots already gone", file=out)
    for snapshot in report.expired_snapshots:
        print(f"  {would}expire snapshot {snapshot}", file=out)
    for snapshot, path in sorted(report.dropped_stats.items()):
        print(f"  {would}drop stats of snapshot {snapshot} ({path})", file=out)
    for path in report.dropped_retired:
        print(f"  {would}drop retired segment {path} (no live snapshot lists its files)", file=out)
    _print_cleanup(report, out)
    print(
        f"{opened.name}: {would}expire {len(report.expired_snapshots)} snapshot(s), "
        f"{would}drop stats of {len(report.dropped_stats)}, "
        f"{would}delete {report.cleanup.removed} file(s)",
        file=out,
    )
    return EXIT_OK


def _cmd_compact(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.maintenance import compact  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    opened = open_configured(_table_config(args, config), config)
    report = compact(opened, config, dry_run=args.dry_run)
    would = "would " if report.dry_run else ""
    for group in report.merged:
        print(f"  {would}rewrite {len(group)} segment(s) into one: {', '.join(group)}", file=out)
    _print_cleanup(report, out)
    print(
        f"{opened.name}: {report.segments_before} → {report.segments_after} segment(s), "
        f"{would}drop rows of {report.dead_rows_dropped} dead file(s) from the live "
        f"segments ({report.dead_rows_retired} kept apart while a snapshot lists them), "
        f"{would}delete {report.cleanup.removed} file(s)",
        file=out,
    )
    return EXIT_OK


def _cmd_forget(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.unclaimed import forget_folder  # noqa: PLC0415

    report = forget_folder(config, args.folder, dry_run=args.dry_run)
    folder = report.folder
    what = f"table {folder.table}, " if folder.table else ""
    where = f"{what}{folder.location or 'no state'}"
    if report.dry_run:
        for rel in report.files:
            print(f"  would delete {rel}", file=out)
    verb = "would delete" if report.dry_run else "deleted"
    print(
        f"{folder.name} ({where}): {verb} {len(report.files)} file(s), {byte_size(folder.bytes)}",
        file=out,
    )
    return EXIT_OK


def _cmd_advise(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    from lakestats.advise import render_report, report_json  # noqa: PLC0415
    from lakestats.advise_io import advise_table  # noqa: PLC0415
    from lakestats.tables import open_configured  # noqa: PLC0415

    opened = open_configured(_table_config(args, config), config)
    report = advise_table(opened, config, args.column)
    if args.json:
        json.dump(report_json(report), out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        out.write(render_report(report, per_partition=args.per_partition))
    return EXIT_OK


def _positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0 (``nan``, ``inf`` and 0 would
    reach the socket's timeout, which refuses them with a traceback)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be above 0 and finite, got {text!r}")
    return value


def _cmd_notify(args: argparse.Namespace, config: Config, out: TextIO, err: TextIO) -> int:
    from lakestats.notify import DaemonUnavailableError, notify  # noqa: PLC0415

    timeout = args.timeout if args.timeout is not None else config.http.wait_timeout_s
    try:
        result = notify(config, args.table, wait=args.wait, timeout_s=timeout)
    except DaemonUnavailableError as exc:
        if not args.fallback_analyze:
            raise
        print(f"lakestats: {exc}; analyzing in this process instead", file=err)
        args.no_sketches, args.rebuild, args.quiet = False, False, True
        return _cmd_analyze(args, config, out, err)
    if result.waited:
        snapshot = result.last_snapshot_id
        print(f"{result.table}: stats are up to date (snapshot {snapshot})", file=out)
    else:
        print(f"{result.table}: commit notification queued by lakestatsd", file=out)
    return EXIT_OK


def _log_to_stderr() -> None:
    """lakestats' own log events from info up (warnings such as ``stats_not_published``) go
    to stderr, beside the progress lines: stdout carries only results (``show --json`` …).
    JSON lines when stderr is not a terminal, like the progress. An application that
    configured structlog itself keeps its configuration."""
    import structlog  # noqa: PLC0415

    if structlog.is_configured():
        return
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=False)
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        # sys.stderr looked up per message: it may be replaced after this call
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),  # no debug events
    )


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    stdout = out or sys.stdout
    stderr = sys.stderr
    args = _parser().parse_args(argv)
    if stdout is None:  # started with stdout closed (`lakestats status >&-`), as cat says
        print("lakestats: error: standard output is closed", file=stderr)
        return EXIT_ERROR
    _log_to_stderr()
    try:
        config = _load(args)
        cache.configure(config.cache_size)
        if args.command == "analyze":
            return _cmd_analyze(args, config, stdout, stderr)
        if args.command == "show":
            return _cmd_show(args, config, stdout, stderr)
        if args.command == "status":
            return _cmd_status(args, config, stdout)
        if args.command == "commits":
            return _cmd_commits(args, config, stdout)
        if args.command == "expire":
            return _cmd_expire(args, config, stdout)
        if args.command == "compact":
            return _cmd_compact(args, config, stdout)
        if args.command == "forget":
            return _cmd_forget(args, config, stdout)
        if args.command == "advise":
            return _cmd_advise(args, config, stdout)
        if args.command == "estimate":
            return _cmd_estimate(args, config, stdout, stderr)
        if args.command == "shards":
            return _cmd_shards(args, config, stdout)
        return _cmd_notify(args, config, stdout, stderr)
    except ConfigError as exc:
        print(f"lakestats: error: {exc}", file=stderr)
        return EXIT_USAGE
    except LakestatsError as exc:
        if args.debug:
            raise
        print(f"lakestats: error: {exc}", file=stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # before OSError, of which it is one
        # the reader went away (`show --json | head`): stop quietly, as `cat` does
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # a full disk, a read-only or unreadable directory: not a bug
        if args.debug:
            raise
        where = f": {exc.filename}" if exc.filename else ""
        print(f"lakestats: error: {exc.strerror or exc}{where}", file=stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("lakestats: interrupted; the stats store keeps its last version", file=stderr)
        return EXIT_INTERRUPTED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout already closed or not a real file
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
