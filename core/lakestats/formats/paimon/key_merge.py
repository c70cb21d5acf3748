"""Which files of a Paimon primary-key table need a key merge, and its rules (pure).

Without deletion vectors, readers merge a bucket's live files by primary key (LSM
merge-on-read). Each such file gets a ``model.KeyMerge`` naming every live file of its
bucket, so the core sketches the merged rows attributed to it (``deletes/key_merge.py``).
A bucket whose files form one sorted run — all in one level above 0, no retraction rows
(``_DELETE_ROW_COUNT`` 0), none written with other column types — holds unique live keys:
no merge (a fully compacted table reads no more than before).

The rules come from the table's options, as Java Paimon's merge functions read them:
``merge-engine`` (deduplicate, partial-update, aggregation, first-row), ``ignore-delete``
(and its per-engine old names), ``<engine>.remove-record-on-delete``, ``sequence.field``,
``fields.<col>.aggregate-function`` / ``fields.default-aggregate-function``. What the
merge cannot reproduce (sequence groups, descending sequence order, other aggregate
functions, other engines) is refused with one line naming it, and the table keeps the
stats of every stored version (``merge_rules`` returns the reason).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from lakestats.deletes.key_merge import SUPPORTED_FUNCTIONS
from lakestats.formats.paimon.entries import ManifestEntry
from lakestats.formats.paimon.types import VALUE_KIND_COLUMN, VALUE_KIND_FIELD_ID, PaimonSchema
from lakestats.model import KeyMerge, MergeInput
from lakestats.written_types import WrittenAs, written_as

# Java's SpecialFields.SEQUENCE_NUMBER: Integer.MAX_VALUE - 1
SEQUENCE_COLUMN = "_SEQUENCE_NUMBER"
SEQUENCE_FIELD_ID = 2_147_483_646
ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
_DEFAULT_FUNCTION = "last_non_null_value"

BucketKey = tuple[bytes, int]


def merge_rules(schema: PaimonSchema) -> KeyMerge | str:
    """The table's merge rules (a ``KeyMerge`` without inputs), or why it cannot be merged."""
    options = {k: v.strip() for k, v in schema.options.items()}

    def enabled(key: str) -> bool:
        return options.get(key, "false").lower() == "true"

    engine = options.get("merge-engine", "deduplicate").lower()
    if engine not in ENGINES:
        return f"merge engine {engine!r} is not supported"
    by_name = schema.by_name()
    sequence: list[int] = []
    for name in filter(None, (n.strip() for n in options.get("sequence.field", "").split(","))):
        if name not in by_name:
            return f"sequence field {name!r} is not a column"
        sequence.append(by_name[name].field_id)
    if options.get("sequence.field.sort-order", "ascending").lower() != "ascending":
        return "a descending sequence.field order is not supported"
    if any(k.endswith(".sequence-group") for k in options):
        return "partial-update sequence groups are not supported"
    keys = [by_name[k].field_id for k in schema.primary_keys if k in by_name]
    if len(keys) != len(schema.primary_keys):
        return "a primary key column is not in the schema"
    functions: list[tuple[int, str]] = []
    if engine == "aggregation":
        default = options.get("fields.default-aggregate-function", _DEFAULT_FUNCTION).lower()
        for f in schema.fields:
            if f.name in schema.primary_keys:
                continue
            function = options.get(f"fields.{f.name}.aggregate-function", default).lower()
            if function not in SUPPORTED_FUNCTIONS:
                return (
                    f"aggregate function {function!r} of column {f.name!r} is not supported "
                    f"(supported: {', '.join(sorted(SUPPORTED_FUNCTIONS))})"
                )
            functions.append((f.field_id, function))
    elif any(k.endswith(".aggregate-function") for k in options):
        return f"aggregate functions with the {engine} engine are not supported"
    return KeyMerge(
        inputs=(),
        key_field_ids=tuple(keys),
        engine=engine,
        functions=tuple(functions),
        sequence_field_ids=tuple(sequence),
        ignore_delete=enabled("ignore-delete") or enabled(f"{engine}.ignore-delete"),
        remove_record_on_delete=enabled(f"{engine}.remove-record-on-delete"),
        sequence_column=SEQUENCE_COLUMN,
        sequence_field_id=SEQUENCE_FIELD_ID,
        row_kind_column=VALUE_KIND_COLUMN,
        row_kind_field_id=VALUE_KIND_FIELD_ID,
    )


def schema_written_as(written: PaimonSchema, current: PaimonSchema) -> WrittenAs:
    """(field id, name, type) as written of the columns renamed, or given another type,
    since ``written`` (``written_types``)."""

    def described(schema: PaimonSchema) -> dict[int, tuple[str, str]]:
        return {
            f.field_id: (f.name, type_str)
            for f in schema.fields
            if (type_str := f.type.iceberg_type) is not None
        }

    return written_as(described(written), described(current))


def by_bucket(entries: Iterable[ManifestEntry]) -> dict[BucketKey, list[ManifestEntry]]:
    buckets: dict[BucketKey, list[ManifestEntry]] = {}
    for entry in entries:
        buckets.setdefault((entry.partition, entry.bucket), []).append(entry)
    return buckets


def needs_merge(files: Sequence[ManifestEntry], retyped_schemas: Collection[int]) -> bool:
    """Whether a bucket's live files may hold several versions of a key (or retractions,
    or columns written with other types: schema ids of ``retyped_schemas``): not one
    sorted run above level 0."""
    levels = {e.level for e in files}
    sorted_run = len(levels) == 1 and min(levels) > 0
    clean = all(e.delete_row_count == 0 for e in files)
    return not (sorted_run and clean) or any(e.schema_id in retyped_schemas for e in files)


def bucket_merge(
    rules: KeyMerge,
    files: Sequence[ManifestEntry],
    paths: Mapping[str, str],
    written_as_of: Mapping[int, WrittenAs],
) -> KeyMerge:
    """``rules`` with the bucket's files as inputs (sorted by path, so every file of the
    bucket names the same merge). ``paths``: file name → its path."""
    inputs = sorted(
        (MergeInput(paths[e.file_name], written_as_of.get(e.schema_id, ())) for e in files),
        key=lambda i: i.path,
    )
    return replace(rules, inputs=tuple(inputs))
