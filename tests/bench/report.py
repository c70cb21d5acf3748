"""The run's summary: plain text for the terminal, a markdown section for docs/benchmarks.md.

Each run's section is delimited by HTML comments keyed by scale factor and commit count;
a new run replaces the section of an earlier run with the same key, and other sections
(and the hand-written text around them) are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sections
from measure import Timing
from results import Results

INCREMENTAL_TARGET = 50.0  # ≥ 50× faster than ANALYZE TABLE (DESIGN §11)
FULL_BUILD_TARGET = 1.5  # ≤ 1.5× a plain scan
RUNS_ANCHOR = "<!-- bench:runs -->"
_MAX_PROFILE_LINES = 30


# -- numbers ---------------------------------------------------------------------------


def incremental_ratio(r: Results) -> float:
    return r.spark.seconds.best / r.incremental.total_seconds.best


def full_build_ratio(r: Results) -> float:
    return r.sketch_build.best / r.min_scan.best


def _t(t: Timing) -> str:
    """``1.23 s`` (best of n), with the median when there are several runs."""
    if len(t.seconds) == 1:
        return _s(t.best)
    return f"{_s(t.best)} (median {_s(t.median)}, n={len(t.seconds)})"


def _verdict(met: bool) -> str:
    return "MET" if met else "MISSED"


def _pct(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x * 100:+.{digits}f} %"


def _s(x: float) -> str:
    return f"{x:.2f} s"


def _phases(phases: dict[str, float], total: float) -> str:
    """``sketch 0.41 s, store 0.02 s, …, other 0.10 s`` (other = total - named phases)."""
    named = dict(phases)
    rest = total - sum(named.values())
    if "open + plan + other" not in named:
        named["plan + other"] = rest
    return ", ".join(f"{k} {v:.2f} s" for k, v in named.items())


def _title(r: Results) -> str:
    tuned = " (extra Spark conf)" if r.args.spark_conf else ""
    return (
        f"TPC-H lineitem SF {r.dataset.scale_factor:g}, {r.dataset.commits} commits "
        f"+ 1 % append, Spark {r.args.spark_master}{tuned}"
    )


def _speed_rows(r: Results) -> list[tuple[str, str, str]]:
    inc = r.incremental
    return [
        (
            "lakestats per-commit update (open table + `analyze_table`)",
            _t(inc.total_seconds),
            f"open {_s(inc.open_seconds.best)} + analyze {_s(inc.analyze_seconds.best)} (best "
            f"runs); phases of run 1: {_phases(inc.phases, inc.total_seconds.seconds[0])}",
        ),
        (
            "lakestats `sketch_files` on the new file only",
            _t(inc.sketch_only),
            "the Spark job alone, as called inside the update",
        ),
        (
            "Spark `ANALYZE TABLE … COMPUTE STATISTICS FOR ALL COLUMNS`",
            _t(r.spark.seconds),
            f"{r.files_before + 1} files, `histogram.enabled=true` "
            f"({r.spark.histogram_buckets} bins), warm JVM",
        ),
    ]


def _build_rows(r: Results) -> list[tuple[str, str, str]]:
    return [
        (
            "Spark `min()` of every column (plain scan)",
            _t(r.min_scan),
            f"after one cold run ({_s(r.cold_min_scan)}); one job, all 16 columns",
        ),
        (
            "lakestats `sketch_files` over all files (pure sketch build)",
            _t(r.sketch_build),
            "one Spark job, every statistic of all 16 columns, grouped by file",
        ),
        (
            f"lakestats initial `analyze_table` ({r.dataset.commits} commits)",
            _s(r.initial_seconds),
            "once; " + _phases(r.initial_phases, r.initial_seconds),
        ),
    ]


def _accuracy_rows(r: Results) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for c in r.columns:
        rank = c.max_rank_error
        rows.append(
            (
                c.column,
                c.type,
                f"{c.exact_ndv:,}",
                "n/a" if c.lakestats_ndv is None else f"{c.lakestats_ndv:,}",
                _pct(c.lakestats_ndv_error),
                "n/a" if c.spark_ndv is None else f"{c.spark_ndv:,}",
                _pct(c.spark_ndv_error),
                "—" if rank is None else f"{rank * 100:.3f} %",
            )
        )
    return rows


_ACCURACY_HEADERS = (
    "column",
    "type",
    "exact NDV",
    "lakestats NDV",
    "error",
    "Spark NDV",
    "error",
    "max quantile rank error",
)


def _accuracy_summary(r: Results) -> list[str]:
    ls = [abs(e) for c in r.columns if (e := c.lakestats_ndv_error) is not None]
    sp = [abs(e) for c in r.columns if (e := c.spark_ndv_error) is not None]
    ranks = [e for c in r.columns if (e := c.max_rank_error) is not None]
    bound = 2 * r.ndv_rse
    return [
        f"lakestats NDV: max |error| {max(ls, default=0) * 100:.2f} %, mean "
        f"{_mean(ls) * 100:.2f} % (theta lgK {r.theta_lg_k}: RSE {r.ndv_rse * 100:.2f} %, 2σ bound "
        f"{bound * 100:.2f} %; {sum(e <= bound for e in ls)}/{len(ls)} columns within it)",
        f"Spark ANALYZE NDV: max |error| {max(sp, default=0) * 100:.2f} %, mean "
        f"{_mean(sp) * 100:.2f} % (HyperLogLog++, spark.sql.statistics.ndv.maxError 5 %)",
        f"lakestats quantiles: max normalized rank error {max(ranks, default=0) * 100:.3f} % "
        f"over {sum(len(c.rank_errors) for c in r.columns)} quantiles of {len(ranks)} columns "
        f"(KLL k {r.kll_k} bound {r.kll_rank_error * 100:.2f} % at 99 % confidence)",
        f"row count: lakestats {r.lakestats_rows:,}, Spark {r.spark.row_count or 0:,}, "
        f"exact {r.exact_rows:,}",
    ]


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _memory_rows(r: Results) -> list[tuple[str, str, str]]:
    return [(phase, python.mib(), jvm.mib()) for phase, (python, jvm) in r.memory.phases.items()]


def _loads(r: Results) -> str:
    """Load averages; this run's own Spark adds up to one per CPU once it has started, so
    only the value at the start says whether something else was running."""
    loads = ", ".join(f"{k} {v:.2f}" for k, v in r.load_averages.items())
    busy = r.load_averages.get("start", 0.0) >= 0.5 * int(r.machine["cpus"])
    warning = " — the machine was not idle at the start: timings may be inflated" if busy else ""
    return (
        f"1-minute load average: {loads} (this run's Spark adds up to {r.machine['cpus']}){warning}"
    )


_COST_HEADERS = ("column", "type", "min() alone", "sketch_files alone", "ratio")


def _cost_rows(r: Results) -> list[tuple[str, ...]]:
    return [
        (
            c.column,
            c.type,
            _s(c.min_scan_seconds),
            _s(c.sketch_seconds),
            f"{c.sketch_seconds / c.min_scan_seconds:.2f}×",
        )
        for c in r.column_costs
    ]


def _profile_lines(r: Results) -> list[str]:
    """The top of the cProfile listing of one incremental update."""
    lines = r.incremental.profile.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return lines[start : start + _MAX_PROFILE_LINES]


# -- text --------------------------------------------------------------------------------


def _text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*row) for row in rows]
    return "\n".join("  " + line.rstrip() for line in lines)


def console(r: Results) -> str:
    ratio1, ratio2 = incremental_ratio(r), full_build_ratio(r)
    out = [
        f"== lakestats bench: {_title(r)} ==",
        f"table: {r.rows_before:,} rows in {r.files_before} files "
        f"({r.bytes_before / 2**20:,.0f} MiB); append: {r.append_rows:,} rows in 1 file",
        _loads(r),
        "",
        "1. per-commit update after a 1 % append",
        _text_table(("measurement", "time", "what it includes"), _speed_rows(r)),
        f"  ratio ANALYZE / lakestats = {ratio1:,.1f}x   target >= {INCREMENTAL_TARGET:g}x   "
        f"{_verdict(ratio1 >= INCREMENTAL_TARGET)}",
        "",
        "2. full build",
        _text_table(("measurement", "time", "what it includes"), _build_rows(r)),
        f"  ratio sketch_files / min() scan = {ratio2:.2f}x   target <= {FULL_BUILD_TARGET:g}x   "
        f"{_verdict(ratio2 <= FULL_BUILD_TARGET)}",
        f"  (initial analyze_table / min() scan = {r.initial_seconds / r.min_scan.best:.2f}x)",
        *(
            ["  profile, one column at a time:", _text_table(_COST_HEADERS, _cost_rows(r))]
            if r.column_costs
            else []
        ),
        "",
        "3. accuracy against exact values (DuckDB)",
        _text_table(_ACCURACY_HEADERS, _accuracy_rows(r)),
        *("  " + line for line in _accuracy_summary(r)),
        "",
        "4. peak RSS per phase",
        _text_table(("phase", "Python process", "Spark driver JVM"), _memory_rows(r)),
    ]
    if r.args.profile or ratio1 < INCREMENTAL_TARGET:
        out += ["", "profile of one incremental update (cProfile, cumulative):"]
        out += ["  " + line for line in _profile_lines(r)]
    return "\n".join(out)


# -- markdown ----------------------------------------------------------------------------


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _key(r: Results) -> str:
    conf = " ".join(f"conf:{kv}" for kv in r.args.spark_conf)
    return f"sf={r.dataset.scale_factor:g} commits={r.dataset.commits} {conf}".strip()


def markdown(r: Results) -> str:
    ratio1, ratio2 = incremental_ratio(r), full_build_ratio(r)
    m, v = r.machine, r.versions
    command = f"make bench BENCH_ARGS='{r.command}'" if r.command else "make bench"
    lines = [
        f"<!-- bench:run {_key(r)} begin (generated by tests/bench/run.py) -->",
        f"### {_title(r)} — {r.date}",
        "",
        f"* **Command:** `{command}` (runs "
        f"`{' '.join(['.venv/bin/python tests/bench/run.py', r.command]).strip()}`)",
        f"* **Machine:** {m['cpus']} CPUs ({m['cpu']}), {m['memory']} RAM, {m['os']}",
        "* **Versions:** " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"* **Table:** {r.rows_before:,} rows in {r.files_before} files "
        f"({r.bytes_before / 2**20:,.0f} MiB Parquet, zstd, written by pyiceberg), "
        f"then a 1 % append of {r.append_rows:,} rows in 1 file",
        f"* **Spark:** {r.args.spark_master}, driver memory "
        f"{r.args.driver_memory or 'Spark default (1g)'}, session started in "
        f"{_s(r.spark_start_seconds)} (not in any timing)"
        + "".join(f", `{kv}`" for kv in r.args.spark_conf),
        f"* **Machine load:** {_loads(r)}",
        "",
        "#### 1. Per-commit update after a 1 % append vs `ANALYZE TABLE`",
        "",
        _md_table(("measurement", "time", "what it includes"), _speed_rows(r)),
        "",
        f"**Ratio: {ratio1:,.1f}×** (target ≥ {INCREMENTAL_TARGET:g}×: "
        f"**{_verdict(ratio1 >= INCREMENTAL_TARGET)}**). Against `analyze_table` alone: "
        f"{r.spark.seconds.best / r.incremental.analyze_seconds.best:,.1f}×; against the "
        f"sketch job alone: {r.spark.seconds.best / r.incremental.sketch_only.best:,.1f}×. "
        "Ratios compare the best run of each side (other load on the machine only ever "
        "adds time).",
        "",
        "#### 2. Full sketch build vs a plain scan",
        "",
        _md_table(("measurement", "time", "what it includes"), _build_rows(r)),
        "",
        f"**Ratio `sketch_files` / `min()` scan: {ratio2:.2f}×** (target ≤ "
        f"{FULL_BUILD_TARGET:g}×: **{_verdict(ratio2 <= FULL_BUILD_TARGET)}**). Initial "
        f"`analyze_table` / `min()` scan: {r.initial_seconds / r.min_scan.best:.2f}×.",
        "",
        *(
            [
                "Where the time goes — each column alone (one `min()` scan, one "
                "`sketch_files` job over the same files):",
                "",
                _md_table(_COST_HEADERS, _cost_rows(r)),
                "",
            ]
            if r.column_costs
            else []
        ),
        "#### 3. Accuracy against exact values",
        "",
        "Exact values by DuckDB over the live files (`count(DISTINCT …)`; for each reported "
        "quantile *v* of rank *q*, the exact ranks [#(x < v)/n, #(x ≤ v)/n] and *q*'s "
        "distance to them). lakestats values are from the published stats document "
        "(`show --json`); Spark's from `DESCRIBE TABLE EXTENDED … col` after its ANALYZE.",
        "",
        _md_table(_ACCURACY_HEADERS, _accuracy_rows(r)),
        "",
        *(f"* {line}" for line in _accuracy_summary(r)),
        "",
        "#### 4. Peak memory (RSS high-water mark per phase)",
        "",
        _md_table(("phase", "Python process", "Spark driver JVM"), _memory_rows(r)),
        "",
    ]
    if ratio1 < INCREMENTAL_TARGET or r.args.profile:
        lines += [
            "#### Profile of one incremental update (cProfile, by cumulative time)",
            "",
            "```",
            *_profile_lines(r),
            "```",
            "",
        ]
    lines.append(f"<!-- bench:run {_key(r)} end -->")
    return "\n".join(lines)


def write_markdown(path: Path, r: Results) -> None:
    """Replace this run's section (same key) or insert it after the runs anchor."""
    sections.write_block(path, f"run {_key(r)}", markdown(r), anchor=RUNS_ANCHOR, heading=None)
