"""Decimals wider than Python's default 28 digits, written by delta-rs, pyiceberg and
pypaimon: Spark's default decimal(38, 18) from 10^10 up, decimal(38, 0) at ±(10^38 - 1),
decimal(38, 38). ``analyze`` failed on them (quantize raised InvalidOperation); delta-rs
writes some of their bounds clamped to int64 or rounded through a double, which must be
scanned, not trusted. Expected values from pyarrow over the rows each writer reads back."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import PyarrowFieldParser

import lakestats
from lakestats.config import Config
from lakestats.formats.delta.files import stat_value
from lakestats.formats.paimon.testing import write_arrow
from lakestats.model import Column, SketchSettings, TableSchema
from lakestats.pipeline import sketch_files
from lakestats.testing import IcebergWarehouse
from lakestats.values import at_scale, to_json, unscaled_decimal

NINES = Decimal("9" * 38)
COLUMNS = {
    # Spark's default decimal type, values from 10^10 on: 29 digits and more at scale 18
    "spark_default": (
        pa.decimal128(38, 18),
        [Decimal(k * 10**9) + Decimal("0.5") for k in range(10, 1010)],
    ),
    "widest": (
        pa.decimal128(38, 0),
        [Decimal(k * 12345) for k in range(998)] + [NINES, Decimal("-" + "9" * 38)],
    ),
    "all_scale": (pa.decimal128(38, 38), [Decimal(k).scaleb(-4) for k in range(1000)]),
    # delta-rs clamps these bounds to int64's limits
    "past_int64": (pa.decimal128(38, 0), [Decimal(10**20 + k) for k in range(1000)]),
    "tiny": (pa.decimal128(38, 20), [Decimal(k).scaleb(-20) for k in range(1000)]),
}


def _rows() -> pa.Table:
    return pa.table({name: pa.array(values, t) for name, (t, values) in COLUMNS.items()})


def _check(doc: dict[str, Any], rows: pa.Table) -> None:
    assert doc["record_count"] == rows.num_rows
    for name in COLUMNS:
        col = doc["columns"][name]
        low, high = pc.min_max(rows.column(name)).values()
        assert (col["min"], col["max"]) == (to_json(low.as_py()), to_json(high.as_py())), name
        assert col["min_max_exact"], name
        assert abs(col["ndv"] - len(set(rows.column(name).to_pylist()))) <= 0.03 * rows.num_rows
        # plain digits, as exact as the column's scale: no 0E-20, no 1E+1
        texts = [col["min"], col["max"], *col["quantiles"].values()]
        texts += [b[k] for b in col["histogram"] for k in ("lower", "upper")]
        assert all("E" not in t for t in texts), (name, texts)


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    return _rows()


def test_delta_rs(spark: Any, tmp_path: Path, rows: pa.Table) -> None:
    table = str(tmp_path / "delta")
    write_deltalake(table, rows)
    written = DeltaTable(table).to_pyarrow_table()
    config = Config(state_dir=str(tmp_path / "state"))
    lakestats.analyze_table(table, config=config)
    _check(lakestats.read_stats(table, config=config), written)


def test_pyiceberg(spark: Any, tmp_path: Path, rows: pa.Table) -> None:
    warehouse = IcebergWarehouse(tmp_path / "wh")
    warehouse.create_table("t", rows.schema)
    warehouse.append("t", rows)
    config = Config(state_dir=str(tmp_path / "state"))
    location = warehouse.location("t")
    lakestats.analyze_table(location, config=config)
    _check(lakestats.read_stats(location, config=config), warehouse.table("t").scan().to_arrow())


def test_pypaimon(spark: Any, tmp_path: Path, rows: pa.Table) -> None:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "wh")})
    catalog.create_database("db", False)
    options = {"metadata.stats-mode": "full"}
    catalog.create_table("db.t", Schema.from_pyarrow_schema(rows.schema, options=options), False)
    table = catalog.get_table("db.t")
    schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
    write_arrow(table, rows.cast(schema))
    config = Config(state_dir=str(tmp_path / "state"))
    location = str(tmp_path / "wh" / "db.db" / "t")
    lakestats.analyze_table(location, config=config)
    read = table.new_read_builder()
    _check(
        lakestats.read_stats(location, config=config),
        read.new_read().to_arrow(read.new_scan().plan().splits()),
    )


@pytest.mark.parametrize(
    ("type_str", "raw", "expected"),
    [
        ("decimal(38, 18)", Decimal("10000000000.5"), Decimal("10000000000.500000000000000000")),
        ("decimal(38, 0)", NINES, NINES),
        ("decimal(10, 2)", Decimal("12.3"), Decimal("12.30")),
        # delta-rs' int64 clamp of a decimal(38, 0) of 10^20, and its double of 0.0999
        ("decimal(38, 0)", Decimal((1 << 63) - 1), None),
        ("decimal(38, 0)", Decimal(-(1 << 63)), None),
        ("decimal(38, 38)", Decimal("0.09989999999999999"), None),
        # not a value of the column: past its scale, past its precision
        ("decimal(10, 2)", Decimal("12.345"), None),
        ("decimal(4, 2)", Decimal("123.45"), None),
        # the widest value of its precision
        ("decimal(18, 0)", Decimal(10**18 - 1), Decimal(10**18 - 1)),
    ],
)
def test_delta_decimal_bounds_that_cannot_be_the_value_are_unknown(
    type_str: str, raw: Decimal, expected: Decimal | None
) -> None:
    assert stat_value(type_str, raw) == expected


def test_every_digit_is_kept() -> None:
    assert at_scale(1e20 + 0.5, 18) == Decimal("100000000000000000000.000000000000000000")
    assert at_scale("1.005", 2) == Decimal("1.00")  # ties to even
    assert unscaled_decimal(int(NINES), 38) == Decimal("0." + "9" * 38)
    assert to_json(Decimal("0E-20")) == "0.00000000000000000000"
    assert to_json(Decimal("1E-7")) == "0.0000001"


def test_the_sql_job_gives_decimal_bounds_at_the_column_scale(spark: Any, tmp_path: Path) -> None:
    """pyspark hands a decimal over with the scale of Spark's BigDecimal (``1.00E-10`` of a
    ``decimal(38, 10)``), which then printed as ``0.000000000100``; both engines must give
    the column's scale."""
    path = str(tmp_path / "d.parquet")
    values = [Decimal("-12345678901234567890.1234567890"), Decimal("0.0000000001")]
    pq.write_table(pa.table({"dec": pa.array(values, pa.decimal128(38, 10))}), path)
    schema = TableSchema(0, (Column(1, "dec", "decimal(38, 10)"),))

    shown = {}
    for engine in ("sql", "auto"):
        (sketches,) = sketch_files(
            spark, [path], schema, SketchSettings(), match_by="name", engine=engine
        ).values()
        shown[engine] = (to_json(sketches[1].min), to_json(sketches[1].max))

    assert shown["sql"] == shown["auto"] == ("-12345678901234567890.1234567890", "0.0000000001")
