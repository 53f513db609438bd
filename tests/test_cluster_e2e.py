"""End to end on a standalone cluster: a worker and then the driver killed (SIGKILL) mid-batch.

For each sink and front door, a streaming query (one source file per micro-batch) runs on
the cluster, a driver process of its own:

1. batch 1 stalls in one task; that task's worker is killed with its executor and Python
   workers (the JVMs and the Python processes, all SIGKILL); Spark runs the batch's tasks
   again on the other worker, and a replacement worker joins;
2. batch 2 stalls; the driver is killed (its whole process group);
3. the query restarts from its checkpoint and runs to the end.

An independent reader (Spark's own reader on the cluster for files, delta-rs, the YT client)
then counts exactly the source rows, and the installed ``eosink`` command (from the wheels)
finds the proofs of all batches, verifies the target and lists what the killed attempts left.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from eosink_yt_emulator.pytest_plugin import yt_emulator  # noqa: F401 - the YT sinks' target
from cluster_helpers import (
    arm,
    kill_driver,
    last_log,
    run_cli,
    start_driver,
    wait_reached,
    write_source,
)

SINKS = ["files", "delta", "yt-dynamic", "yt-static"]
YT_TABLE = "//home/eosink/cluster"


@pytest.fixture
def target(request, tmp_path):
    """A new target: (sink, its options, the CLI's target arguments, reader, damage)."""
    sink = request.param
    if sink in ("files", "delta"):
        path = str(tmp_path / "target")
        return (
            sink,
            {"path": path},
            [path],
            lambda: _read_local(sink, tmp_path, path),
            lambda: _remove_a_committed_file(sink, path),
        )
    emulator = request.getfixturevalue("yt_emulator")
    connection = {
        "proxy": emulator.url,
        "proxy_discovery": "false",
        "client_config": json.dumps(emulator.client_config()),
    }
    options = {**connection, "path": YT_TABLE}
    if sink == "yt-dynamic":
        options["create_table"] = "true"
    cli = [YT_TABLE, "--proxy", emulator.url, "--proxy-discovery", "false"]
    cli += ["--client-config", connection["client_config"]]
    yt = emulator.client()
    if sink == "yt-dynamic":
        read = lambda: [r["id"] for r in yt.select_rows(f"id from [{YT_TABLE}]")]  # noqa: E731
        return sink, options, cli, read, lambda: yt.unmount_table(YT_TABLE, sync=True)
    read = lambda: [r["id"] for r in yt.read_table(YT_TABLE)]  # noqa: E731
    return sink, options, cli, read, lambda: yt.write_table(YT_TABLE, [])  # rows gone, proof kept


def _remove_a_committed_file(sink, path):
    if sink == "delta":
        from deltalake import DeltaTable

        uri = DeltaTable(path).file_uris()[0]
    else:
        from eosink_files import committed_files

        uri = committed_files(path)[0].uri
    os.remove(uri.removeprefix("file://"))


def _read_local(sink, tmp_path, path):
    if sink == "delta":
        from deltalake import DeltaTable

        return DeltaTable(path).to_pyarrow_table().column("id").to_pylist()
    return json.loads((tmp_path / "read_back.json").read_text())


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
@pytest.mark.parametrize("target", SINKS, indirect=True)
def test_worker_then_driver_killed_mid_batch(spark_cluster, wheel_env, tmp_path, target, door):
    sink, options, cli_target, read_ids, damage = target
    work = tmp_path / "work"
    expected = write_source(work)
    job = {"master": spark_cluster.master_url, "door": door, "sink": sink, "options": options}
    job["conf"] = spark_cluster.spark_conf()
    if sink == "files":
        job["read_back"] = str(tmp_path / "read_back.json")

    arm(work, 1050)
    driver = start_driver(work, job)
    pid = wait_reached(work, 1050, driver)
    spark_cluster.kill_worker(spark_cluster.worker_of(pid))
    arm(work, 2050)  # releases batch 1's retried task, stalls batch 2
    spark_cluster.ensure_workers()
    wait_reached(work, 2050, driver)
    kill_driver(driver)

    arm(work, None)
    restarted = start_driver(work, job)
    assert restarted.wait(timeout=600) == 0, last_log(work)

    held = Counter(read_ids())
    assert held == Counter(expected), (
        f"duplicates: {sum(held[i] - 1 for i in held if held[i] > 1)}, "
        f"lost: {len(set(expected) - set(held))}"
    )

    status = json.loads(run_cli(wheel_env, "status", sink, *cli_target, "--json").stdout)
    assert [(w["writer_id"], w["batch_id"]) for w in status["writers"]] == [("orders", 3)]
    run_cli(wheel_env, "verify", sink, *cli_target)
    run_cli(wheel_env, "cleanup", sink, *cli_target, "--older-than", "0s")

    damage()
    problems = json.loads(
        run_cli(wheel_env, "verify", sink, *cli_target, "--json", check_exit=1).stdout
    )
    assert problems["problems"], problems
