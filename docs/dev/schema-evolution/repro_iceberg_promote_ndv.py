"""REPRO: Iceberg (pyiceberg writer) type promotion int->long, float->double, decimal(5,2)->decimal(10,2).
The SAME 50 values are appended before and after the promotion (exact NDV = 50 per column);
incremental analyze (run before and after) vs from-scratch vs exact."""
import sys, decimal
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
import pyarrow as pa
from lakestats.testing import IcebergWarehouse
from pyiceberg.types import LongType, DoubleType, DecimalType
root = fresh("w_repro_ice_prom_ndv"); inc = fresh("st_repro_ice_prom_ndv_inc"); scr = fresh("st_repro_ice_prom_ndv_scr")
w = IcebergWarehouse(root)
w.create_table("t", pa.schema([("a", pa.int32()), ("f", pa.float32()), ("d", pa.decimal128(5, 2))]))
N = 50
def write():
    t = w.table("t")
    t.append(pa.table({"a": list(range(N)), "f": [i + 0.5 for i in range(N)], "d": [decimal.Decimal(i) / 4 for i in range(N)]},
                      schema=t.schema().as_arrow()))
write()
loc = w.location("t")
analyze(loc, inc)
with w.table("t").update_schema() as u:
    u.update_column("a", LongType()); u.update_column("f", DoubleType()); u.update_column("d", DecimalType(10, 2))
write()
live = lambda: w.table("t").scan().to_arrow()
check(loc, inc, scr, live)
