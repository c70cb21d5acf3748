"""REPRO: Paimon (pypaimon 2.1 writer, append-only table, metadata.stats-mode=full).
Write 50 rows (g STRING 'g0'..'g49'); analyze; DROP g; ADD g <TYPE>; write 50 rows with g = NULL except every
5th row; analyze incrementally; then analyze from scratch. pypaimon's reader (the oracle) shows the old rows'
g as NULL (a new column). usage: repro_paimon_drop_readd.py [string|long]"""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
import pyarrow as pa
from paimon_tables import PaimonWarehouse
typ = (sys.argv[1:] or ["string"])[0]
root = fresh(f"w_repro_paimon_readd_{typ}"); inc = fresh(f"st_repro_paimon_readd_{typ}_inc"); scr = fresh(f"st_repro_paimon_readd_{typ}_scr")
w = PaimonWarehouse(root)
loc = w.create("t", [("id", "long"), ("g", "string")])
w.write("t", {"id": list(range(50)), "g": [f"g{i}" for i in range(50)]})
analyze(loc, inc)
w.drop_column("t", "g"); w.add_column("t", "g", typ)
newg = [(f"new{i}" if typ == "string" else i * 1000) if i % 5 == 0 else None for i in range(50)]
w.write("t", {"id": list(range(50, 100)), "g": newg})
live = w.read("t")
print("pypaimon reader: g non-null values:", [v for v in live.column("g").to_pylist() if v is not None])
ex = exact(live)
for label, st in (("incremental", inc), ("from-scratch", scr)):
    r = analyze(loc, st, check=False, quiet_fail=True)
    if r.returncode:
        print(f"{label} ANALYZE FAILED:", [l for l in r.stderr.splitlines() if "Exception:" in l or l.startswith("lakestats.")][-2:])
        continue
    doc = show(loc, st); print(label); summary(doc); compare_exact(doc, ex, f"{label} vs exact")
