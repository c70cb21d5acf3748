"""lakestats: incremental statistics for lakehouse tables."""

__version__ = "0.1.0"
