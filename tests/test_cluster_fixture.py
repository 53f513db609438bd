"""The standalone cluster of eosink.testing.cluster (the ``spark_cluster`` session fixture that
every cluster test here shares): two workers, each with its own executor and Python workers; a
killed worker's processes are all gone and a replacement registers.

That ``stop()`` leaves no process and no folder behind is checked by ``stop()`` itself, which
raises if anything survived: the fixture calls it when the test process ends.
"""

from __future__ import annotations

import os

import pyarrow as pa

from eosink.testing.cluster import is_running


def _pids(batches):
    for batch in batches:
        yield pa.record_batch([pa.array([os.getpid()] * batch.num_rows)], names=["pid"])


def test_two_workers_and_a_replaced_worker(spark_cluster):
    cluster = spark_cluster
    assert len(cluster.running) == 2
    spark = cluster.session()
    try:
        rows = spark.range(0, 400, 1, 8).mapInArrow(_pids, "pid long").distinct().collect()
        workers = {cluster.worker_of(r.pid).index for r in rows}
        assert workers == {0, 1}, "the tasks did not run in Python workers of both workers"
        # master, two workers, an executor JVM per worker, Python daemons and workers
        assert len(cluster.processes()) >= 7, cluster.processes()

        victim = cluster.running[0]
        tree = victim.tree()
        assert len(tree) >= 3, "worker JVM, its executor JVM, its Python daemon"
        cluster.kill_worker(victim)
        assert not [p for p in tree if is_running(p)]
        cluster.ensure_workers()
        assert [w.index for w in cluster.running] == [0, 1]
        assert spark.range(0, 100, 1, 4).count() == 100  # the application goes on
    finally:
        spark.stop()  # an application holds every core of the cluster: free them
