"""REPRO: Delta (delta-rs, no column mapping). v0 appends g:string; v1 overwrites the table with
schema_mode='overwrite' where g is now a long. Incremental analyze (run after v0, then after v1) is checked
against exact values; a from-scratch analyze of the same table FAILS reading the removed v0 file with g as bigint."""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
import pyarrow as pa
from deltalake import write_deltalake
from delta_tables import live_rows
loc = fresh("w_repro_delta_retype"); inc = fresh("st_repro_delta_retype_inc"); scr = fresh("st_repro_delta_retype_scr")
write_deltalake(str(loc), pa.table({"id": pa.array(range(100), pa.int64()), "g": [f"g{i}" for i in range(100)]}), mode="append")
analyze(loc, inc)
write_deltalake(str(loc), pa.table({"id": pa.array(range(100, 200), pa.int64()), "g": pa.array(range(-100, 0), pa.int64())}),
                mode="overwrite", schema_mode="overwrite")
analyze(loc, inc)
doc = show(loc, inc); summary(doc)
compare_exact(doc, exact(live_rows(str(loc))), "incremental vs exact")
print("--- from-scratch analyze into a fresh state dir:")
r = analyze(loc, scr, check=False, quiet_fail=True)
if r.returncode != 0:
    lines = (r.stdout + r.stderr).splitlines()
    print("FROM-SCRATCH ANALYZE FAILED; key lines:")
    for l in lines:
        if "SchemaColumnConvertNotSupportedException" in l or l.startswith("lakestats") or "cannot read data file" in l:
            print("   ", l[:300])
    print("without --debug the CLI prints:")
    r2 = subprocess.run([LAKESTATS, "analyze", str(loc), "--state-dir", str(fresh("st_repro_delta_retype_scr2")), "-q"], capture_output=True, text=True)
    print("   rc", r2.returncode, (r2.stderr.strip().splitlines() or [""])[-1][:400])
    print("--no-sketches from scratch:")
    r3 = analyze(loc, fresh("st_repro_delta_retype_scr3"), sketches=False, check=False, quiet_fail=True); print("   rc", r3.returncode)
else:
    compare_exact(show(loc, scr), exact(live_rows(str(loc))), "scratch vs exact")
