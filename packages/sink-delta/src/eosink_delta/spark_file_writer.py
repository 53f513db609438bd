"""Spark's own Parquet writer writes a DataFrame batch's files; delta-rs commits them as usual.

Handing every row from the JVM to Python as Arrow costs more than Spark's Parquet writer spends
on the whole write, so in the front doors that hold a DataFrame (``foreachBatch``,
``write_batch``) the sink lets Spark write the data files (option ``file_writer``):

1. The DataFrame gets the same treatment ``WritePlan.prepare`` gives Arrow batches (casts to the
   table's types) and Spark writes it, partitioned like the table, into
   ``_eosink_staging/<attempt>`` inside the table folder (the core's ``stage_dataframe``, which
   counts the rows for the proof and, here, the nulls in NOT NULL columns).
2. A NOT NULL column holding nulls fails the batch here, before anything is committed.
3. The driver moves each file into the partition folder the Arrow path would use, reads its
   Parquet footer for the Delta stats, and returns the files as one ``DeltaMessage``.
4. ``commit`` adds them with the ``txn`` in one Delta commit, exactly as files from ``write``.

Files of a failed attempt are listed in no Delta commit, so readers never see them; ``abort``
or Delta's ``VACUUM`` removes them. A driver killed during step 1 leaves its staging folder,
which ``VACUUM`` skips (it ignores ``_`` folders): :func:`remove_stale_staging` removes those.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from eosink.plugin import ConfigurationError
from eosink.spark import is_classic, stage_dataframe
from eosink.spark.executors import arrow_schema
from eosink_delta.options import DeltaOptions
from eosink_delta.parquet import DeltaFile, DeltaMessage, file_stats, stats_json
from eosink_delta.schema import WritePlan, normalize_schema, not_null_error
from eosink_delta.table import HIVE_NULL, partition_dir

STAGING_DIR = "_eosink_staging"
SPARK_CODECS = {"lz4": "lz4_raw", "none": "none"}


def _spark_names_partitions_like_delta(field: pa.Field) -> bool:
    """Whether Spark's folder name of a value is the value as Delta serializes it."""
    t = field.type
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_date32(t)
        or pa.types.is_boolean(t)
    )


def chooses_spark(options: DeltaOptions, uri: str, df: Any, partition_by: tuple[str, ...]) -> bool:
    """Whether Spark writes this batch's files; raises when ``file_writer="spark"`` cannot."""
    if options.file_writer == "arrow":
        return False
    problems = []
    if "://" in uri:
        problems.append("the table is not on a local or shared path")
    if not is_classic(df):
        problems.append("the session is Spark Connect (its server may not share this disk)")
    stream = normalize_schema(arrow_schema(df))
    odd = [c for c in partition_by if not _spark_names_partitions_like_delta(stream.field(c))]
    if odd:
        problems.append(f"partition column(s) {odd} are not strings, integers, dates or booleans")
    if options.file_writer == "auto":
        return not problems
    if problems:
        raise ConfigurationError(
            "sink 'delta': file_writer 'spark' cannot write this batch: "
            + "; ".join(problems)
            + ". Set file_writer='arrow' (or 'auto', which picks the writer that can)."
        )
    return True


def _prepared(df: Any, plan: WritePlan, partition_by: tuple[str, ...]) -> Any:
    """``df`` with the plan's columns cast to the table's types (what ``prepare`` does)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    stream = normalize_schema(arrow_schema(df))
    columns = []
    for field in plan.data_schema:
        column = F.col(field.name)
        if stream.field(field.name).type != field.type:
            column = column.cast(from_arrow_type(field.type))
        columns.append(column.alias(field.name))
    return df.select(*columns, *[F.col(c) for c in partition_by])


def _partition_values(folder: str, partition_by: tuple[str, ...]) -> tuple[str | None, ...]:
    """The values of Spark's Hive folder ``a=1/b=x%2Fy``, as Delta serializes them."""
    found = {}
    for part in folder.split("/") if folder else ():
        name, _, text = part.partition("=")
        found[unquote(name)] = None if text == HIVE_NULL else unquote(text)
    return tuple(found[c] for c in partition_by)


def stage(
    uri: str,
    options: DeltaOptions,
    df: Any,
    attempt: str,
    plan: WritePlan,
    partition_by: tuple[str, ...],
) -> DeltaMessage:
    """Let Spark write the batch's files, then move them into the table's partition folders."""
    from pyspark.sql import functions as F

    checked = [c for c in plan.not_null if c in df.columns]
    nulls = [
        F.sum(F.col(c).isNull().cast("long")).alias(f"nulls_{i}") for i, c in enumerate(checked)
    ]
    codec = options.compression.lower()
    moved: list[DeltaFile] = []
    try:
        with stage_dataframe(
            _prepared(df, plan, partition_by),
            os.path.join(uri, STAGING_DIR, attempt),
            format="parquet",
            options={"compression": SPARK_CODECS.get(codec, codec)},
            partition_by=partition_by,
            metrics=nulls,
        ) as staged:
            for i, column in enumerate(checked):
                if staged.metrics[f"nulls_{i}"]:
                    raise not_null_error(column)
            for f in staged.files:
                folder, _, name = f.relpath.rpartition("/")
                values = _partition_values(folder, partition_by)
                target = partition_dir(partition_by, values) if partition_by else ""
                relative = f"{target}/{name}" if target else name
                os.makedirs(os.path.join(uri, target), exist_ok=True)
                os.rename(
                    os.path.join(uri, STAGING_DIR, attempt, f.relpath), os.path.join(uri, relative)
                )
                moved.append(
                    _described(uri, relative, dict(zip(partition_by, values)), plan, options)
                )
    except BaseException:
        for f in moved:
            try:
                os.unlink(os.path.join(uri, f.path))
            except FileNotFoundError:
                pass
        raise
    return DeltaMessage(files=tuple(moved), rows=staged.rows)


def _described(
    uri: str, relative: str, values: dict[str, str | None], plan: WritePlan, options: DeltaOptions
) -> DeltaFile:
    """A moved file as its add action will describe it: size, time, rows and stats."""
    path = os.path.join(uri, relative)
    metadata = pq.read_metadata(path)
    rows = metadata.num_rows
    stats: dict[str, Any] = {"numRecords": rows}
    if options.stats:
        stats = file_stats(
            metadata,
            plan.data_schema,
            rows,
            missing=plan.missing,
            # parquet-mr drops the min/max of a value over 4 KiB too
            read_column=lambda name: pq.read_table(path, columns=[name]).column(name),
        )
    st = os.stat(path)
    return DeltaFile(
        path=relative,
        size=st.st_size,
        rows=rows,
        partition_values=values,
        modification_time=int(st.st_mtime * 1000),
        stats=stats_json(stats),
    )


def remove_stale_staging(
    path: str, *, older_than_s: float = 24 * 3600.0, dry_run: bool = True
) -> list[str]:
    """The staging folders of killed attempts in the table at ``path``, removed unless ``dry_run``.

    A folder is stale when nothing in it changed for ``older_than_s`` seconds: set the threshold
    above your longest batch, since a live attempt's folder must not go.
    """
    root = os.path.join(path, STAGING_DIR)
    cutoff = time.time() - older_than_s
    stale = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        folder = os.path.join(root, name)
        times = [os.stat(folder).st_mtime] + [
            os.stat(os.path.join(d, n)).st_mtime for d, _, names in os.walk(folder) for n in names
        ]
        if max(times) <= cutoff:
            stale.append(folder)
            if not dry_run:
                shutil.rmtree(folder, ignore_errors=True)
    return stale
