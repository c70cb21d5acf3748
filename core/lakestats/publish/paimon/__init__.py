"""Publishing stats where Paimon engines read them: the table's statistics file.

* ``publisher.py``: ``PaimonPublisher`` and ``open_publisher`` (the registry's factory);
* the statistics file's JSON and Java's value strings are Paimon's terms, kept with the
  format (``formats/paimon/statistics.py``, ``serialize.py``): ``show`` uses them too.

See docs/paimon.md.
"""

from lakestats.publish.paimon.publisher import (
    PUBLISHED_KEY,
    STATS_PREFIX,
    PaimonPublisher,
    open_publisher,
)

__all__ = ["PUBLISHED_KEY", "STATS_PREFIX", "PaimonPublisher", "open_publisher"]
