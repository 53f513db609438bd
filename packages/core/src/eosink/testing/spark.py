"""A local SparkSession for tests: quiet, private directories, this Python on the executors."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any


def local_spark(cores: int = 2, **conf: str) -> Any:
    """Start (or reuse) a local SparkSession set up for tests of sinks."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    scratch = tempfile.mkdtemp(prefix="eosink-spark-")
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("eosink-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", scratch)
        .config("spark.jars.ivy", os.path.join(scratch, "ivy"))
        .config("spark.driver.extraJavaOptions", f"-Duser.home={scratch}")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
