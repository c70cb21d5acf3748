"""REPRO: Paimon (pypaimon 2.1 writer, append-only). Columns x INT (0..49) and y INT (1000..1049).
Write; analyze (incremental store); then SWAP the names (x->tmp, y->x, tmp->y) and write 50 more rows
(x 2000..2049, y 3000..3049); analyze incrementally and from scratch; compare with pypaimon's read.
usage: repro_paimon_rename.py [full|nostats]  (metadata.stats-mode=full, or pypaimon's default: no value stats)"""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
from paimon_tables import PaimonWarehouse
mode = (sys.argv[1:] or ["full"])[0]
root = fresh(f"w_repro_paimon_rename_{mode}"); inc = fresh(f"st_repro_paimon_rename_{mode}_inc"); scr = fresh(f"st_repro_paimon_rename_{mode}_scr")
w = PaimonWarehouse(root)
loc = w.create("t", [("x", "int"), ("y", "int")], options=None if mode == "full" else {})
w.write("t", {"x": list(range(50)), "y": list(range(1000, 1050))})
analyze(loc, inc)
w.rename_column("t", "x", "tmp"); w.rename_column("t", "y", "x"); w.rename_column("t", "tmp", "y")
w.write("t", {"x": list(range(2000, 2050)), "y": list(range(3000, 3050))})
live = w.read("t")
ex = exact(live)
print("pypaimon read: x in", ex["columns"]["x"]["min"], "..", ex["columns"]["x"]["max"], "; y in", ex["columns"]["y"]["min"], "..", ex["columns"]["y"]["max"])
docs = {}
for label, st in (("incremental", inc), ("from-scratch", scr)):
    analyze(loc, st); docs[label] = doc = show(loc, st)
    print(label); summary(doc); compare_exact(doc, ex, label)
    for n in ("x", "y"):
        print(f"    {n} quantiles: {docs[label]['columns'][n].get('quantiles')}")
