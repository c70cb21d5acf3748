"""lakestatsd: the long-running service that decides when lakestats processes commits."""

from lakestats import __version__

__all__ = ["__version__"]
