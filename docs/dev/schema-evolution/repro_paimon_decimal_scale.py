"""REPRO: Paimon (pypaimon 2.1 writer, append-only, metadata.stats-mode=full): DECIMAL(5,2) -> DECIMAL(10,4)
(SchemaChange.update_column_type) between two writes. Incremental analyze and a from-scratch analyze both fail."""
import sys, decimal
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
from paimon_tables import PaimonWarehouse
from pypaimon.schema.schema_change import SchemaChange
from pypaimon.schema.data_types import AtomicType
root = fresh("w_repro_paimon_dec"); inc = fresh("st_repro_paimon_dec_inc"); scr = fresh("st_repro_paimon_dec_scr")
w = PaimonWarehouse(root)
loc = w.create("t", [("id", "long"), ("d", "decimal(5, 2)")])
w.write("t", {"id": list(range(50)), "d": [decimal.Decimal(i) / 4 for i in range(50)]})
analyze(loc, inc)
w.alter("t", SchemaChange.update_column_type("d", AtomicType("DECIMAL(10, 4)")))
w.write("t", {"id": list(range(50, 100)), "d": [decimal.Decimal(i) / 8 for i in range(50)]})
live = w.read("t"); print("pypaimon reads", live.num_rows, "rows; d:", live.schema.field("d").type)
for label, st in (("incremental", inc), ("from-scratch", scr)):
    r = analyze(loc, st, check=False, quiet_fail=True)
    if r.returncode:
        print(f"{label} ANALYZE FAILED:", [l for l in r.stderr.splitlines() if l.startswith("ValueError")][-1:])
        continue
    doc = show(loc, st); summary(doc); compare_exact(doc, exact(live), label)
