import pyspark, time
from pyspark.sql import SparkSession
print('pyspark', pyspark.__version__)
t=time.time()
spark=(SparkSession.builder.master('local[1]').config('spark.ui.enabled','false').config('spark.sql.shuffle.partitions','1').getOrCreate())
R='/tmp/rs/reloc/iceberg_v2_positional_not_all_data_files_have_delete_files/data/'
import glob
data=[f for f in glob.glob(R+'*') if '-data-' in f]
dels=[f for f in glob.glob(R+'*') if '-delete-' in f]
df=spark.read.parquet(*data).select('*', '_metadata.file_path', '_metadata.row_index', '_metadata.file_name')
df.show(truncate=60)
d=spark.read.parquet(*dels).select('file_path','pos')
d.show(truncate=False)
# file_path from _metadata is a URI 'file:/...'? compare
live=df.join(d, (df.file_path==d.file_path)&(df.row_index==d.pos), 'left_anti')
print('live naive', live.count())
from pyspark.sql import functions as F
df2=df.withColumn('p', F.regexp_replace('file_path','^file:',''))
live=df2.join(d, (df2.p==d.file_path)&(df2.row_index==d.pos), 'left_anti')
print('live normalized', live.count())
print([r.function for r in spark.sql("show functions like '*bitmap*'").collect()])
print([r.function for r in spark.sql("show functions like '*roaring*'").collect()])
# ORC: _metadata.row_index?
spark.range(5).write.mode('overwrite').orc('/tmp/rs/orc_t')
spark.read.orc('/tmp/rs/orc_t').select('id','_metadata.row_index','_metadata.file_path').show(truncate=40)
print('secs', time.time()-t)
spark.stop()
