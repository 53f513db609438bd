"""Scenarios on the Spark Delta's connector is built for, in a process of their own.

The project's pyspark (4.3) cannot run Delta 4.4's code, so a test that needs Delta's own Spark
code (its engine, its streaming sink) runs its scenarios in one child process on the python of
``build-support/spark-env 4.2.0`` (pyspark 4.2 and py4j), with the parent's import path
appended after that environment's own (eosink, deltalake, pyarrow... come from the parent;
pyspark from 4.2's environment, which is searched first), one JVM for every scenario::

    python CHILD.py REQUEST.json RESULT.json

The request names the scenarios, a scratch folder and the parent's ``sys.path``; the result
holds, per scenario, what it observed (plain JSON values) or the error it met. The parent
judges. Parent side: :func:`run_scenarios`, :func:`scenario`; child side: :func:`serve`.
This module imports nothing but the standard library at its top: the child imports it before
it extends its path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

#: The Spark line Delta's connector of the ``delta`` jar set is built for (Delta 4.4).
DELTA_SPARK_VERSION = "4.2.0"
#: Delta 4.4's session, as its documentation sets one up, kept small for one local test JVM:
#: one snapshot partition instead of 50, no progress bars.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.shuffle.partitions": "1",
    "spark.ui.showConsoleProgress": "false",
}


# -- the parent ---------------------------------------------------------------------------------
def run_scenarios(child: str, scenarios: list[str], root: str) -> dict[str, Any]:
    """Run ``scenarios`` of the child module at path ``child`` in one process; its results."""
    from eosink.testing.reference_spark import FOREIGN_ENV, RUN_TIMEOUT_S, spark_python

    python = spark_python(DELTA_SPARK_VERSION)
    request, result = os.path.join(root, "request.json"), os.path.join(root, "result.json")
    # absolute: under Pants the sources' entries are relative to the sandbox, and the child
    # runs in a folder of its own
    path = [os.path.abspath(p) for p in sys.path if p]
    with open(request, "w") as f:
        json.dump({"scenarios": scenarios, "root": root, "sys_path": path}, f)
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("PEX")}
    env.update({"PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    done = subprocess.run(
        [python, child, request, result],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=env,
        cwd=root,
        check=False,
    )
    if done.returncode != 0 or not os.path.exists(result):
        raise AssertionError(
            f"the scenarios' process failed ({done.returncode}):\n{done.stderr[-6000:]}"
        )
    with open(result) as f:
        out = json.load(f)
    assert out["pyspark"] == DELTA_SPARK_VERSION
    return out


def scenario(runs: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One scenario's result; fails the test with the child's error if it raised one."""
    result = runs[name]
    assert "failed" not in result, f"{result['failed']}\n{result.get('traceback', '')}"
    return result


# -- the child ----------------------------------------------------------------------------------
def error_of(error: BaseException) -> dict[str, str]:
    """The error's type and message; of a long one (a Python traceback inside a Spark error)
    its start and its end, where the error raised in Python is."""
    message = str(error)
    if len(message) > 4000:
        message = message[:1000] + " [...] " + message[-3000:]
    return {"type": type(error).__name__, "message": message}


def serve(
    run: Callable[[Any, str, str], dict[str, Any]], conf: Mapping[str, str] | None = None
) -> None:
    """The child's main: ``run(spark, name, folder)`` for each scenario of the request (in a
    fresh folder of its own; an error it raises is the scenario's result), in one session
    with Delta's jars and ``conf``, eosink's data sources registered."""
    request_path, result_path = sys.argv[1:3]
    with open(request_path) as f:
        request = json.load(f)
    sys.path.extend(p for p in request["sys_path"] if p not in sys.path)
    import eosink
    from eosink.testing.jvm import spark_jars
    from eosink.testing.spark import local_spark

    # The Python workers (the data-source door writes there) import what the driver imports:
    # this environment's pyspark first, then the parent's path.
    workers = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    started = time.monotonic()
    spark = local_spark(
        **spark_jars("delta"),
        **DELTA_CONF,
        **(conf or {}),
        **{"spark.executorEnv.PYTHONPATH": workers},
    )
    spark.sparkContext.setLogLevel("ERROR")
    eosink.register_data_sources(spark)
    results: dict[str, Any] = {"pyspark": spark.version, "start_s": time.monotonic() - started}
    for name in request["scenarios"]:
        folder = os.path.join(request["root"], name.replace(":", "_"))
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        began = time.monotonic()
        try:
            result = run(spark, name, folder)
        except Exception as error:  # noqa: BLE001 - the parent judges it
            result = {"failed": error_of(error), "traceback": traceback.format_exc()[-6000:]}
        for query in spark.streams.active:
            query.stop()
        result["seconds"] = round(time.monotonic() - began, 1)
        results[name] = result
    results["total_s"] = time.monotonic() - started
    with open(result_path, "w") as f:
        json.dump(results, f)
    spark.stop()
