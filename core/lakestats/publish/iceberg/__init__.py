"""Publishing stats where Iceberg engines read them: the table's own metadata.

* ``publisher.py``: ``IcebergPublisher`` (the ``Publisher`` protocol: stage files, register
  them in one catalog commit with retry) and ``open_publisher``, the registry's factory;
* ``registration.py``: what a catalog commit registers and removes, and the bookkeeping;
* ``partition_stats.py``: partition statistics rows and their Parquet codec;
* ``theta.py``: theta NDV blobs from the merged table aggregate;
* ``puffin.py``: the Puffin container, written and read per the spec.

See docs/publishing.md.
"""

from lakestats.publish.iceberg.publisher import (
    PARTITION_STATS_SUFFIX,
    STATS_SUFFIX,
    IcebergPublisher,
    open_publisher,
)
from lakestats.publish.iceberg.registration import FILE_PREFIX, PUBLISHED_KEY, is_ours

__all__ = [
    "FILE_PREFIX",
    "PARTITION_STATS_SUFFIX",
    "PUBLISHED_KEY",
    "STATS_SUFFIX",
    "IcebergPublisher",
    "is_ours",
    "open_publisher",
]
