"""lakestats: incremental statistics for lakehouse tables.

The library API (``docs/library.md``), for writers' on-commit hooks and tools::

    import lakestats

    lakestats.analyze_table("/data/warehouse/db/sales")           # a location
    lakestats.analyze_table("sales", config="lakestats.toml")     # a configured name
    stats = lakestats.read_stats("sales", config="lakestats.toml")

Names are loaded on first use, so ``import lakestats`` stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "analyze_table": "lakestats.analyze",
    "AnalyzeResult": "lakestats.analyze",
    "CommitReport": "lakestats.analyze",
    "AUTO": "lakestats.analyze",
    "read_stats": "lakestats.read",
    "list_commit_docs": "lakestats.read",
    "open_table": "lakestats.tables",
    "OpenedTable": "lakestats.tables",
    "Config": "lakestats.config",
    "TableConfig": "lakestats.config",
    "load_config": "lakestats.config",
    "LakestatsError": "lakestats.exceptions",
    "estimate": "lakestats.estimates",
    "Estimate": "lakestats.estimates",
    "Predicate": "lakestats.predicates",
    "parse_predicate": "lakestats.predicates",
}

__all__ = [
    "AUTO",
    "AnalyzeResult",
    "CommitReport",
    "Config",
    "Estimate",
    "LakestatsError",
    "OpenedTable",
    "Predicate",
    "TableConfig",
    "__version__",
    "analyze_table",
    "estimate",
    "list_commit_docs",
    "load_config",
    "open_table",
    "parse_predicate",
    "read_stats",
]

if TYPE_CHECKING:
    from lakestats.analyze import AUTO, AnalyzeResult, CommitReport, analyze_table
    from lakestats.config import Config, TableConfig, load_config
    from lakestats.estimates import Estimate, estimate
    from lakestats.exceptions import LakestatsError
    from lakestats.predicates import Predicate, parse_predicate
    from lakestats.read import list_commit_docs, read_stats
    from lakestats.tables import OpenedTable, open_table


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lakestats' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
