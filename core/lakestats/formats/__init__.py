"""Table formats behind one Protocol, found through a registry keyed by format name."""

from lakestats.formats.base import TableFormat

__all__ = ["TableFormat"]
