"""Partition values nobody picks on purpose, and how to compare what a reader gives back.

Hive-style partition paths must escape ``/`` and ``%``, write null (and ``""``) as Hive's default
name, and keep a float's sign and NaN; a sink partitioning by a column must survive all of them.
:func:`tricky` is a Spark frame of such values; :func:`same` compares a read-back value with the
one sent (NaN equals NaN, ``-0.0`` differs from ``0.0``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

#: The folder name Hive (and Spark, and Delta) writes for a null partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: A NaN with a payload: a NaN whose bits differ from ``math.nan``'s.
NAN_PAYLOAD = struct.unpack("d", struct.pack("Q", 0x7FF8000000000001))[0]
#: String partition values: empty, null, a slash, non-ASCII, a percent, Hive's null name.
STRINGS = ["", None, "a/b", "ü", "%", HIVE_NULL, "x"]
#: Double partition values as Spark SQL literals: NaN, both zeros, infinity, a huge one, null.
FLOATS = ["cast('NaN' as double)", "cast('-0.0' as double)", "0.0D", "cast('Infinity' as double)",
          "1.5D", "1e20D", "cast(null as double)"]  # fmt: skip


def tricky(spark: Any, rows: int = 420, partitions: int = 4) -> Any:
    """``rows`` rows (``id``, ``s`` string, ``f`` double, ``x`` data) in ``partitions`` tasks,
    every string meeting every float in every task."""
    strings = ", ".join("null" if s is None else f"'{s}'" for s in STRINGS)
    floats = ", ".join(FLOATS)
    return spark.range(0, rows, 1, partitions).selectExpr(
        "id",
        f"element_at(array({strings}), cast(id % {len(STRINGS)} + 1 as int)) as s",
        f"element_at(array({floats}), cast(floor(id / {len(STRINGS)}) % {len(FLOATS)} + 1 as int))"
        " as f",
        "cast(id as string) as x",
    )


def same(a: Any, b: Any) -> bool:
    """Whether read-back ``a`` is sent ``b``: nulls only match nulls, NaN matches NaN, and a
    float must keep its sign (``-0.0`` is not ``0.0``)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


def assert_read_back(back: Mapping[int, Any], sent: Mapping[int, Any]) -> None:
    """Every row sent (id -> value) read back once (id -> value), each :func:`same` as sent."""
    assert set(back) == set(sent), f"{len(set(sent) - set(back))} rows missing"
    wrong = {i: (back[i], v) for i, v in sent.items() if not same(back[i], v)}
    assert (
        not wrong
    ), f"{len(wrong)} rows read back with another value, e.g. {list(wrong.items())[:3]}"


def write_tricky(df: Any, sink_name: str, path: str, door: str, rows: int = 420) -> None:
    """Write :func:`tricky`'s ``df`` (``rows`` rows) partitioned by ``s`` and ``f`` through
    ``door``: ``"data_source"`` (Spark's batch writer), else ``eosink.write_batch`` with that
    ``file_writer``; the batch must commit every row."""
    import eosink

    if door == "data_source":
        eosink.register_data_sources(df.sparkSession)
        (
            df.write.format(f"eosink-{sink_name}")
            .option("writerId", "job")
            .option("version", 1)
            .option("path", path)
            .option("partitionBy", "s,f")
            .mode("append")
            .save()
        )
    else:
        sink = eosink.sink(sink_name, path=path, partition_by=["s", "f"], file_writer=door)
        (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
        assert (outcome.status, outcome.rows) == ("committed", rows)


def string_and_float_batch() -> pa.RecordBatch:
    """100 rows (``id``, ``s`` string, ``f`` double) whose ``(s, f)`` pairs put ``""`` next to
    null and ``-0.0``, ``0.0``, NaN and a NaN with a payload next to each other."""
    pairs = [("", -0.0), (None, 0.0), ("a", math.nan), ("", 0.0), (None, NAN_PAYLOAD)] * 20
    return pa.record_batch(
        {
            "id": pa.array(range(len(pairs)), pa.int64()),
            "s": pa.array([s for s, _ in pairs], pa.string()),
            "f": pa.array([f for _, f in pairs], pa.float64()),
        }
    )
