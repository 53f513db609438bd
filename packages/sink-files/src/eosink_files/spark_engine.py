"""The ``spark`` engine: Spark's own file writer stages the batch, the manifest publishes it.

Handing every row from the JVM to Python as Arrow costs more than Spark's file writer spends
on the whole write (``bench_throughput`` prints both), so where Spark can write the folder
itself the sink lets it:

1. Spark writes the batch (format, compression, ``partitionBy``) into this attempt's hidden
   staging folder, ``_eosink_staging/<attempt>``; an ``Observation`` counts the rows.
2. The driver moves the part files into their Hive folders. No manifest lists them yet, so
   Spark's reader and :mod:`eosink_files.reader` do not see them.
3. ``commit`` publishes them like files written by ``write``; ``abort`` deletes them.

A crash between 1 and 3 leaves files no manifest lists: orphans for
:func:`eosink_files.cleanup` (which also removes stale staging folders).

The engine needs a folder that the driver and Spark see alike (a local or shared path) and a
classic Spark session: with Spark Connect the files would be written by the server, which may
not share the client's disk.
"""

from __future__ import annotations

import os
from typing import Any

from eosink import ConfigurationError
from eosink.spark import MICROS_TIMESTAMPS, is_classic, session_conf
from eosink_files.options import FilesOptions, default_sizes
from eosink_files.store import Store
from eosink_files.writers import WrittenFile

STAGING_DIR = "_eosink_staging"

#: Spark's names for the codecs where they differ from the sink's.
SPARK_CODECS = {"lz4": "lz4_raw"}


def chooses_spark(options: FilesOptions, store: Store, df: Any) -> bool:
    """Whether this batch is staged by Spark's writer; raises when ``engine="spark"`` cannot be."""
    if options.engine == "arrow":
        return False
    problems = []
    if store.kind() != "file":
        problems.append(f"the folder is on {store.kind()!r}, not a local or shared path")
    if not is_classic(df):
        problems.append("the session is Spark Connect (its server may not share this disk)")
    if not default_sizes(options):
        problems.append("target_file_size / row_group_size are set (the arrow engine's options)")
    if options.engine == "auto":
        return not problems
    if problems:
        raise ConfigurationError(
            "sink 'files': engine 'spark' cannot write this batch: "
            + "; ".join(problems)
            + ". Set engine='arrow' (or 'auto', which picks the engine that can)."
        )
    return True


def stage(
    store: Store, options: FilesOptions, df: Any, attempt: str
) -> tuple[list[WrittenFile], int]:
    """Write ``df`` with Spark into the attempt's staging folder, then move its files into place.

    Returns the moved files (relative paths, sizes, times) and the row count. On failure the
    files moved so far and the staging folder are removed and the error re-raised.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    staging = f"{STAGING_DIR}/{attempt}"
    observation = Observation()
    writer = (
        df.observe(observation, F.count(F.lit(1)).alias("rows"))
        .write.format(options.format)
        .option("compression", SPARK_CODECS.get(options.codec, options.codec))
        # no _SUCCESS marker: the manifest says what is committed
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    if options.format == "csv":
        writer = writer.option("header", str(options.csv_header).lower())
    if options.partition_by:
        writer = writer.partitionBy(*options.partition_by)
    moved: list[WrittenFile] = []
    try:
        with session_conf(df.sparkSession, *MICROS_TIMESTAMPS):  # the arrow engine's types
            writer.save("file://" + os.path.join(store.location, staging))
        rows = int(observation.get["rows"])
        for relpath, _size, _mtime in list(store.walk(staging)):
            inside = relpath[len(staging) + 1 :]
            if not inside.rsplit("/", 1)[-1].startswith("part-"):
                continue  # Hadoop's .crc side files
            store.move(relpath, inside)
            size, mtime = store.stat(inside)
            moved.append(WrittenFile(inside, size, mtime, 0))
    except BaseException:
        for f in moved:
            store.delete(f.relpath)
        raise
    finally:
        store.delete_tree(staging)
    return moved, rows
