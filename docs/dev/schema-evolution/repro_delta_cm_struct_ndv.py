"""Delta (delta-rs), column mapping 'name', a struct column from creation (no schema change): NDV of struct leaves."""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import *
import pyarrow as pa
from deltalake import DeltaTable, TableFeatures, write_deltalake
from delta_tables import live_rows
cm = "nocm" not in sys.argv
loc = fresh("w_delta_cm_struct0"); st = fresh("st_delta_cm_struct0")
schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("p", pa.int32()), ("r", pa.string())]))])
cfg = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "3", "delta.minWriterVersion": "7"} if cm else {}
t = DeltaTable.create(str(loc), schema, configuration=cfg)
if cm:
    t.alter.add_feature(TableFeatures.ColumnMapping, allow_protocol_versions_increase=True)
write_deltalake(str(loc), pa.table({"id": list(range(100)), "s": [{"p": i, "r": f"r{i}"} if i % 4 else None for i in range(100)]}, schema=schema), mode="append")
analyze(loc, st)
doc = show(loc, st); summary(doc)
print("DISCREPANCIES:", compare_exact(doc, exact(live_rows(str(loc)))))
import pyarrow.parquet as pq, glob
f = [p for p in glob.glob(str(loc / "**" / "*.parquet"), recursive=True) if "_delta_log" not in p][0]
s = pq.read_schema(f); print("data file:", f); [print("  ", x.name, x.metadata, [(c.name, c.metadata) for c in x.type] if pa.types.is_struct(x.type) else "") for x in s]
