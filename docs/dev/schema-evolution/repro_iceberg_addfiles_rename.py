"""Iceberg: a Parquet file WITHOUT field ids added by pyiceberg add_files (name mapping set), rename k -> k2 (pyiceberg
updates the name mapping: k2 has alias k), append with ids, then a position delete on the id-less file (forces a re-read).
Analyze after each step. usage: [nodelete|promote] (stop before the position delete | promote v int -> long instead of the delete)"""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
import pyarrow as pa, pyarrow.parquet as pq
from lakestats.testing import IcebergWarehouse
from lakestats.formats.iceberg.testing_deletes import add_position_deletes

root = fresh("w_ice_af"); inc = fresh("st_ice_af_inc"); scr = HERE / "st_ice_af_scr"
w = IcebergWarehouse(root)
schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int32())])
w.create_table("t", schema)
loc = w.location("t")
f = f"{loc}/data/migrated-0.parquet"
import os; os.makedirs(f"{loc}/data", exist_ok=True)
pq.write_table(pa.table({"id": list(range(100)), "k": [f"k{i % 30}" for i in range(100)], "v": list(range(100))}, schema=schema), f)
w.table("t").add_files([f])
analyze(loc, inc)
w.rename_column("t", "k", "k2")
print("name mapping:", w.table("t").metadata.properties.get("schema.name-mapping.default"))
w.append("t", {"id": list(range(100, 120)), "k2": [f"z{i}" for i in range(20)], "v": list(range(20))})
if "promote" in sys.argv:  # instead of the delete: promote v int -> long (every live file is listed again)
    from pyiceberg.types import LongType
    analyze(loc, inc)
    with w.table("t").update_schema() as u:
        u.update_column("v", LongType())
    w.append("t", {"id": [500], "k2": ["p"], "v": [7]})
elif "nodelete" not in sys.argv:
    analyze(loc, inc)
    add_position_deletes(w.table("t"), {"file://" + f if not f.startswith("file:") else f: [0, 1, 2]} if False else {next(p for p in (t.file.file_path for t in w.table("t").scan().plan_files()) if p.endswith("migrated-0.parquet")): [0, 1, 2]})
live = lambda: w.table("t").scan().to_arrow()
inc_doc, scr_doc, ex, bad = check(loc, inc, scr, live)
print("DISCREPANCIES:", bad)
