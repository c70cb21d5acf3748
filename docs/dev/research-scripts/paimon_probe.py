import traceback, json
from pypaimon import CatalogFactory
from pypaimon.manifest.manifest_list_manager import ManifestListManager
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
cat=CatalogFactory.create({'warehouse':'/work/shared/fixtures/paimon/paimon-cpp'})
for db in cat.list_databases():
    name=f'{db}.{db}'
    print('=====', name)
    try:
        t=cat.get_table(name)
        print('  pk', t.primary_keys, 'partition', t.partition_keys, 'options', {k:v for k,v in t.options.options.to_map().items()} if hasattr(t.options,'options') else '')
    except Exception as e:
        print('  get_table ERR', type(e).__name__, str(e)[:300]); continue
    try:
        rb=t.new_read_builder(); splits=rb.new_scan().plan().splits()
        a=rb.new_read().to_arrow(splits)
        print('  read rows', a.num_rows, 'splits', len(splits), 'split snapshot', splits[0].snapshot_id if splits else None, 'merged_row_count', [s.merged_row_count() if callable(s.merged_row_count) else s.merged_row_count for s in splits])
        for r in a.to_pylist(): print('    ', r)
    except Exception as e:
        print('  read ERR', type(e).__name__, str(e)[:300]); traceback.print_exc(limit=3)
    try:
        sm=t.snapshot_manager() if callable(t.snapshot_manager) else t.snapshot_manager; snaps=sm.list_snapshots() if hasattr(sm,'list_snapshots') else []
        for s in snaps:
            print('  snapshot', s.id, s.commit_kind, 'schema', s.schema_id, 'total', s.total_record_count, 'delta', s.delta_record_count, 'index', s.index_manifest, 'statistics', s.statistics)
        latest=sm.get_latest_snapshot()
        mlm=ManifestListManager(t); mfm=ManifestFileManager(t)
        metas=mlm.read_all(latest)
        for m in metas:
            for e in mfm.read(m.file_name, drop_stats=False):
                f=e.file
                print('   entry kind', e.kind, 'part', e.partition.values if hasattr(e.partition,'values') else e.partition, 'bucket', e.bucket, f.file_name[:20], 'rows', f.row_count, 'level', f.level, 'seq', f.min_sequence_number, f.max_sequence_number, 'delrows', f.delete_row_count, 'stats_cols', f.value_stats_cols, 'min', f.value_stats.min_values.values if hasattr(f.value_stats.min_values,'values') else f.value_stats.min_values, 'nulls', f.value_stats.null_counts)
    except Exception as e:
        print('  manager ERR', type(e).__name__, str(e)[:300]); traceback.print_exc(limit=4)
