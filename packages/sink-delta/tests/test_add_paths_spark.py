"""Add paths of both file writers: delta-rs' own encoding, and URIs the JVM's readers parse.

Delta's Spark reader turns an add path into a file with ``new Path(new URI(path))``: every
path must parse as a ``java.net.URI``, and its decoded path must be the file on disk.
"""

from __future__ import annotations

import os

import pytest
from add_paths import ODD_VALUES, delta_rs_folders, folders_by_value, odd_rows
from deltalake import DeltaTable
from delta_helpers import log_actions

import eosink


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


@pytest.mark.parametrize("file_writer", ["arrow", "spark"])
def test_add_paths_parse_in_the_jvm_and_equal_delta_rs(spark, tmp_path, file_writer):
    path = str(tmp_path / "table")
    df = spark.createDataFrame(odd_rows().to_pandas()).repartition(1)
    sink = eosink.sink("delta", path=path, partition_by=["p"], file_writer=file_writer)
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert outcome.status == "committed"
    # Both writers write an empty partition string as null, which is what the protocol reads
    # it as (Spark's writer through Hive's default partition): it gets delta-rs' path for null.
    expected = {k: v for k, v in delta_rs_folders(str(tmp_path)).items() if k != ""}
    assert folders_by_value(path) == expected
    jvm = spark._jvm  # noqa: SLF001
    adds = [a["add"]["path"] for _v, a in log_actions(path) if "add" in a]
    assert len(adds) == len(expected)
    for add in adds:
        uri = jvm.java.net.URI(add)  # raises on a path that is not a URI
        hadoop = jvm.org.apache.hadoop.fs.Path(uri)
        assert not uri.isAbsolute() and not hadoop.isAbsolute()
        assert os.path.isfile(os.path.join(path, uri.getPath())), add
    back = DeltaTable(path).to_pyarrow_table().sort_by("id").to_pylist()
    reference = DeltaTable(str(tmp_path / "written-by-delta-rs")).to_pyarrow_table()
    assert back == reference.sort_by("id").to_pylist()
    assert len(back) == len(ODD_VALUES)
