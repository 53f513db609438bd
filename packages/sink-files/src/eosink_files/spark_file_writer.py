"""The ``spark`` file writer: Spark's own file writer stages the batch, the manifest publishes it.

Handing every row from the JVM to Python as Arrow costs more than Spark's file writer spends
on the whole write (``eosink_files_benchmarks.throughput`` prints both), so where Spark can
write the folder itself the sink lets it:

1. Spark writes the batch (format, compression, ``partitionBy``) into this attempt's hidden
   staging folder, ``_eosink_staging/<attempt>`` (the core's ``stage_dataframe``, which also
   counts the rows for the proof).
2. The driver moves the part files into their Hive folders. No manifest lists them yet, so
   Spark's reader and :mod:`eosink_files.reader` do not see them.
3. ``commit`` publishes them like files written by ``write``; ``abort`` deletes them.

A crash between 1 and 3 leaves files no manifest lists: orphans for
:func:`eosink_files.cleanup` (which also removes stale staging folders).

This file writer (option ``file_writer="spark"``) needs a folder that the driver and Spark see
alike (a local or shared path) and a classic Spark session: with Spark Connect the files would
be written by the server, which may not share the client's disk.
"""

from __future__ import annotations

import os
from typing import Any

from eosink.plugin import ConfigurationError
from eosink.spark import is_classic, stage_dataframe
from eosink_files.options import FilesOptions, default_sizes
from eosink_files.store import Store
from eosink_files.writers import WrittenFile

STAGING_DIR = "_eosink_staging"

#: Spark's names for the codecs where they differ from the sink's.
SPARK_CODECS = {"lz4": "lz4_raw"}


def chooses_spark(options: FilesOptions, store: Store, df: Any) -> bool:
    """Whether this batch is staged by Spark's writer; raises when ``file_writer="spark"``
    cannot be."""
    if options.file_writer == "arrow":
        return False
    problems = []
    if store.kind() != "file":
        problems.append(f"the folder is on {store.kind()!r}, not a local or shared path")
    if not is_classic(df):
        problems.append("the session is Spark Connect (its server may not share this disk)")
    if not default_sizes(options):
        problems.append(
            "target_file_size / row_group_size are set (the arrow file writer's options)"
        )
    if options.file_writer == "auto":
        return not problems
    if problems:
        raise ConfigurationError(
            "sink 'files': file_writer 'spark' cannot write this batch: "
            + "; ".join(problems)
            + ". Set file_writer='arrow' (or 'auto', which picks the writer that can)."
        )
    return True


def stage(
    store: Store, options: FilesOptions, df: Any, attempt: str
) -> tuple[list[WrittenFile], int]:
    """Let Spark stage ``df`` in the attempt's staging folder, then move its files into place.

    Returns the moved files (relative paths, sizes, times) and the row count the core observed.
    On failure the files moved so far are removed and the error re-raised.
    """
    spark_options = {"compression": SPARK_CODECS.get(options.codec, options.codec)}
    if options.format == "csv":
        spark_options["header"] = str(options.csv_header).lower()
        # Spark's CSV writer trims blank ends off every value by default (" a" read back as
        # "a"); the arrow writer keeps them, and so does this one
        spark_options["ignoreLeadingWhiteSpace"] = "false"
        spark_options["ignoreTrailingWhiteSpace"] = "false"
    staging = f"{STAGING_DIR}/{attempt}"
    moved: list[WrittenFile] = []
    try:
        with stage_dataframe(
            df,
            os.path.join(store.location, staging),
            format=options.format,
            options=spark_options,
            partition_by=options.partition_by,
        ) as staged:
            for f in staged.files:
                store.move(f"{staging}/{f.relpath}", f.relpath)
                size, mtime = store.stat(f.relpath)
                moved.append(WrittenFile(f.relpath, size, mtime, 0))
    except BaseException:
        for f in moved:
            store.delete(f.relpath)
        raise
    return moved, staged.rows
