"""The rows a primary-key merge attributes to each file (``model.KeyMerge``), in Spark.

Paimon merge-on-read files hold every version of a key; readers return one merged row per
key. For the job's files with a ``KeyMerge``, this reads every input of their buckets once
(``inputs``: like Iceberg equality-delete files, the bucket's other live files), tags each
row with the merge groups (buckets) its file belongs to, orders a key's rows by the
sequence fields then ``_SEQUENCE_NUMBER`` and makes the merged row with the engine's rule —
``max_by``/``min_by`` over that order, ``sum``/``min``/``max``/``bool_and``/``bool_or`` —
in one ``groupBy`` of (group, key). A merged row belongs to the file of its
highest-ordered row (``first-row``: its lowest), so per-file sketches stay mergeable and
the file's live rows sum to the table's exact merged row count. Files written under an
older schema are read with their own names and types (``MergeInput.written_as``), cast and
renamed to the current ones, as the pipeline's ordinary read does
(``written_types.read_cast``).

Cost: every input of a touched bucket is read (the bucket's files, not only the commit's),
one shuffle by key — as equality deletes are (``docs/paimon.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import pyarrow as pa

from lakestats.exceptions import SketchError
from lakestats.field_ids import SPARK_FIELD_ID_KEY, spark_column, split_by_field_ids
from lakestats.model import KeyMerge, MergeInput, TableSchema
from lakestats.written_types import (
    WrittenAs,
    by_written_as,
    read_cast,
    read_name,
    written_spark_type,
)

UPDATE_BEFORE, DELETE = 1, 3
_RETRACT = (UPDATE_BEFORE, DELETE)
_HIDDEN = ("__path", "__row_index")
_URI, _GROUP, _FID, _ORDER, _KIND = "__muri", "__mgrp", "__fid", "__mord", "__mkind"
_WINNER = "__mwin"

# Paimon aggregate functions → how the merged value is made from a key's rows
SUPPORTED_FUNCTIONS = frozenset(
    {
        "sum",
        "min",
        "max",
        "last_value",
        "last_non_null_value",
        "first_value",
        "first_non_null_value",
        "bool_and",
        "bool_or",
    }
)


def _normalised(column: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    return F.regexp_replace(column, "^file:///", "file:/")


def _rules(merge: KeyMerge) -> KeyMerge:
    return replace(merge, inputs=())


def merged_rows(
    session: Any,
    scan: Any,
    *,
    merges: Sequence[tuple[KeyMerge, int]],
    paths: Sequence[str],
    schema: TableSchema,
    uri_of: Any,
) -> Any:
    """The merged rows of the job's files: ``__path`` (the Spark path of the file a row
    belongs to), ``__fid`` (its number in ``paths``) and the scan's columns with merged
    values (the row kind column, if read, set to +I). ``scan`` gives only the read schema
    (its rows are read again here, with the inputs). ``uri_of(path)`` is Spark's
    normalised URI of a path."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    rules = {_rules(m) for m, _ in merges}
    if len(rules) != 1:
        raise SketchError("one sketch job cannot merge files of differently keyed tables")
    merge = merges[0][0]
    groups: dict[tuple[MergeInput, ...], int] = {}
    requested: list[tuple[str, int, int]] = []
    for source, number in merges:
        group = groups.setdefault(source.inputs, len(groups))
        requested.append((uri_of(paths[number]), group, number))
    members = [(uri_of(i.path), g) for inputs, g in groups.items() for i in inputs]
    inputs = {i.path: i for inputs in groups for i in inputs}

    fields = [f for f in scan.schema.fields if f.name not in _HIDDEN]
    names = {c.field_id: c.name for c in schema.columns}
    top = {f.name for f in fields}
    missing = [
        f for f in (*merge.key_field_ids, *merge.sequence_field_ids) if names.get(f) not in top
    ]
    if missing:
        raise SketchError(f"primary-key merge: key or sequence field ids {missing} are not read")
    rows = _read_inputs(session, list(inputs.values()), fields, merge=merge, names=names)
    membership = session.createDataFrame(
        pa.table(
            {_URI: [u for u, _ in members], _GROUP: pa.array([g for _, g in members], pa.int32())}
        )
    )
    rows = rows.join(F.broadcast(membership), _URI)
    key = [F.col(spark_column(names[f])) for f in merge.key_field_ids]
    order = F.struct(
        *[F.col(spark_column(names[f])) for f in merge.sequence_field_ids], F.col("__mseq")
    )
    rows = rows.withColumn(_ORDER, order)
    rows = _live_inputs(rows, merge, [_GROUP, *[names[f] for f in merge.key_field_ids]])
    values = [f.name for f in fields if f.name != merge.row_kind_column]
    key_names = {names[f] for f in merge.key_field_ids}
    merged = _merge(rows, merge, values=values, key=key, key_names=key_names, names=names)
    wanted = session.createDataFrame(
        pa.table(
            {
                _URI: [u for u, _, _ in requested],
                _GROUP: pa.array([g for _, g, _ in requested], pa.int32()),
                _FID: pa.array([n for _, _, n in requested], pa.int32()),
            }
        )
    )
    merged = merged.join(F.broadcast(wanted), [_URI, _GROUP])
    out = [F.col("__path"), F.col(_FID)]
    for f in fields:
        if f.name == merge.row_kind_column:
            out.append(F.lit(0).cast(f.dataType).alias(f.name))
        else:
            out.append(F.col(spark_column(f.name)).cast(f.dataType).alias(f.name))
    return merged.select(*out)


def _read_inputs(
    session: Any,
    inputs: list[MergeInput],
    fields: list[Any],
    *,
    merge: KeyMerge,
    names: dict[int, str],
) -> Any:
    """Every input once, each with its own written types cast to the current ones
    (``written_types.read_cast``), by field id or by name as the file was written (one
    bucket may hold Java Paimon's files, with Parquet field ids, and pypaimon's, without:
    ``lakestats.field_ids``)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name
    from pyspark.sql import types as T  # noqa: N812, PLC0415

    ids = {name: field_id for field_id, name in names.items()}
    if merge.row_kind_field_id is not None:  # the row kind column, when the scan reads it
        ids.setdefault(merge.row_kind_column, merge.row_kind_field_id)
    kind_read = any(f.name == merge.row_kind_column for f in fields)

    def meta(field_id: int | None, by_id: bool) -> dict[str, Any]:
        return {SPARK_FIELD_ID_KEY: field_id} if by_id and field_id is not None else {}

    def matched(field: Any, by_id: bool, prefix: str = "") -> Any:
        """``field`` matched by id or by name; struct parents by name (Paimon, the one
        format with key merges, has no struct columns)."""
        path = prefix + field.name
        if isinstance(field.dataType, T.StructType):
            children = [matched(c, by_id, f"{path}.") for c in field.dataType.fields]
            return T.StructField(field.name, T.StructType(children), True)
        return T.StructField(field.name, field.dataType, True, meta(ids.get(path), by_id))

    def read_schema(as_written: WrittenAs, *, by_id: bool) -> Any:
        written = {
            names[f]: (read_name(f, n), written_spark_type(t))
            for f, n, t in as_written
            if f in names
        }
        read_fields = [matched(f, by_id) for f in fields]
        read_fields = [
            T.StructField(name, data_type, True, f.metadata)
            for f in read_fields
            for name, data_type in [written.get(f.name, (f.name, f.dataType))]
        ]
        if not kind_read:
            read_fields.append(
                T.StructField(
                    merge.row_kind_column, T.ByteType(), True, meta(merge.row_kind_field_id, by_id)
                )
            )
        read_fields.append(
            T.StructField(
                merge.sequence_column, T.LongType(), True, meta(merge.sequence_field_id, by_id)
            )
        )
        return T.StructType(read_fields)

    hidden = [
        _normalised(F.col("_metadata.file_path")).alias(_URI),
        F.col("_metadata.file_path").alias("__path"),
    ]
    written_as = {i.path: i.written_as for i in inputs}
    reads = [
        read_cast(
            session,
            by_written_as(paths, written_as),
            partial(read_schema, by_id=by_id),
            hidden=hidden,
        )
        for by_id, paths in zip((True, False), split_by_field_ids(written_as), strict=True)
        if paths
    ]
    read = reads[0] if len(reads) == 1 else reads[0].union(reads[1])  # same columns, same order
    return read.select(
        F.col(_URI),
        F.col("__path"),
        *[F.col(spark_column(f.name)) for f in fields if f.name != merge.row_kind_column],
        F.col(spark_column(merge.row_kind_column)).cast("int").alias(_KIND),
        F.col(spark_column(merge.sequence_column)).alias("__mseq"),
    )


def _live_inputs(rows: Any, merge: KeyMerge, partition: list[str]) -> Any:
    """The rows that take part in the merge: retractions dropped where the engine ignores
    them; with ``remove_record_on_delete``, only rows after a key's last -D."""
    from pyspark.sql import Window  # noqa: PLC0415 - lazy
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    retract = F.col(_KIND).isin(*_RETRACT)
    if merge.engine == "deduplicate":
        return rows.where(~retract) if merge.ignore_delete else rows
    if merge.remove_record_on_delete and not merge.ignore_delete:
        last_delete = F.max(F.when(F.col(_KIND) == DELETE, F.col(_ORDER))).over(
            Window.partitionBy(*[F.col(spark_column(c)) for c in partition])
        )
        rows = rows.withColumn("__mlastd", last_delete)
        rows = rows.where(F.col("__mlastd").isNull() | (F.col(_ORDER) > F.col("__mlastd")))
        return rows.drop("__mlastd").where(~retract)
    if merge.engine == "aggregation" and not merge.ignore_delete:
        return rows  # sum retracts (subtracts) -U/-D values; other functions skip them
    return rows.where(~retract)


def _merge(
    rows: Any,
    merge: KeyMerge,
    *,
    values: list[str],
    key: list[Any],
    key_names: set[str],
    names: dict[int, str],
) -> Any:
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    order = F.col(_ORDER)
    group = [F.col(_GROUP), *key]
    winner = F.struct(
        F.col(_URI).alias(_URI), F.col("__path").alias("__path"), F.col(_KIND).alias(_KIND)
    )
    if merge.engine in ("deduplicate", "first-row"):
        whole = F.struct(winner.alias(_WINNER), *[F.col(spark_column(v)).alias(v) for v in values])
        pick = F.max_by if merge.engine == "deduplicate" else F.min_by
        merged = rows.groupBy(*group).agg(pick(whole, order).alias("__mrow"))
        merged = merged.select(
            F.col(_GROUP),
            F.col(f"__mrow.{_WINNER}.{_URI}").alias(_URI),
            F.col(f"__mrow.{_WINNER}.__path").alias("__path"),
            F.col(f"__mrow.{_WINNER}.{_KIND}").alias(_KIND),
            *[F.col("__mrow." + spark_column(v)).alias(v) for v in values],
        )
        # deduplicate: a key whose newest row retracts it is gone
        return merged.where(~F.col(_KIND).isin(*_RETRACT))
    functions = dict(merge.functions)
    ids = {name: field_id for field_id, name in names.items()}
    aggregates = [F.max_by(winner, order).alias(_WINNER)]
    for v in values:
        if v in key_names:
            continue  # grouped by
        function = functions.get(ids.get(v, -1), "last_non_null_value")
        aggregates.append(_aggregate(function, F.col(spark_column(v)), order).alias(v))
    merged = rows.groupBy(*group).agg(*aggregates)
    return merged.select(
        F.col(_GROUP),
        F.col(f"{_WINNER}.{_URI}").alias(_URI),
        F.col(f"{_WINNER}.__path").alias("__path"),
        *[F.col(spark_column(v)) for v in values],
    )


def _aggregate(function: str, column: Any, order: Any) -> Any:
    """A Paimon aggregate function over a key's rows (``_live_inputs`` kept only the
    retractions ``sum`` subtracts)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    retract = F.col(_KIND).isin(*_RETRACT)
    adding = F.when(~retract, column)
    present = F.when(column.isNotNull() & ~retract, order)
    if function == "sum":
        return F.sum(F.when(retract, -column).otherwise(column))
    if function == "min":
        return F.min(adding)
    if function == "max":
        return F.max(adding)
    if function == "last_value":
        return F.max_by(column, F.when(~retract, order))
    if function == "last_non_null_value":
        return F.max_by(column, present)
    if function == "first_value":
        return F.min_by(column, F.when(~retract, order))
    if function == "first_non_null_value":
        return F.min_by(column, present)
    if function == "bool_and":
        return F.bool_and(adding)
    if function == "bool_or":
        return F.bool_or(adding)
    raise SketchError(f"primary-key merge: aggregate function {function!r} is not supported")
