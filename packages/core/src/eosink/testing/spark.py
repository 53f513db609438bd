"""A local SparkSession for tests: quiet, private directories, this Python on the executors."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any


def local_spark(
    cores: int = 2, *, java_options: str = "", class_archive: bool = True, **conf: str
) -> Any:
    """Start (or reuse) a local SparkSession set up for tests of sinks.

    ``java_options``: more options of the driver's JVM. ``class_archive``: map the archive of
    Spark's classes (:mod:`eosink.testing.spark_class_archive`; nothing unless its folder is
    set), which saves most of a JVM's start.
    """
    from eosink.testing import spark_class_archive

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    scratch = tempfile.mkdtemp(prefix="eosink-spark-")
    # A running session is reused as it is: no archive to look up (or make) for it.
    fresh = SparkSession.getActiveSession() is None
    archive = spark_class_archive.java_options() if class_archive and fresh else ""
    options = " ".join(o for o in (f"-Duser.home={scratch}", archive, java_options) if o)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("eosink-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", scratch)
        .config("spark.jars.ivy", os.path.join(scratch, "ivy"))
        .config("spark.driver.extraJavaOptions", options)
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
