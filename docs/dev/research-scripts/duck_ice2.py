import duckdb, duckdb_extension_avro, duckdb_extension_iceberg, os, glob, sys
from pathlib import Path
ROOT='/tmp/rs/reloc'
con=duckdb.connect(config={'threads':1})
for package in (duckdb_extension_avro, duckdb_extension_iceberg):
    (binary,) = Path(package.__file__).parent.rglob("*.duckdb_extension")
    con.execute(f"LOAD '{binary}'")
mode=sys.argv[1]
for name in sorted(os.listdir(ROOT)):
    metas=sorted(glob.glob(ROOT+'/'+name+'/metadata/v*.metadata.json'), key=lambda s:int(os.path.basename(s)[1:].split('.')[0]))
    v=os.path.basename(metas[-1])[1:].split('.')[0]
    try:
        if mode=='moved':
            q=f"select count(*) from iceberg_scan('{ROOT}/{name}', allow_moved_paths=true, version='{v}')"
        else:
            # baked path via symlink
            q=f"select count(*) from iceberg_scan('{ROOT}/{name}/metadata/v{v}.metadata.json')"
        print(name, mode, con.execute(q).fetchall())
    except Exception as e:
        print(name, mode, 'ERR', str(e).splitlines()[0][:200])
