"""Scenarios on the Spark Delta's connector is built for, in a process of their own.

The project's pyspark (4.3) cannot run Delta 4.4's code, so a test that needs Delta's own Spark
code (its engine, its streaming sink) runs its scenarios in one child process of Spark 4.2
(:mod:`eosink.testing.spark_child`), one JVM for every scenario, with Delta's jars and the
session settings below. The child modules (``delta_spark_engine_runs.py``,
``delta_streaming_helpers.py``) define ``run(spark, name, folder)``; the parent judges.
"""

from __future__ import annotations

from typing import Any

from eosink.testing.spark_child import run_scenarios as run_child
from eosink.testing.spark_child import scenario

__all__ = ["DELTA_CONF", "DELTA_SPARK_VERSION", "run_scenarios", "scenario"]

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


def run_scenarios(child: str, scenarios: list[str], root: str) -> dict[str, Any]:
    """Run ``scenarios`` of the child module at path ``child`` in one Spark 4.2 process with
    Delta's jars; its results by scenario."""
    return run_child(
        child, DELTA_SPARK_VERSION, scenarios, root, jar_sets=["delta"], conf=DELTA_CONF
    )
