"""End to end on a standalone cluster, the YT sinks against the emulator on loopback: a worker,
then the driver, killed (SIGKILL) in the middle of a batch, as in test_cluster_e2e.py.

The executors and the driver talk to the in-process emulator over HTTP with the real YT client;
the test reads the tables back with its own client: exactly the source rows. The installed
``eosink`` command then reads the proofs, verifies, lists leftovers, and notices the damage
(the dynamic table unmounted; the static table's rows gone while its proofs stay).
"""

from __future__ import annotations

import json

import pytest
from cluster_helpers import Target, worker_then_driver_killed
from eosink_yt_emulator.pytest_plugin import yt_emulator  # noqa: F401 - the target's proxy

TABLE = "//home/eosink/cluster"


def yt_target(sink, emulator):
    yt = emulator.client()
    config = json.dumps(emulator.client_config())
    options = {"proxy": emulator.url, "proxy_discovery": "false", "client_config": config}
    cli = [TABLE, "--proxy", emulator.url, "--proxy-discovery", "false"]
    cli += ["--client-config", config]
    if sink == "yt-dynamic":
        return Target(
            sink=sink,
            options={**options, "path": TABLE, "create_table": "true"},
            cli=cli,
            read_ids=lambda: [r["id"] for r in yt.select_rows(f"id from [{TABLE}]")],
            damage=lambda: yt.unmount_table(TABLE, sync=True),
        )
    return Target(
        sink=sink,
        options={**options, "path": TABLE},
        cli=cli,
        read_ids=lambda: [r["id"] for r in yt.read_table(TABLE)],
        damage=lambda: yt.write_table(TABLE, []),  # the rows go, the proofs stay
    )


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
@pytest.mark.parametrize("sink", ["yt-dynamic", "yt-static"])
def test_worker_then_driver_killed_mid_batch(
    spark_cluster, wheel_env, yt_emulator, tmp_path, sink, door  # noqa: F811
):
    target = yt_target(sink, yt_emulator)
    worker_then_driver_killed(spark_cluster, wheel_env, tmp_path / "work", target, door)
