"""What the delta-spark engine refuses, and how, checked without a Spark (the engine's own
runs are in test_jvm_*.py).

Found when Delta's connector was tried on eosink's engine: a column-mapped table (name, id,
UniForm) was refused with the delta-rs engine's message, which tells the user to use
``engine='delta-spark'``, the engine in use, though Delta's own writer maps columns itself; and
a row breaking a CHECK or NOT NULL constraint came back as a raw ``Py4JJavaError``.
"""

from __future__ import annotations

import pytest
from eosink_delta.delta_spark import constraint_violation
from eosink_delta.table import check_table_features

from eosink.plugin import ConfigurationError


@pytest.mark.parametrize("mapping", ["name", "id"])
def test_column_mapping_is_delta_sparks_own_business(mapping):
    config = {"delta.columnMapping.mode": mapping}
    check_table_features("/t", config, engine="delta-spark", mode="append")
    with pytest.raises(ConfigurationError, match="engine='delta-spark'"):
        check_table_features("/t", config, engine="delta-rs", mode="append")


# Delta 4.4's messages (error/delta-error-classes.json in delta-spark_2.13-4.4.0.jar), as the
# driver sees them: the task's error inside Spark's "Job aborted" error, through py4j.
CHECK = (
    "An error occurred while calling o123.save.\n: org.apache.spark.SparkException: Job aborted "
    "due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task "
    "0.0 in stage 3.0 (TID 3) (127.0.0.1 executor driver): "
    "com.databricks.sql.transaction.tahoe.schema.DeltaInvariantViolationException: "
    "[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK constraint positive (id > 0) violated by row "
    "with values:\n - id : -1\n\tat org.apache.spark.sql.delta.schema.X.apply(X.scala:1)\n"
)
NOT_NULL = (
    "An error occurred while calling o77.save.\n: org.apache.spark.SparkException: Job aborted "
    "due to stage failure: ... org.apache.spark.sql.delta.schema.DeltaInvariantViolationException"
    ": [DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for column: name.\n"
    "\tat org.apache.spark.sql.delta.X(X.scala:1)\n"
)


def test_a_row_breaking_a_constraint_is_named():
    assert constraint_violation(RuntimeError(CHECK)) == (
        "CHECK constraint positive (id > 0) violated by row with values: - id : -1"
    )
    assert constraint_violation(RuntimeError(NOT_NULL)) == (
        "NOT NULL constraint violated for column: name."
    )
    assert constraint_violation(RuntimeError("Job aborted: disk full")) is None
