import duckdb, duckdb_extension_avro, duckdb_extension_iceberg, os, glob, sys
from pathlib import Path
ROOT='/work/shared/fixtures/iceberg-foreign/impala'
con=duckdb.connect(config={'threads':1})
for package in (duckdb_extension_avro, duckdb_extension_iceberg):
    (binary,) = Path(package.__file__).parent.rglob("*.duckdb_extension")
    con.execute(f"LOAD '{binary}'")
print(con.execute("select extension_name, extension_version, loaded from duckdb_extensions() where extension_name in ('iceberg','avro','parquet')").fetchall())
for name in sorted(os.listdir(ROOT)):
    d=ROOT+'/'+name
    for variant in ('dir_moved','metadata_moved'):
        try:
            if variant=='dir_moved':
                q=f"select count(*) from iceberg_scan('{d}', allow_moved_paths=true)"
            else:
                metas=sorted(glob.glob(d+'/metadata/v*.metadata.json'), key=lambda s:int(os.path.basename(s)[1:].split('.')[0]))
                q=f"select count(*) from iceberg_scan('{metas[-1]}', allow_moved_paths=true)"
            print(name, variant, con.execute(q).fetchall())
        except Exception as e:
            print(name, variant, 'ERR', str(e).splitlines()[0][:250])
