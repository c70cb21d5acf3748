"""Paimon manifests in Parquet (``manifest.format = parquet``) read as their Avro twins.

pypaimon writes Avro manifests only and Java's Parquet manifests are not among the
fixtures (``append_10`` covers ORC), so a pypaimon table's manifest lists and manifests
are rewritten in place as Parquet files holding the same records (pyarrow): the commits
read from them must be exactly those read from the Avro originals.
"""

from __future__ import annotations

from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from lakestats.formats.paimon import PaimonTable, open_paimon_location
from paimon_tables import PaimonWarehouse


def as_stored(table: PaimonTable) -> PaimonTable:
    """The files each commit wrote (a key merge also lists the touched buckets' others)."""
    table.set_key_merge(False)
    return table


def test_parquet_manifests_read_as_the_same_commits(tmp_path: Path) -> None:
    warehouse = PaimonWarehouse(tmp_path / "wh")
    location = warehouse.create(
        "t",
        [("id", "long"), ("p", "string"), ("v", "double")],
        partition_keys=["p"],
        primary_keys=["id", "p"],
    )
    warehouse.write("t", {"id": [1, 2, 3], "p": ["a", "b", "a"], "v": [1.0, None, 3.5]})
    warehouse.write("t", {"id": [2, 4], "p": ["b", "c"], "v": [2.5, -1.0]})
    from_avro = as_stored(open_paimon_location(str(location))).commits_since(None)
    assert sum(len(c.added_files) for c in from_avro) == 4

    rewritten = 0
    for manifest in sorted((location / "manifest").iterdir()):
        with manifest.open("rb") as f:
            records = list(fastavro.reader(f))
        pq.write_table(pa.Table.from_pylist(records), manifest)
        assert manifest.read_bytes()[:4] == b"PAR1"
        rewritten += 1
    assert rewritten >= 4  # two manifest lists and their manifests per commit

    from_parquet = as_stored(open_paimon_location(str(location))).commits_since(None)
    assert from_parquet == from_avro
