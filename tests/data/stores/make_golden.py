"""Make a golden stats store: tables of every format analyzed by an *earlier* lakestats.

    .venv/bin/python tests/data/stores/make_golden.py 777e461   # a commit of this repo

The tables are written by today's writers (delta-rs, pyiceberg, pypaimon) at a fixed place,
``/tmp/lakestats-golden/<commit>/`` (a store names data files by full path and its folder
by the table's location, so the test puts them back there), then analyzed with sketches by
that commit's ``lakestats`` (``git archive`` on ``PYTHONPATH``), whose ``show --json`` of
each table is kept beside them. Everything goes into ``tests/data/stores/<commit>.tar.gz``,
which ``tests/core/store/test_golden_stores.py`` reads with today's code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests"))

from deltalake import DeltaTable, write_deltalake  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402

from lakestats.testing import IcebergWarehouse  # noqa: E402
from paimon_tables import PaimonWarehouse  # noqa: E402

ROOT = Path("/tmp/lakestats-golden")
# what each golden table holds; the test names them the same
TABLES = ("delta", "iceberg", "paimon", "paimon_pk")


def rows(start: int, count: int) -> pa.Table:
    """Columns of the types whose sketches and bounds are encoded differently."""
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([("north", "south", "east")[i % 3] for i in ids], pa.string()),
            "name": pa.array([None if i % 7 == 0 else f"name-{i % 50}" for i in ids], pa.string()),
            "price": pa.array([i * 1.25 if i % 11 else None for i in ids], pa.float64()),
            "amount": pa.array([Decimal(i % 97) / 4 for i in ids], pa.decimal128(10, 2)),
            "day": pa.array(
                [dt.date(2024, 1, 1) + dt.timedelta(days=i % 40) for i in ids], pa.date32()
            ),
            "flag": pa.array([i % 3 == 0 for i in ids], pa.bool_()),
        }
    )


def write_tables(root: Path) -> dict[str, str]:
    """Three commits each (two appends and a delete); the tables' locations."""
    locations: dict[str, str] = {}
    delta = root / "delta"
    write_deltalake(delta, rows(0, 300), partition_by=["region"])
    write_deltalake(delta, rows(300, 200), partition_by=["region"], mode="append")
    DeltaTable(delta).delete("id < 40")
    locations["delta"] = str(delta)

    iceberg = IcebergWarehouse(root / "iceberg")
    iceberg.create_table("t", rows(0, 1).schema, partition_by=[("region", IdentityTransform())])
    iceberg.append("t", rows(0, 300))
    iceberg.append("t", rows(300, 200))
    iceberg.table("t").delete("id < 40")
    locations["iceberg"] = iceberg.location("t")

    paimon = PaimonWarehouse(root / "paimon")
    schema = rows(0, 1).schema
    paimon.create("t", schema, partition_keys=["region"])
    paimon.write("t", rows(0, 300).to_pydict())
    paimon.write("t", rows(300, 200).to_pydict())
    paimon.delete_files("t", lambda f: "north" in f.path)
    locations["paimon"] = str(paimon.location("t"))
    keyed = pa.schema([f.with_nullable(f.name != "id") for f in schema])
    paimon.create(
        "pk",
        keyed,
        primary_keys=["id"],
        options={"bucket": "2", "metadata.stats-mode": "full"},
    )
    paimon.write("pk", rows(0, 300).to_pydict())
    paimon.write("pk", rows(250, 200).to_pydict())  # 50 keys written again
    paimon.write("pk", rows(0, 20).to_pydict())
    locations["paimon_pk"] = str(paimon.location("pk"))
    return locations


def old_cli(code: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": f"{code / 'core'}:{code / 'daemon'}"}
    command = [sys.executable, "-c", "import sys; from lakestats.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*command, *args], env=env, capture_output=True, text=True, check=False, cwd=code
    )
    if done.returncode != 0:
        raise SystemExit(f"lakestats {' '.join(args)}: {done.stderr[-2000:]}")
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit", help="the commit of this repository whose code analyzes")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short=7", args.commit],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    root = ROOT / commit
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    locations = write_tables(root)
    with tempfile.TemporaryDirectory() as scratch:
        code = Path(scratch)
        archive = subprocess.run(
            ["git", "archive", commit], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
        shown: dict[str, Any] = {}
        for name in TABLES:
            location = locations[name]
            old_cli(code, "analyze", location, "--state-dir", str(root / "state"), "-q")
            shown[name] = json.loads(
                old_cli(code, "show", location, "--state-dir", str(root / "state"), "--json")
            )
    (root / "golden.json").write_text(
        json.dumps({"commit": commit, "locations": locations, "shown": shown}, indent=1) + "\n"
    )
    (root / "state" / "lakestats-spark.log").unlink(missing_ok=True)
    out = Path(__file__).resolve().parent / f"{commit}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=commit)
    print(f"{out}: {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
