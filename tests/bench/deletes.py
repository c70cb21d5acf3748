"""``make bench`` (row-level deletes, issue 10): fresh stats after a 1 % merge-on-read delete.

The TPC-H lineitem Iceberg table of ``run.py`` (``tpch.py``: ``--commits`` pyiceberg
appends, cached under ``--work-dir`` with ``--keep``), analyzed once by lakestats. Then,
for each of two shapes of a 1 % ``DELETE``, starting from that same table and stats store:

* **clustered**: ``DELETE … WHERE l_orderkey >= lo AND l_orderkey < hi`` — a range of the
  key the parts are generated in order of, so the deleted rows sit in one or two files;
* **spread**: ``DELETE … WHERE l_orderkey % 100 = 42`` — about 1 % of the rows of every
  file (the worst case: every data file gets deletes and is re-read);
* **equality**: the same rows deleted as Flink's upserts delete them: one equality-delete
  file on ``l_orderkey`` listing the deleted keys, which applies to every data file; timed
  with the Arrow engine (the default) and again with ``[sketch] engine = "sql"``;

a position delete is committed as Spark's merge-on-read ``DELETE`` writes it with Iceberg's
``write.delete.granularity=file``: one position-delete file per data file it touches,
holding that file's deleted row positions, in one ``overwrite`` snapshot
(``lakestats.formats.iceberg.testing_deletes.add_position_deletes``). Measured:

1. lakestats' time to fresh stats: ``open_configured`` + ``analyze_table`` of that one
   commit (``--repeat`` runs, each on a copy of the store the initial analyze left), with
   the files and rows it re-read (its commit report);
2. the stats checked against exact values: DuckDB's iceberg extension reads the snapshot
   (it applies the position deletes itself): live row count, null counts, min and max
   exact, NDV within 3 standard errors of the theta sketch. A mismatch fails the run;
3. the peer: Spark ``ANALYZE TABLE … COMPUTE STATISTICS FOR ALL COLUMNS`` (histograms on)
   over a Parquet table holding exactly the live rows, in the same files (each data file
   with its deleted rows left out, as copy-on-write would have rewritten it).

Prints the results and writes them into docs/benchmarks.md (section ``bench:deletes-…``).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import baseline
import duckdb
import numpy as np
import options
import pyarrow as pa
import pyarrow.parquet as pq
import sections
import tpch
from measure import Timing, cpus, load_average, machine, timed
from options import progress

try:
    from lakestats.analyze import CommitReport, SparkSketcher, analyze_table, read_stats
    from lakestats.config import Config, SparkConfig, TableConfig
    from lakestats.formats.iceberg.testing_deletes import (
        add_equality_deletes,
        add_position_deletes,
    )
    from lakestats.sketches.merge import theta_relative_standard_error
    from lakestats.sketches.spark import SparkSettings, get_spark, stop_spark
    from lakestats.tables import open_configured
    from lakestats.values import to_json
except ImportError as exc:  # pragma: no cover - a set-up problem, said plainly
    raise SystemExit(f"cannot import lakestats ({exc}): run `make bench` (installs it)") from exc

REPO = options.REPO
CATALOG = "bench"
KEY = "l_orderkey"
NDV_SIGMAS = 3  # NDV must be within this many theta standard errors of the exact count


@dataclass(frozen=True)
class Shape:
    name: str
    predicate: str  # the DELETE's WHERE clause, for the report
    deleted: Callable[[np.ndarray], np.ndarray]  # l_orderkey values -> rows to delete
    equality: bool = False  # committed as an equality delete on l_orderkey (Flink's upsert)


@dataclass(frozen=True)
class ShapeResult:
    shape: Shape
    files_with_deletes: int
    deleted_rows: int
    commit_seconds: float
    update: Timing
    report: CommitReport
    live_rows: int
    checks: list[str]  # what was checked, one line each
    failures: list[str]
    worst_ndv: tuple[str, float]
    copy_files: int
    analyze: Timing
    spark_rows: int | None
    sql_update: Timing | None = None  # the same update with [sketch] engine = "sql"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tests/bench/deletes.py",
        description="Fresh stats after a 1 %% position delete on TPC-H lineitem (Iceberg) "
        "vs Spark ANALYZE TABLE over the live rows.",
    )
    return options.parse(
        parser,
        argv,
        keep="reuse the generated data and table of an earlier run (run.py's cache) and keep them",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work_dir: Path = args.work_dir.resolve()
    run_dir = work_dir / "deletes-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    dataset = tpch.prepare(
        work_dir, args.scale_factor, args.commits, reuse=args.keep, progress=progress
    )
    command = shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        lines, failures = measure(args, dataset, run_dir, command)
    finally:
        stop_spark()
        shutil.rmtree(run_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(dataset.root, ignore_errors=True)
    print("\n".join(lines))
    if failures:  # a fast wrong answer is not a result: nothing is recorded
        print("\nWRONG STATS after the delete:\n" + "\n".join(failures), file=sys.stderr)
        return 1
    if not args.no_report:
        sections.write_section(
            args.report,
            f"deletes-sf{args.scale_factor:g}-c{args.commits}",
            lines,
            anchor="<!-- bench:deletes -->",
            heading=(
                "## Row-level deletes: a 1 % position or equality delete (`tests/bench/deletes.py`)"
            ),
        )
        progress(f"wrote the results into {args.report}")
    return 0


def shapes(keys: np.ndarray) -> list[Shape]:
    """The two deletes, each about 1 % of ``keys`` (every live row's l_orderkey)."""
    ordered = np.sort(keys)
    lo = int(ordered[len(ordered) // 2])
    hi = int(ordered[min(len(ordered) - 1, len(ordered) // 2 + len(ordered) // 100)])
    return [
        Shape(
            "clustered",
            f"{KEY} >= {lo} AND {KEY} < {hi}",
            lambda k: (k >= lo) & (k < hi),
        ),
        Shape("spread", f"{KEY} % 100 = 42", lambda k: k % 100 == 42),
        Shape("equality", f"{KEY} % 100 = 42", lambda k: k % 100 == 42, equality=True),
    ]


def measure(
    args: argparse.Namespace, dataset: tpch.Dataset, run_dir: Path, command: str
) -> tuple[list[str], list[str]]:
    loads = {"start": load_average()}
    table = tpch.RunTable(dataset, run_dir / "table-initial")
    config = Config(
        state_dir=str(run_dir / "state"),
        spark=SparkConfig(
            master=args.spark_master,
            conf={
                "spark.ui.enabled": "false",
                "spark.sql.warehouse.dir": str(run_dir / "spark-warehouse"),
            },
        ),
        catalog={CATALOG: table.catalog_properties},
        table=(TableConfig(name="lineitem", catalog=CATALOG, identifier=tpch.IDENTIFIER),),
    )
    table_config = config.table[0]
    progress(f"starting Spark ({args.spark_master}); load average {loads['start']:.2f}")
    spark, spark_start = timed(
        lambda: get_spark(SparkSettings(master=config.spark.master, conf=config.spark.conf))
    )
    try:
        progress(f"lakestats initial analyze over {args.commits} commits")
        _, initial = timed(
            lambda: analyze_table(
                open_configured(table_config, config),
                config=config,
                sketcher=SparkSketcher(config),
            )
        )
        progress(f"  {initial:.2f} s")
    finally:
        table.cleanup()  # what publishing added: each shape starts from the loaded table
    keys = _keys(tpch.RunTable(dataset, run_dir / "table-keys"))
    rows_before = sum(len(v) for v in keys.values())
    results = []
    for shape in shapes(np.concatenate(list(keys.values()))):
        results.append(
            _measure_shape(
                args, shape, dataset=dataset, run_dir=run_dir, config=config, keys=keys, spark=spark
            )
        )
        loads[f"after {shape.name}"] = load_average()
    lines = _report(
        args,
        command=command,
        spark=spark,
        spark_start=spark_start,
        initial=initial,
        rows_before=rows_before,
        files=len(keys),
        results=results,
        loads=loads,
    )
    return lines, [f for r in results for f in r.failures]


def _keys(table: tpch.RunTable) -> dict[str, np.ndarray]:
    """Each live data file's l_orderkey column, in row order (position = index)."""
    return {
        task.file.file_path: pq.read_table(tpch.local_path(task.file.file_path), columns=[KEY])
        .column(KEY)
        .to_numpy()
        for task in table.table().scan().plan_files()
    }


def _measure_shape(
    args: argparse.Namespace,
    shape: Shape,
    *,
    dataset: tpch.Dataset,
    run_dir: Path,
    config: Config,
    keys: Mapping[str, np.ndarray],
    spark: Any,
) -> ShapeResult:
    # the loaded snapshots again, in a catalog of their own (the initial run's catalog
    # names metadata its publishing wrote, which ``cleanup`` deleted)
    table = tpch.RunTable(dataset, run_dir / f"table-{shape.name}")
    config = config.model_copy(update={"catalog": {CATALOG: table.catalog_properties}})
    try:
        positions = {path: np.flatnonzero(shape.deleted(values)) for path, values in keys.items()}
        positions = {path: p for path, p in positions.items() if len(p)}
        deleted_rows = sum(len(p) for p in positions.values())
        how = "one equality-delete file" if shape.equality else "position deletes"
        progress(
            f"{shape.name}: DELETE WHERE {shape.predicate}: {deleted_rows:,} rows in "
            f"{len(positions)} files, committed as {how}"
        )
        if shape.equality:
            doomed = np.unique(np.concatenate([keys[p][v] for p, v in positions.items()]))
            _, commit_seconds = timed(
                lambda: add_equality_deletes(table.table(), [KEY], [(int(k),) for k in doomed])
            )
        else:
            _, commit_seconds = timed(
                lambda: add_position_deletes(
                    table.table(), {p: v.tolist() for p, v in positions.items()}
                )
            )
        update, report = _updates(args, config)
        sql_update = None
        if shape.equality:  # the SQL job's anti-join, for the Arrow engine's first job
            progress('  the same update with [sketch] engine = "sql"')
            sql_config = config.model_copy(
                update={
                    "state_dir": f"{config.state_dir}-sql",
                    "sketch": config.sketch.model_copy(update={"engine": "sql"}),
                }
            )
            sql_update, _ = _updates(args, sql_config, initial_state=Path(config.state_dir))
        progress(
            f"  re-read {report.deletes_reread_files} files, {report.deletes_reread_rows:,} rows"
        )
        metadata = tpch.local_path(str(table.table().metadata_location))
        doc = read_stats(open_configured(config.table[0], _state_copy(config, 1)))
        rows_before = sum(len(v) for v in keys.values())
        live_rows, checks, failures, worst = _check(
            doc, metadata, rows_before=rows_before, deleted_rows=deleted_rows
        )
        for line in failures:
            progress(f"  WRONG: {line}")
        live_dir = run_dir / f"live-{shape.name}"
        copied = _live_copy(keys, positions, live_dir)
        progress(
            f"  Spark ANALYZE TABLE … FOR ALL COLUMNS over the live rows ({len(copied)} files)"
        )
        session = baseline.create_table(spark, copied, run_dir / f"spark-table-{shape.name}")
        columns = [f.name for f in table.table().schema().fields]
        spark_result = baseline.analyze(session, columns, args.repeat, progress)
        shutil.rmtree(live_dir, ignore_errors=True)
        return ShapeResult(
            shape=shape,
            files_with_deletes=len(positions),
            deleted_rows=deleted_rows,
            commit_seconds=commit_seconds,
            update=update,
            report=report,
            live_rows=live_rows,
            checks=checks,
            failures=failures,
            worst_ndv=worst,
            copy_files=len(copied),
            analyze=spark_result.seconds,
            spark_rows=spark_result.row_count,
            sql_update=sql_update,
        )
    finally:
        table.cleanup()


def _state_copy(config: Config, run: int) -> Config:
    return config.model_copy(update={"state_dir": f"{config.state_dir}-{run}"})


def _updates(
    args: argparse.Namespace, config: Config, initial_state: Path | None = None
) -> tuple[Timing, CommitReport]:
    """``--repeat`` incremental runs, each from a fresh copy of the initial store
    (``initial_state``, else the config's), so each does the same work: open, plan the
    delete commit, re-read, store, merge, publish."""
    state = initial_state or Path(config.state_dir)
    update = Timing()
    first: CommitReport | None = None
    for run in range(1, args.repeat + 1):
        run_config = _state_copy(config, run)
        shutil.rmtree(run_config.state_dir, ignore_errors=True)
        shutil.copytree(state, run_config.state_dir)
        reports: list[CommitReport] = []

        def fresh(run_config: Config = run_config, reports: list[CommitReport] = reports) -> None:
            analyze_table(
                open_configured(run_config.table[0], run_config),
                config=run_config,
                sketcher=SparkSketcher(run_config),
                on_commit=reports.append,
            )

        _, seconds = timed(fresh)
        if len(reports) != 1:
            raise RuntimeError(
                f"expected the one delete commit, lakestats processed {len(reports)}"
            )
        update.seconds.append(seconds)
        first = first or reports[0]
        progress(f"  lakestats update {run}/{args.repeat}: {seconds:.2f} s")
    assert first is not None
    return update, first


def _check(
    doc: Mapping[str, Any], metadata: str, *, rows_before: int, deleted_rows: int
) -> tuple[int, list[str], list[str], tuple[str, float]]:
    """(live rows, what was checked, mismatches, worst NDV error) of the stats document
    against DuckDB's iceberg extension over the same snapshot."""
    rse = theta_relative_standard_error(12)
    con = _duckdb()
    failures: list[str] = []
    worst = ("-", 0.0)
    try:
        scan = f"iceberg_scan('{metadata}')"
        con.execute(f"CREATE TEMP TABLE live AS SELECT * FROM {scan}")  # noqa: S608
        live = _one(con, "SELECT count(*) FROM live")[0]
        if live != rows_before - deleted_rows:
            failures.append(
                f"DuckDB counts {live:,} live rows, the delete left {rows_before - deleted_rows:,}"
            )
        if doc["merged_record_count"] != live:
            failures.append(f"merged_record_count {doc['merged_record_count']} != {live}")
        if doc["row_deletes"].get("exact") is not True:
            failures.append(f"row_deletes not exact: {doc['row_deletes']}")
        for name, got in doc["columns"].items():
            quoted = '"' + name.replace('"', '""') + '"'
            nulls, lo, hi, ndv = _one(
                con,
                f"SELECT count(*) - count({quoted}), min({quoted}), max({quoted}), "  # noqa: S608
                f"count(DISTINCT {quoted}) FROM live",
            )
            if got["null_count"] != nulls:
                failures.append(f"{name}: null_count {got['null_count']} != {nulls}")
            if (got["min"], got["max"]) != (to_json(lo), to_json(hi)):
                failures.append(
                    f"{name}: min/max {got['min']!r}/{got['max']!r} != "
                    f"{to_json(lo)!r}/{to_json(hi)!r}"
                )
            error = abs(got["ndv"] - ndv) / max(ndv, 1)
            if error > NDV_SIGMAS * rse:
                failures.append(f"{name}: NDV {got['ndv']} vs exact {ndv} ({error:.2%})")
            if error >= worst[1]:
                worst = (name, error)
    finally:
        con.close()
    checks = [
        f"live rows {live:,} = DuckDB count = rows before − deleted rows",
        f"null count, min and max of all {len(doc['columns'])} columns equal DuckDB's",
        f"NDV within {NDV_SIGMAS} standard errors ({NDV_SIGMAS * rse:.2%}) of DuckDB's exact "
        f"count(DISTINCT); worst {worst[0]} {worst[1]:.2%}",
    ]
    return int(live), checks, failures, worst


def _duckdb() -> duckdb.DuckDBPyConnection:
    """DuckDB with the iceberg and avro extensions from their PyPI packages (no download)."""
    import duckdb_extension_avro  # type: ignore[import-untyped]
    import duckdb_extension_iceberg  # type: ignore[import-untyped]

    con = duckdb.connect(config={"threads": cpus()})
    for package in (duckdb_extension_avro, duckdb_extension_iceberg):
        (binary,) = Path(package.__file__).parent.rglob("*.duckdb_extension")
        con.execute(f"LOAD '{binary}'")
    return con


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    if row is None:
        raise RuntimeError(f"no result from {sql!r}")
    return tuple(row)


def _live_copy(
    keys: Mapping[str, np.ndarray], positions: Mapping[str, np.ndarray], out_dir: Path
) -> list[str]:
    """Each data file's live rows, as copy-on-write would leave them: files without
    deletes as they are, the others rewritten without their deleted rows (zstd, as
    pyiceberg writes). Not timed: it stands for the table the peer analyzes."""
    out_dir.mkdir(parents=True)
    files = []
    for i, path in enumerate(keys):
        local = tpch.local_path(path)
        dead = positions.get(path)
        if dead is None:
            files.append(local)
            continue
        data = pq.read_table(local)
        keep = np.ones(data.num_rows, dtype=bool)
        keep[dead] = False
        target = out_dir / f"live-{i:05d}.parquet"
        pq.write_table(data.filter(pa.array(keep)), target, compression="zstd")
        files.append(str(target))
    return files


def _report(
    args: argparse.Namespace,
    *,
    command: str,
    spark: Any,
    spark_start: float,
    initial: float,
    rows_before: int,
    files: int,
    results: Sequence[ShapeResult],
    loads: Mapping[str, float],
) -> list[str]:
    m = machine()
    load_line = ", ".join(f"{name} {value:.2f}" for name, value in loads.items())
    lines = [
        f"### TPC-H lineitem SF {args.scale_factor:g}, {args.commits} commits, then a 1 % "
        f"position or equality delete — {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "",
        f"* **Command:** `.venv/bin/python tests/bench/deletes.py {command}` (`make bench` "
        "runs it without options: SF 1, 100 commits)",
        f"* **Machine:** {m['cpus']} CPUs ({m['cpu']}), {m['memory']}, {m['os']}, "
        f"Python {m['python']}; Spark {spark.version} {args.spark_master}, started in "
        f"{spark_start:.2f} s (in no timing)",
        f"* **Load:** 1-minute load average {load_line} (this run's Spark adds up to 2; the "
        "machine is shared, so other work inflates absolute times — compare ratios)",
        f"* **Table:** {rows_before:,} rows in {files} data files; lakestats' initial analyze "
        f"of the {args.commits} commits took {initial:.2f} s",
        "",
        "| shape | DELETE WHERE | deleted rows (files) | commit | lakestats re-read "
        "(commit report) | **lakestats: fresh stats** | **Spark ANALYZE** over the live "
        "rows | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.shape.name} | `{r.shape.predicate}` | {r.deleted_rows:,} "
            f"({r.files_with_deletes} files) | {r.commit_seconds:.2f} s | "
            f"{r.report.deletes_reread_files} files, {r.report.deletes_reread_rows:,} rows | "
            f"**{r.update.best:.2f} s** (median {statistics.median(r.update.seconds):.2f}, "
            f"n={len(r.update.seconds)}) | **{r.analyze.best:.2f} s** (median "
            f"{r.analyze.median:.2f}, n={len(r.analyze.seconds)}, {r.copy_files} files) | "
            f"{r.analyze.best / r.update.best:.1f}× |"
        )
    lines.append("")
    for r in results:
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in r.report.timings.items())
        verdict = "all correct" if not r.failures else f"{len(r.failures)} WRONG"
        sql = (
            ""
            if r.sql_update is None
            else f' The same update by the SQL job (`[sketch] engine = "sql"`): '
            f"{r.sql_update.best:.2f} s (median {statistics.median(r.sql_update.seconds):.2f}),"
            f" {r.sql_update.best / r.update.best:.1f}× the Arrow engine's."
        )
        lines.append(
            f"* {r.shape.name}: phases of the first update: {phases}. Checked against DuckDB "
            f"({verdict}): " + "; ".join(r.checks) + f". Spark counted {r.spark_rows} rows." + sql
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
