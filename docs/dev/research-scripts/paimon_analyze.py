"""Write a Paimon ANALYZE snapshot + statistics file, commit with create-if-absent (os.link)."""
import fastavro, json, os, uuid, time, sys
def commit_analyze(table_dir, make_stats, max_retries=50):
    sdir=f'{table_dir}/snapshot'; mdir=f'{table_dir}/manifest'
    for attempt in range(max_retries):
        ids=[int(n.split('-')[1]) for n in os.listdir(sdir) if n.startswith('snapshot-')]
        latest=max(ids)
        try: prev=json.load(open(f'{sdir}/snapshot-{latest}'))
        except (FileNotFoundError, json.JSONDecodeError): continue
        u=uuid.uuid4()
        # base list = prev base + prev delta entries; delta list = empty
        recs=[]; schema=None; codec='null'
        for name in (prev['baseManifestList'], prev['deltaManifestList']):
            r=fastavro.reader(open(f'{mdir}/{name}','rb')); schema=r.writer_schema; codec=r.codec; recs+=list(r)
        base=f'manifest-list-{u}-0'; delta=f'manifest-list-{u}-1'
        for name, rr in ((base, recs), (delta, [])):
            with open(f'{mdir}/{name}','wb') as fo: fastavro.writer(fo, schema, rr, codec=codec)
        os.makedirs(f'{table_dir}/statistics', exist_ok=True)
        stat=f'stat-{u}-0'
        with open(f'{table_dir}/statistics/{stat}','w') as fo: json.dump(make_stats(prev), fo)
        snap=dict(prev); snap.update({'id': latest+1, 'baseManifestList': base, 'baseManifestListSize': os.path.getsize(f'{mdir}/{base}'),
            'deltaManifestList': delta, 'deltaManifestListSize': os.path.getsize(f'{mdir}/{delta}'), 'changelogManifestList': None,
            'commitUser': 'lakestats', 'commitIdentifier': 9223372036854775807, 'commitKind': 'ANALYZE', 'timeMillis': int(time.time()*1000),
            'deltaRecordCount': 0, 'statistics': stat})
        snap.pop('uuid', None); snap.pop('writerVersion', None)
        tmp=f'{sdir}/.snapshot-{latest+1}.{u}.tmp'
        with open(tmp,'w') as fo: json.dump(snap, fo, indent=2); fo.flush(); os.fsync(fo.fileno())
        try:
            os.link(tmp, f'{sdir}/snapshot-{latest+1}')   # atomic create-if-absent, never overwrites
            ok=True
        except FileExistsError:
            ok=False
        finally:
            os.unlink(tmp)
        if ok:
            with open(f'{sdir}/LATEST.{u}.tmp','w') as fo: fo.write(str(latest+1))
            os.replace(f'{sdir}/LATEST.{u}.tmp', f'{sdir}/LATEST')   # hint only
            return latest+1, stat
        # lost the race: clean our files, retry on the new latest
        for p in (f'{mdir}/{base}', f'{mdir}/{delta}', f'{table_dir}/statistics/{stat}'): os.unlink(p)
    raise RuntimeError('too many conflicts')
if __name__=='__main__':
    d=sys.argv[1]
    print(commit_analyze(d, lambda prev: {'snapshotId': prev['id'], 'schemaId': prev['schemaId'], 'mergedRecordCount': prev['totalRecordCount'], 'mergedRecordSize': 1234,
        'colStats': {'id': {'colId': 0, 'distinctCount': 4, 'min': '3', 'max': '10', 'nullCount': 0, 'avgLen': 8, 'maxLen': 8}}}))
