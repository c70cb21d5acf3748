"""Publishing stats where Paimon engines read them: the table's statistics file.

* ``publisher.py``: ``PaimonPublisher`` and ``open_publisher`` (the registry's factory);
* ``statistics.py``: the statistics file's JSON (``Statistics``/``ColStats``);
* ``serialize.py``: bounds as Java Paimon's ``serializeToString`` writes them.

See docs/paimon.md.
"""

from lakestats.publish.paimon.publisher import (
    PUBLISHED_KEY,
    STATS_PREFIX,
    PaimonPublisher,
    open_publisher,
)

__all__ = ["PUBLISHED_KEY", "STATS_PREFIX", "PaimonPublisher", "open_publisher"]
