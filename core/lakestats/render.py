"""Human-readable rendering of stats documents (the JSON form is the contract; this is for
people reading a terminal)."""

from __future__ import annotations

import datetime as dt
import math
import textwrap
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from lakestats.exceptions import first_of
from lakestats.sketches.spec import no_histogram_reason

_SPARK_BARS = " ▁▂▃▄▅▆▇█"
_MAX_CELL = 24


def column_names(names: Sequence[str], limit: int = 20) -> str:
    """The columns an unknown-column error names: the first ``limit``, so that the error of
    a wide table stays one readable line."""
    return first_of(names, limit)


def byte_size(count: int) -> str:
    """``512 B``, ``1.5 KiB``, ``12.3 MiB``, ``2.0 GiB``: for people."""
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control, format and separator characters
    (a newline, ESC starting a terminal sequence, a right-to-left override — whatever a
    table's data or names hold) escaped as Python writes them, ``\\n``, ``\\x1b``,
    ``\\u202e``; the space and every visible character as they are."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def partition_text(values: Iterable[tuple[str, Any]]) -> str:
    """``day=2024-01-02, region=null``: a partition's key as SQL would read its values."""
    return printable(", ".join(f"{k}={'null' if v is None else v}" for k, v in values))


def _escaped(char: str) -> str:
    code = ord(char)
    if char in _ESCAPES:
        return _ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _cell(value: Any, *, exact: bool = False) -> str:
    """A table cell. Estimates print 4 significant digits; an ``exact`` float prints in
    full (its shortest round-trip form: a max of 1026.46 is 1026.46, not 1026)."""
    if value is None:
        return "-"
    text = f"{value:.4g}" if isinstance(value, float) and not exact else printable(str(value))
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def _position(value: Any) -> float | None:
    """Where a histogram bound lies on a number line: numbers as they are, decimals (JSON
    strings) as floats, dates as day numbers, timestamps as epoch seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    try:
        return float(value)  # decimals; "NaN"/"Infinity" come back non-finite
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if "T" not in value and " " not in value:
        return float(moment.date().toordinal())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def render_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    wide_last: bool = False,
    wide_first: bool = False,
) -> str:
    """A plain text table; ``wide_last`` leaves the last column uncut (error messages),
    ``wide_first`` the first (names: two long ones with one prefix must not read alike)."""
    return _table(headers, rows, wide_last=wide_last, wide_first=wide_first)


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    wide_last: bool = False,
    wide_first: bool = False,
) -> str:
    def uncut(i: int, row: Sequence[Any]) -> bool:
        return (wide_first and i == 0) or (wide_last and i == len(row) - 1)

    cells = [
        [
            printable(str(v)) if uncut(i, row) and v is not None else _cell(v)
            for i, v in enumerate(row)
        ]
        for row in rows
    ]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
    return "\n".join(lines) + "\n"


def sparkline(histogram: Sequence[dict[str, Any]], width: int = 24) -> str | None:
    """Density over the value range from equi-depth buckets (numbers, decimals, dates and
    timestamps; None for bounds with no order on a number line, such as strings)."""
    bounds: list[tuple[float, float, float]] = []
    for bucket in histogram:
        start, end = _position(bucket["lower"]), _position(bucket["upper"])
        if start is None or end is None:
            return None
        bounds.append((start, end, float(bucket["count"])))
    # a bucket of one value (surely: its NDV's upper bound is 1) holds its rows at that
    # value, its upper bound (a bucket is (lower, upper]); spread over its range, they
    # drew a three-value column as one bar at its minimum
    bounds = [
        (end, end, count) if (bucket.get("ndv_upper") or math.inf) <= 1 else (start, end, count)
        for bucket, (start, end, count) in zip(histogram, bounds, strict=True)
    ]
    # a bucket reaching ±infinity (a float column that holds them) has no width to spread
    # its rows over: the line draws the buckets between finite bounds
    bounds = [b for b in bounds if math.isfinite(b[0]) and math.isfinite(b[1])]
    if not bounds:
        return None
    low, high = bounds[0][0], bounds[-1][1]
    if high <= low:
        return None
    bins = [0.0] * width
    step = (high - low) / width
    for lo, hi, count in bounds:
        lo_f, hi_f = lo, hi
        span = max(hi_f - lo_f, 0.0)
        for i in range(width):
            b_lo, b_hi = low + i * step, low + (i + 1) * step
            if span == 0:
                if b_lo <= lo_f <= b_hi:
                    bins[i] += count
                    break
                continue
            overlap = max(0.0, min(hi_f, b_hi) - max(lo_f, b_lo))
            bins[i] += count * overlap / span
    peak = max(bins) or 1.0
    return "".join(_SPARK_BARS[round(v / peak * (len(_SPARK_BARS) - 1))] for v in bins)


def _format_terms(doc: dict[str, Any]) -> list[str]:
    """Lines a format gives in its own terms (``formats/base.SupportsFormatTerms``)."""
    terms = doc.get(str(doc.get("format")))
    summary = terms.get("summary") if isinstance(terms, dict) else None
    title = str(doc.get("format"))
    return [f"{title:<9} {line}" for line in summary] if isinstance(summary, list) else []


def render_histogram(name: str, column: dict[str, Any], width: int = 40) -> str:
    """One column's histogram as served, a bucket a line: its value range, rows, distinct
    values and a bar of its rows (dates, timestamps and decimals print as the document has
    them)."""
    buckets = column.get("histogram") or []
    if not buckets:
        return (
            f"histogram of {printable(name)}: none ({no_histogram_reason(str(column['type']))})\n"
        )
    quantiles = (column.get("sketch") or {}).get("quantiles") or {}
    peak = max(float(b["count"]) for b in buckets) or 1.0
    rows = []
    for j, b in enumerate(buckets):
        rows.append(
            [
                f"{'[' if j == 0 else '('}{b['lower']}, {b['upper']}]",
                f"{'~' if b.get('approximate') else ''}{b['count']}",
                None if b.get("ndv") is None else f"{b['ndv']:.4g}",
                "█" * max(1 if b["count"] else 0, round(float(b["count"]) / peak * width)),
            ]
        )
    error = quantiles.get("bucket_count_error")
    note = f"; ~ counts within ±{error} rows (~99 %)" if error else ""
    head = f"histogram of {printable(name)} ({column['type']}, {len(buckets)} buckets{note})\n"
    return head + _table(["values", "rows", "ndv≈", ""], rows, wide_last=True)


def _deletes_lines(deletes: dict[str, Any] | None) -> list[str]:
    """What row-level deletes did to the stats; nothing when there were none."""
    if not deletes or not (deletes.get("applied_files") or deletes.get("unapplied_files")):
        return []
    lines = []
    if deletes.get("applied_files"):
        lines.append(
            f"deletes   applied to {deletes['applied_files']} files: "
            f"{deletes['deleted_records']} rows deleted, stats describe live rows"
        )
    if deletes.get("unapplied_files"):
        lines.append(
            f"APPROX    deletes of {deletes['unapplied_files']} files not applied: their "
            "stats include deleted rows (docs/deletes.md)"
        )
    return lines


def render_stats(
    doc: dict[str, Any], *, behind: str | None = None, kept: Collection[str] = ()
) -> str:
    """``behind``: a note that the table has commits these stats do not reflect; ``kept``:
    the sketches the configuration keeps per file (``SKETCH_KINDS``' keys), which a note
    names where some live files lack them."""
    out = [
        f"table     {printable(str(doc['table']))} ({doc['format']})",
        f"snapshot  {doc['snapshot_id']}  schema {doc['schema_id']}",
        *([f"BEHIND    {behind}"] if behind else []),
        f"rows      {doc['record_count']}"
        + (
            f" ({doc['merged_record_count']} after deletes)"
            if doc.get("merged_record_count") not in (None, doc["record_count"])
            else ""
        ),
        f"files     {doc['file_count']}  bytes {doc['total_size_bytes']}",
        *_format_terms(doc),
        *_deletes_lines(doc.get("row_deletes")),
        "",
    ]
    rows = []
    for name, col in doc["columns"].items():
        bound_note = "" if col["min_max_exact"] else "~"
        rows.append(
            [
                name,
                col["type"],
                col["null_count"],
                col["nan_count"],
                f"{bound_note}{_cell(col['min'], exact=True)}" if col["min"] is not None else None,
                f"{bound_note}{_cell(col['max'], exact=True)}" if col["max"] is not None else None,
                col.get("ndv"),
                col.get("avg_len"),
                col.get("true_count"),
                col.get("false_count"),
                col["column_size_bytes"],
            ]
        )
    out.append(
        _table(
            [
                "column",
                "type",
                "nulls",
                "nans",
                "min",
                "max",
                "ndv≈",
                "avg_len",
                "true",
                "false",
                "bytes",
            ],
            rows,
            wide_first=True,
        )
    )
    out.append("(~ marks bounds that may be truncated or incomplete; ndv≈ is a sketch estimate)")
    histograms = [
        (name, sparkline(col["histogram"]), col.get("quantiles"))
        for name, col in doc["columns"].items()
        if col.get("histogram")
    ]
    if histograms:
        out.append("\ndistribution (density over min..max; quantiles p25 / p50 / p75)")
        for name, line, quantiles in histograms:
            q = quantiles or {}
            marks = " / ".join(_cell(q.get(k)) for k in ("0.25", "0.5", "0.75"))
            out.append(f"  {printable(name):<20} {line or '':<24}  {marks}")
    out.extend(_common_values_lines(doc))
    out.extend(_missing_sketches_lines(doc, kept))
    partitions = doc.get("partitions") or []
    if len(partitions) > 1 or (partitions and partitions[0]["partition"]):
        out.append("")
        shown = partitions[:50]
        # rows left after row-level deletes, where they differ anywhere (the table line's
        # "after deletes", per partition)
        deleted = any(
            p.get("merged_record_count", p["record_count"]) != p["record_count"] for p in partitions
        )
        out.append(
            _table(
                ["partition", "rows", *(["after deletes"] if deleted else []), "files", "bytes"],
                [
                    [
                        partition_text(p["partition"].items()) or "()",
                        p["record_count"],
                        *([p.get("merged_record_count")] if deleted else []),
                        p["file_count"],
                        p["total_size_bytes"],
                    ]
                    for p in shown
                ],
            )
        )
        if len(partitions) > len(shown):
            out.append(f"… and {len(partitions) - len(shown)} more partitions (see --json)")
    published = doc.get("published")
    if published:
        out.append("")
        for where in published:
            out.append(f"published: {where}")
    return "\n".join(out) + "\n"


# the per-file sketches a store written by an earlier lakestats (or with them off) may lack:
# the key in a column's ``sketch`` → what its absence costs
SKETCH_KINDS = {"frequent_items": "most common values", "value_sample": "measured bucket NDVs"}


def _missing_sketches_lines(doc: dict[str, Any], kept: Collection[str]) -> list[str]:
    """Which of the ``kept`` sketches the columns lack: a column has one merged only when
    every live file it was sketched in had one."""
    lacking: dict[tuple[str, ...], list[str]] = {}  # what is missing → of which columns
    for name, col in doc["columns"].items():
        sketch = col.get("sketch") or {}
        if not sketch.get("sketched_files"):
            continue
        # a column with quantiles keeps both; a string column its frequent values only
        kinds = SKETCH_KINDS if "quantiles" in sketch else {}
        if col.get("type") == "string":
            kinds = {"frequent_items": SKETCH_KINDS["frequent_items"]}
        what = tuple(kinds[k] for k in kinds if k in kept and k not in sketch)
        if what:
            lacking.setdefault(what, []).append(name)
    if not lacking:
        return []
    parts = "; ".join(
        f"{' and '.join(what)} of {printable(column_names(names))}"
        for what, names in lacking.items()
    )
    text = (
        f"not kept: {parts} — some live files were sketched without them (by an earlier "
        "lakestats, or with the setting off); `lakestats analyze --rebuild` sketches every "
        "live file again"
    )
    return ["", *textwrap.wrap(text, width=90, subsequent_indent="  ", break_on_hyphens=False)]


def described_rows(doc: dict[str, Any]) -> int:
    """The rows a stats document's columns describe: the live rows where row-level deletes
    were applied to the files (``row_deletes.applied_files``; ``merged_record_count``),
    else the data files' rows (``record_count``) — also where ``merged_record_count`` is
    only an estimate from the delete files' rows, which the column stats do not reflect.
    What shares, selectivities and estimated rows are of."""
    merged = doc.get("merged_record_count")
    applied = (doc.get("row_deletes") or {}).get("applied_files")
    return int(merged if merged is not None and applied else doc["record_count"])


COMMON_SHARE = 0.01  # a value hotter than one bucket of a 100-bucket histogram
COMMON_SHOWN = 5


def _quoted(text: str) -> str:
    """A string value as SQL quotes it, cut to a cell's width."""
    return _cell("'" + text.replace("'", "''") + "'")


def _common_values_lines(doc: dict[str, Any]) -> list[str]:
    """The columns' most common values, as ``frequent_values`` lists them: the few that
    hold at least ``COMMON_SHARE`` of the rows each (a column with none is not listed). A
    count the sketch holds only within bounds prints with ≈."""
    rows = described_rows(doc)
    lines = []
    for name, col in doc["columns"].items():
        quoted = col.get("type") == "string"  # so that '' and 'a, b' read as values
        common = [
            f"{_quoted(f['value']) if quoted else _cell(f['value'], exact=True)} "
            f"{f['count'] / rows:.1%}"
            + ("" if f.get("count_lower") == f.get("count_upper") else "≈")
            for f in (col.get("frequent_values") or [])[:COMMON_SHOWN]
            if rows and f["count"] >= COMMON_SHARE * rows
        ]
        if common:
            lines.append(f"  {printable(name):<20} {', '.join(common)}")
    if not lines:
        return []
    title = (
        f"\nmost common values (those holding ≥ {COMMON_SHARE:.0%} of the rows; share of the rows)"
    )
    return [title, *lines]


def render_commits(table: str, docs: Sequence[dict[str, Any]]) -> str:
    if not docs:
        return f"{table}: no commits analyzed yet\n"
    rows = [
        [
            d["snapshot_id"],
            d["operation"],
            d["added"]["data_files"],
            d["added"]["record_count"],
            d["added"]["file_size_bytes"],
            d["removed"]["data_files"],
            d["removed"]["record_count"],
            d["added"]["delete_files"],
        ]
        for d in docs
    ]
    return _table(
        ["snapshot", "operation", "+files", "+rows", "+bytes", "-files", "-rows", "+deletes"],
        rows,
    )


def render_estimates(doc: dict[str, Any], estimates: Sequence[dict[str, Any]]) -> str:
    """``lakestats estimate``: a line per predicate (``selectivity.estimate_json``)."""
    live, files_rows = described_rows(doc), int(doc["record_count"])
    before = f" ({files_rows:,} before row-level deletes)" if live != files_rows else ""
    head = f"{doc['table']} at snapshot {doc['snapshot_id']}: {live:,} rows{before}\n\n"
    rows = [(_rows(e["rows"]), f"{e['selectivity']:.4%}", e["predicate"]) for e in estimates]
    return head + _table(("rows≈", "selectivity", "predicate"), rows, wide_last=True)


def _rows(rows: float) -> str:
    return f"{rows:,.0f}" if rows >= 10 or rows == 0 else f"{rows:.2g}"
