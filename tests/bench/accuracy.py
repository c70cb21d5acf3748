"""Exact statistics of the live files (DuckDB, no approximate functions) and the errors of
lakestats' NDV and quantiles, and of Spark ANALYZE's NDV, against them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb


@dataclass(frozen=True)
class ColumnAccuracy:
    column: str
    type: str
    exact_ndv: int
    lakestats_ndv: int | None
    spark_ndv: int | None
    # requested rank -> |exact normalized rank of the reported value - requested rank|
    rank_errors: dict[float, float]

    @property
    def lakestats_ndv_error(self) -> float | None:
        return _relative(self.lakestats_ndv, self.exact_ndv)

    @property
    def spark_ndv_error(self) -> float | None:
        return _relative(self.spark_ndv, self.exact_ndv)

    @property
    def max_rank_error(self) -> float | None:
        return max(self.rank_errors.values()) if self.rank_errors else None


def _relative(estimate: int | None, exact: int) -> float | None:
    if estimate is None or exact == 0:
        return None
    return (estimate - exact) / exact


def compare(
    files: Sequence[str],
    doc: Mapping[str, Any],
    spark_ndv: Mapping[str, int | None],
    *,
    threads: int,
) -> tuple[int, list[ColumnAccuracy]]:
    """(exact row count, per-column accuracy) for the stats document ``doc`` of the
    snapshot whose live data files are ``files``."""
    con = duckdb.connect(config={"threads": threads})
    try:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")  # noqa: S608
        rows = _one(con, "SELECT count(*) FROM t")[0]
        out = []
        for name, column in doc["columns"].items():
            quoted = '"' + name.replace('"', '""') + '"'
            ndv_sql = f"SELECT count(DISTINCT {quoted}) FROM t"  # noqa: S608 - quoted name
            exact_ndv = _one(con, ndv_sql)[0]
            errors: dict[float, float] = {}
            quantiles = column.get("quantiles") or {}
            if quantiles:
                errors = _rank_errors(con, quoted, column["type"], quantiles)
            out.append(
                ColumnAccuracy(
                    column=name,
                    type=column["type"],
                    exact_ndv=int(exact_ndv),
                    lakestats_ndv=column.get("ndv"),
                    spark_ndv=spark_ndv.get(name),
                    rank_errors=errors,
                )
            )
        return int(rows), out
    finally:
        con.close()


def _rank_errors(
    con: duckdb.DuckDBPyConnection, quoted: str, type_str: str, quantiles: Mapping[str, Any]
) -> dict[float, float]:
    """For each reported quantile value v of rank q: the exact ranks v occupies are
    [#(x < v) / n, #(x <= v) / n]; the error is q's distance to that interval (0 inside)."""
    ranks = [float(q) for q in quantiles]
    values = [_value(type_str, quantiles[q]) for q in quantiles]
    aggregates = ["count(" + quoted + ")"]
    params: dict[str, Any] = {}
    for i, value in enumerate(values):
        params[f"v{i}"] = value
        aggregates.append(f"count(*) FILTER (WHERE {quoted} < $v{i})")
        aggregates.append(f"count(*) FILTER (WHERE {quoted} <= $v{i})")
    sql = f"SELECT {', '.join(aggregates)} FROM t"  # noqa: S608 - quoted name, parameters
    row = _one(con, sql, params)
    n = row[0]
    errors: dict[float, float] = {}
    for i, q in enumerate(ranks):
        below, at_or_below = row[1 + 2 * i] / n, row[2 + 2 * i] / n
        errors[q] = max(0.0, below - q, q - at_or_below)
    return errors


def _value(type_str: str, value: Any) -> Any:
    """A quantile from the stats document (JSON) as a value DuckDB compares with."""
    if type_str.startswith("decimal"):
        return Decimal(value)
    if type_str == "date":
        return dt.date.fromisoformat(value)
    if type_str in ("timestamp", "timestamptz"):
        return dt.datetime.fromisoformat(value)
    return value


def _one(
    con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any] | None = None
) -> tuple[Any, ...]:
    row = con.execute(sql, params or {}).fetchone()
    if row is None:
        raise RuntimeError(f"no result from {sql!r}")
    return tuple(row)
