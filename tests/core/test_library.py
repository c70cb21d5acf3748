"""The library API as documented: docs/library.md's example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import lakestats

DOC = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def _hook_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    (example,) = [b for b in blocks if "def commit_and_refresh" in b]
    return example


@pytest.mark.spark
def test_documented_hook_example_runs(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace: dict[str, Any] = {"root": tmp_path}
    exec(compile(_hook_example(), str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "1 5"
    assert sum(1 for line in printed if line.startswith("snapshot ")) == 2


def test_public_names_resolve_and_import_lazily() -> None:
    for name in lakestats.__all__:
        assert getattr(lakestats, name) is not None
    with pytest.raises(AttributeError):
        _ = lakestats.no_such_name  # type: ignore[attr-defined]
    # `import lakestats` (what the CLI does first) loads neither pyiceberg nor pyspark
    code = (
        "import sys, lakestats; "
        "print(sorted(m for m in ('pyiceberg', 'pyspark') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_tables_are_named_by_location_name_or_config_entry(tmp_path: Path) -> None:
    import pyarrow as pa

    from lakestats.testing import IcebergWarehouse

    warehouse = IcebergWarehouse(tmp_path / "wh")
    warehouse.create_table("t", pa.schema([("id", pa.int64())]))
    warehouse.append("t", {"id": [1, 2]})
    location = warehouse.location("t")
    entry = lakestats.TableConfig(
        name="t", catalog=warehouse.catalog_name, identifier=warehouse.identifier("t")
    )
    config = lakestats.Config(
        state_dir=str(tmp_path / "stats"),
        catalog={warehouse.catalog_name: warehouse.catalog_properties},
        table=(lakestats.TableConfig(name="by_name", location=location),),
    )
    by_location = lakestats.analyze_table(location, config=config, sketcher=None)
    assert by_location.last_snapshot_id == warehouse.table("t").metadata.current_snapshot_id
    for table in ("by_name", entry, location, lakestats.open_table(location, config)):
        doc = lakestats.read_stats(table, config=config)
        assert doc["record_count"] == 2
    with pytest.raises(lakestats.LakestatsError, match="neither a configured table name"):
        lakestats.read_stats("nosuch", config=config)


def test_the_on_commit_hook_loads_no_store_or_spark() -> None:
    """``lakestats notify`` runs in a writer's commit hook: loading its config and client
    stays clear of pyarrow (0.2 s of imports), the store (boto3) and Spark."""
    code = (
        "import sys; import lakestats.config, lakestats.notify; "
        "print(sorted({m.split('.')[0] if not m.startswith('lakestats.') else "
        "'.'.join(m.split('.')[:2]) for m in sys.modules} & "
        "{'pyspark', 'pyarrow', 'lakestats.store', 'boto3', 'botocore'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
