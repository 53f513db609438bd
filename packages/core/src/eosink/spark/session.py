"""Small helpers for sinks whose ``write_dataframe`` drives Spark's own writers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def is_classic(df: Any) -> bool:
    """Whether ``df`` belongs to a classic session (a JVM in this process), not Spark Connect.

    With Spark Connect the server writes the files, and it may not share the client's disk, so
    a sink that moves the files Spark wrote must use its Arrow path there.
    """
    try:
        df.sparkSession.sparkContext  # noqa: B018 - Spark Connect raises here
    except Exception:  # noqa: BLE001 - any failure means no JVM of ours
        return False
    return True


@contextmanager
def session_conf(spark: Any, key: str, value: str) -> Iterator[None]:
    """Set a SQL conf for the duration of a write, then restore it (or unset it again).

    In ``foreachBatch`` the batch's session is the streaming query's own clone, so the change
    is invisible to other queries; in a batch job it is the caller's session for the write.
    """
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


#: Parquet timestamps as INT64 microseconds, UTC-adjusted (what Arrow writers produce and Delta
#: expects), instead of Spark's default INT96.
MICROS_TIMESTAMPS = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
