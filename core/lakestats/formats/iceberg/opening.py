"""Opening an Iceberg table: by location (no catalog) or through a pyiceberg catalog.

Both hand back an ``IcebergTable`` whose ``refresh()`` looks again where it was opened:
the newest ``metadata/*.metadata.json`` of the location, or the catalog's current pointer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from pydantic import ValidationError
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.table import StaticTable, Table

from lakestats.exceptions import (
    ConfigError,
    MetadataError,
    PartialMetadataError,
    TableNotFoundError,
    first_line,
)
from lakestats.formats.iceberg.mapped_io import io_properties
from lakestats.formats.iceberg.metadata_files import find_current_metadata, list_metadata_files
from lakestats.formats.iceberg.table import IcebergTable
from lakestats.locations import LocationMap, resolve_location

# a newest metadata file that does not parse and is younger than this may be mid-write
WRITE_GRACE_S = 60.0

# pyiceberg's S3 FileIO takes its endpoint and region from properties only; everything else
# lakestats reads (pyarrow, Spark's Python workers) follows the standard AWS environment.
# Without these, a table on MinIO or Ceph is looked for at AWS, after a region lookup there.
_S3_FROM_ENVIRONMENT = {
    "s3.endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "s3.region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}


def environment_io_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` plus the S3 endpoint and region of the AWS environment variables,
    where the properties do not set them."""
    out = dict(properties)
    for key, variables in _S3_FROM_ENVIRONMENT.items():
        value = next((os.environ[v] for v in variables if os.environ.get(v)), None)
        if value is not None and key not in out:
            out[key] = value
    return out


def is_iceberg_location(path: str) -> bool:
    """Whether ``path`` holds ``metadata/*.metadata.json`` (never raises)."""
    try:
        return bool(list_metadata_files(resolve_location(path)))
    except (TableNotFoundError, OSError, ValueError):
        return False


def open_iceberg_location(path: str, *, location_map: LocationMap | None = None) -> IcebergTable:
    """Open a table from its location (local path, ``file://`` or filesystem URI).

    The current metadata file is the newest ``metadata/*.metadata.json`` (or the one
    ``version-hint.text`` names); ``refresh()`` looks again. ``location_map`` says where the
    files the metadata names really are (``MappedFileIO``).
    """
    location = resolve_location(path)
    properties = io_properties(location_map or LocationMap(), environment_io_properties({}))
    loaded: dict[str, tuple[int | None, int | None]] = {}  # metadata file → (size, mtime)

    def load(previous: Table | None) -> Table:
        # its size and mtime come with the request that found it: no second look
        current = find_current_metadata(location)
        metadata_file, seen = current.location, (current.size, current.mtime_ns)
        if (
            previous is not None
            and previous.metadata_location == metadata_file
            and loaded.get(metadata_file) == seen
        ):
            return previous
        # new, or rewritten in place (metadata files are immutable: that is corruption,
        # and it must surface as an error now, not at the next commit)
        table = _load_static(metadata_file, properties, written_ns=seen[1])
        loaded.clear()
        loaded[metadata_file] = seen
        return table

    return IcebergTable(load, location.uri, opened_at=location.uri, location_map=location_map)


def open_iceberg_catalog(
    catalog_name: str,
    catalog_properties: Mapping[str, str],
    identifier: str,
    *,
    location_map: LocationMap | None = None,
) -> IcebergTable:
    """Open a table through a pyiceberg catalog; ``refresh()`` asks the catalog again.

    With a ``location_map``, the metadata file the catalog names and every file it lists
    are read at their mapped locations.
    """
    properties = io_properties(
        location_map or LocationMap(), environment_io_properties(catalog_properties)
    )
    try:
        catalog = load_catalog(catalog_name, **properties)
    except Exception as exc:
        # Each catalog backend (SQL, REST, Glue, Hive …) fails with its own client errors;
        # all of them mean the catalog settings do not lead to a working catalog.
        raise ConfigError(f"catalog {catalog_name!r} cannot be used: {first_line(exc)}") from exc
    description = f"{identifier} (catalog {catalog_name})"

    def load(previous: Table | None) -> Table:
        try:
            table = catalog.load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError) as exc:
            raise TableNotFoundError(f"table {description} does not exist") from exc
        except (ValidationError, IcebergValidationError) as exc:
            raise MetadataError(
                f"table {description}: current metadata file {_describe_invalid(exc)}"
            ) from exc
        except FileNotFoundError as exc:
            raise MetadataError(
                f"table {description}: metadata file {first_line(exc)} does not exist"
            ) from exc
        except Exception as exc:  # backend client errors, as above
            raise MetadataError(
                f"table {description} cannot be loaded ({type(exc).__name__}: {first_line(exc)})"
            ) from exc
        if previous is not None and previous.metadata_location == table.metadata_location:
            return previous
        return table

    return IcebergTable(load, description)


def _load_static(
    metadata_file: str, properties: dict[str, str], *, written_ns: int | None = None
) -> Table:
    """The table of one metadata file. ``written_ns`` (its modification time): a file that
    is not valid JSON and was written less than ``WRITE_GRACE_S`` ago is a
    ``PartialMetadataError`` — the newest file is found by listing, and writers that write
    it in place (pyiceberg's catalogs do) leave it half written while at it. An object store
    shows a file only whole; a writer that died mid-file leaves it truncated for good, which
    is reported as damage once older than the grace."""
    what = f"metadata file {metadata_file}"
    try:
        return StaticTable.from_metadata(metadata_file, properties)
    except FileNotFoundError as exc:
        raise MetadataError(f"{what} does not exist (removed while reading?)") from exc
    except (ValidationError, IcebergValidationError) as exc:
        message = f"{what} {_describe_invalid(exc)}"
        age_s = None if written_ns is None else time.time() - written_ns / 1e9
        if _json_invalid(exc) and age_s is not None and age_s < WRITE_GRACE_S:
            raise PartialMetadataError(
                f"{message}; written {max(age_s, 0.0):.1f} s ago: a writer may still be writing it"
            ) from exc
        raise MetadataError(message) from exc
    except UnicodeDecodeError as exc:
        raise MetadataError(f"{what} is not UTF-8 text (corrupt?)") from exc
    except (OSError, ValueError, EOFError) as exc:
        raise MetadataError(f"{what} is unreadable ({first_line(exc)})") from exc


def _json_invalid(exc: ValidationError | IcebergValidationError) -> bool:
    # pyiceberg wraps pydantic's error in its own, keeping the original as the cause
    cause = exc if isinstance(exc, ValidationError) else exc.__cause__
    return isinstance(cause, ValidationError) and any(
        e["type"] == "json_invalid" for e in cause.errors()
    )


def _describe_invalid(exc: ValidationError | IcebergValidationError) -> str:
    cause = exc if isinstance(exc, ValidationError) else exc.__cause__
    if not isinstance(cause, ValidationError) or not cause.errors():
        return f"is not valid Iceberg table metadata ({first_line(exc)})"
    errors = cause.errors()
    if _json_invalid(exc):
        return "is not valid JSON (truncated?)"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"is not valid Iceberg table metadata ({where}: {first['msg']})"
