"""REPRO: Paimon (pypaimon 2.1, append-only, pypaimon's default stats mode = no value stats).
1. columns name STRING, a INT; write 50 rows (name 'old00'..'old49'); analyze  (incremental store)
2. RENAME name -> label; write 50 rows (label 'new00'..'new49'); analyze      (incremental: correct)
3. change type of the OTHER column a INT -> BIGINT; write 50 rows (label 'z00'..'z49'); analyze
   The type change makes lakestats re-list every live file; the pre-rename file is re-read by name and its
   'label' values are lost (read as null). pypaimon's read is the oracle."""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
from paimon_tables import PaimonWarehouse
from pypaimon.schema.schema_change import SchemaChange
from pypaimon.schema.data_types import AtomicType
root = fresh("w_repro_paimon_rr"); inc = fresh("st_repro_paimon_rr_inc")
w = PaimonWarehouse(root)
loc = w.create("t", [("name", "string"), ("a", "int")], options={})
w.write("t", {"name": [f"old{i:02d}" for i in range(50)], "a": list(range(50))})
analyze(loc, inc)
w.rename_column("t", "name", "label")
w.write("t", {"label": [f"new{i:02d}" for i in range(50)], "a": list(range(50))})
analyze(loc, inc)
print("after rename:"); compare_exact(show(loc, inc), exact(w.read("t")), "incremental, step 2")
w.alter("t", SchemaChange.update_column_type("a", AtomicType("BIGINT")))
w.write("t", {"label": [f"z{i:02d}" for i in range(50)], "a": list(range(50))})
analyze(loc, inc)
doc = show(loc, inc); print("after type change of a:"); summary(doc)
compare_exact(doc, exact(w.read("t")), "incremental, step 3")
print("  label avg_len:", doc["columns"]["label"]["avg_len"], "(exact 5.0/4.67/3.0 mix = ", round((50*5+50*5+50*3)/150, 3), ")")
