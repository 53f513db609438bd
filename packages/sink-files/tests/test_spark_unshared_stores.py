"""Under real Spark, a store the executors do not share with the driver never gets a proof.

Spark runs the write tasks in its executors' Python workers, other processes even with
``local[N]``: files they write into ``memory://`` exist only there. The sink refuses such a
store at ``init``; and should a store still hide the executors' files from the driver (a
"local" path that is not one shared folder), the commit's check refuses to publish them.
"""

from __future__ import annotations

import pytest

import eosink
from eosink import ConfigurationError
from eosink_files import sink as sink_module
from eosink_files.manifest_commit import UnreadableFilesError


def batch(spark):
    return spark.range(0, 20, numPartitions=2).selectExpr("id", "cast(id as string) as name")


def test_memory_store_is_refused_at_init(spark, memory_url):
    sink = eosink.sink("files", path=memory_url, file_writer="arrow")
    with pytest.raises(ConfigurationError, match="memory:// lives in one process.*shared mount"):
        eosink.write_batch(batch(spark), sink, writer_id="w", version=1)


def test_commit_refuses_files_only_the_executors_see(spark, memory_url, monkeypatch):
    import fsspec

    monkeypatch.setattr(sink_module, "in_spark_application", lambda: False)  # the init check off
    sink = eosink.sink("files", path=memory_url, file_writer="arrow")
    with pytest.raises(UnreadableFilesError, match="is missing.*memory://"):
        eosink.write_batch(batch(spark), sink, writer_id="w", version=1)
    fs = fsspec.filesystem("memory")
    root = memory_url[len("memory://") :]
    assert not fs.exists(f"{root}/_spark_metadata/0")  # no proof over files nobody can read
