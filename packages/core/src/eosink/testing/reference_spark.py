"""A reference engine on the Spark it was built for, beside the project's own Spark.

The project runs on pyspark 4.3; Delta's Spark connector 4.4 runs on Spark 4.2 (Maven Central
has no connector for 4.3 yet). So the connector runs in a process of its own: the python of
``build-support/spark-env`` (pyspark of that version and py4j, nothing else), with the jars of
sets of ``3rdparty/jvm/artifacts.txt`` (:func:`eosink.testing.jvm.jars`) in ``spark.jars``.
It reads and changes the tables eosink writes, as a user's Delta job would, and hands the
rows back as plain JSON values (:func:`eosink.testing.reference_spark_main.plain`)::

    results = run_reference(
        "4.2.0",
        ["delta"],
        [Read("delta", path, where="id > 3"), Sql(f"OPTIMIZE delta.`{path}`")],
        conf=DELTA_SESSION,
    )
    ids = [row["id"] for row in results[0].rows]

A :class:`Stream` step runs a streaming query of the engine's own sink over a folder of files
to the end of its input (a user's streaming job beside eosink's).

One call is one process and one JVM (a start costs ~10 s on these machines): a test hands
every step it needs at once, and they run in order in one session. The JVM maps the archive of
its Spark's classes (:mod:`eosink.testing.spark_class_archive`), written by the environment's
first call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from eosink.testing import reference_spark_main, spark_class_archive
from eosink.testing.jvm import JvmJarsError, jars, script

#: One call's limit: a JVM start, the steps, and on a fresh machine the environment's making
#: (a ~450 MB pyspark from the package index) and the jars' fetch are not in it.
RUN_TIMEOUT_S = 900
#: What the reference process must not inherit from the project's process: its Spark and its
#: Python path belong to pyspark 4.3.
FOREIGN_ENV = ("PYTHONPATH", "PYTHONHOME", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


@attrs.frozen
class Read:
    """``spark.read.format(format).options(**options).load(path)``, filtered by ``where``."""

    format: str
    path: str
    where: str | None = None
    options: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Sql:
    """A statement (``OPTIMIZE``, ``VACUUM``, ``ALTER TABLE``, ``DESCRIBE HISTORY``...)."""

    statement: str


@attrs.frozen
class Stream:
    """A streaming query of the engine's own sink over a folder of files, to the end of its
    input (``trigger(availableNow=True)``): ``spark.readStream.format(format)`` with ``schema``
    and ``options`` from ``source``, ``writeStream.format(sink)`` into the catalog table
    ``table``, its checkpoint at ``checkpoint``. Its rows: one per micro-batch it ran
    (``id``, ``runId``, ``batchId``, ``numInputRows``)."""

    source: str
    table: str
    checkpoint: str
    schema: str | None = None
    format: str = "json"
    sink: str = "iceberg"
    options: Mapping[str, str] = attrs.field(factory=dict)


def _request_step(step: Read | Sql | Stream) -> dict[str, Any]:
    if isinstance(step, Sql):
        return {"sql": step.statement}
    if isinstance(step, Stream):
        return {"stream": attrs.asdict(step)}
    return {"read": attrs.asdict(step)}


@attrs.frozen
class StepResult:
    rows: list[dict[str, Any]] | None
    error: str | None

    def ok(self) -> list[dict[str, Any]]:
        """The rows, or an AssertionError with the reference engine's error."""
        if self.error is not None:
            raise AssertionError(f"the reference engine failed: {self.error}")
        assert self.rows is not None
        return self.rows


def spark_python(version: str) -> str:
    """The python of the environment of Spark ``version``, made first if it is not yet."""
    done = subprocess.run(
        [str(script("spark-env")), version],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S * 2,
        env={**os.environ, "PYTHON": getattr(sys, "_base_executable", sys.executable)},
        check=False,
    )
    if done.returncode != 0:
        raise JvmJarsError(f"spark-env {version} failed:\n{done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def run_reference(
    version: str,
    jar_sets: Sequence[str],
    steps: Sequence[Read | Sql | Stream],
    conf: Mapping[str, str] | None = None,
) -> list[StepResult]:
    """Run ``steps`` in order in one session of Spark ``version`` with the jars of
    ``jar_sets``; each step's rows or error."""
    python = spark_python(version)
    paths = [path for name in jar_sets for path in jars(name)]
    # The environment's making keys its archive of Spark's classes.
    archive = spark_class_archive.archive_path(version, Path(python).parent.parent / "pyvenv.cfg")
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("PEX")}
    env.update({"PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC"})
    with (
        spark_class_archive.made_by_this_run(archive) as (java_options, archive_to),
        tempfile.TemporaryDirectory(prefix="eosink-reference-") as work,
    ):
        request = {
            "conf": {**(conf or {}), "spark.jars": ",".join(paths)},
            "java_options": java_options,
            "archive_to": archive_to,
            "steps": [_request_step(s) for s in steps],
        }
        request_path, result_path = os.path.join(work, "request"), os.path.join(work, "result")
        with open(request_path, "w") as f:
            json.dump(request, f)
        done = subprocess.run(
            [python, reference_spark_main.__file__, request_path, result_path],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            env=env,
            cwd=work,
            check=False,
        )
        if done.returncode != 0 or not os.path.exists(result_path):
            raise AssertionError(
                f"the reference Spark {version} did not run (exit {done.returncode}):\n"
                f"{done.stderr[-4000:]}"
            )
        with open(result_path) as f:
            result = json.load(f)
    assert result["version"] == version, f"asked for Spark {version}, ran {result['version']}"
    return [StepResult(rows=r.get("rows"), error=r.get("error")) for r in result["results"]]
