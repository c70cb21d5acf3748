"""The oracle check of a string column's frequent values, shared by the tests of every
format's foreign-written tables: each listed count within its bounds of the exact count
over the live rows, and where the sketch counted every value exactly (maximum error 0,
the list complete) the list is the whole exact count."""

from __future__ import annotations

from typing import Any


def assert_frequent_strings(got: dict[str, Any], counted: dict[str, int], label: Any) -> None:
    """``got``: a string column of ``show --json``; ``counted``: value → rows, exactly."""
    info = got["sketch"]["frequent_items"]
    assert info["kind"] == "frequent_items_strings", label
    assert info["rows"] == sum(counted.values()), label
    listed = got["frequent_values"]
    for entry in listed:
        assert entry["count_lower"] <= counted[entry["value"]] <= entry["count_upper"], label
    if info["maximum_error"] == 0 and info["complete"]:
        assert {e["value"]: e["count"] for e in listed} == counted, label


def duckdb_counts(duck: Any, source: str, quoted: str) -> dict[str, int]:
    """Each non-null value of column ``quoted`` of DuckDB's ``source`` (a table function
    such as ``delta_scan('…')``) with its rows."""
    return dict(
        duck.execute(
            f"SELECT {quoted}, count(*) FROM {source} WHERE {quoted} IS NOT NULL GROUP BY ALL"  # noqa: S608
        ).fetchall()
    )
