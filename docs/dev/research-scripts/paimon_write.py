import pyarrow as pa, json, os, glob, traceback
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.schema_change import SchemaChange
W='/tmp/rs/pwh'
cat=CatalogFactory.create({'warehouse':W}); cat.create_database('db', True)
def commit(t, data, overwrite=None):
    wb=t.new_batch_write_builder()
    if overwrite is not None: wb=wb.overwrite(overwrite)
    w=wb.new_write(); w.write_arrow(data); c=wb.new_commit(); c.commit(w.prepare_commit()); w.close(); c.close()
def read(t):
    rb=t.new_read_builder(); return rb.new_read().to_arrow(rb.new_scan().plan().splits())
def step(name, f):
    try: print(name, '->', f())
    except Exception as e: print(name, 'ERR', type(e).__name__, str(e)[:300])
# 1 append, partitioned
s=pa.schema([('id',pa.int64()),('p',pa.string()),('v',pa.float64())])
cat.create_table('db.app', Schema.from_pyarrow_schema(s, partition_keys=['p']), False)
t=cat.get_table('db.app')
step('append x2', lambda: (commit(t, pa.table({'id':[1,2,3],'p':['a','a','b'],'v':[1.0,None,3.0]},schema=s)), commit(t, pa.table({'id':[4],'p':['b'],'v':[4.0]},schema=s)), read(t).num_rows)[-1])
step('overwrite p=a', lambda: (commit(cat.get_table('db.app'), pa.table({'id':[9],'p':['a'],'v':[9.0]},schema=s), overwrite={'p':'a'}), sorted(read(cat.get_table('db.app')).column('id').to_pylist()))[-1])
step('schema change add col + rename', lambda: (cat.alter_table('db.app',[SchemaChange.add_column('w', pa.int32() if False else __import__('pypaimon.schema.data_types',fromlist=['AtomicType']).AtomicType('INT')), SchemaChange.rename_column('v','v2')]), [f.name for f in cat.get_table('db.app').fields])[-1])
step('append after schema change', lambda: (commit(cat.get_table('db.app'), pa.table({'id':[10],'p':['b'],'v2':[1.5],'w':[7]}, schema=pa.schema([('id',pa.int64()),('p',pa.string()),('v2',pa.float64()),('w',pa.int32())]))), read(cat.get_table('db.app')).to_pylist())[-1])
# 2 PK with deletes via rowkind.field
sk=pa.schema([('k',pa.int64()),('v',pa.string()),('rk',pa.string())])
cat.create_table('db.pk', Schema.from_pyarrow_schema(sk, primary_keys=['k'], options={'bucket':'1','rowkind.field':'rk'}), False)
t=cat.get_table('db.pk')
step('pk insert', lambda: (commit(t, pa.table({'k':[1,2,3],'v':['a','b','c'],'rk':['+I','+I','+I']},schema=sk)), read(t).num_rows)[-1])
step('pk update+delete', lambda: (commit(t, pa.table({'k':[2,3],'v':['B','c'],'rk':['+U','-D']},schema=sk)), read(cat.get_table('db.pk')).to_pylist())[-1])
# 3 PK with deletion vectors
cat.create_table('db.pkdv', Schema.from_pyarrow_schema(sk, primary_keys=['k'], options={'bucket':'1','rowkind.field':'rk','deletion-vectors.enabled':'true'}), False)
t=cat.get_table('db.pkdv')
step('dv insert', lambda: (commit(t, pa.table({'k':[1,2,3],'v':['a','b','c'],'rk':['+I','+I','+I']},schema=sk)), read(t).num_rows)[-1])
step('dv delete', lambda: (commit(t, pa.table({'k':[2],'v':['b'],'rk':['-D']},schema=sk)), read(cat.get_table('db.pkdv')).to_pylist())[-1])
for tb in ['app','pk','pkdv']:
    d=f'{W}/db.db/{tb}'
    print('##', tb, sorted(os.listdir(d)), 'snapshots', sorted(os.listdir(d+'/snapshot')), 'index', os.listdir(d+'/index') if os.path.exists(d+'/index') else None)
    for sf in sorted(glob.glob(d+'/snapshot/snapshot-*')):
        j=json.load(open(sf)); print('   ', os.path.basename(sf), j['commitKind'], 'total', j['totalRecordCount'], 'idx', j.get('indexManifest'), 'keys', sorted(j.keys()) if sf.endswith('-1') else '')
