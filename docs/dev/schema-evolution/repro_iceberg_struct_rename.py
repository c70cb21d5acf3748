"""Iceberg (pyiceberg): rename a STRUCT PARENT column (s -> s2) after files were written, then append and analyze."""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
import pyarrow as pa
from lakestats.testing import IcebergWarehouse

root = fresh("w_ice_struct"); inc = fresh("st_ice_struct_inc"); scr = HERE / "st_ice_struct_scr"
w = IcebergWarehouse(root)
w.create_table("t", pa.schema([("id", pa.int64()), ("s", pa.struct([("p", pa.int32()), ("r", pa.string())]))]))
def write(base):
    t = w.table("t"); sch = t.schema().as_arrow()
    t.append(pa.table({sch.field(0).name: list(range(base, base + 100)),
                       sch.field(1).name: [{"p": base + i, "r": f"r{base+i}"} if i % 4 else None for i in range(100)]}, schema=sch))
loc = w.location("t")
write(0)
analyze(loc, inc, sketches=len(sys.argv) < 2)
with w.table("t").update_schema() as u:
    u.rename_column("s", "s2")
write(1000)
live = lambda: w.table("t").scan().to_arrow()
inc_doc, scr_doc, ex, bad = check(loc, inc, scr, live, sketches=len(sys.argv) < 2)
print("DISCREPANCIES:", bad)
