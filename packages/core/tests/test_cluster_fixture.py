"""The standalone cluster of eosink.testing.cluster: up with two workers, each with its own
executor and Python workers; a killed worker is replaced; stop() leaves no process behind."""

from __future__ import annotations

import os

import pyarrow as pa

from eosink.testing.cluster import StandaloneCluster, is_running


def _pids(batches):
    for batch in batches:
        yield pa.record_batch([pa.array([os.getpid()] * batch.num_rows)], names=["pid"])


def test_two_workers_a_replaced_worker_and_nothing_left_after_stop():
    cluster = StandaloneCluster().start()
    spark = None
    try:
        assert len(cluster.running) == 2
        spark = cluster.session()
        rows = spark.range(0, 400, 1, 8).mapInArrow(_pids, "pid long").distinct().collect()
        workers = {cluster.worker_of(r.pid).index for r in rows}
        assert workers == {0, 1}, "the tasks did not run in Python workers of both workers"
        lived = cluster.processes()
        # master, two workers, an executor JVM per worker, Python daemons and workers
        assert len(lived) >= 7, lived

        victim = cluster.running[0]
        tree = victim.tree()
        assert len(tree) >= 3, "worker JVM, its executor JVM, its Python daemon"
        cluster.kill_worker(victim)
        assert not [p for p in tree if is_running(p)]
        cluster.ensure_workers()
        assert [w.index for w in cluster.running] == [0, 1]
        assert spark.range(0, 100, 1, 4).count() == 100  # the application goes on
        lived += cluster.processes()
    finally:
        root = cluster.root
        cluster.stop()
        if spark is not None:
            spark.stop()
    assert cluster.processes() == []
    assert not [p for p in set(lived) if is_running(p)]
    assert not root.exists()
