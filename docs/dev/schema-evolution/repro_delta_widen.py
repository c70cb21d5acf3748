"""REPRO: Delta type widening (delta-rs writer; the ALTER COLUMN TYPE metaData commit written by hand the way
tests/delta_tables.py writes Spark's ALTER commits; Delta's typeWidening feature allows these changes).
The SAME values are appended before and after the change, so exact NDV = 50 per column.
usage: repro_delta_widen.py COL [COL...]   COL in: dec (decimal(5,2)->decimal(10,4)), i2d (int->double),
       i2l (int->long), f2d (float->double), dprec (decimal(5,2)->decimal(10,2)), i2dec (int->decimal(12,2))"""
import sys, json, decimal
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
from delta_tables import DeltaWriter, live_rows
N = 50
SPEC = {  # name: (old type, new type, values)
    "dec": ("decimal(5, 2)", "decimal(10,4)", [decimal.Decimal(i) / 4 for i in range(N)]),
    "dprec": ("decimal(5, 2)", "decimal(10,2)", [decimal.Decimal(i) / 4 for i in range(N)]),
    "i2d": ("int", "double", list(range(N))),
    "i2l": ("int", "long", list(range(N))),
    "f2d": ("float", "double", [i + 0.5 for i in range(N)]),
    "i2dec": ("int", "decimal(12,2)", list(range(N))),
}
cols = sys.argv[1:] or ["i2d"]
tag = "_".join(cols)
loc = fresh(f"w_repro_delta_widen_{tag}"); inc = fresh(f"st_repro_delta_widen_{tag}_inc"); scr = fresh(f"st_repro_delta_widen_{tag}_scr")
d = DeltaWriter(loc)
d.create([(c, SPEC[c][0]) for c in cols])
d.append({c: SPEC[c][2] for c in cols})
analyze(loc, inc)
def change(fields, config):
    for f in fields:
        f["metadata"]["delta.typeChanges"] = [{"fromType": f["type"], "toType": SPEC[f["name"]][1]}]
        f["type"] = SPEC[f["name"]][1]
    config["delta.enableTypeWidening"] = "true"
d._alter("CHANGE COLUMN", change)
def conv(c, v):
    t = SPEC[c][1]
    return [decimal.Decimal(x) for x in v] if t.startswith("decimal") else v
d.append({c: conv(c, SPEC[c][2]) for c in cols})
live = lambda: live_rows(str(loc))
print("live row count", live().num_rows, "schema", live().schema)
r = analyze(loc, inc, check=False, quiet_fail=True)
if r.returncode:
    print("INCREMENTAL ANALYZE FAILED:", [l for l in r.stderr.splitlines() if l.startswith(("ValueError", "lakestats"))][-1:])
else:
    doc = show(loc, inc); summary(doc); compare_exact(doc, exact(live()), "incremental vs exact")
r = analyze(loc, scr, check=False, quiet_fail=True)
if r.returncode:
    print("FROM-SCRATCH ANALYZE FAILED:", [l for l in r.stderr.splitlines() if l.startswith(("ValueError", "lakestats"))][-1:])
else:
    doc = show(loc, scr); summary(doc); compare_exact(doc, exact(live()), "scratch vs exact")
