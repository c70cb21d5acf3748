"""Whether a Parquet data file carries field ids: read by id if so, by column name if not.

Writers differ: Iceberg and Java Paimon write Parquet field ids, pypaimon, Hive
migrations and Delta without column mapping do not, and one table may hold files of both
kinds (a Flink job and a Python job writing one Paimon table). Spark's field-id matching
fails on a file without ids, and matching by name misreads a file written before a
rename, so each file is read the way it was written, found from its footer. Reads name
their columns with ``spark_column``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from lakestats.exceptions import DataFileError
from lakestats.locations import filesystem_from_uri, local_path

# Spark's read-schema metadata key that matches a column by Parquet field id
SPARK_FIELD_ID_KEY = "parquet.field.id"
_PARQUET_FIELD_ID = b"PARQUET:field_id"


def split_by_field_ids(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """(files with Parquet field ids, files without), in the given order, from each
    file's footer. Raises ``DataFileError`` naming a file that cannot be read."""
    with_ids: list[str] = []
    without: list[str] = []
    for path in paths:
        (with_ids if has_field_ids(path) else without).append(path)
    return with_ids, without


@lru_cache(maxsize=65_536)  # data files are immutable: a footer read once is good forever
def has_field_ids(path: str) -> bool:
    """Whether the Parquet file at ``path`` (a local path or a URI) has field ids."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only mixed or id-less tables read footers

    local = local_path(path, percent_encoded=False)
    try:
        if local is not None:
            schema = pq.read_schema(str(local))
        else:
            filesystem, inner = filesystem_from_uri(path)
            schema = pq.read_schema(inner, filesystem=filesystem)
    except (OSError, ValueError) as exc:
        raise DataFileError(f"cannot read data file {path}: {exc}") from exc
    return any(field.metadata and _PARQUET_FIELD_ID in field.metadata for field in schema)


def spark_column(*names: str) -> str:
    """Spark SQL's reference to the column at ``names`` (a struct's fields after it), each
    name back-quoted: a name may hold dots, spaces or back quotes."""
    return ".".join("`" + name.replace("`", "``") + "`" for name in names)
