import sys, os, time, json, pyarrow as pa
from pypaimon import CatalogFactory, Schema
W='/tmp/rs/pconc'; role=sys.argv[1]; N=int(sys.argv[2])
s=pa.schema([('id',pa.int64())])
if role=='init':
    cat=CatalogFactory.create({'warehouse':W}); cat.create_database('db',True)
    cat.create_table('db.t', Schema.from_pyarrow_schema(s), False)
    t=cat.get_table('db.t'); wb=t.new_batch_write_builder(); w=wb.new_write(); w.write_arrow(pa.table({'id':[0]},schema=s)); wb.new_commit().commit(w.prepare_commit())
elif role=='writer':
    cat=CatalogFactory.create({'warehouse':W})
    for i in range(1,N+1):
        t=cat.get_table('db.t'); wb=t.new_batch_write_builder(); w=wb.new_write(); w.write_arrow(pa.table({'id':[i]},schema=s)); wb.new_commit().commit(w.prepare_commit())
elif role=='analyzer':
    sys.path.insert(0,'/tmp/rs'); from paimon_analyze import commit_analyze
    for i in range(N):
        commit_analyze(W+'/db.db/t', lambda prev: {'snapshotId':prev['id'],'schemaId':prev['schemaId'],'mergedRecordCount':prev['totalRecordCount'],'colStats':{}})
elif role=='check':
    d=W+'/db.db/t/snapshot'; kinds={}
    ids=sorted(int(n.split('-')[1]) for n in os.listdir(d) if n.startswith('snapshot-'))
    for i in ids:
        j=json.load(open(f'{d}/snapshot-{i}')); kinds[j['commitKind']]=kinds.get(j['commitKind'],0)+1
    print('snapshots', len(ids), 'contiguous', ids==list(range(1,len(ids)+1)), kinds)
    cat=CatalogFactory.create({'warehouse':W}); t=cat.get_table('db.t'); rb=t.new_read_builder()
    ids_read=sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column('id').to_pylist()); print('rows', len(ids_read), 'all ids present', ids_read==list(range(0,N+1)))
    print('leftover tmp files', [n for n in os.listdir(d) if 'tmp' in n])
