"""Theta blobs for Iceberg table statistics: one NDV sketch per column, from the table merge.

The sketches come from the whole-table aggregate the commit path merged once
(``SnapshotStats.table``); nothing here merges again. Hashing follows the Puffin spec's
single-value serialization (``lakestats.sketches.hashing``), so a blob is what a
spec-following engine would build from the same values.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakestats.model import PartitionAggregate
from lakestats.publish.iceberg.puffin import THETA_BLOB, Blob
from lakestats.sketches.merge import theta_estimate


def theta_blobs(
    table: PartitionAggregate,
    field_ids: Sequence[int],
    snapshot_id: int,
    sequence_number: int,
) -> list[Blob]:
    """One theta blob per column of ``field_ids`` whose sketch covers every file holding
    the column (``table``: the snapshot's whole-table aggregate).

    A sketch over only some files (sketching was off for older commits) would understate
    the NDV, so such a column gets no blob rather than a wrong one.
    """
    blobs = []
    for field_id in field_ids:
        column = table.columns.get(field_id)
        if column is None or column.theta is None or column.sketched_files != column.files:
            continue
        blobs.append(
            Blob(
                type=THETA_BLOB,
                fields=(field_id,),
                snapshot_id=snapshot_id,
                sequence_number=sequence_number,
                payload=column.theta,
                properties={"ndv": str(round(theta_estimate(column.theta)))},
            )
        )
    return blobs
