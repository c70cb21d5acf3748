"""Sketches: which stats apply per type, Spark expressions, datasketches merge and histograms.

Importing this package never imports pyspark: ``spark`` and ``lakestats.pipeline`` do that
lazily, so commands that only read stored sketches start fast.
"""
