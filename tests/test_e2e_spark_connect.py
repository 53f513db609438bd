"""Both front doors through Spark Connect: a local Connect server, a client in another process.

On Connect a ``foreachBatch`` function cannot see its query's id; given the checkpoint, eosink
reads it there, so a new checkpoint pointed at old output fails as loudly as on classic Spark.

The client runs in a subprocess of its own because a process holds either a classic or a
Connect session, and the other Spark tests share this process's classic one. The server's
Python workers import eosink and the sinks from this test's environment (PYTHONPATH), as a
real deployment installs them into the server's environment.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from eosink_sqlite.sink import read_rows


CLASSIC_SESSION_ENV = {
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "SPARK_AUTH_SOCKET_TIMEOUT",
    "SPARK_BUFFER_SIZE",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def connect_server(tmp_path):
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    port = free_port()
    for folder in ("logs", "pids", "conf", "work"):
        (tmp_path / folder).mkdir()
    # Without what a classic session of this process put into the environment for its own JVM
    # and workers (Spark tests share one process): the server starts its own.
    inherited = {k: v for k, v in os.environ.items() if k not in CLASSIC_SESSION_ENV}
    env = dict(
        inherited,
        SPARK_HOME=home,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp_path / "logs"),
        SPARK_PID_DIR=str(tmp_path / "pids"),
        SPARK_CONF_DIR=str(tmp_path / "conf"),
        PYSPARK_PYTHON=sys.executable,
        # absolute: the server and its workers run from other working directories
        PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p),
    )
    server = subprocess.Popen(
        [
            os.path.join(home, "bin", "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            "local[2]",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.local.dir={tmp_path / 'work'}",
            "--conf",
            f"spark.driver.extraJavaOptions=-Duser.home={tmp_path / 'work'}",
            "spark-internal",
        ],
        env=env,
        stdout=open(tmp_path / "server.log", "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log = (tmp_path / "server.log").read_text()[-2000:]
                    pytest.fail(f"Spark Connect server did not start: {log}")
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", env
    finally:
        server.terminate()
        server.wait(30)


WORKER_TIMEOUT = "Python worker failed to connect back"

CLIENT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    import eosink

    remote, source, root = sys.argv[1:4]
    spark = SparkSession.builder.remote(remote).getOrCreate()
    assert spark.version.startswith("4"), spark.version
    df = spark.readStream.schema("id long, name string") \\
        .option("maxFilesPerTrigger", 1).json(source)

    def foreach_batch(location, **identity):
        writer = eosink.foreach_batch(
            eosink.sink("sqlite", path=root + "/fb.db"), writer_id="orders", **identity
        )
        df.writeStream.foreachBatch(writer).option("checkpointLocation", location) \\
            .trigger(availableNow=True).start().awaitTermination()

    def outcome(location, **identity):
        try:
            foreach_batch(location, **identity)
        except Exception as error:
            return str(error)
        return "no error"

    for _ in range(2):  # the second run finds nothing new: Spark's own checkpoint at work
        foreach_batch(root + "/ck-fb", checkpoint=root + "/ck-fb")
    # a new checkpoint pointed at this writer's output fails loudly, as on classic Spark
    # (without checkpoint= eosink refuses to run on Connect: packages/core/tests)
    print("new checkpoint:", "new writer id" in outcome(root + "/ck-2", checkpoint=root + "/ck-2"))

    eosink.register_data_sources(spark)
    df.writeStream.format("eosink-sqlite").option("writerId", "orders") \\
        .option("path", root + "/ds.db").option("checkpointLocation", root + "/ck-ds") \\
        .trigger(availableNow=True).start().awaitTermination()
    spark.stop()
    print("client done")
    """
)


def test_both_front_doors_through_spark_connect(connect_server, tmp_path):
    remote, env = connect_server
    source = tmp_path / "in"
    source.mkdir()
    expected = []
    for n in range(3):
        with open(source / f"part-{n}.json", "w") as f:
            for i in range(100):
                expected.append(n * 1000 + i)
                f.write(json.dumps({"id": n * 1000 + i, "name": f"r{i}"}) + "\n")
    for attempt in range(3):
        root = tmp_path / f"run-{attempt}"
        root.mkdir()
        run = subprocess.run(
            [sys.executable, "-c", CLIENT, remote, str(source), str(root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        # Spark waits a fixed 10 s for the Python worker of a foreachBatch query to start; on a
        # loaded machine it may not: that is the machine, not eosink, so the client runs again.
        if WORKER_TIMEOUT not in run.stderr:
            break
    assert run.returncode == 0 and "client done" in run.stdout, run.stderr[-3000:]
    assert "new checkpoint: True" in run.stdout, run.stdout
    for db in ("fb.db", "ds.db"):
        held = sorted(r["id"] for r in read_rows(str(root / db)))
        assert held == sorted(expected), f"{db}: {len(held)} rows; client log: {run.stderr[-3000:]}"
