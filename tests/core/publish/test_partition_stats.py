"""Partition values reach the partition statistics file typed and matched by field id.

JSON appears only for keys read from stores written before lakestats kept field ids (the
documented fallback of ``UnifiedPartitionType.values``).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import IdentityTransform

from lakestats.exceptions import PublishError
from lakestats.model import PartitionField, PartitionKey
from lakestats.publish.iceberg.partition_stats import (
    PartitionStatsRow,
    rows_from_parquet,
    rows_to_parquet,
    unified_partition_type,
)
from lakestats.testing import IcebergWarehouse

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("day", pa.date32()),
        pa.field("price", pa.decimal128(10, 2)),
    ]
)
DAY = dt.date(2024, 2, 29)
PRICE = Decimal("12.50")


@pytest.fixture
def metadata(tmp_path: Path) -> TableMetadata:
    wh = IcebergWarehouse(tmp_path / "wh")
    wh.create_table(
        "t", SCHEMA, partition_by=[("day", IdentityTransform()), ("price", IdentityTransform())]
    )
    return wh.table("t").metadata


def test_typed_keys_are_matched_by_field_id_and_kept_typed(metadata: TableMetadata) -> None:
    unified = unified_partition_type(metadata)
    ids = [f.field_id for f in unified.fields]
    # field names that match nothing: only the ids place the values
    key = PartitionKey(
        spec_id=0,
        values=(("renamed_price", PRICE), ("renamed_day", DAY)),
        fields=(PartitionField(ids[1], "decimal(10, 2)"), PartitionField(ids[0], "date")),
    )
    values = unified.values(key)
    assert values == (DAY, PRICE)
    assert type(values[0]) is dt.date and type(values[1]) is Decimal

    row = PartitionStatsRow(spec_id=0, partition=values, data_record_count=3, data_file_count=1)
    back = rows_from_parquet(rows_to_parquet([row], unified, 2), unified)
    assert back == {(0, (DAY, PRICE)): row}


def test_keys_from_older_stores_fall_back_to_names_and_json(metadata: TableMetadata) -> None:
    unified = unified_partition_type(metadata)
    legacy = PartitionKey(spec_id=0, values=(("day", "2024-02-29"), ("price", "12.50")))
    assert unified.values(legacy) == (DAY, PRICE)


def test_a_field_not_in_the_table_is_an_error(metadata: TableMetadata) -> None:
    unified = unified_partition_type(metadata)
    with pytest.raises(PublishError, match="not in spec 0"):
        unified.values(PartitionKey(0, (("x", 1),), (PartitionField(4242, "int"),)))
    with pytest.raises(PublishError, match="not in spec 0"):
        unified.values(PartitionKey(0, (("x", 1),)))
