"""Selectivity q-error: lakestats' histograms against Spark's CBO and a uniform model.

    .venv/bin/python tests/bench/qerror.py                      # the cached TPC-H table
    .venv/bin/python tests/bench/qerror.py --scale-factor 0.1 --per-kind 10
    .venv/bin/python tests/bench/qerror.py --files 'x/*.parquet'

For the data files of the TPC-H lineitem table ``tests/bench/run.py`` loads (reused from
its cache in ``--work-dir``, generated and loaded there if missing) or the given Parquet
files, and a generated skewed data set (Zipf-distributed long and decimal columns,
``--skewed-rows``):

1. lakestats: ``sketch_files`` over the files, per-file sketches merged, and the column
   entry of the stats document built by ``publish.native.column_doc`` (exactly what
   ``show --json`` serves); estimates by ``lakestats.selectivity.selectivity``.
2. Spark: a Parquet table over the same files, ``ANALYZE TABLE … FOR ALL COLUMNS`` with
   equi-height histograms (254 bins), CBO on; its estimate is the row count of the
   optimized plan of ``SELECT * FROM t WHERE <predicate>`` (no job runs).
3. Uniform: min, max, NDV and nulls only (what an optimizer without histograms assumes).
4. Exact: DuckDB ``count(*)`` over the same files.

Predicates per numeric/decimal/date column and kind (``--per-kind`` each, constants drawn
from the column's own values): ``=``, ``<``, narrow ``BETWEEN`` (≈ 0.1 % of the value
range), wide ``BETWEEN`` (≈ 10-50 %), ``IN`` of 3 values. q-error = max(est/exact,
exact/est) with both floored at 1 row. Also the bucket row-count error of lakestats'
histogram against exact counts per bucket, and, in a table of their own, comparisons
joined by AND (``lakestats.estimates``): a range written as ``c >= a AND c <= b``, and
``c1 <= a AND c2 >= b`` on two columns (independence assumed by lakestats and Spark); and,
in another, ``=`` and ``IN`` of 3 values on string columns (no histogram: lakestats' frequent
values against Spark's NDV; the skewed set has a Zipf string column for it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import math
import random
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import tpch
from baseline import SPARK_TABLE, create_table

from lakestats.config import SketchConfig
from lakestats.estimates import estimate_from
from lakestats.model import ColumnAggregate, ColumnSketch, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.publish.native import column_doc
from lakestats.selectivity import Predicate, selectivity
from lakestats.sketches.frequent import kind_of, merge_frequent_items
from lakestats.sketches.merge import merge_kll, union_theta
from lakestats.sketches.spark import SparkSettings, get_spark
from lakestats.sketches.value_sample import union_value_samples

_HISTOGRAM_TYPES = ("int", "long", "double", "float", "date")
KINDS = ("=", "<", "between narrow", "between wide", "in")
CONJUNCTION_KINDS = ("and, one column", "and, two columns")
STRING_KINDS = ("string =", "string in")


def _schema(path: str) -> TableSchema:
    from columns import _schema as schema_of

    return schema_of(path)


def _doc(files: Sequence[str], schema: TableSchema, spark: Any) -> dict[str, Any]:
    """The stats document's columns for ``files``, as ``show --json`` would serve them."""
    # the defaults: value samples and frequent items (256) on
    settings = SketchConfig().settings()
    per_file = sketch_files(spark, files, schema, settings)
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    columns: dict[str, Any] = {}
    for column in schema.columns:
        sketches: list[ColumnSketch] = [per_file[f][column.field_id] for f in files]
        aggregate = ColumnAggregate(
            field_id=column.field_id,
            type=column.type,
            files=len(files),
            records=rows,
            null_count=sum(s.null_count or 0 for s in sketches),
            nan_count=sum(s.nan_count or 0 for s in sketches),
            lower=min((s.min for s in sketches if s.min is not None), default=None),
            upper=max((s.max for s in sketches if s.max is not None), default=None),
            sketched_files=len(files),
            theta=union_theta([s.theta for s in sketches], settings.theta_lg_k),
            kll=merge_kll([s.kll for s in sketches], settings.kll_k),
            value_sample=union_value_samples(
                [s.value_sample for s in sketches], settings.theta_lg_k
            ),
            frequent_items=(
                merge_frequent_items((s.frequent_items for s in sketches), kind)
                if (kind := kind_of(column.type))
                else None
            ),
        )
        columns[column.name] = column_doc(aggregate, column.field_id, column.type, rows, settings)
    return {"record_count": rows, "columns": columns}


def _has_histogram(type_str: str) -> bool:
    return type_str in _HISTOGRAM_TYPES or type_str.startswith("decimal")


def _sql_literal(value: Any) -> str:
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, Decimal):
        return f"{value}BD"
    return repr(value)


def _duck_literal(value: Any) -> str:
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return str(value)


def _predicates(  # noqa: PLR0917 - private, called once
    con: Any, source: str, name: str, type_str: str, per_kind: int, rng: random.Random
) -> list[tuple[str, Predicate, str, str]]:
    """(kind, lakestats predicate, Spark SQL condition, DuckDB condition)."""
    sample = [
        r[0]
        for r in con.execute(
            f"SELECT {name} FROM (SELECT {name} FROM {source} WHERE {name} IS NOT NULL) "  # noqa: S608 - our own names
            "USING SAMPLE reservoir(2000 ROWS) REPEATABLE (14)"
        ).fetchall()
    ]
    lo, hi = con.execute(f"SELECT min({name}), max({name}) FROM {source}").fetchone()  # noqa: S608
    out: list[tuple[str, Predicate, str, str]] = []

    def add(kind: str, op: str, values: Sequence[Any]) -> None:
        constants = tuple(v.isoformat() if isinstance(v, dt.date) else v for v in values)
        predicate = Predicate(name, op, constants)  # type: ignore[arg-type] # op is an Op
        if op == "between":
            spark = f"{name} BETWEEN {_sql_literal(values[0])} AND {_sql_literal(values[1])}"
            duck = f"{name} BETWEEN {_duck_literal(values[0])} AND {_duck_literal(values[1])}"
        elif op == "in":
            spark = f"{name} IN ({', '.join(_sql_literal(v) for v in values)})"
            duck = f"{name} IN ({', '.join(_duck_literal(v) for v in values)})"
        else:
            spark = f"{name} {op} {_sql_literal(values[0])}"
            duck = f"{name} {op} {_duck_literal(values[0])}"
        out.append((kind, predicate, spark, duck))

    span = _number(hi) - _number(lo)
    for _ in range(per_kind):
        a = rng.choice(sample)
        add("=", "=", [a])
        add("<", "<", [rng.choice(sample)])
        for kind, share in (("between narrow", 0.001), ("between wide", rng.uniform(0.1, 0.5))):
            b = _plus(a, span * share, type_str)
            add(kind, "between", [a, b])
        add("in", "in", rng.sample(sample, 3))
    return out


def _number(value: Any) -> float:
    if isinstance(value, dt.date):
        return float(value.toordinal())
    return float(value)


def _plus(value: Any, delta: float, type_str: str) -> Any:
    if isinstance(value, dt.date):
        return value + dt.timedelta(days=max(1, round(delta)))
    if isinstance(value, Decimal):
        scale = -value.as_tuple().exponent  # type: ignore[operator]
        return value + Decimal(str(round(delta, int(scale))))
    if type_str in ("int", "long"):
        return value + max(1, round(delta))
    return value + delta


def _uniform(column: dict[str, Any], rows: int, predicate: Predicate) -> float:
    """Rows by min/max/NDV alone: equality 1/NDV, ranges in proportion to the value range."""
    from lakestats.selectivity import _unit

    t = column["type"]
    non_null = rows - (column["null_count"] or 0)
    ndv = max(float(column["ndv"] or 1), 1.0)
    lo, hi = _unit(t, column["min"]), _unit(t, column["max"])
    width = max(hi - lo, 1e-12)
    points = [_unit(t, v) for v in predicate.values]
    if predicate.op == "=":
        return non_null / ndv if lo <= points[0] <= hi else 0.0
    if predicate.op == "in":
        return non_null / ndv * sum(1 for p in set(points) if lo <= p <= hi)
    if predicate.op == "<":
        return non_null * min(1.0, max(0.0, (points[0] - lo) / width))
    a, b = points
    return non_null * max(0.0, (min(b, hi) - max(a, lo)) / width) + (non_null / ndv)


def _spark_rows(session: Any, condition: str) -> float | None:
    plan = session.sql(f"SELECT * FROM {SPARK_TABLE} WHERE {condition}")  # noqa: S608
    stats = plan._jdf.queryExecution().optimizedPlan().stats()
    count = stats.rowCount()
    return float(str(count.get())) if count.isDefined() else None


def _q(estimate: float | None, exact: float) -> float:
    if estimate is None:
        return math.inf
    est, ex = max(estimate, 1.0), max(exact, 1.0)
    return max(est / ex, ex / est)


RESAMPLES = 2000


def _resampled_share(ours: Sequence[float], theirs: Sequence[float], p: float, seed: int) -> float:
    """How often lakestats' p-th percentile q-error is at or below Spark's over resamples
    of the same predicates: how far a met or missed cell is from the predicates drawn."""
    drawn = np.random.default_rng(seed).integers(0, len(ours), (RESAMPLES, len(ours)))
    mine = np.percentile(np.asarray(ours)[drawn], p, axis=1)
    spark = np.percentile(np.asarray(theirs)[drawn], p, axis=1)
    return float(np.mean(mine <= spark))


def _summary(values: Sequence[float]) -> str:
    v = np.array(sorted(values))
    return " / ".join(f"{x:.2f}" for x in np.percentile(v, [50, 90, 99, 100]))


def _bucket_errors(con: Any, source: str, name: str, column: dict[str, Any]) -> list[float]:
    """|count − exact| / exact for each bucket (exact by DuckDB over the bucket's range)."""
    errors = []
    for j, bucket in enumerate(column["histogram"]):
        lower, upper = bucket["lower"], bucket["upper"]
        lit = (lambda v: f"DATE '{v}'") if column["type"] == "date" else str
        low_op = ">=" if j == 0 else ">"
        exact = con.execute(
            f"SELECT count(*) FROM {source} WHERE {name} {low_op} {lit(lower)} "  # noqa: S608
            f"AND {name} <= {lit(upper)}"
        ).fetchone()[0]
        errors.append(abs(bucket["count"] - exact) / max(exact, 1))
    return errors


def _skewed(path: Path, rows: int, rng: np.random.Generator) -> list[str]:
    """Ten Parquet files (with field ids) of Zipf-skewed values: a CBO's hard case."""
    path.mkdir(parents=True, exist_ok=True)
    fields = [
        pa.field("zipf_long", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("zipf_price", pa.decimal128(12, 2), metadata={b"PARQUET:field_id": b"2"}),
        pa.field("ship_day", pa.date32(), metadata={b"PARQUET:field_id": b"3"}),
        pa.field("zipf_tag", pa.string(), metadata={b"PARQUET:field_id": b"4"}),
    ]
    files = []
    for i in range(10):
        n = rows // 10
        longs = np.minimum(rng.zipf(1.3, n), 10**9).astype(np.int64)
        cents = np.minimum(rng.zipf(1.5, n), 10**8) * 25
        days = (rng.zipf(1.8, n) % 3650).astype(np.int32)
        # a generator of its own, so that the numeric columns stay what they were
        tags = np.minimum(np.random.default_rng(1000 + i).zipf(1.4, n), 10**6)
        table = pa.Table.from_arrays(
            [
                pa.array(longs),
                pa.array([Decimal(int(c)) / 100 for c in cents], pa.decimal128(12, 2)),
                pa.array(days, pa.int32()).cast(pa.date32()),
                pa.array([f"étiquette {t}" for t in tags.tolist()], pa.string()),
            ],
            schema=pa.schema(fields),
        )
        target = path / f"skewed-{i}.parquet"
        pq.write_table(table, target)
        files.append(str(target))
    return files


def run_dataset(
    label: str, files: list[str], spark: Any, work: Path, args: argparse.Namespace
) -> None:
    schema = _schema(files[0])
    print(f"\n### {label}: {len(files)} files\n", flush=True)
    doc = _doc(files, schema, spark)
    rows = int(doc["record_count"])
    session = create_table(spark, files, work / f"spark-{label.split(maxsplit=1)[0].lower()}")
    session.conf.set("spark.sql.cbo.enabled", "true")
    session.conf.set("spark.sql.cbo.planStats.enabled", "true")
    # plan statistics read the conf of the thread's active session: make it this one
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
    numeric = [c for c in schema.columns if _has_histogram(c.type)]
    strings = [c for c in schema.columns if c.type == "string"]
    session.sql(
        f"ANALYZE TABLE {SPARK_TABLE} COMPUTE STATISTICS FOR COLUMNS "
        + ", ".join(c.name for c in numeric + strings)
    )
    con = duckdb.connect()
    source = "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"
    rng = random.Random(args.seed)
    q: dict[str, dict[str, list[float]]] = {
        k: {"lakestats": [], "spark": [], "uniform": []} for k in KINDS
    }
    print("| column | type | buckets | bucket count error median / p90 / max |")
    print("|---|---|---|---|")
    for column in numeric:
        entry = doc["columns"][column.name]
        errors = _bucket_errors(con, source, column.name, entry)
        p50, p90, pmax = np.percentile(errors, [50, 90, 100]) * 100
        print(f"| {column.name} | {column.type} | {len(errors)} | "
              f"{p50:.2f} % / {p90:.2f} % / {pmax:.2f} % |", flush=True)  # fmt: skip
        for kind, predicate, spark_sql, duck_sql in _predicates(
            con, source, column.name, column.type, args.per_kind, rng
        ):
            exact = float(
                con.execute(f"SELECT count(*) FROM {source} WHERE {duck_sql}").fetchone()[0]  # noqa: S608
            )
            ours = selectivity(doc, predicate) * rows
            theirs = _spark_rows(session, spark_sql)
            if args.show_worst and max(_q(ours, exact), _q(theirs, exact)) > args.show_worst:
                print(f"  worst: {predicate} lakestats {ours:.2f} Spark {theirs} exact {exact:.0f}")
            q[kind]["lakestats"].append(_q(ours, exact))
            q[kind]["spark"].append(_q(theirs, exact))
            q[kind]["uniform"].append(_q(_uniform(entry, rows, predicate), exact))
    print(
        "\n| predicate kind | n | lakestats q-error p50 / p90 / p99 / max | Spark CBO | uniform |"
    )
    print("|---|---|---|---|---|")
    everything: dict[str, list[float]] = {"lakestats": [], "spark": [], "uniform": []}
    for kind in KINDS:
        for who in everything:
            everything[who] += q[kind][who]
        print(f"| {kind} | {len(q[kind]['lakestats'])} | {_summary(q[kind]['lakestats'])} | "
              f"{_summary(q[kind]['spark'])} | {_summary(q[kind]['uniform'])} |")  # fmt: skip
    total = {who: _summary(values) for who, values in everything.items()}
    print(f"| all | {len(everything['lakestats'])} | {total['lakestats']} | {total['spark']} "
          f"| {total['uniform']} |", flush=True)  # fmt: skip
    print("\nTarget, lakestats at or below Spark's CBO (unrounded; ties count as met). Resampled:")
    print(f"the share of {RESAMPLES:,} resamples of the kind's predicates (drawn with replacement,")
    print("both estimators on the same draw) in which lakestats is at or below Spark:\n")
    print("| predicate kind | p90 lakestats / Spark | p99 lakestats / Spark | met ", end="")
    print("| resampled p90 / p99 |")
    print("|---|---|---|---|---|")
    for kind in KINDS:
        mine, spark_q = q[kind]["lakestats"], q[kind]["spark"]
        p90, p99 = (float(np.percentile(mine, p)) for p in (90, 99))
        s90, s99 = (float(np.percentile(spark_q, p)) for p in (90, 99))
        met = "yes" if p90 <= s90 and p99 <= s99 else "**no**"
        r90, r99 = (_resampled_share(mine, spark_q, p, args.seed) for p in (90, 99))
        print(f"| {kind} | {p90:.4f} / {s90:.4f} | {p99:.4f} / {s99:.4f} | {met} | "
              f"{r90:.0%} / {r99:.0%} |", flush=True)  # fmt: skip
    _report_conjunctions(doc, con, source, session, numeric, args)
    _report_strings(doc, con, source, session, strings, args)


def _report_strings(  # noqa: PLR0917 - private, called once
    doc: dict[str, Any],
    con: Any,
    source: str,
    session: Any,
    strings: list[Any],
    args: argparse.Namespace,
) -> None:
    """``=`` and ``IN`` of 3 values on each string column, constants drawn from its rows:
    lakestats' frequent values (else non-null rows / NDV), Spark's CBO (its NDV: no
    histogram for strings), uniform (non-null rows / NDV). Their own random stream."""
    if not strings:
        return
    rows = int(doc["record_count"])
    rng = random.Random(args.seed * 1000 + 2)
    q: dict[str, dict[str, list[float]]] = {
        k: {"lakestats": [], "spark": [], "uniform": []} for k in STRING_KINDS
    }
    for column in strings:
        sample = [v for v in _row_sample(con, source, column.name) if not {"'", "\\"} & set(v)]
        entry = doc["columns"][column.name]
        non_null = rows - (entry["null_count"] or 0)
        for _ in range(args.per_kind):
            for kind, values in (
                ("string =", [rng.choice(sample)]),
                ("string in", rng.sample(sample, 3)),
            ):
                listed = ", ".join(_string_literal(v) for v in values)
                condition = f"{column.name} IN ({listed})"
                exact = float(
                    con.execute(f"SELECT count(*) FROM {source} WHERE {condition}").fetchone()[0]  # noqa: S608
                )
                op = "=" if kind == "string =" else "in"
                ours = selectivity(doc, Predicate(column.name, op, tuple(values))) * rows
                theirs = _spark_rows(session, condition)
                uniform = non_null / max(float(entry["ndv"] or 1), 1.0) * len(set(values))
                _record(q[kind], condition, (ours, theirs, uniform), exact, args)
    title = (
        "String columns (no histogram: frequent values; not a kind of the target above), "
        f"{', '.join(c.name for c in strings)}"
    )
    _print_q_table(title, "predicate kind", q)


def _string_literal(value: str) -> str:
    """A SQL string literal Spark and DuckDB read alike (they escape quotes differently:
    values holding a quote or a backslash are not drawn)."""
    return f"'{value}'"


def _report_conjunctions(  # noqa: PLR0917 - private, called once
    doc: dict[str, Any],
    con: Any,
    source: str,
    session: Any,
    numeric: list[Any],
    args: argparse.Namespace,
) -> None:
    """Comparisons joined by AND (``lakestats.estimates``), apart from the kinds above: a
    range written as two comparisons on one column, and comparisons on two columns (taken
    as independent by lakestats and by Spark's CBO alike). Their own random stream, so the
    predicates above stay the same."""
    rows = int(doc["record_count"])
    rng = random.Random(args.seed * 1000 + 1)
    samples = {c.name: _row_sample(con, source, c.name) for c in numeric}
    q: dict[str, dict[str, list[float]]] = {
        k: {"lakestats": [], "spark": [], "uniform": []} for k in CONJUNCTION_KINDS
    }
    for _ in range(args.per_kind * len(numeric)):  # as many as one kind above
        c = rng.choice(numeric)
        a, b = sorted(rng.sample(samples[c.name], 2))
        one = [(c, ">=", a), (c, "<=", b)]
        first, second = rng.sample(numeric, 2)
        two = [(first, "<=", rng.choice(samples[first.name]))]
        two.append((second, ">=", rng.choice(samples[second.name])))
        for kind, terms in zip(CONJUNCTION_KINDS, (one, two), strict=True):
            text = " AND ".join(f"{t.name} {op} {_lakestats_literal(v)}" for t, op, v in terms)
            spark = " AND ".join(f"{t.name} {op} {_sql_literal(v)}" for t, op, v in terms)
            duck = " AND ".join(f"{t.name} {op} {_duck_literal(v)}" for t, op, v in terms)
            exact = float(
                con.execute(f"SELECT count(*) FROM {source} WHERE {duck}").fetchone()[0]  # noqa: S608
            )
            ours = estimate_from(doc, text).rows
            theirs = _spark_rows(session, spark)
            if kind == "and, one column":  # one range of one column
                between = Predicate(c.name, "between", tuple(_constant(v) for v in (a, b)))
                uniform = _uniform(doc["columns"][c.name], rows, between)
            else:  # the uniform model takes columns as independent too
                uniform = rows * math.prod(
                    _uniform_fraction(doc["columns"][t.name], rows, op, v) for t, op, v in terms
                )
            _record(q[kind], text, (ours, theirs, uniform), exact, args)
    title = (
        "Comparisons joined by AND (not a kind of the target above; two columns are "
        "taken as independent by both)"
    )
    _print_q_table(title, "conjunction", q)


def _record(
    q: dict[str, list[float]],
    text: str,
    estimates: tuple[float, float | None, float],
    exact: float,
    args: argparse.Namespace,
) -> None:
    """One predicate's q-errors (lakestats, Spark, uniform), and it printed when it is
    worse than ``--show-worst`` for lakestats or Spark."""
    ours, theirs, uniform = estimates
    if args.show_worst and max(_q(ours, exact), _q(theirs, exact)) > args.show_worst:
        print(f"  worst: {text} lakestats {ours:.2f} Spark {theirs} exact {exact:.0f}")
    q["lakestats"].append(_q(ours, exact))
    q["spark"].append(_q(theirs, exact))
    q["uniform"].append(_q(uniform, exact))


def _print_q_table(title: str, first: str, q: dict[str, dict[str, list[float]]]) -> None:
    print(f"\n{title}:\n")
    print(f"| {first} | n | lakestats q-error p50 / p90 / p99 / max | Spark CBO | uniform |")
    print("|---|---|---|---|---|")
    for kind, got in q.items():
        print(f"| {kind} | {len(got['lakestats'])} | {_summary(got['lakestats'])} | "
              f"{_summary(got['spark'])} | {_summary(got['uniform'])} |", flush=True)  # fmt: skip


def _row_sample(con: Any, source: str, name: str) -> list[Any]:
    return [
        r[0]
        for r in con.execute(
            f"SELECT {name} FROM (SELECT {name} FROM {source} WHERE {name} IS NOT NULL) "  # noqa: S608 - our own names
            "USING SAMPLE reservoir(2000 ROWS) REPEATABLE (15)"
        ).fetchall()
    ]


def _lakestats_literal(value: Any) -> str:
    if isinstance(value, dt.date):
        return f"'{value.isoformat()}'"
    return str(value)


def _constant(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def _uniform_fraction(column: dict[str, Any], rows: int, op: str, value: Any) -> float:
    """The uniform model's fraction of ``column <= value`` or ``column >= value``."""
    below = _uniform(column, rows, Predicate("c", "<", (_constant(value),)))  # name not read
    non_null = rows - (column["null_count"] or 0)
    return (below if op == "<=" else non_null - below) / rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", help="glob of Parquet files (default: TPC-H lineitem)")
    parser.add_argument("--scale-factor", type=float, default=1.0, help="TPC-H SF (default 1)")
    parser.add_argument("--commits", type=int, default=100, help="as tests/bench/run.py")
    parser.add_argument("--work-dir", default=".bench", help="cache of run.py (--keep)")
    parser.add_argument("--per-kind", type=int, default=20, help="predicates per column, kind")
    parser.add_argument("--skewed-rows", type=int, default=1_000_000, help="0: no skewed set")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument(
        "--show-worst", type=float, default=0.0, help="print predicates whose q-error is above"
    )
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args(argv)
    work = Path(args.work_dir).resolve()  # Spark resolves a relative LOCATION elsewhere
    if args.files:
        label = f"Parquet files {args.files}"
        files = sorted(glob.glob(args.files, recursive=True))  # noqa: PTH207 - a user's glob
    else:  # the table run.py loads, reused from its cache (generated once if missing)
        dataset = tpch.prepare(work, args.scale_factor, args.commits, reuse=True, progress=print)
        label = f"TPC-H lineitem SF {args.scale_factor:g}, {args.commits} commits"
        # the loaded snapshot's files: the cache's data folder may hold strays of killed runs
        files = sorted(tpch.RunTable(dataset, work / "qerror" / "table").live_files())
    if not files:
        parser.error(f"no Parquet files in {args.files or work}")
    work = work / "qerror"
    spark = get_spark(SparkSettings(master=args.spark_master))
    run_dataset(label, files, spark, work, args)
    if args.skewed_rows:
        skewed = _skewed(work / "skewed", args.skewed_rows, np.random.default_rng(args.seed))
        run_dataset(f"Skewed ({args.skewed_rows:,} rows, Zipf)", skewed, spark, work, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
