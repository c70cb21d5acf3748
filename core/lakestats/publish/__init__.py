"""Publishers: outputs that put a snapshot's stats where readers look.

``base.py`` holds the ``Publisher`` protocol and ``SnapshotStats``; ``registry.py`` picks a
table's publisher by its format (``publisher_for``); ``native.py`` builds the native stats
document kept in the stats store; ``iceberg/`` publishes into Iceberg table metadata.
"""
