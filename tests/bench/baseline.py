"""What lakestats is compared with: plain Spark over the same Parquet files.

Both baselines run in a child session of the one process-wide SparkSession (shared
SparkContext and JVM, so they are as warm as lakestats' own jobs), with Spark's defaults
apart from what each says.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import Timing, timed

SPARK_TABLE = "bench_lineitem"


def jvm_pid(spark: Any) -> int:
    """The Spark driver JVM's process id."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def min_scan(spark: Any, files: Sequence[str], columns: Sequence[str] | None = None) -> float:
    """Seconds for ``SELECT min(c) for every column`` (or ``columns``) over ``files``.

    Includes planning (reading the Parquet footers for the schema) and collecting the
    single result row. Spark's file source (DSv1) does not answer ``min`` from Parquet
    footers, so every column chunk is decompressed and decoded.
    """
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

    session = spark.newSession()

    def run() -> list[Any]:
        df = session.read.parquet(*files)
        wanted = df.columns if columns is None else columns
        return list(df.agg(*[F.min(c).alias(c) for c in wanted]).collect())

    _, seconds = timed(run)
    return seconds


@dataclass(frozen=True)
class FullBuild:
    """The full sketch build against a plain scan of the same files (DESIGN §11: ≤ 1.5×)."""

    scan: Timing  # min() of every column, after one cold run that is not counted
    sketch: Timing  # sketch_files over every file, as the sketcher of analyze_table calls it

    @property
    def ratio(self) -> float:
        """Best against best: other load on the machine only ever adds time."""
        return self.sketch.best / self.scan.best


def full_build(
    spark: Any,
    files: Sequence[str],
    sketch: Callable[[], object],
    repeat: int,
    progress: Callable[[str], None],
) -> FullBuild:
    """Time ``repeat`` plain ``min()`` scans of ``files`` (after a cold one) and ``repeat``
    runs of ``sketch`` (the full sketch job over the same files), interleaved so that a
    change of load on a shared machine falls on both."""
    progress(f"full build: a cold min() scan of {len(files)} files (not counted)")
    min_scan(spark, files)
    result = FullBuild(Timing(), Timing())
    for i in range(repeat):
        result.scan.seconds.append(min_scan(spark, files))
        result.sketch.seconds.append(timed(sketch)[1])
        progress(
            f"  run {i + 1}/{repeat}: min() scan {result.scan.seconds[-1]:.2f} s, "
            f"sketch_files {result.sketch.seconds[-1]:.2f} s"
        )
    return result


@dataclass(frozen=True)
class SparkAnalyze:
    seconds: Timing  # ANALYZE TABLE … COMPUTE STATISTICS FOR ALL COLUMNS, histograms on
    row_count: int | None
    distinct_count: dict[str, int | None]  # column -> Spark's own NDV estimate
    histogram_buckets: int


def create_table(spark: Any, files: Sequence[str], link_dir: Path) -> Any:
    """A Spark (in-memory catalog) Parquet table over exactly ``files``.

    The files are hard-linked (copied across file systems) into ``link_dir``, so the
    table's location holds the live files and nothing else.
    """
    if link_dir.exists():
        shutil.rmtree(link_dir)
    link_dir.mkdir(parents=True)
    for i, path in enumerate(files):
        target = link_dir / f"part-{i:05d}.parquet"
        try:
            os.link(path, target)
        except OSError:
            shutil.copyfile(path, target)
    session = spark.newSession()
    session.conf.set("spark.sql.statistics.histogram.enabled", "true")
    session.sql(f"DROP TABLE IF EXISTS {SPARK_TABLE}")
    location = str(link_dir).replace("'", "\\'")
    session.sql(f"CREATE TABLE {SPARK_TABLE} USING parquet LOCATION '{location}'")
    return session


def analyze(
    session: Any, columns: Sequence[str], repeat: int, progress: Callable[[str], None]
) -> SparkAnalyze:
    """Time Spark's ANALYZE (table + all columns, equi-height histograms) ``repeat`` times
    and read back what it computed. ``session.sql`` runs a command eagerly."""
    seconds = Timing()
    for i in range(repeat):
        _, took = timed(
            lambda: session.sql(f"ANALYZE TABLE {SPARK_TABLE} COMPUTE STATISTICS FOR ALL COLUMNS")
        )
        seconds.seconds.append(took)
        progress(f"  ANALYZE TABLE {i + 1}/{repeat}: {took:.2f} s")
    distinct: dict[str, int | None] = {}
    for column in columns:
        rows = session.sql(f"DESCRIBE TABLE EXTENDED {SPARK_TABLE} `{column}`").collect()
        info = {r["info_name"]: r["info_value"] for r in rows}
        value = info.get("distinct_count")
        distinct[column] = None if value in (None, "NULL") else int(value)
    stats = [
        r
        for r in session.sql(f"DESCRIBE TABLE EXTENDED {SPARK_TABLE}").collect()
        if r["col_name"] == "Statistics"
    ]
    row_count = None
    if stats:  # "123 bytes, 456 rows"
        for piece in str(stats[0]["data_type"]).split(","):
            if piece.strip().endswith("rows"):
                row_count = int(piece.split()[0])
    buckets = int(session.conf.get("spark.sql.statistics.histogram.numBins"))
    return SparkAnalyze(seconds, row_count, distinct, buckets)
