"""Spark helpers that put the source key columns on a streaming DataFrame (pyspark imported on
use); the checks of the source key itself are in :mod:`eosink_yt_dynamic.keys`."""

from __future__ import annotations

from typing import Any

from eosink_yt_dynamic.keys import SPYT_ROW_INDEX, SPYT_TABLET_INDEX


def with_source_key(
    df: Any, *, tablet_index_column: str = "tablet_index", row_index_column: str = "row_index"
) -> Any:
    """Rename SPYT's service columns to the output key column names (no-op when already done)."""
    for service, name in (
        (SPYT_TABLET_INDEX, tablet_index_column),
        (SPYT_ROW_INDEX, row_index_column),
    ):
        if service in df.columns and service != name:
            df = df.withColumnRenamed(service, name)
    return df


def with_queue_id(
    df: Any,
    queue_id: str,
    *,
    column: str = "queue_id",
    tablet_index_column: str = "tablet_index",
    row_index_column: str = "row_index",
) -> Any:
    """Tag every row of one queue's stream with ``queue_id`` (e.g. the queue path), before a union.

    Each queue numbers its rows independently, so rows of two queues share
    ``(tablet_index, row_index)``; with the queue id first in the table key they do not collide.
    Also renames SPYT's service columns like :func:`with_source_key`.
    """
    from pyspark.sql import functions as F

    return with_source_key(
        df, tablet_index_column=tablet_index_column, row_index_column=row_index_column
    ).withColumn(column, F.lit(queue_id))
