"""End to end on a standalone cluster: workers, then the driver, killed (SIGKILL) in the middle
of a batch, for files, delta, yt-dynamic and yt-static at once (``workers_then_driver_killed``).

For each front door one driver process runs four streaming queries (one per sink, one source
file per micro-batch) on the cluster. Batch 1 stalls in one task of every query; the workers
running those tasks are killed with their executors and Python workers, one after the other
(Spark runs the tasks again elsewhere; a replacement worker joins after each kill); batch 2
stalls and the driver's process group is killed; the queries restart from their checkpoints.
Independent readers then count exactly the source rows: Spark's own reader on the cluster
(files), delta-rs (delta), the test's own YT client against the emulator on loopback (the YT
sinks). The installed ``eosink`` command (from the wheels) finds the last batch's proof,
verifies the target, lists what the killed attempts left, and notices damage done afterwards
(a committed file removed; the dynamic table unmounted; the static table's rows gone while
its proofs stay).
"""

from __future__ import annotations

import json
import os

import pytest
from cluster_helpers import Target, workers_then_driver_killed
from eosink_yt_emulator.pytest_plugin import yt_emulator  # noqa: F401 - the YT sinks' proxy


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


def file_targets(tmp_path):
    files, delta = str(tmp_path / "files"), str(tmp_path / "delta")
    read_back = tmp_path / "read_back.json"
    return [
        Target(
            sink="files",
            options={"path": files},
            cli=[files],
            read_ids=lambda: json.loads(read_back.read_text()),  # Spark's reader, on the cluster
            damage=lambda: remove_a_committed_file("files", files),
            read_back=str(read_back),
        ),
        Target(
            sink="delta",
            options={"path": delta},
            cli=[delta],
            read_ids=lambda: read_delta(delta),
            damage=lambda: remove_a_committed_file("delta", delta),
        ),
    ]


def yt_targets(emulator):
    yt = emulator.client()
    config = json.dumps(emulator.client_config())
    options = {"proxy": emulator.url, "proxy_discovery": "false", "client_config": config}
    cli = ["--proxy", emulator.url, "--proxy-discovery", "false", "--client-config", config]
    dynamic, static = "//home/eosink/dynamic", "//home/eosink/static"
    return [
        Target(
            sink="yt-dynamic",
            options={**options, "path": dynamic, "create_table": "true"},
            cli=[dynamic, *cli],
            read_ids=lambda: [r["id"] for r in yt.select_rows(f"id from [{dynamic}]")],
            damage=lambda: yt.unmount_table(dynamic, sync=True),
        ),
        Target(
            sink="yt-static",
            options={**options, "path": static},
            cli=[static, *cli],
            read_ids=lambda: [r["id"] for r in yt.read_table(static)],
            damage=lambda: yt.write_table(static, []),  # the rows go, the proofs stay
        ),
    ]


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_workers_then_driver_killed_mid_batch(
    spark_cluster, wheel_env, yt_emulator, tmp_path, door  # noqa: F811
):
    targets = file_targets(tmp_path) + yt_targets(yt_emulator)
    workers_then_driver_killed(spark_cluster, wheel_env, tmp_path / "work", targets, door)
