"""The ``eosink`` console script, installed by pip from the project's wheels into a clean venv.

Every command's ``--help`` shows an example; ``eosink sinks`` lists the installed sinks with
their packages and versions; the example third-party sink (sqlite), written by a real query on
the cluster, answers ``status`` and ``verify`` and says it does not do ``cleanup``. The other
sinks' commands run against the targets of the kill tests (test_cluster_e2e.py).
"""

from __future__ import annotations

import json

import pytest
from cluster_helpers import FILES, last_log, run_cli, single_job, start_driver, write_source


@pytest.mark.parametrize("command", [[], ["sinks"], ["status"], ["verify"], ["cleanup"]])
def test_help_of_every_command_shows_an_example(wheel_env, command):
    out = run_cli(wheel_env, *command, "--help").stdout
    assert "example" in out
    assert f"eosink {command[0] if command else ''}".strip() in out.split("example", 1)[1]


def test_sinks_lists_packages_and_versions(wheel_env):
    listed = json.loads(run_cli(wheel_env, "sinks", "--json").stdout)
    by_name = {s["sink"]: (s["package"], s["version"]) for s in listed}
    assert by_name == {
        "delta": ("eosink-delta", "0.1.0"),
        "files": ("eosink-files", "0.1.0"),
        "iceberg": ("eosink-iceberg", "0.1.0"),
        "postgres": ("eosink-postgres", "0.1.0"),
        "sqlite": ("eosink-sqlite", "0.1.0"),
        "yt-dynamic": ("eosink-yt-dynamic", "0.1.0"),
        "yt-static": ("eosink-yt-static", "0.1.0"),
    }
    assert "eosink-files" in run_cli(wheel_env, "sinks").stdout


def test_third_party_sink_written_by_a_query(spark_cluster, wheel_env, tmp_path):
    work, db = tmp_path / "work", tmp_path / "out.db"
    expected = write_source(work)
    job = single_job(
        spark_cluster, "sqlite", {"path": str(db)}, "foreach_batch", **spark_cluster.spark_conf()
    )
    assert start_driver(work, job).wait(timeout=600) == 0, last_log(work)

    status = json.loads(run_cli(wheel_env, "status", "sqlite", str(db), "--json").stdout)
    assert [(w["writer_id"], w["batch_id"]) for w in status["writers"]] == [("orders", FILES - 1)]
    assert status["details"]["batches"] == FILES
    verified = json.loads(run_cli(wheel_env, "verify", "sqlite", str(db), "--json").stdout)
    assert verified["ok"] and verified["checked"] == FILES

    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM events WHERE id = ?", (expected[0],))
    broken = run_cli(wheel_env, "verify", "sqlite", str(db), check_exit=1).stdout
    assert "1 problem" in broken
    refused = run_cli(wheel_env, "cleanup", "sqlite", str(db), check_exit=2)
    assert "does not support `eosink cleanup`" in refused.stderr
