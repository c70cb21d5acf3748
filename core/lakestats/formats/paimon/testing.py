"""A helper for tests and examples that write Paimon tables with pypaimon.

lakestats reads Paimon without pypaimon and does not depend on it: the table is
pypaimon's own (``catalog.get_table(...)``), handed in by code that has pypaimon
installed (the ``test`` extra). The tests, the benchmarks and ``make demo FORMAT=paimon``
commit through this one function, the way an application writes with pypaimon.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa


def write_arrow(table: Any, data: pa.Table, *, overwrite: Mapping[str, str] | None = None) -> None:
    """Commit ``data`` to the pypaimon ``table`` as one batch snapshot: an append, or with
    ``overwrite`` an overwrite of that static partition (``{}``: the whole table)."""
    builder = table.new_batch_write_builder()
    if overwrite is not None:
        builder = builder.overwrite(dict(overwrite))
    write = builder.new_write()
    write.write_arrow(data)
    commit = builder.new_commit()
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
