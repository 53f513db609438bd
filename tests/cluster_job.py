"""Streaming queries on the standalone cluster, run as their own process (a driver a test can kill).

Usage: ``python -m cluster_job <job.json>``, where the JSON holds ``master`` (the cluster's
URL), ``work`` (a folder with ``in/``: one JSON file per micro-batch), ``conf`` (more Spark
settings) and ``targets``: one query per target, all at once in this driver, each with its
``name``, ``sink``, ``door`` (``foreach_batch`` or ``data_source``), ``options`` (the sink's,
as strings) and, for the files sink, ``read_back`` (where to write the ids that
Spark's own reader finds in the target after the queries end). A files target on an object
store is read from a local copy whose manifest names the copy's files (this Spark has no
S3 filesystem): :func:`local_copy`.

Stalls: while ``<work>/armed`` holds an id, the task of each query whose rows contain it writes
``<work>/reached-<query name>-<id>`` (``pid=<its Python worker's pid>``) and waits, so a test
can kill the driver or that task's worker in the middle of the batch.
"""

from __future__ import annotations

import json
import os
import sys
import time

SCHEMA = "id long, name string, tablet_index long, row_index long"


def _armed(work: str) -> int | None:
    try:
        with open(os.path.join(work, "armed")) as f:
            return int(f.read().strip() or -1)
    except (OSError, ValueError):
        return None


def stall(work: str, name: str):
    def apply(batches):
        for batch in batches:
            armed = _armed(work)
            if armed is not None and armed in batch.column("id").to_pylist():
                with open(os.path.join(work, f"reached-{name}-{armed}"), "w") as f:
                    f.write(f"pid={os.getpid()}")
                while _armed(work) == armed:
                    time.sleep(0.2)
            yield batch

    return apply


def start_query(spark, work: str, target: dict):
    import eosink

    name, sink, door, options = target["name"], target["sink"], target["door"], target["options"]
    df = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(os.path.join(work, "in"))
        .repartition(2)
    )
    df = df.mapInArrow(stall(work, name), df.schema)
    if door == "foreach_batch":
        writer = df.writeStream.foreachBatch(
            eosink.foreach_batch(eosink.sink(sink, **options), writer_id="orders")
        )
    else:
        writer = df.writeStream.format(f"eosink-{sink}").option("writerId", "orders")
        for key, value in options.items():
            writer = writer.option(key, value)
    checkpoint = os.path.join(work, "ckpt", name)
    return writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()


def local_copy(path: str, options: dict, dest: str) -> str:
    """A copy of the files sink's folder ``path`` (an object store) in the local folder ``dest``,
    for Spark's reader. Only the manifest's URI prefix changes (``s3a://<bucket>/<folder>`` to
    ``file://<dest>``): which files each log file lists, and how the compacts read, stay."""
    import fsspec
    from eosink_files.options import fsspec_options

    storage = fsspec_options({k[len("storage.") :]: v for k, v in options.items() if "." in k})
    fs, root = fsspec.core.url_to_fs(path, skip_instance_cache=True, **storage)
    root = root.rstrip("/")
    spark_prefix, local_prefix = f"s3a://{root}".encode(), f"file://{dest}".encode()
    for key in fs.find(root):
        relpath = key[len(root) :].lstrip("/")
        data = fs.cat_file(key)
        if relpath.startswith("_spark_metadata/"):
            data = data.replace(spark_prefix, local_prefix)
        os.makedirs(os.path.dirname(os.path.join(dest, relpath)), exist_ok=True)
        with open(os.path.join(dest, relpath), "wb") as f:
            f.write(data)
    return dest


def main(config_path: str) -> None:
    with open(config_path) as f:
        job = json.load(f)
    import eosink
    from eosink.testing.spark import local_spark

    work = job["work"]
    spark = local_spark(**{"spark.master": job["master"], **job.get("conf", {})})
    if any(target["door"] == "data_source" for target in job["targets"]):
        eosink.register_data_sources(spark)
    queries = [start_query(spark, work, target) for target in job["targets"]]
    for query in queries:
        query.awaitTermination()
    for target in job["targets"]:
        if target.get("read_back"):
            path = target["options"]["path"]
            if "://" in path:
                path = local_copy(path, target["options"], os.path.join(work, "copy-of-target"))
            ids = [r.id for r in spark.read.parquet(path).select("id").collect()]
            with open(target["read_back"], "w") as f:
                json.dump(ids, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
