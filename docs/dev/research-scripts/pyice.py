import os, glob, warnings
from pyiceberg.table import StaticTable
ROOT='/tmp/rs/reloc'
for name in sorted(os.listdir(ROOT)):
    metas=sorted(glob.glob(ROOT+'/'+name+'/metadata/v*.metadata.json'), key=lambda s:int(os.path.basename(s)[1:].split('.')[0]))
    try:
        t=StaticTable.from_metadata(metas[-1])
        a=t.scan().to_arrow()
        print(name, a.num_rows, a.to_pylist()[:8])
    except Exception as e:
        print(name,'ERR',type(e).__name__, str(e).splitlines()[0][:200])
