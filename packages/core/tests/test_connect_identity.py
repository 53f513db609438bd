"""On Spark Connect a foreachBatch function cannot see its query: eosink needs the checkpoint.

The end-to-end proof runs on a local Connect server (tests/test_e2e_spark_connect.py); here the
refusals, without a server: a batch whose session has no SparkContext is what Connect hands over.
"""

import json

import pytest
from sample_sinks import MemorySink

import eosink
from eosink.spark.foreach_batch import declared_query


class ConnectBatch:
    """What Spark Connect's foreachBatch worker hands over, as far as eosink looks."""

    @property
    def sparkSession(self):  # noqa: N802 - Spark's name
        return self

    @property
    def sparkContext(self):  # noqa: N802
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported")


def test_connect_without_checkpoint_is_refused_naming_the_fix():
    writer = eosink.foreach_batch(MemorySink(name="connect-1"), writer_id="orders")
    with pytest.raises(eosink.ConfigurationError, match="checkpoint=<the checkpointLocation"):
        writer(ConnectBatch(), 0)


def test_connect_checkpoint_without_metadata_is_refused(tmp_path):
    writer = eosink.foreach_batch(
        MemorySink(name="connect-2"), writer_id="orders", checkpoint=str(tmp_path)
    )
    with pytest.raises(eosink.ConfigurationError, match="holds no query metadata"):
        writer(ConnectBatch(), 0)


def test_connect_query_id_is_read_from_the_checkpoint(tmp_path):
    (tmp_path / "metadata").write_text(json.dumps({"id": "query-1"}))
    query = declared_query(str(tmp_path), "orders")
    assert (query.id, query.checkpoint) == ("query-1", str(tmp_path))
