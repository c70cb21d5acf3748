"""Delta, column mapping 'name', partitioned by part: rename part -> region (and value column v -> w), append to old and new partitions, then delete one partition's rows partially (delta-rs delete rewrites). Analyze after each step."""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
from delta_tables import DeltaWriter, live_rows

loc = fresh("w_dcm_pr"); inc = fresh("st_dcm_pr_inc"); scr = HERE / "st_dcm_pr_scr"
w = DeltaWriter(loc)
w.create([("id", "long"), ("v", "int"), ("part", "string")], column_mapping=True, partition_by=["part"])
w.append({"id": list(range(60)), "v": [i % 13 for i in range(60)], "part": ["abc"[i % 3] for i in range(60)]})
analyze(loc, inc)
import json
v = w.rename_column("part", "region")
f = w.log / f"{v:020d}.json"   # Spark's RENAME COLUMN also renames the partition column in partitionColumns
lines = [json.loads(l) for l in f.read_text().splitlines()]
for l in lines:
    if "metaData" in l:
        l["metaData"]["partitionColumns"] = ["region"]
f.write_text("\n".join(json.dumps(l) for l in lines) + "\n")
w.rename_column("v", "w")
w.append({"id": list(range(100, 140)), "w": [100 + i for i in range(40)], "region": ["bd"[i % 2] for i in range(40)]})
analyze(loc, inc)
if "nodelete" not in sys.argv:
    w.delete("region = 'a' AND id < 30")
print(w.table().schema().to_json())
print("partitionValues sample:", [l for l in (w.log / "00000000000000000004.json").read_text().splitlines() if '"add"' in l][:1])
live = lambda: live_rows(str(loc))
inc_doc, scr_doc, ex, bad = check(loc, inc, scr, live)
import pyarrow.compute as pc
want = {(("region", e["values"]),): e["counts"] for e in pc.value_counts(live().column("region")).to_pylist()}
for label, doc in (("incremental", inc_doc), ("scratch", scr_doc)):
    got = {tuple(p["partition"].items()): p["record_count"] for p in doc.get("partitions", [])}
    if got != want:
        bad += 1
        print(f"  [{label} vs exact] MISMATCH partitions: lakestats {sorted(got.items())} vs exact {sorted(want.items())}")
print("DISCREPANCIES:", bad)
