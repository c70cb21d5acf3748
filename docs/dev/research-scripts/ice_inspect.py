import json, os, glob, sys, fastavro
ROOT='/work/shared/fixtures/iceberg-foreign/impala'
def local(p, name):
    for pre in ('/test-warehouse/iceberg_test/hadoop_catalog/ice/'+name, 'hdfs://localhost:20500/test-warehouse/'+name):
        if p.startswith(pre): return ROOT+'/'+name+p[len(pre):]
    return p
for name in sorted(os.listdir(ROOT)):
    d=ROOT+'/'+name
    metas=sorted(glob.glob(d+'/metadata/v*.metadata.json'), key=lambda s:int(os.path.basename(s)[1:].split('.')[0]))
    m=json.load(open(metas[-1]))
    print('=====',name,'fv',m['format-version'],'metadata',os.path.basename(metas[-1]),'location',m['location'])
    print(' current',m.get('current-snapshot-id'),'specs',json.dumps(m.get('partition-specs',m.get('partition-spec'))), 'default-spec',m.get('default-spec-id'))
    print(' schema', json.dumps([ (f['id'],f['name'],f['type'] if isinstance(f['type'],str) else 'nested') for f in (m['schemas'][-1] if 'schemas' in m else m['schema'])['fields']]))
    print(' props', m.get('properties'))
    for s in m.get('snapshots',[]):
        ml=s.get('manifest-list')
        lp=local(ml,name) if ml else None
        print(' snap',s['snapshot-id'],'seq',s.get('sequence-number'),'parent',s.get('parent-snapshot-id'),'summary',{k:v for k,v in s['summary'].items() if k in('operation','added-records','deleted-records','added-position-deletes','added-equality-deletes','added-delete-files','removed-position-deletes','total-records','total-position-deletes','total-equality-deletes','added-dvs','total-data-files','total-delete-files')}, 'first-row-id', s.get('first-row-id'), 'added-rows', s.get('added-rows'))
        if lp and not os.path.exists(lp): print('   MANIFEST LIST MISSING', ml); continue
        if not lp: print('   (v1 manifests inline?)', s.get('manifests')); continue
        for e in fastavro.reader(open(lp,'rb')):
            mp=local(e['manifest_path'],name)
            ex=os.path.exists(mp)
            real=os.path.getsize(mp) if ex else None
            print('   manifest',os.path.basename(mp),'content',e.get('content'),'len',e['manifest_length'],'real',real,'MISMATCH' if real!=e['manifest_length'] else '','seq',e.get('sequence_number'),'min_seq',e.get('min_sequence_number'),'added_snap',e.get('added_snapshot_id'),'spec',e.get('partition_spec_id'), 'first_row_id', e.get('first_row_id'))
            if not ex: print('   MANIFEST MISSING'); continue
            r=fastavro.reader(open(mp,'rb'))
            for me in r:
                df=me['data_file']
                fp=local(df['file_path'],name)
                print('     status',me['status'],'snap',me.get('snapshot_id'),'seq',me.get('sequence_number'),'fseq',me.get('file_sequence_number'),'content',df.get('content',0),df.get('file_format'),os.path.basename(df['file_path']),'exists',os.path.exists(fp),'rows',df['record_count'],'part',df.get('partition'),'eq_ids',df.get('equality_ids'),'ref',df.get('referenced_data_file') and os.path.basename(df['referenced_data_file']),'off',df.get('content_offset'),'size',df.get('content_size_in_bytes'),'first_row_id',df.get('first_row_id'))
