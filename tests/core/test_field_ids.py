"""``lakestats.field_ids``: each Parquet file's footer says whether it carries field ids."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.exceptions import DataFileError
from lakestats.field_ids import has_field_ids, split_by_field_ids


def _write(path: Path, *, ids: bool) -> str:
    metadata = {b"PARQUET:field_id": b"1"} if ids else None
    schema = pa.schema([pa.field("a", pa.int64(), metadata=metadata)])
    pq.write_table(pa.table({"a": [1, 2]}, schema=schema), path)
    return str(path)


def test_files_split_by_their_footers_in_the_given_order(tmp_path: Path) -> None:
    java = _write(tmp_path / "java.parquet", ids=True)
    python = _write(tmp_path / "python.parquet", ids=False)
    java_too = _write(tmp_path / "java too.parquet", ids=True)
    uri = f"file://{tmp_path}/java too.parquet"  # manifests' URIs: not percent-encoded
    assert split_by_field_ids([python, java, java_too, uri]) == ([java, java_too, uri], [python])


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "half-written.parquet"
    broken.write_bytes(b"PAR1 not a footer")
    with pytest.raises(DataFileError, match=r"half-written\.parquet"):
        has_field_ids(str(broken))
    with pytest.raises(DataFileError, match=r"missing\.parquet"):
        split_by_field_ids([str(tmp_path / "missing.parquet")])
