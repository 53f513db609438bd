"""End to end on a standalone cluster, files and delta: a worker, then the driver, killed
(SIGKILL) in the middle of a batch (``cluster_helpers.worker_then_driver_killed``).

For each sink and front door a streaming query (one source file per micro-batch) runs on the
cluster from a driver process of its own: batch 1 stalls in one task, whose worker is killed
with its executor and Python workers (Spark runs the tasks again on the other worker, and a
replacement worker joins); batch 2 stalls and the driver's process group is killed; the query
restarts from its checkpoint. Spark's own reader (files, on the cluster) and delta-rs then
count exactly the source rows, and the installed ``eosink`` command (from the wheels) finds the
last batch's proof, verifies the target, lists what the killed attempts left, and notices a
committed file removed afterwards. The YT sinks: test_cluster_e2e_yt.py.
"""

from __future__ import annotations

import json
import os

import pytest
from cluster_helpers import Target, worker_then_driver_killed


def read_delta(path):
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().column("id").to_pylist()


def remove_a_committed_file(sink, path):
    if sink == "delta":
        from deltalake import DeltaTable

        uri = DeltaTable(path).file_uris()[0]
    else:
        from eosink_files import committed_files

        uri = committed_files(path)[0].uri
    os.remove(uri.removeprefix("file://"))


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
@pytest.mark.parametrize("sink", ["files", "delta"])
def test_worker_then_driver_killed_mid_batch(spark_cluster, wheel_env, tmp_path, sink, door):
    path, read_back = str(tmp_path / "target"), tmp_path / "read_back.json"
    target = Target(
        sink=sink,
        options={"path": path},
        cli=[path],
        read_ids=(
            (lambda: read_delta(path))
            if sink == "delta"
            else (lambda: json.loads(read_back.read_text()))  # Spark's reader, on the cluster
        ),
        damage=lambda: remove_a_committed_file(sink, path),
        read_back=str(read_back) if sink == "files" else None,
    )
    worker_then_driver_killed(spark_cluster, wheel_env, tmp_path / "work", target, door)
