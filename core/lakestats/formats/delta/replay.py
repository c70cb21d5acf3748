"""Log replay over parsed actions (pure): one commit's actions, and the table state.

Delta's rule, which Spark writers rely on: within one commit, removes and adds apply as
*sets* keyed by the logical file id ``(path, deletion vector id)``, removes first. Spark
writes ``add(P, vector)`` before ``remove(P)`` in the same commit; replaying lines in
order would lose the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from lakestats.exceptions import MetadataError, UnsupportedTableError
from lakestats.formats.delta.dv import DvDescriptor

FileKey = tuple[str, str]  # (unquoted path, deletion vector unique id or "")

# Reader features whose tables lakestats reads correctly (Delta PROTOCOL.md names).
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "checkpointProtection",
    }
)
MAX_READER_VERSION = 3


def file_key(action: Mapping[str, Any]) -> FileKey:
    dv = action.get("deletionVector")
    return (unquote(str(action.get("path"))), DvDescriptor.parse(dv).unique_id if dv else "")


@dataclass(frozen=True)
class CommitLog:
    """The actions of one ``<version>.json`` that lakestats uses."""

    version: int
    timestamp_ms: int
    adds: tuple[Mapping[str, Any], ...] = ()
    removes: tuple[Mapping[str, Any], ...] = ()
    metadata: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None
    engine_operation: str | None = None  # commitInfo.operation, e.g. "WRITE", "OPTIMIZE"
    fingerprint: str | None = None  # ``Commit.fingerprint``: a digest of the commit file

    @classmethod
    def of(
        cls,
        version: int,
        actions: Iterable[Mapping[str, Any]],
        mtime_ms: int,
        fingerprint: str | None = None,
    ) -> CommitLog:
        adds, removes = [], []
        metadata = protocol = info = None
        for action in actions:
            if (add := action.get("add")) is not None:
                adds.append(_file_action(add, "add", version))
            elif (remove := action.get("remove")) is not None:
                removes.append(_file_action(remove, "remove", version))
            elif (found := action.get("metaData")) is not None:
                metadata = found
            elif (found := action.get("protocol")) is not None:
                protocol = found
            elif (found := action.get("commitInfo")) is not None:
                info = found
        in_commit = (info or {}).get("inCommitTimestamp")
        return cls(
            version=version,
            # Delta's commit time is the file's modification time, unless the table keeps
            # in-commit timestamps
            timestamp_ms=int(in_commit) if in_commit is not None else mtime_ms,
            adds=tuple(adds),
            removes=tuple(removes),
            metadata=metadata,
            protocol=protocol,
            engine_operation=(info or {}).get("operation"),
            fingerprint=fingerprint,
        )

    @property
    def operation(self) -> str:
        """``append``, ``delete``, ``overwrite``, ``replace`` (no data change: OPTIMIZE,
        stats backfill) or ``metadata`` (no file changed: schema, properties, VACUUM)."""
        if not self.adds and not self.removes:
            return "metadata"
        actions = (*self.adds, *self.removes)
        if all(a.get("dataChange") is False for a in actions):
            return "replace"
        if not self.removes:
            return "append"
        if not self.adds:
            return "delete"
        removed_paths = {file_key(r)[0] for r in self.removes}
        if all(file_key(a)[0] in removed_paths and a.get("deletionVector") for a in self.adds):
            return "delete"  # deletion vectors re-add the same files
        return "overwrite"

    def net_changes(self) -> tuple[dict[FileKey, Mapping[str, Any]], set[FileKey]]:
        """(added files by key, removed keys), with the set semantics of one commit: a key
        both removed and re-added here is listed in both."""
        return {file_key(a): a for a in self.adds}, {file_key(r) for r in self.removes}


def _file_action(action: Any, kind: str, version: int) -> Mapping[str, Any]:
    if not isinstance(action, Mapping) or not isinstance(action.get("path"), str):
        raise MetadataError(
            f"_delta_log/{version:020d}.json: {kind} action without a path; the commit is corrupt"
        )
    return action


@dataclass
class ReplayState:
    """The table as of one version: live files, metadata, protocol (mutable while built)."""

    version: int = -1
    files: dict[FileKey, Mapping[str, Any]] = field(default_factory=dict)
    metadata: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None
    # the metadata (schema) each file was written under, for files added by a replayed
    # commit: a column added later is absent from the file, not of unknown stats. Files
    # listed by a checkpoint are not here (a checkpoint does not say).
    written_under: dict[FileKey, Mapping[str, Any]] = field(default_factory=dict)

    def load_checkpoint(self, version: int, actions: Iterable[Mapping[str, Any]]) -> None:
        self.version = version
        self.files = {}
        self.written_under = {}
        for action in actions:
            if (add := action.get("add")) is not None:
                self.files[file_key(add)] = add
            elif (found := action.get("metaData")) is not None:
                self.metadata = found
            elif (found := action.get("protocol")) is not None:
                self.protocol = found

    def apply(self, commit: CommitLog, *, with_files: bool = True) -> None:
        if commit.metadata is not None:
            self.metadata = commit.metadata
        if commit.protocol is not None:
            self.protocol = commit.protocol
        if with_files:
            added, removed = commit.net_changes()
            for key in removed:
                self.files.pop(key, None)
                self.written_under.pop(key, None)
            self.files.update(added)
            if self.metadata is not None:  # files of a commit are written under its schema
                self.written_under.update(dict.fromkeys(added, self.metadata))
        self.version = commit.version

    def files_by_metadata(self) -> list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]]:
        """The live files grouped by the metadata they were written under (the current
        metadata where not known); ``metadata`` must be set."""
        assert self.metadata is not None
        groups: dict[int, tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = {}
        for key, add in self.files.items():
            metadata = self.written_under.get(key, self.metadata)
            groups.setdefault(id(metadata), (metadata, []))[1].append(add)
        return list(groups.values())


def check_protocol(protocol: Mapping[str, Any] | None, *, where: str) -> None:
    """``UnsupportedTableError`` when the table needs a reader lakestats is not."""
    if protocol is None:
        return
    version = int(protocol.get("minReaderVersion") or 1)
    if version > MAX_READER_VERSION:
        raise UnsupportedTableError(
            f"{where}: the table needs Delta reader version {version}; lakestats reads up to "
            f"{MAX_READER_VERSION}"
        )
    unknown = sorted(set(protocol.get("readerFeatures") or ()) - SUPPORTED_READER_FEATURES)
    if unknown:
        raise UnsupportedTableError(
            f"{where}: the table uses Delta reader feature(s) {', '.join(unknown)} that "
            "lakestats cannot read"
        )
