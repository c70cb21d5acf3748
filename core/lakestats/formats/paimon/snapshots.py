"""Paimon snapshots (``snapshot/snapshot-N``): the fields lakestats uses, and commit kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakestats.exceptions import MetadataError

APPEND = "APPEND"
COMPACT = "COMPACT"
OVERWRITE = "OVERWRITE"
ANALYZE = "ANALYZE"


@dataclass(frozen=True)
class PaimonSnapshot:
    snapshot_id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_kind: str
    time_millis: int
    total_record_count: int | None = None
    index_manifest: str | None = None
    statistics: str | None = None
    commit_user: str | None = None
    changelog_manifest_list: str | None = None  # changelog files (``changelog-producer``)
    next_row_id: int | None = None  # row tracking: the first row id of the next new rows

    @property
    def fingerprint(self) -> str:
        """What tells this snapshot apart from another one given its id after a rollback
        (``Commit.fingerprint``): its commit time and its delta manifest list, whose name
        holds a random UUID that every commit draws anew."""
        return f"{self.time_millis}/{self.delta_manifest_list}"


def parse_snapshot(document: Mapping[str, Any], where: str) -> PaimonSnapshot:
    try:
        return PaimonSnapshot(
            snapshot_id=int(document["id"]),
            schema_id=int(document["schemaId"]),
            base_manifest_list=str(document["baseManifestList"]),
            delta_manifest_list=str(document["deltaManifestList"]),
            commit_kind=str(document.get("commitKind") or APPEND).upper(),
            time_millis=int(document.get("timeMillis") or 0),
            total_record_count=_optional_int(document.get("totalRecordCount")),
            index_manifest=document.get("indexManifest"),
            statistics=document.get("statistics"),
            commit_user=document.get("commitUser"),
            changelog_manifest_list=document.get("changelogManifestList"),
            next_row_id=_optional_int(document.get("nextRowId")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataError(f"{where}: not a Paimon snapshot ({exc!r})") from exc


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def operation(kind: str, added: int, removed: int) -> str:
    """The model's operation name of a Paimon commit kind and what the commit changed."""
    if kind == APPEND:
        return "append"
    if kind == COMPACT:
        return "replace"
    if kind == OVERWRITE:
        return "delete" if added == 0 and removed else "overwrite"
    if kind == ANALYZE:
        return "analyze"
    return kind.lower()
