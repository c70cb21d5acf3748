"""The sketch job's ``RowFilter`` for row-level deletes: anti-joins inside Spark.

The scan carries ``__path`` (Spark's URI of the file) and ``__row_index`` (0-based row
position, Parquet only). Each row gets its data file's number ``__fid`` from a small
broadcast table keyed by the URI Hadoop makes of each path; then

* position deletes and deletion vectors: ``left_anti`` on ``(__fid, __row_index)`` with
  the driver-built positions table (``positions``);
* equality deletes, one join per set of equality columns: Spark reads the delete files
  (same read schema as the data, so types match), each delete row tagged with the data
  files it applies to, ``left_anti`` on ``__fid`` and null-safe equality (``<=>``) of
  every equality column: a NULL in a delete file deletes rows whose value IS NULL.

Every row must find its ``__fid``; the job returns ``min(__fid)`` per file and ``check``
refuses a file without one (a path spelled differently would otherwise apply nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import structlog

from lakestats.arrow_sketch.dead_rows import DeadRows
from lakestats.arrow_sketch.engine import ArrowDeletes
from lakestats.arrow_sketch.equality import EqualityTask, equality_tasks
from lakestats.arrow_sketch.key_winners import winner_groups
from lakestats.deletes.plan import EqualityGroup, LiveReadPlan
from lakestats.deletes.positions import FID, POS, dead_rows_by_file, positions_table
from lakestats.exceptions import SketchError
from lakestats.field_ids import spark_column
from lakestats.locations import LocationMap
from lakestats.model import TableSchema

_log = structlog.get_logger(__name__)

_KEY = "__fkey"
_FILE_NUMBER = "__fid"
_CHECK = "__fid_min"


def _normalised(column: Any) -> Any:
    """Spark writes local files as ``file:/x``, Hadoop's qualified URI as ``file:///x``."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

    return F.regexp_replace(column, "^file:///", "file:/")


def spark_uri(session: Any, path: str) -> str:
    """The URI Spark reports in ``_metadata.file_path`` for ``path``, normalised."""
    jvm = session._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    filesystem = hadoop_path.getFileSystem(session._jsc.hadoopConfiguration())
    uri = str(filesystem.makeQualified(hadoop_path).toUri().toString())
    return "file:/" + uri.removeprefix("file:///") if uri.startswith("file:///") else uri


class LiveRowFilter:
    """Removes the dead rows of the job's data files (``plan``) before the aggregate."""

    columns: Sequence[str] = (_FILE_NUMBER,)
    aggregates: Sequence[tuple[str, str]] = ((_CHECK, f"min({_FILE_NUMBER})"),)

    def __init__(self, plan: LiveReadPlan, schema: TableSchema, mapping: LocationMap) -> None:
        self.plan = plan
        self.schema = schema
        self.mapping = mapping
        self.needs_row_index = plan.needs_row_index
        self.live_rows: dict[str, int] = {}
        self.deleted_positions = 0  # rows of the positions table (after matching)

    def arrow_deletes(self) -> ArrowDeletes | None:
        """The plan's deletes as the Arrow engine applies them (``ArrowDeletes``): position
        deletes and deletion vectors as positions (the delete files read here), primary-key
        merges and equality deletes as first jobs to run; ``None`` where only the SQL job
        applies them exactly (the reason logged at debug level)."""
        plan = self.plan
        if plan.merges:
            if plan.positions or plan.vectors or plan.equality:
                return None
            groups = winner_groups(plan.merges, plan.paths, self.schema)
            if isinstance(groups, str):
                _log.debug("arrow_key_merge_unsupported", reason=groups)
                return None
            return ArrowDeletes(dead={}, winners=groups)
        tasks: list[EqualityTask] = []
        if plan.equality:
            found = equality_tasks(plan, self.schema)
            if isinstance(found, str):
                _log.debug("arrow_equality_deletes_unsupported", reason=found)
                return None
            tasks = found
        return ArrowDeletes(dead=self._positions(), equality=tasks)

    def _positions(self) -> dict[str, DeadRows]:
        """Path → its dead rows from position deletes and vectors."""
        dead, self.deleted_positions = dead_rows_by_file(self.plan, self.mapping)
        return dict(zip(self.plan.paths, dead, strict=True))

    def apply(self, session: Any, df: Any) -> Any:
        from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name

        if self.plan.merges:
            if self.plan.positions or self.plan.vectors or self.plan.equality:
                raise SketchError("a primary-key merge and other row-level deletes in one job")
            from lakestats.deletes.key_merge import merged_rows  # noqa: PLC0415 - on use

            return merged_rows(
                session,
                df,
                merges=self.plan.merges,
                paths=self.plan.paths,
                schema=self.schema,
                uri_of=lambda path: spark_uri(session, path),
            )
        keys = self._frame(
            session,
            pa.table(
                {
                    _KEY: [spark_uri(session, p) for p in self.plan.paths],
                    _FILE_NUMBER: pa.array(range(len(self.plan.paths)), pa.int32()),
                }
            ),
        )
        data = df.withColumn(_KEY, _normalised(F.col("__path")))
        data = data.join(F.broadcast(keys), _KEY, "left").drop(_KEY)
        if self.plan.needs_row_index:
            positions = positions_table(self.plan, self.mapping)
            self.deleted_positions = positions.num_rows
            if positions.num_rows:
                dead = self._frame(session, positions)
                data = data.join(
                    dead,
                    (data[_FILE_NUMBER] == dead[FID]) & (data["__row_index"] == dead[POS]),
                    "left_anti",
                )
        for number, group in enumerate(self.plan.equality):
            data = self._equality(session, data, group, number)
        return data

    def check(self, rows: Sequence[Any]) -> None:
        unmatched = [row["__path"] for row in rows if row[_CHECK] is None]
        if unmatched:
            raise SketchError(
                "cannot apply row-level deletes: Spark named data files "
                f"{unmatched[:3]} differently than lakestats expected"
            )

    def _frame(self, session: Any, table: pa.Table) -> Any:
        return session.createDataFrame(table)

    def _equality(self, session: Any, data: Any, group: EqualityGroup, number: int) -> Any:
        from pyspark.sql import functions as F  # noqa: N812, PLC0415 - lazy; pyspark's own name
        from pyspark.sql import types as T  # noqa: N812, PLC0415

        names = self._equality_names(group.field_ids)
        top = list(dict.fromkeys(parts[0] for parts in names))
        read_schema = T.StructType([data.schema[name] for name in top])
        files = [d.path for d, _ in group.files]
        targets = self._frame(
            session,
            pa.table(
                {
                    _KEY: [
                        spark_uri(session, d.path) for d, numbers in group.files for _ in numbers
                    ],
                    _FILE_NUMBER: pa.array(
                        [n for _, numbers in group.files for n in numbers], pa.int32()
                    ),
                }
            ),
        ).withColumnRenamed(_FILE_NUMBER, f"__efid{number}")
        read = session.read.schema(read_schema).parquet(*files)
        equal = [f"__e{number}_{j}" for j in range(len(names))]
        rows = read.select(
            _normalised(F.col("_metadata.file_path")).alias(_KEY),
            *[
                F.col(spark_column(*parts)).alias(alias)
                for parts, alias in zip(names, equal, strict=True)
            ],
        )
        dead = rows.join(F.broadcast(targets), _KEY).drop(_KEY)
        mine = [f"__q{number}_{j}" for j in range(len(names))]
        for parts, alias in zip(names, mine, strict=True):
            data = data.withColumn(alias, F.col(spark_column(*parts)))
        condition = data[_FILE_NUMBER] == dead[f"__efid{number}"]
        for left, right in zip(mine, equal, strict=True):
            condition = condition & data[left].eqNullSafe(dead[right])
        return data.join(dead, condition, "left_anti").drop(*mine)

    def _equality_names(self, field_ids: Sequence[int]) -> list[tuple[str, ...]]:
        by_id: Mapping[int, Any] = self.schema.by_id()
        missing = [f for f in field_ids if f not in by_id]
        if missing:
            raise SketchError(f"equality deletes on field ids {missing} not in the table schema")
        return [by_id[f].parts for f in field_ids]
