"""The archive of Spark's classes (eosink.testing.spark_class_archive) is mapped by the local
Spark JVMs of the tests: a JVM started through ``local_spark`` takes most of its classes from it.
If the archive stopped matching (another key than the jars' install, a JVM that refuses it),
the JVMs would silently load every class again and the suite would only get slower: this test
is what notices."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from eosink.testing import spark_class_archive

STARTS_A_SPARK = """
import sys
from eosink.testing.spark import local_spark
spark = local_spark(java_options=f"-Xlog:class+load=info:file={sys.argv[1]}")
spark.range(3).collect()
spark.stop()
"""


def test_a_local_spark_maps_the_archive_of_sparks_classes(tmp_path):
    folder = os.environ.get(spark_class_archive.ENV)
    if not folder:
        pytest.skip(f"{spark_class_archive.ENV} is not set (pants.toml sets it for the tests)")
    archive = spark_class_archive.local_archive()
    assert archive is not None, "no java found"
    spark_class_archive.make_once(archive, wait=True)
    assert archive.exists(), f"the archive was not made: {archive}"
    loaded = tmp_path / "loaded.txt"
    subprocess.run([sys.executable, "-c", STARTS_A_SPARK, str(loaded)], check=True, timeout=300)
    sources = loaded.read_text().splitlines()
    shared = sum("source: shared objects file (top)" in line for line in sources)
    assert shared > 10_000, f"{shared} of {len(sources)} classes from {archive}"
