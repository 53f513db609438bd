"""A streaming query that fails once in the middle of a batch, then replays it: the in-process
half of a sink's end-to-end tests (the killed-process half is :mod:`eosink.testing.killed_query`).

The source is a folder of JSON files, one per micro-batch (``maxFilesPerTrigger`` 1), so a replay
re-reads the same rows. A transformation fails the task holding one id while a marker file
exists, after the batch's other task has written: the restarted query must replay the batch and
the sink must hold every source row once.

    expected = write_json_source(tmp_path / "in")
    marker = arm(tmp_path / "armed")
    run_twice(lambda: json_stream(spark, tmp_path / "in", crash_once(marker)).writeStream...)
    assert_exactly(ids_read_back, expected)
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

#: Files of the source (one per micro-batch) and rows per file; row ids are ``n * 1000 + i``.
FILES, ROWS_PER_FILE = 4, 300
#: The id whose task fails (or stalls): in the third file, so two batches commit before it.
CRASH_ID = 2_150
#: The source's schema, without the extra columns a test's ``row`` adds.
SCHEMA = "id long, name string"

Row = Callable[[int, int], dict[str, Any]]


def default_row(n: int, i: int) -> dict[str, Any]:
    """Row ``i`` of file ``n``: its id and a name."""
    return {"id": n * 1000 + i, "name": f"r{n}-{i}"}


def write_json_source(
    folder: str | os.PathLike[str],
    *,
    files: int = FILES,
    rows_per_file: int = ROWS_PER_FILE,
    row: Row = default_row,
) -> list[int]:
    """Write the source files and return every id written.

    Spark's file source takes files in modification-time order; the files get increasing
    times in name order, so file ``n`` is batch ``n`` however fast they were written.
    """
    os.makedirs(folder)
    expected = []
    for n in range(files):
        path = os.path.join(folder, f"part-{n}.json")
        with open(path, "w") as f:
            for i in range(rows_per_file):
                record = row(n, i)
                f.write(json.dumps(record) + "\n")
                expected.append(record["id"])
        stamp = time.time() - 100 + n
        os.utime(path, (stamp, stamp))
    return expected


def json_stream(
    spark: Any,
    folder: str | os.PathLike[str],
    transform: Callable[[Iterable[Any]], Iterator[Any]] | None = None,
    *,
    schema: str = SCHEMA,
) -> Any:
    """The streaming DataFrame of the source, one file per batch in two partitions, through
    ``transform`` (a ``mapInArrow`` function) when given."""
    df = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .repartition(2)
    )
    return df if transform is None else df.mapInArrow(transform, df.schema)


def grouped_counts(
    spark: Any, folder: str | os.PathLike[str], *, schema: str = SCHEMA, key: str = "k"
) -> Any:
    """The streaming aggregation of the source, one file per batch: rows counted by
    ``id % 3`` (column ``key``), for the complete and update output modes."""
    from pyspark.sql import functions as F

    return (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .groupBy((F.col("id") % 3).alias(key))
        .count()
    )


def grouped_totals(
    spark: Any, folder: str | os.PathLike[str], *, schema: str = SCHEMA, key: str = "user_id"
) -> Any:
    """The streaming aggregation a keyed sink takes in ``update`` mode, one file per batch:
    per ``id % 7`` (column ``key``), the rows counted, their ids summed and the greatest
    name; every batch changes every key's row."""
    from pyspark.sql import functions as F

    return (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .groupBy((F.col("id") % 7).alias(key))
        .agg(F.count("*").alias("n"), F.sum("id").alias("total"), F.max("name").alias("last"))
    )


def source_records(folder: str | os.PathLike[str], files: int) -> list[dict[str, Any]]:
    """The records of the first ``files`` files :func:`write_json_source` wrote."""
    records = []
    for n in range(files):
        with open(os.path.join(folder, f"part-{n}.json"), encoding="utf-8") as f:
            records += [json.loads(line) for line in f]
    return records


def totals_stall(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """A killed query's stall row in :func:`grouped_totals`' third batch: key 3's row there."""
    return {"user_id": 3, "n": totals_of(source_records(folder, 3))[3][0]}


def totals_of(rows: list[dict[str, Any]], *, key: str = "user_id") -> dict[int, tuple]:
    """:func:`grouped_totals` computed once over ``rows`` (the source's records): key ->
    (count, sum of ids, greatest name)."""
    out: dict[int, tuple] = {}
    for row in rows:
        n, total, last = out.get(row["id"] % 7, (0, 0, ""))
        out[row["id"] % 7] = (n + 1, total + row["id"], max(last, row["name"]))
    return out


def arm(marker: str | os.PathLike[str]) -> str:
    """Create the marker file that arms :func:`crash_once`; returns its path."""
    open(marker, "w").close()
    return str(marker)


def crash_once(marker: str, crash_id: int = CRASH_ID, column: str = "id"):
    """A ``mapInArrow`` function that fails the task holding ``crash_id`` while ``marker``
    exists, removing the marker, so the restarted query passes."""

    def apply(batches):
        for batch in batches:
            if os.path.exists(marker) and crash_id in batch.column(column).to_pylist():
                os.remove(marker)
                raise RuntimeError("injected crash mid-batch")
            yield batch

    return apply


def run_twice(start: Callable[[], Any]) -> None:
    """Start the query; it must fail with the injected crash; start it again from the same
    checkpoint; it must finish."""
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException, match="injected crash"):
        start().awaitTermination()
    start().awaitTermination()


def assert_exactly(ids: Iterable[int], expected_ids: Iterable[int]) -> None:
    """Every expected id once: none lost, none twice (the message names a few of each)."""
    held, expected = Counter(ids), list(expected_ids)
    assert sorted(held.elements()) == sorted(expected), (
        f"duplicates: {[i for i, n in held.items() if n > 1][:5]}, "
        f"lost: {sorted(set(expected) - set(held))[:5]}"
    )
