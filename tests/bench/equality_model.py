"""What any single per-value estimate can reach on TPC-H ``=`` predicates (issue 14 item 4).

For a value that is not a listed frequent value, an optimizer knows no count of its own:
every estimator (lakestats', Spark's CBO, a uniform model) answers ``col = c`` with one
number per bucket. This script asks, without sketches or Spark, how good such a number can
be: it takes every distinct value's exact row count from DuckDB over the cached TPC-H
lineitem files, and computes the q-error quantiles of candidate constant estimates over
*every* value (the population, no sampling noise), for constants drawn from the rows (as
``tests/bench/qerror.py`` draws them: a value with c rows is c times as likely) and from
the distinct values.

Candidates, per column: the mean rows per value (rows / NDV: lakestats' estimate with its
exact NDV, and the standard one), the size-biased mean Σc²/Σc and size-biased geometric
mean exp(Σ c·ln c / Σc) (the expected count, and the q-error-optimal one in the mean of
log q, for row-drawn constants), the row-weighted median, and the mean scaled by 1.05,
1.089 (Spark's NDV for ``l_extendedprice`` was 8.9 % low in the bench: 7.0 rows per value
against 6.43) and 1.13. Then the mix ``qerror.py`` reports for ``=``: the 11 columns with
equal weight, the seven columns whose values are all listed counted at q = 1.

    .venv/bin/python tests/bench/equality_model.py [--files 'x/*.parquet']

(default: the lineitem files ``tests/bench/run.py`` caches in ``.bench/sf1-c100``)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np

REPO = Path(__file__).resolve().parents[2]
COLUMNS = ("l_orderkey", "l_partkey", "l_suppkey", "l_extendedprice")
ALL_COLUMNS = 11  # the numeric/decimal/date columns qerror.py draws predicates on

Estimate = Callable[[np.ndarray], float]


def _row_median(c: np.ndarray) -> float:
    ordered = np.sort(c)
    return float(ordered[np.searchsorted(np.cumsum(ordered) / ordered.sum(), 0.5)])


CANDIDATES: dict[str, Estimate] = {
    "mean (rows / NDV)": lambda c: float(c.mean()),
    "size-biased mean": lambda c: float((c * c).sum() / c.sum()),
    "size-biased geometric mean": lambda c: float(np.exp((c * np.log(c)).sum() / c.sum())),
    "row-weighted median": _row_median,
    "mean × 1.05": lambda c: float(c.mean() * 1.05),
    "mean × 1.089": lambda c: float(c.mean() * 1.089),
    "mean × 1.13": lambda c: float(c.mean() * 1.13),
}


def _quantile(q: np.ndarray, weights: np.ndarray, p: float) -> float:
    order = np.argsort(q)
    cumulative = np.cumsum(weights[order]) / weights.sum()
    return float(q[order][min(np.searchsorted(cumulative, p), len(q) - 1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default=str(REPO / ".bench/sf1-c100/parts/lineitem/*.parquet"))
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(f"CREATE VIEW l AS SELECT * FROM read_parquet('{args.files}')")  # noqa: S608
    counts = {
        name: np.array(
            [r[0] for r in con.execute(f"SELECT count(*) FROM l GROUP BY {name}").fetchall()],  # noqa: S608 - our own names
            dtype=float,
        )
        for name in COLUMNS
    }
    print("| column | candidate | estimate | rows-drawn p90 / p99 | distinct-drawn p90 / p99 |")
    print("|---|---|---|---|---|")
    for name, c in counts.items():
        for label, estimate in CANDIDATES.items():
            e = estimate(c)
            q = np.maximum(e / c, c / e)
            rows = [_quantile(q, c, p) for p in (0.9, 0.99)]
            distinct = [float(np.quantile(q, p)) for p in (0.9, 0.99)]
            print(
                f"| {name} | {label} | {e:.2f} | {rows[0]:.2f} / {rows[1]:.2f} "
                f"| {distinct[0]:.2f} / {distinct[1]:.2f} |"
            )
    print("\n`=` over the 11 columns, constants drawn from the rows (population p90 / p99):\n")
    print("| candidate on every column | p90 | p99 |")
    print("|---|---|---|")
    for label, estimate in CANDIDATES.items():
        qs, ws = [np.array([1.0])], [np.array([(ALL_COLUMNS - len(COLUMNS)) / ALL_COLUMNS])]
        for c in counts.values():
            e = estimate(c)
            qs.append(np.maximum(e / c, c / e))
            ws.append(c / c.sum() / ALL_COLUMNS)
        q, w = np.concatenate(qs), np.concatenate(ws)
        print(f"| {label} | {_quantile(q, w, 0.9):.3f} | {_quantile(q, w, 0.99):.3f} |")


if __name__ == "__main__":
    main()
