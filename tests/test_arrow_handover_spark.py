"""How eosink's own Arrow hand-over (the executor half of a ``foreachBatch`` batch, run through
``mapInArrow``) cuts a partition into Arrow batches.

Since Spark 4.0 (SPARK-51316) a batch is cut at ``spark.sql.execution.arrow.maxRecordsPerBatch``
rows or at ``spark.sql.execution.arrow.maxBytesPerBatch`` bytes (64 MB by default), and the byte
check measures the whole batch's vectors after every row: on a 5-column stream it took about 40%
of the JVM's time of the hand-over (a JFR profile, benchmarks/README.md). Only the value
``Int.MaxValue`` skips it. eosink's hand-over therefore cuts by rows alone, as Spark did before
4.0, unless the user set the byte limit: then theirs holds. Spark's conf is restored after the
write, so nothing leaks into the query's session.
"""

from __future__ import annotations

import pytest

from eosink.model import BatchContext
from eosink.plugin import hookimpl
from eosink.protocol import WriteTask
from eosink.spark import session_conf
from eosink.spark.executors import ARROW_BYTES, spark_run_writes

ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
WIDE = 70_000  # bytes per row: 1,000 rows hold 70 MB, above Spark's default 64 MB per batch


class BatchSizes:
    """Writes nothing: its message is the row count of every Arrow batch its task received."""

    @hookimpl
    def write(self, state, partition_id, attempt, batches):
        return [batch.num_rows for batch in batches]


def batch_sizes(spark, rows: int) -> list[int]:
    df = spark.range(rows).selectExpr("id", f"repeat('x', {WIDE}) AS s").coalesce(1)
    ctx = BatchContext(sink="batch-sizes", writer_id="w", batch_id=0, kind="stream")
    task = WriteTask(BatchSizes(), ctx, state=None)
    return [size for result in spark_run_writes(df)(task) for size in result.message]


@pytest.fixture
def records_1000(spark):
    assert spark.conf.get(ARROW_BYTES, None) is None, "the session must keep Spark's default"
    with session_conf(spark, ROWS, "1000"):
        yield spark


def test_batches_are_cut_by_rows_alone_by_default(records_1000):
    assert batch_sizes(records_1000, 2_000) == [1_000, 1_000]
    assert records_1000.conf.get(ARROW_BYTES, None) is None  # restored: unset again


def test_a_byte_limit_the_user_set_holds(records_1000):
    with session_conf(records_1000, ARROW_BYTES, "1MB"):
        sizes = batch_sizes(records_1000, 200)
        assert records_1000.conf.get(ARROW_BYTES) == "1MB"
    assert sum(sizes) == 200
    assert max(sizes) <= 16  # 1 MB / 70 kB: cut by the user's bytes, not by rows
