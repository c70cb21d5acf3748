"""Make a relocated copy of a foreign Iceberg table: every path prefix in metadata JSON, manifest
lists, manifests and position-delete files is rewritten; manifest_length recomputed."""
import fastavro, json, os, shutil, sys, glob, io
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc
def relocate(src, dst, prefixes):
    def m(p):
        for pre in prefixes:
            if p.startswith(pre): return dst + p[len(pre):]
        return p
    def rewrite(obj):
        if isinstance(obj, str): return m(obj)
        if isinstance(obj, dict): return {k: rewrite(v) for k, v in obj.items()}
        if isinstance(obj, list): return [rewrite(v) for v in obj]
        return obj
    shutil.rmtree(dst, ignore_errors=True); shutil.copytree(src, dst)
    # position delete files first (content) -- we learn which from manifests
    manifests = [f for f in glob.glob(dst+'/metadata/*.avro') if not os.path.basename(f).startswith('snap-')]
    for f in manifests:
        r = fastavro.reader(open(f,'rb')); schema = json.loads(r.metadata['avro.schema'])
        meta = {k: v for k, v in r.metadata.items() if not k.startswith('avro.')}
        recs = []
        for e in r:
            df = e['data_file']
            if df.get('content') == 1 and df.get('file_format','').upper() == 'PARQUET':
                local = m(df['file_path']); t = pq.ParquetFile(local).read()
                i = t.schema.get_field_index('file_path')
                col = pa.array([m(x) for x in t.column(i).to_pylist()], pa.string())
                t = t.set_column(i, t.schema.field(i), col); pq.write_table(t, local)
                df['file_size_in_bytes'] = os.path.getsize(local)
                for b in ('lower_bounds','upper_bounds'):
                    if df.get(b):
                        df[b] = [{'key':x['key'],'value': m(x['value'].decode()).encode() if x['key']==2147483546 else x['value']} for x in df[b]]
            recs.append(rewrite(e))
        with open(f,'wb') as fo: fastavro.writer(fo, schema, recs, metadata=meta, codec=r.codec)
    for f in glob.glob(dst+'/metadata/snap-*.avro'):
        r = fastavro.reader(open(f,'rb')); schema = json.loads(r.metadata['avro.schema'])
        meta = {k: v for k, v in r.metadata.items() if not k.startswith('avro.')}
        recs = []
        for e in r:
            e = rewrite(e); e['manifest_length'] = os.path.getsize(e['manifest_path']); recs.append(e)
        with open(f,'wb') as fo: fastavro.writer(fo, schema, recs, metadata=meta, codec=r.codec)
    for f in glob.glob(dst+'/metadata/*.metadata.json'):
        d = json.load(open(f)); json.dump(rewrite(d), open(f,'w'))
if __name__ == '__main__':
    ROOT='/work/shared/fixtures/iceberg-foreign/impala'
    for name in sorted(os.listdir(ROOT)):
        relocate(ROOT+'/'+name, '/tmp/rs/reloc/'+name, ['hdfs://localhost:20500/test-warehouse/iceberg_test/hadoop_catalog/ice/'+name, '/test-warehouse/iceberg_test/hadoop_catalog/ice/'+name, 'hdfs://localhost:20500/test-warehouse/'+name])
        print('relocated', name)
