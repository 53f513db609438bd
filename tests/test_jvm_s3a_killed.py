"""eosink-files on S3 with a live query, its checkpoint on S3 through S3A: the query's process is
killed (SIGKILL) in the middle of a batch and started again from its checkpoint. The output is
then read by Spark's own reader straight from ``s3a://`` (its file source honours
``_spark_metadata``) and, independently, by s3fs and pyarrow following the manifest by hand:
every source id exactly once, though the killed attempt left its files in the folder.

The store is the loopback S3 server (``eosink.testing.s3``, moto in a child process), one for
the file; Spark reaches it with hadoop-aws (3rdparty/jvm/artifacts.txt's ``s3a`` set, built
for the Hadoop client of the project's pyspark), the sink with s3fs.

One front door, the data source's: its writer plans and commits each batch in Spark's Python
workers from the checkpoint Spark keeps on S3, which no other test drives with a live query
(``tests/test_datasource_checkpoint_s3.py`` plans batches from an S3 checkpoint without one).
The foreachBatch door's output on S3, killed and restarted, is ``sink-files``'
``test_killed_mid_batch_then_restarted_on_s3``; its checkpoint is Spark's, the same for both
doors. (Each run costs minutes: S3A's checkpoint writes are many requests to the loopback server.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
import pyarrow.parquet as pq
import pytest
import s3fs

from eosink.testing.jvm import spark_jars
from eosink.testing.killed_query import QueryJob, QueryProcesses
from eosink.testing.replay import assert_exactly, write_json_source
from eosink.testing.s3 import S3Bucket, S3Endpoint, s3_server
from eosink.testing.spark import local_spark

#: Source files, one a batch (ids ``n * 1000 + i``); the query stalls in the second, the last:
#: one batch committed before the kill, one batch after the restart (each costs seconds on S3).
FILES, STALL_ID = 2, 1_150


@pytest.fixture(scope="module")
def endpoint() -> Iterator[S3Endpoint]:
    with s3_server() as served:
        yield served


@pytest.fixture(scope="module")
def spark_settings(endpoint: S3Endpoint) -> dict[str, str]:
    """The query processes' and the reader's Spark settings: the S3A jars and the server."""
    return {**spark_jars("s3a"), **endpoint.spark_s3a_settings()}


@pytest.fixture
def bucket(endpoint: S3Endpoint) -> S3Bucket:
    return S3Bucket(endpoint, endpoint.create_bucket())


def manifest_files(fs: s3fs.S3FileSystem, folder: str) -> list[str]:
    """The files ``_spark_metadata`` lists (S3 keys), read as Spark's ``FileStreamSinkLog``
    reads it: the latest ``<id>.compact`` and the log files after it, ``add`` less ``delete``,
    folders (``isDir``, where eosink keeps its proof of a batch) left out.
    Written here from the format, without eosink's code."""
    entries = {}
    for key in fs.ls(f"{folder}/_spark_metadata", detail=False):
        name = key.rsplit("/", 1)[-1]
        if name.removesuffix(".compact").isdigit():
            entries[int(name.removesuffix(".compact"))] = key
    compacts = [i for i, key in entries.items() if key.endswith(".compact")]
    start = max(compacts, default=0)
    listed: dict[str, None] = {}
    for log_id in sorted(i for i in entries if i >= start):
        lines = fs.cat(entries[log_id]).decode().splitlines()
        assert lines[0] == "v1", f"{entries[log_id]}: {lines[0]!r}"
        for line in lines[1:]:
            entry = json.loads(line)
            path = entry["path"]
            if entry["isDir"]:
                continue
            assert path.startswith("s3a://"), path  # what Spark reads them with
            if entry["action"] == "delete":
                listed.pop(path, None)
            else:
                listed[path] = None
    return [path.removeprefix("s3a://") for path in listed]


def test_query_on_s3_killed_mid_batch_and_restarted(bucket, spark_settings, tmp_path):
    endpoint = bucket.endpoint
    expected = write_json_source(tmp_path / "in", files=FILES)
    out = bucket.uri("out")
    storage = endpoint.fsspec_options()
    job = QueryJob(
        sink="files",
        door="data_source",
        source_options={
            "path": out,
            "storage.key": endpoint.access_key,
            "storage.secret": endpoint.secret_key,
            "storage.client_kwargs.endpoint_url": endpoint.url,
            "storage.client_kwargs.region_name": endpoint.region,
        },
        stall={"id": STALL_ID},
        checkpoint=bucket.uri("ckpt", scheme="s3a"),
        spark=spark_settings,
    )
    # no listings cached: the folder is listed again after the restart
    fs = s3fs.S3FileSystem(**storage, use_listings_cache=False, skip_instance_cache=True)
    folder = f"{bucket.name}/out"

    def parquet_files() -> set[str]:
        return {key for key in fs.find(folder) if key.endswith(".parquet")}

    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        committed_before = manifest_files(fs, folder)
        orphans = parquet_files() - set(committed_before)
        queries.restart(job)

    # the checkpoint is on S3 (Spark's offsets and commits, through S3A), none on local disk
    commits = [k.rsplit("/", 1)[-1] for k in fs.ls(f"{bucket.name}/ckpt/commits", detail=False)]
    assert sorted(int(name) for name in commits if name.isdigit()) == list(range(FILES))
    assert not (tmp_path / "ckpt").exists()
    # the killed attempt wrote a file of its batch that the manifest never listed
    assert orphans, "the killed attempt left no file behind: the kill was not mid-batch"
    listed = manifest_files(fs, folder)
    assert orphans.isdisjoint(listed)

    # Spark's own reader, straight from S3 through S3A, honouring _spark_metadata (this
    # process's Spark: started after the query, so that the two JVMs do not share the cores)
    reader = local_spark(**spark_settings)
    ids = reader.read.parquet(bucket.uri("out", scheme="s3a")).select("id").collect()
    assert_exactly([row.id for row in ids], expected)
    # s3fs and pyarrow, following the manifest by hand
    tables = [pq.read_table(key, filesystem=fs, columns=["id"]) for key in listed]
    assert_exactly([i for t in tables for i in t.column("id").to_pylist()], expected)
    # the folder read whole holds the killed attempt's rows too: only the manifest tells
    everything = [pq.read_table(k, filesystem=fs, columns=["id"]) for k in parquet_files()]
    assert sum(t.num_rows for t in everything) > len(expected)
