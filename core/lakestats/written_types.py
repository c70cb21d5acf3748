"""Data files written with other column types than the table's: read with theirs, cast.

A format states a file's written types only where they differ from the table's current
ones (``DataFile.retyped``, ``MergeInput.retyped``: Paimon after a type change such as
``DOUBLE`` → ``INT``). Spark's Parquet reader refuses to read such a column as the new
type, so ``read_cast`` reads the files grouped by their written types, each group with a
schema of those types, casts them to the current ones and unions the groups: still one
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
from lakestats.sketches.spec import type_spec

# (field id, type as the file was written), where it differs from the current type
Retyped = tuple[tuple[int, str], ...]


def by_written_types(
    paths: Iterable[str], retyped_of: Mapping[str, Retyped]
) -> dict[Retyped, list[str]]:
    """``paths`` grouped by their written types (``()``: written with the current ones)."""
    groups: dict[Retyped, list[str]] = {}
    for path in paths:
        groups.setdefault(retyped_of.get(path, ()), []).append(path)
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
    groups: Mapping[Retyped, Sequence[str]],
    read_schema: Callable[[Retyped], Any],
    *,
    hidden: Sequence[Any],
    source: str = "parquet",
) -> Any:
    """The files of ``groups`` (written types → paths) as one DataFrame: ``hidden``
    (columns of the file scan, e.g. ``_metadata.file_path``) then every top-level column
    of ``read_schema(())`` (the current types), each group read with
    ``read_schema(its written types)`` and cast where a column's type differs."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    current = read_schema(())
    frames = []
    for written, paths in groups.items():
        schema = read_schema(written) if written else current
        reader = session.read.schema(schema)
        scan = reader.orc(*paths) if source == "orc" else reader.parquet(*paths)
        as_written = {f.name: f.dataType for f in schema.fields}
        columns = [
            F.col(_q(f.name))
            if as_written.get(f.name) == f.dataType
            else F.col(_q(f.name)).cast(f.dataType).alias(f.name, metadata=f.metadata)
            for f in current.fields
        ]
        frames.append(scan.select(*hidden, *columns))
    if not frames:
        raise SketchError("no data files to read")
    result = frames[0]
    for frame in frames[1:]:
        result = result.union(frame)  # same columns in the same order
    return result


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
