import os, json, glob, traceback
from deltalake import DeltaTable, QueryBuilder
import pyarrow as pa, pyarrow.compute
ROOT='/work/shared/fixtures/delta'
tables=sorted(glob.glob(ROOT+'/delta-rs/*')+glob.glob(ROOT+'/delta-golden/*'))
for t in tables:
    name=t.split('/delta/')[1]
    print('=====', name)
    try:
        dt=DeltaTable(t)
    except Exception as e:
        print('  OPEN ERR', type(e).__name__, str(e)[:300]); continue
    try:
        p=dt.protocol(); md=dt.metadata()
        print('  version', dt.version(), 'protocol', p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features)
        print('  metadata id', md.id, 'partition_columns', md.partition_columns, 'configuration', md.configuration)
        print('  schema', [(f.name, str(f.type)[:40], {k:v for k,v in (f.metadata or {}).items()}) for f in dt.schema().fields][:12])
        aa=pa.table(dt.get_add_actions(flatten=True)); print("  get_add_actions type", type(dt.get_add_actions(flatten=True)))
        print('  add_actions rows', aa.num_rows, 'cols', aa.column_names[:40])
        if 'num_records' in aa.column_names: print('  sum num_records', pa.compute.sum(aa['num_records']).as_py())
        dvcols=[c for c in aa.column_names if 'deletion' in c.lower()]
        if dvcols: print('  dv cols', dvcols, aa.select(dvcols).to_pylist()[:3])
        print('  count()', dt.count())
        try:
            dvs=pa.RecordBatchReader.from_stream(dt.deletion_vectors()).read_all()
            print('  deletion_vectors()', dvs.num_rows, [(r['filepath'][-40:], len(r['selection_vector']), sum(1 for x in r['selection_vector'] if not x)) for r in dvs.to_pylist()[:4]])
        except Exception as e: print('  deletion_vectors ERR', str(e)[:200])
        n=QueryBuilder().register('t', dt).execute("select count(*) as n from t"); n=pa.RecordBatchReader.from_stream(n).read_all()
        print('  QueryBuilder count', n.to_pylist())
        s=pa.RecordBatchReader.from_stream(dt.scan()).read_all(); print('  scan() rows', s.num_rows)
        h=dt.history(); print('  history', len(h), [(x.get('version'), x.get('operation')) for x in h][:20])
    except Exception as e:
        print('  ERR', type(e).__name__, str(e)[:400])
