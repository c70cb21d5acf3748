"""The Arrow sketch engine: the full build's per-file statistics computed in Spark tasks that
read each Parquet file themselves with pyarrow and hash with numpy (docs/sketches.md, "The
Arrow engine"). ``pipeline.sketch_files`` chooses it for plain jobs (``engine.arrow_plan``);
every other job keeps the SQL aggregate."""
