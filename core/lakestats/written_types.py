"""Data files written with other column names or types than the table's: read with
theirs, cast and renamed.

A format states a file's written columns only where their name or type differs from the
table's current one (``DataFile.written_as``, ``MergeInput.written_as``: Paimon after a
type change such as ``DOUBLE`` → ``INT``, or a rename, which a file without field ids —
pypaimon's — knows only by its old name). Spark's Parquet reader refuses to read such a
column as the new type, and finds it by name only under the old name, so ``read_cast``
reads the files grouped by how they were written, each group with a schema of those names
and types, casts and renames them to the current ones and unions the groups: still one
scan stage of the one sketch job, and each file's own row positions
(``_metadata.row_index``), so deletion vectors still apply. The cast is Spark's ``CAST``
with ANSI off (the sketch job's conf): ``DOUBLE`` → ``INT`` truncates toward zero,
``BOOLEAN`` → ``STRING`` is ``true``/``false``, ``INT`` → ``STRING`` its digits,
``STRING`` → ``BYTES`` UTF-8 — Paimon's cast rules for these. Used by the pipeline's
ordinary read and by the primary-key merge (``deletes/key_merge.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lakestats.exceptions import SketchError
from lakestats.field_ids import spark_column
from lakestats.sketches.spec import type_spec

# (field id, name, type) as the file was written, for each column where the name or the
# type differs from the table's current one; the name ``ABSENT`` for a column the file was
# written without whose current name is one of the file's (a column dropped and added again
# under its old name): it reads as null, not as the file's column of that name
WrittenAs = tuple[tuple[int, str, str], ...]
ABSENT = ""


def written_as(
    then: Mapping[int, tuple[str, str]], current: Mapping[int, tuple[str, str]]
) -> WrittenAs:
    """How a file written with the columns ``then`` (field id → (name, type)) differs from
    the ``current`` ones. Columns since dropped are not read, so left out; columns added
    since under a name the file has are ``ABSENT`` (names compared as Spark's reader
    matches them, ignoring case)."""
    names = {name.lower() for name, _ in then.values()}
    changed = [
        (field_id, *then[field_id])
        for field_id, now in current.items()
        if field_id in then and then[field_id] != now
    ]
    absent = [
        (field_id, ABSENT, type_str)
        for field_id, (name, type_str) in current.items()
        if field_id not in then and name.lower() in names
    ]
    return tuple(changed + absent)


def read_by_field_id(written: WrittenAs, current: Mapping[int, tuple[str, str]]) -> WrittenAs:
    """What of ``written`` a read of a file with field ids needs: the columns of other
    types than ``current``'s (field id → (name, type)), under their current names. Such a
    file is found by its ids whatever its names (so no name of it may clash with another
    column's current one), and a column it lacks reads as null."""
    return tuple(
        (field_id, current[field_id][0], type_str)
        for field_id, name, type_str in written
        if name != ABSENT and field_id in current and type_str != current[field_id][1]
    )


def read_name(field_id: int, written_name: str) -> str:
    """The name a column is read by from a file it was written to as ``written_name``; a
    name no file has for an ``ABSENT`` one, so that it reads as null."""
    return f"__lakestats_absent_{field_id}" if written_name == ABSENT else written_name


def by_written_as(
    paths: Iterable[str], written_as_of: Mapping[str, WrittenAs]
) -> dict[WrittenAs, list[str]]:
    """``paths`` grouped by how they were written (``()``: as the table is now)."""
    groups: dict[WrittenAs, list[str]] = {}
    for path in paths:
        groups.setdefault(written_as_of.get(path, ()), []).append(path)
    return groups


def written_spark_type(type_str: str) -> Any:
    """The Spark type a column written as ``type_str`` (a model type) is read with."""
    from lakestats.pipeline import _spark_type  # noqa: PLC0415 - the pipeline imports this module

    spec = type_spec(type_str)
    if spec is None:
        raise SketchError(f"cannot read a column written as {type_str!r} (unsupported type)")
    return _spark_type(spec)


def read_cast(
    session: Any,
    groups: Mapping[WrittenAs, Sequence[str]],
    read_schema: Callable[[WrittenAs], Any],
    *,
    hidden: Sequence[Any],
    source: str = "parquet",
) -> Any:
    """The files of ``groups`` (how they were written → paths) as one DataFrame:
    ``hidden`` (columns of the file scan, e.g. ``_metadata.file_path``) then every
    top-level column of ``read_schema(())`` (the current names and types), each group
    read with ``read_schema(how it was written)`` — the same fields in the same order —
    and cast and renamed where a column differs."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    current = read_schema(())
    frames = []
    for written, paths in groups.items():
        schema = read_schema(written) if written else current
        reader = session.read.schema(schema)
        scan = reader.orc(*paths) if source == "orc" else reader.parquet(*paths)
        if len(schema.fields) != len(current.fields):
            raise SketchError("a written schema must have the current schema's fields")
        columns = [
            F.col(spark_column(now.name))
            if (was.name, was.dataType) == (now.name, now.dataType)
            else F.col(spark_column(was.name))
            .cast(now.dataType)
            .alias(now.name, metadata=now.metadata)
            for was, now in zip(schema.fields, current.fields, strict=True)
        ]
        frames.append(scan.select(*hidden, *columns))
    if not frames:
        raise SketchError("no data files to read")
    result = frames[0]
    for frame in frames[1:]:
        result = result.union(frame)  # same columns in the same order
    return result
