"""End to end: a file-source streaming query into the files sink through both front doors.

A task of one micro-batch fails mid-batch (after the other task wrote its files) and stops the
query; the query restarts from its checkpoint, Spark replays the batch, and Spark's own
``spark.read.parquet`` returns exactly the source rows. A stray Parquet file dropped into the
folder is not read.
"""

from __future__ import annotations

import os
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eosink
from eosink_files import cleanup, committed_files, read_table
from eosink_files.cleanup import FOREIGN

ROWS_PER_FILE = 1000
FILES = 3
CRASH_ID = 1500  # a row of the second micro-batch


def write_source(folder) -> list[int]:
    os.makedirs(folder, exist_ok=True)
    ids = []
    for n in range(FILES):
        batch = list(range(n * ROWS_PER_FILE, (n + 1) * ROWS_PER_FILE))
        ids += batch
        pq.write_table(
            pa.table(
                {
                    "id": pa.array(batch, pa.int64()),
                    "name": [f"row-{i}" for i in batch],
                    "amount": [i / 4 for i in batch],
                }
            ),
            os.path.join(folder, f"input-{n:03d}.parquet"),
        )
    return ids


def crashing_stream(spark, source, marker):
    """The source stream, with a UDF that fails one task once while ``marker`` exists."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    def maybe_crash(value):
        if value == CRASH_ID and os.path.exists(marker):
            os.unlink(marker)
            raise RuntimeError("injected crash in the middle of a micro-batch")
        return value

    crash = F.udf(maybe_crash, LongType())
    schema = "id long, name string, amount double"
    return (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .repartition(2)
        .withColumn("id", crash("id"))
    )


def run_until_done(start, restarts=2):
    """Start the query; after a failure restart it from the same checkpoint."""
    failures = 0
    for _ in range(restarts + 1):
        query = start()
        try:
            query.awaitTermination()
            return failures
        except Exception as exc:  # noqa: BLE001 - StreamingQueryException
            assert "injected crash" in str(exc)
            failures += 1
    raise AssertionError("the query did not finish")


def check_output(spark, out, expected_ids):
    # A stray Parquet file (with a row that would be a duplicate) dropped into the folder.
    pq.write_table(
        pa.table({"id": pa.array([0], pa.int64()), "name": ["stray"], "amount": [0.0]}),
        os.path.join(out, "stray.parquet"),
    )
    rows = spark.read.parquet(str(out)).select("id").collect()
    held = Counter(r.id for r in rows)
    duplicates = sum(n - 1 for n in held.values() if n > 1)
    lost = len(set(expected_ids) - set(held))
    assert (duplicates, lost, len(rows)) == (0, 0, len(expected_ids))
    # The reader helper agrees with Spark's reader.
    assert sorted(read_table(str(out)).column("id").to_pylist()) == sorted(expected_ids)
    assert all(not f.relpath.endswith("stray.parquet") for f in committed_files(str(out)))
    report = cleanup(str(out), older_than_s=0, dry_run=True)
    assert "stray.parquet" in report.paths(FOREIGN)


def written_by_spark(out) -> set[bool]:
    """For each committed file: was it written by Spark's own writer (the spark file writer)?"""
    return {
        b"org.apache.spark.version"
        in (pq.read_metadata(os.path.join(out, f.relpath)).metadata or {})
        for f in committed_files(str(out))
    }


@pytest.mark.parametrize("door", ["foreach_batch", "foreach_batch_arrow", "data_source"])
def test_killed_mid_batch_then_restarted(spark, tmp_path, door):
    source, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    expected = write_source(source)
    marker = tmp_path / "crash-once"
    marker.write_text("1")
    engine = "arrow" if door == "foreach_batch_arrow" else "auto"
    sink = eosink.sink("files", path=str(out), file_writer=engine)
    writer = eosink.foreach_batch(sink, writer_id="e2e")

    def start():
        stream = crashing_stream(spark, source, str(marker)).writeStream
        stream = stream.option("checkpointLocation", str(ckpt)).trigger(availableNow=True)
        if door.startswith("foreach_batch"):
            return stream.foreachBatch(writer).start()
        eosink.register_data_sources(spark)
        return (
            stream.format("eosink-files").option("writerId", "e2e").option("path", str(out)).start()
        )

    failures = run_until_done(start)
    assert failures == 1 and not marker.exists()
    check_output(spark, str(out), expected)
    assert written_by_spark(out) == {door == "foreach_batch"}  # auto picks spark for DataFrames
    assert not (out / "_eosink_staging").exists() or not os.listdir(out / "_eosink_staging")
    if door.startswith("foreach_batch"):
        assert writer.committed == FILES


def test_batch_job_versions_through_the_data_source(spark, tmp_path):
    out = str(tmp_path / "out")
    eosink.register_data_sources(spark)
    df = spark.range(0, 100).selectExpr("id", "cast(id as string) as name")
    for version in (7, 7, 5, 8):
        (
            df.where(f"id % 10 = {version % 10}")
            .write.format("eosink-files")
            .option("writerId", "daily")
            .option("version", version)
            .option("path", out)
            .mode("append")
            .save()
        )
    ids = sorted(r.id for r in spark.read.parquet(out).collect())
    assert ids == sorted(i for i in range(100) if i % 10 in (7, 8))


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_killed_mid_batch_then_restarted_on_s3(spark, tmp_path, s3_bucket, door):
    """The same on S3 (the loopback server), storage options given as a dict and as Spark's
    ``storage.<key>`` options; read back through the manifest over s3fs."""
    endpoint = s3_bucket.endpoint
    source, ckpt, out = tmp_path / "in", tmp_path / "ckpt", s3_bucket.uri("out")
    expected = write_source(source)
    marker = tmp_path / "crash-once"
    marker.write_text("1")
    storage = endpoint.fsspec_options()
    writer = eosink.foreach_batch(
        eosink.sink("files", path=out, storage_options=storage), writer_id="e2e"
    )
    spark_options = {
        "storage.key": endpoint.access_key,
        "storage.secret": endpoint.secret_key,
        "storage.client_kwargs.endpoint_url": endpoint.url,
        "storage.client_kwargs.region_name": endpoint.region,
    }

    def start():
        stream = crashing_stream(spark, source, str(marker)).writeStream
        stream = stream.option("checkpointLocation", str(ckpt)).trigger(availableNow=True)
        if door == "foreach_batch":
            return stream.foreachBatch(writer).start()
        eosink.register_data_sources(spark)
        stream = stream.format("eosink-files").option("writerId", "e2e").option("path", out)
        return stream.options(**spark_options).start()

    failures = run_until_done(start)
    assert failures == 1 and not marker.exists()
    ids = read_table(out, storage_options=storage).column("id").to_pylist()
    held = Counter(ids)
    assert (sum(n - 1 for n in held.values()), len(set(expected) - set(held))) == (0, 0)
    assert len(ids) == len(expected)
    listed = committed_files(out, storage_options=storage)
    assert all(f.uri.startswith(f"s3a://{s3_bucket.name}/out/part-") for f in listed)
    # Nothing but part files and the sink's own folders in the bucket (no probe left).
    report = cleanup(out, older_than_s=0, dry_run=True, storage_options=storage)
    assert not report.paths(FOREIGN)
