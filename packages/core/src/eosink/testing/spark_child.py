"""Scenarios on another Spark than the project's, in one process of their own.

A reference engine built for an older Spark (Delta 4.4 for Spark 4.2, Iceberg 1.12 for Spark
4.1) cannot run in the project's pyspark (4.3). A test or a benchmark that needs the engine's
own Spark code beside eosink (its streaming sink, its MERGE, eosink's doors in the same session)
runs its scenarios in a child process on the python of ``build-support/spark-env VERSION``
(pyspark of that version and py4j), with the parent's import path appended after that
environment's own: eosink, deltalake, pyarrow... come from the parent, pyspark from the
environment, which is searched first. One JVM serves every scenario of a call::

    runs = run_scenarios(child_module.__file__, "4.2.0", ["a", "b"], root, jar_sets=["delta"])
    result = scenario(runs, "a")

The child module defines ``run(spark, name, folder) -> dict`` (plain JSON values: what it
observed) and may define ``CONF`` (its session's settings). This file is the child's main: it
imports nothing but the standard library at its top, extends its path from the request, loads
the child module by its file, starts one session (the jars of ``jar_sets``, fetched by the
parent from the repository it runs in, the request's and
the module's settings, eosink's data sources registered) and runs each scenario in a fresh
folder. The parent judges what came back.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any


# -- the parent ---------------------------------------------------------------------------------
def run_scenarios(
    child: str,
    version: str,
    scenarios: Sequence[str],
    root: str,
    jar_sets: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Run ``scenarios`` of the child module at path ``child`` on Spark ``version``, in one
    process; its results by scenario (and ``pyspark``, ``start_s``, ``total_s``)."""
    from eosink.testing.jvm import jars
    from eosink.testing.reference_spark import FOREIGN_ENV, RUN_TIMEOUT_S, spark_python

    python = spark_python(version)
    # fetched here, in the repository the caller runs from: the child runs in a scratch folder
    paths = [path for name in jar_sets for path in jars(name)]
    request, result = os.path.join(root, "request.json"), os.path.join(root, "result.json")
    # absolute: under Pants the sources' entries are relative to the sandbox, and the child
    # runs in a folder of its own
    path = [os.path.abspath(p) for p in sys.path if p]
    with open(request, "w") as f:
        json.dump(
            {
                "child": os.path.abspath(child),
                "scenarios": list(scenarios),
                "root": root,
                "sys_path": path,
                "jars": paths,
                "conf": dict(conf or {}),
            },
            f,
        )
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("PEX")}
    env.update({"PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    done = subprocess.run(
        # -P: this file's folder is not put on the path, where its modules (``secrets``...)
        # would shadow the standard library's for everything the child imports
        [python, "-P", os.path.abspath(__file__), request, result],
        capture_output=True,
        text=True,
        timeout=timeout_s or RUN_TIMEOUT_S,
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
    assert out["pyspark"] == version, f"asked for Spark {version}, ran {out['pyspark']}"
    return out


def scenario(runs: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One scenario's result; fails with the child's error if it raised one."""
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


def _load(child: str) -> Any:
    # the child's siblings (its helpers) import as they do in the parent's tests
    sys.path.append(os.path.dirname(child))
    spec = importlib.util.spec_from_file_location(
        os.path.splitext(os.path.basename(child))[0], child
    )
    assert spec is not None and spec.loader is not None, child
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(request_path: str, result_path: str) -> None:
    with open(request_path) as f:
        request = json.load(f)
    sys.path.extend(p for p in request["sys_path"] if p not in sys.path)
    child = _load(request["child"])
    import eosink
    from eosink.testing.spark import local_spark

    # The Python workers (the data-source doors write there) import what the driver imports:
    # this environment's pyspark first, then the parent's path.
    workers = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    # ... and so do the processes the session's start runs (the archive of Spark's classes)
    os.environ["PYTHONPATH"] = workers
    jar_conf = {"spark.jars": ",".join(request["jars"])} if request["jars"] else {}
    started = time.monotonic()
    spark = local_spark(
        **jar_conf,
        **request["conf"],
        **getattr(child, "CONF", {}),
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
            result = child.run(spark, name, folder)
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


if __name__ == "__main__":
    main(*sys.argv[1:3])
