"""Stats folders that no configured table uses: listed by ``lakestats status``, deleted
one at a time by ``lakestats forget``.

They are what a table leaves behind when it moves (it is analyzed again into a folder of
its own: ``store.store_folder``) or leaves the config. Whether one may go is a pure
decision (``forget_refusal``) over what the folder holds and which folders the config's
tables use; the listing and deleting are ``store.folders``'.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakestats.config import Config
from lakestats.exceptions import LakestatsError, StoreError, first_line
from lakestats.freshness import daemon_tables
from lakestats.notify import daemon_urls
from lakestats.store.folders import (
    StoreFolder,
    check_folder_name,
    delete_folder,
    describe_folder,
    folder_files,
    folder_names,
)
from lakestats.tables import open_configured


@dataclass(frozen=True)
class Claims:
    """The folders a config's tables use, and those a running daemon says its tables use."""

    folders: Mapping[str, str] = field(default_factory=dict)  # folder → configured table
    # configured tables that cannot be opened now (their folder is unknown) → why
    unopened: Mapping[str, str] = field(default_factory=dict)
    # folder → (table, the daemon's URL): a daemon may follow tables this config lacks
    daemons: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def claims_of(config: Config) -> Claims:
    """Open every configured table to learn its folder (metadata only, nothing written),
    and ask the daemon replicas at ``http.url`` which folders theirs use (one request
    each; a daemon that does not answer within a second claims nothing)."""
    folders: dict[str, str] = {}
    unopened: dict[str, str] = {}
    for table in config.table:
        try:
            folders[open_configured(table, config).store.folder] = table.name
        except LakestatsError as exc:
            unopened[table.name] = first_line(exc)
    return Claims(folders, unopened, daemon_claims(daemon_reports(config)))


def daemon_reports(config: Config) -> dict[str, list[dict[str, Any]] | None]:
    """What each daemon replica at ``http.url`` says of its tables (``GET /v1/tables``,
    one request each), None for one that does not answer within a second."""
    return {url: daemon_tables(url) for url in daemon_urls(config)}


def daemon_claims(
    reports: Mapping[str, list[dict[str, Any]] | None],
) -> dict[str, tuple[str, str]]:
    """folder → (table, daemon URL), from ``daemon_reports``."""
    claimed: dict[str, tuple[str, str]] = {}
    for url, tables in reports.items():
        for entry in tables or ():
            folder = entry.get("store_folder")
            if isinstance(folder, str):
                claimed[folder] = (str(entry["name"]), url)
    return claimed


def claims_from(
    used: Iterable[tuple[str, str | None, str | None]],
    daemons: Mapping[str, tuple[str, str]] | None = None,
) -> Claims:
    """``Claims`` from ``(table, its folder or None, why it could not be opened)`` triples
    and ``daemon_claims`` (what ``lakestats status`` learned anyway)."""
    folders: dict[str, str] = {}
    unopened: dict[str, str] = {}
    for name, folder, error in used:
        if folder is not None:
            folders[folder] = name
        else:
            unopened[name] = error or "it cannot be opened"
    return Claims(folders, unopened, dict(daemons or {}))


def unclaimed_folders(state_dir: str, claims: Claims) -> list[StoreFolder]:
    """Every folder under ``state_dir`` that no configured table and no table of a
    running daemon uses, described."""
    names = [
        n for n in folder_names(state_dir) if n not in claims.folders and n not in claims.daemons
    ]
    return [describe_folder(state_dir, n) for n in names]


def forget_refusal(
    folder: StoreFolder, claims: Claims, *, now_ms: int, grace_ms: int
) -> str | None:
    """Why ``folder`` (one that exists) must not be deleted now, or None when it may."""
    if folder.foreign_files:
        return (
            f"{folder.name} holds {folder.foreign_files} file(s) lakestats does not write "
            f"(such as {folder.foreign_example}): it is not a stats folder, or not only "
            "one; delete what should go yourself"
        )
    user = claims.folders.get(folder.name)
    if user is not None:
        return (
            f"{folder.name} holds the stats of configured table {user}: take the table out "
            "of the config first"
        )
    if folder.name in claims.daemons:
        table, url = claims.daemons[folder.name]
        return (
            f"{folder.name} holds the stats of table {table} of the lakestatsd at {url}: "
            "take the table out of that daemon's config first"
        )
    if folder.table is not None and folder.table in claims.unopened:
        return (
            f"{folder.name} holds stats written for configured table {folder.table}, which "
            f"cannot be opened now ({claims.unopened[folder.table]}): they may be its "
            "current stats"
        )
    if folder.newest_file_ms is not None and now_ms - folder.newest_file_ms < grace_ms:
        age_s = max(0, now_ms - folder.newest_file_ms) // 1000
        return (
            f"{folder.name} was written {age_s} s ago, within the grace period "
            f"({grace_ms // 1000} s): another lakestats may be using it (a config sharing "
            "this state dir); try again later"
        )
    return None


@dataclass(frozen=True)
class ForgetReport:
    folder: StoreFolder
    files: tuple[str, ...]  # deleted (or, dry run, to be deleted), in order
    dry_run: bool


def forget_folder(
    config: Config,
    name: str,
    *,
    claims: Claims | None = None,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> ForgetReport:
    """Delete the stats folder ``name`` under the config's state dir unless
    ``forget_refusal`` says why not (raised as ``StoreError``)."""
    try:
        check_folder_name(name)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    if name not in folder_names(config.state_dir):
        raise StoreError(
            f"there is no stats folder {name} in {config.state_dir} (`lakestats status` "
            "lists the ones no configured table uses)"
        )
    folder = describe_folder(config.state_dir, name)
    why = forget_refusal(
        folder,
        claims_of(config) if claims is None else claims,
        now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        grace_ms=round(config.maintenance.grace_period_s * 1000),
    )
    if why is not None:
        raise StoreError(why)
    files = tuple(folder_files(config.state_dir, name))
    if not dry_run:
        delete_folder(config.state_dir, name, list(files))
    return ForgetReport(folder, files, dry_run)
