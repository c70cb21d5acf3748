"""The Paimon table format (filesystem catalog layout), read without pypaimon.

pypaimon 2.1 reads manifests without their stats by default, fails on ORC manifests and on
Paimon 0.9-era manifests (no ``_VALUE_STATS_COLS``), so the metadata is read here directly
(fastavro, pyarrow ORC/Parquet) with fields looked up by name:

* ``table`` — ``PaimonTable``, the ``TableFormat`` (and ``SupportsSnapshotExpiry``);
* ``metafiles`` — snapshot/schema JSON and manifest files of any ``manifest.format``;
* ``snapshots``, ``types`` — snapshot and schema documents, Paimon types → model types;
* ``entries`` — manifest entries → ``DataFile`` (BinaryRow stats and partitions);
* ``binary_row`` — Paimon's ``BinaryRow`` decoder;
* ``changes`` — what one commit changed (level upgrades, deletion-vector visibility);
* ``deletion_vectors`` — index manifests and DV files → ``model.DeletionVector``;
* ``expire`` — Paimon's snapshot expiry rules, for tables lakestats expires itself.
"""

from __future__ import annotations

from lakestats.formats.paimon.table import FORMAT_NAME, PaimonTable, not_a_table
from lakestats.locations import LocationMap, resolve_location


def open_paimon_location(location: str, location_map: LocationMap | None = None) -> PaimonTable:
    """The Paimon table at ``location`` (a directory holding ``snapshot/`` and ``schema/``).

    Paimon manifests name data files relative to the table, so a copied or moved table
    reads in place and ``location_map`` has nothing to map.
    """
    del location_map
    resolved = resolve_location(location)
    if not resolved.is_dir("schema"):
        raise not_a_table(location)
    return PaimonTable(resolved, description=location)


open_location = open_paimon_location

__all__ = ["FORMAT_NAME", "PaimonTable", "open_location", "open_paimon_location"]
