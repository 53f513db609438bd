"""Whether this process belongs to a Spark application, for stores only one process can see.

``memory://`` lives inside one Python process. Under Spark the write tasks run in other
processes (the executors' Python workers, even with ``local[N]``), so the driver would never
see their files; only a runner that writes in the driver's own process (the conformance kit's
``LocalRunner``) can use it. The sink refuses it at ``init`` when this says Spark is here.
"""

from __future__ import annotations

import os
import sys

#: Set by Spark in the environment of every Python process it starts (executors' workers,
#: the data source's planning and commit workers, Spark Connect's foreachBatch runner).
WORKER_VARIABLES = ("PYTHON_WORKER_FACTORY_SECRET", "SPARK_PYTHON_RUNTIME")


def in_spark_application() -> bool:
    """A Python worker Spark started, or a driver with a live classic or Connect session."""
    if any(os.environ.get(name) for name in WORKER_VARIABLES):
        return True
    if "pyspark" not in sys.modules:  # nothing of Spark was imported: no session can exist
        return False
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        return True
    connect = sys.modules.get("pyspark.sql.connect.session")
    return connect is not None and connect.SparkSession._get_default_session() is not None
