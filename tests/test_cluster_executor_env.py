"""Executors whose Python lacks eosink: a clear error before anything is written; and shipping
eosink to the executors by installing its wheels into their Python (PYSPARK_PYTHON).

The driver runs with the project on its path; the executors run ``PYSPARK_PYTHON``, a venv
with pyspark and the other third-party packages but without eosink (as a node where nobody
installed it, or a driver venv used without activating it on the executors).
"""

from __future__ import annotations

from collections import Counter

import pytest
from cluster_helpers import last_log, single_job, start_driver, write_source


def run_to_end(spark_cluster, work, door, target, python):
    conf = spark_cluster.spark_conf(ship_path=False)  # the executors' own Python only
    job = single_job(spark_cluster, "delta", {"path": str(target)}, door, **conf)
    driver = start_driver(work, job, env={"PYSPARK_PYTHON": str(python)})
    return driver.wait(timeout=600), last_log(work)


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_executors_without_eosink_get_a_clear_error(spark_cluster, bare_python, tmp_path, door):
    work, target = tmp_path / "work", tmp_path / "target"
    write_source(work)
    code, log = run_to_end(spark_cluster, work, door, target, bare_python)
    assert code != 0
    assert "ExecutorEnvironmentError" in log, log
    assert "lacks eosink" in log and "PYSPARK_PYTHON" in log and "spark.archives" in log, log
    assert str(bare_python) in log  # which Python the executors ran
    assert not target.exists(), "something was written into the target"


def test_eosink_shipped_as_wheels_into_the_executors_python(spark_cluster, wheel_env, tmp_path):
    from deltalake import DeltaTable

    work, target = tmp_path / "work", tmp_path / "target"
    expected = write_source(work)
    code, log = run_to_end(spark_cluster, work, "data_source", target, wheel_env / "python")
    assert code == 0, log
    assert Counter(DeltaTable(str(target)).to_pyarrow_table().column("id").to_pylist()) == Counter(
        expected
    )
