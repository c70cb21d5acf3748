"""Shared helpers for the schema-evolution exploration (run with the repository's .venv/bin/python)."""
import json, math, shutil, subprocess, sys, decimal, datetime as dt
from pathlib import Path
import pyarrow as pa, pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[3]  # the repository
sys.path.insert(0, str(ROOT / "tests"))
LAKESTATS = str(ROOT / ".venv/bin/lakestats")
HERE = Path("/tmp/explore-schema")  # scratch: tables and state dirs

def fresh(path):
    p = HERE / path
    shutil.rmtree(p, ignore_errors=True)
    return p

def analyze(loc, state, sketches=True, check=True, quiet_fail=False):
    cmd = [LAKESTATS, "analyze", str(loc), "--state-dir", str(state), "-q", "--debug"]
    if not sketches:
        cmd.append("--no-sketches")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"!!! analyze FAILED rc={r.returncode} ({state})")
        if not quiet_fail:
            print(r.stdout[-3000:]); print(r.stderr[-6000:])
        if check:
            raise SystemExit(1)
    return r

def show(loc, state):
    r = subprocess.run([LAKESTATS, "show", str(loc), "--state-dir", str(state), "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("!!! show FAILED", r.stdout[-2000:], r.stderr[-4000:])
        raise SystemExit(1)
    return json.loads(r.stdout)

def flatten(t: pa.Table) -> pa.Table:
    while any(pa.types.is_struct(f.type) for f in t.schema):
        t = t.flatten()
    return t

def exact(t: pa.Table):
    t = flatten(t)
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    t = t.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in t.schema]))
    out = {"record_count": t.num_rows, "columns": {}}
    for name in t.column_names:
        col = t.column(name)
        if pa.types.is_list(col.type) or pa.types.is_map(col.type):
            continue
        present = col.drop_null()
        nan = None
        if pa.types.is_floating(col.type):
            isn = pc.is_nan(present)
            nan = int(pc.sum(isn).as_py() or 0)
            present = present.filter(pc.invert(isn))
        mn = mx = None
        if len(present):
            mm = pc.min_max(present)
            mn, mx = mm["min"].as_py(), mm["max"].as_py()
        ndv = len(pc.unique(present)) if len(present) else 0
        c = {"null_count": col.null_count, "nan_count": nan, "min": mn, "max": mx, "ndv": ndv}
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            lens = pc.utf8_length(present)
            c["max_len"] = pc.max(lens).as_py() if len(present) else None
        if pa.types.is_boolean(col.type):
            c["true_count"] = int(pc.sum(present).as_py() or 0)
            c["false_count"] = len(present) - c["true_count"]
        out["columns"][name] = c
    return out

def _norm(v):
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    return v

def _eq(a, b):
    a, b = _norm(a), _norm(b)
    if isinstance(a, str) and isinstance(b, (int, float)) or isinstance(b, str) and isinstance(a, (int, float)):
        try:
            return float(a) == float(b)
        except ValueError:
            return False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str) and ("T" in a or "T" in b or " " in a):
        return a.replace(" ", "T").rstrip("Z").replace("+00:00", "") == b.replace(" ", "T").rstrip("Z").replace("+00:00", "")
    return a == b

def compare_exact(doc, ex, label="incremental"):
    """Print every discrepancy between a show --json doc and exact values; return count."""
    bad = 0
    def report(msg):
        nonlocal bad
        bad += 1
        print(f"  [{label}] MISMATCH {msg}")
    rc = doc.get("merged_record_count", doc.get("record_count"))
    if rc != ex["record_count"]:
        report(f"record_count: lakestats {rc} (record_count {doc.get('record_count')}) vs exact {ex['record_count']}")
    cols = doc["columns"]
    for name, e in ex["columns"].items():
        if name not in cols:
            report(f"column {name!r} missing from stats (stats has {sorted(cols)})")
            continue
        c = cols[name]
        for k in ("null_count", "nan_count", "max_len", "true_count", "false_count"):
            if k in e and c.get(k) is not None and c.get(k) != e[k]:
                report(f"{name}.{k}: lakestats {c.get(k)!r} vs exact {e[k]!r}")
            elif k in e and c.get(k) is None and e[k] not in (None,) and k == "null_count":
                report(f"{name}.{k}: lakestats None (unknown) vs exact {e[k]!r}")
        for k in ("min", "max"):
            if not _eq(c.get(k), e[k]):
                report(f"{name}.{k}: lakestats {c.get(k)!r} (exact flag {c.get('min_max_exact')}) vs exact {e[k]!r}")
        if c.get("ndv") is not None:
            n, x = c["ndv"], e["ndv"]
            if abs(n - x) > max(1, 0.05 * x):
                report(f"{name}.ndv: lakestats {n} vs exact {x}")
        # histogram count sanity
        h = c.get("histogram")
        if h:
            tot = sum(b["count"] for b in h)
            nonnull = ex["record_count"] - e["null_count"] - (e["nan_count"] or 0)
            if abs(tot - nonnull) > max(1, 0.02 * nonnull):
                report(f"{name}.histogram total {tot} vs exact non-null non-NaN {nonnull}")
    extra = set(cols) - set(ex["columns"])
    if extra:
        report(f"stats has columns not in live schema: {sorted(extra)}")
    if not bad:
        print(f"  [{label}] matches exact values")
    return bad

KEYS = ("field_id", "type", "null_count", "nan_count", "min", "max", "min_max_exact", "ndv",
        "avg_len", "max_len", "true_count", "false_count", "quantiles")

def compare_docs(inc, scratch):
    bad = 0
    for k in ("record_count", "merged_record_count", "file_count"):
        if inc.get(k) != scratch.get(k):
            bad += 1; print(f"  [inc vs scratch] {k}: {inc.get(k)} vs {scratch.get(k)}")
    ci, cs = inc["columns"], scratch["columns"]
    if set(ci) != set(cs):
        bad += 1; print(f"  [inc vs scratch] column sets differ: inc {sorted(ci)} scratch {sorted(cs)}")
    for n in set(ci) & set(cs):
        for k in KEYS:
            a, b = ci[n].get(k), cs[n].get(k)
            if k == "quantiles" and a and b:
                if any(not _eq(a.get(q), b.get(q)) for q in set(a) | set(b)):
                    bad += 1; print(f"  [inc vs scratch] {n}.quantiles: {a} vs {b}")
                continue
            if k == "field_id":
                continue  # delta without column mapping etc.: ids can differ legitimately? report anyway below
            if not _eq(a, b):
                bad += 1; print(f"  [inc vs scratch] {n}.{k}: inc {a!r} vs scratch {b!r}")
    if not bad:
        print("  [inc vs scratch] identical on compared keys")
    return bad

def summary(doc):
    print(f"  doc: snapshot {doc.get('snapshot_id')} schema {doc.get('schema_id')} rows {doc.get('record_count')}/{doc.get('merged_record_count')}")
    for n, c in doc["columns"].items():
        print(f"    {n}: id={c.get('field_id')} {c.get('type')} nulls={c.get('null_count')} min={c.get('min')!r} max={c.get('max')!r} exact={c.get('min_max_exact')} ndv={c.get('ndv')}")

def check(loc, state_inc, state_scratch, live, sketches=True, verbose=True):
    """Incremental analyze already done into state_inc... this does the final inc + scratch + comparisons."""
    analyze(loc, state_inc, sketches)
    inc = show(loc, state_inc)
    shutil.rmtree(state_scratch, ignore_errors=True)
    analyze(loc, state_scratch, sketches)
    scr = show(loc, state_scratch)
    if verbose:
        print(" incremental:"); summary(inc)
    ex = exact(live())
    b = compare_exact(inc, ex, "incremental vs exact")
    b += compare_exact(scr, ex, "scratch vs exact")
    b += compare_docs(inc, scr)
    return inc, scr, ex, b
