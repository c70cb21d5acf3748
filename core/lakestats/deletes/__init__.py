"""Row-level deletes: a data file's live rows, applied inside the sketch job.

A format attaches every delete that applies to a data file (``DataFile.deletes``); this
package turns them into what the Spark job needs and nothing more:

* ``plan`` — pure: which data files have which deletes, numbered for the job;
* ``positions`` — driver I/O: position-delete files read (only ``file_path``/``pos``),
  their paths mapped and matched to the job's data files; deletion vectors decoded with
  pyroaring. Small next to the data: one (file, position) pair per deleted row;
* ``spark_filter`` — the ``RowFilter`` of ``pipeline.sketch_files``: anti-joins on
  ``_metadata.row_index`` (positions) and null-safe anti-joins on the equality columns
  (equality-delete files read by Spark), never a Python UDF.

``docs/deletes.md`` says what is exact and what it costs.
"""

from lakestats.deletes.plan import LiveReadPlan, plan_live_read, vector_only_live_rows

__all__ = ["LiveReadPlan", "plan_live_read", "vector_only_live_rows"]
