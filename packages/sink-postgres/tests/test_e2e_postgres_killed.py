"""End to end with a real kill, through foreachBatch: the query's process group gets SIGKILL
in the middle of a batch and starts again from its checkpoint; every source row is in the
table once, read by plain SQL (see :mod:`killed_query_run`)."""

from killed_query_run import query_killed_mid_batch_and_restarted


def test_query_killed_mid_batch_and_restarted(tmp_path, database):
    query_killed_mid_batch_and_restarted(tmp_path, database, "foreach_batch")
