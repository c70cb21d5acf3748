"""Spark's Python worker daemon, with the Arrow engine's imports done once.

Spark forks every Python worker from one daemon process per executor (``pyspark.daemon``)
and ends workers idle for a minute, so a worker's first import of numpy, pyarrow and
datasketches (seconds) would recur for a small commit's job every few minutes. Importing
them in the daemon before it forks gives every worker them for free. ``sketches/spark.py``
sets ``spark.python.daemon.module`` to this module for local masters.
"""

from __future__ import annotations

import datasketches  # noqa: F401 - imported for the forked workers
import numpy  # noqa: F401
import pyarrow.compute
import pyarrow.parquet  # noqa: F401
from pyspark import daemon

import lakestats.arrow_sketch.engine  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
