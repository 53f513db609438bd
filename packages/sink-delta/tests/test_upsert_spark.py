"""Keyed upserts on local Spark: a change feed through the foreachBatch door (Spark's own
Parquet writer stages the rows), crashed mid-batch and restarted; every reader sees, per key,
the row with the greatest sequence number of all input."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from delta_helpers import txns
from eosink_delta.sink import DeltaSink
from test_upsert import READERS

import eosink
from eosink.testing.replay import (
    FILES,
    ROWS_PER_FILE,
    arm,
    crash_once,
    json_stream,
    run_twice,
    write_json_source,
)

KEYS = 40
SCHEMA = "id long, user_id long, v string, region string"


@pytest.fixture(scope="module")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


def change(n: int, i: int) -> dict:
    """Row ``i`` of file ``n``: a change of user ``i % KEYS``, ``id`` its sequence number."""
    user = i % KEYS
    return {
        "id": n * 1000 + i,
        "user_id": user,
        "v": f"{n}-{i}",
        "region": "eu us".split()[user % 2],
    }


@pytest.mark.parametrize("partitioned", [False, True])
def test_change_feed_upserted_exactly_once_through_a_crash(spark, tmp_path, partitioned):
    """Spark's own Parquet writer stages the rows (``file_writer="auto"`` on a local path),
    in partition folders when the table is partitioned by ``region``."""
    source, target = tmp_path / "source", str(tmp_path / "table")
    write_json_source(source, row=change)
    marker = arm(tmp_path / "crash")
    options = {"partition_by": ["region"]} if partitioned else {}
    sink = DeltaSink(path=target, mode="upsert", key=["user_id"], order_by="id", **options)
    writer = eosink.foreach_batch(sink, writer_id="feed")

    def start():
        return (
            json_stream(spark, source, crash_once(marker), schema=SCHEMA)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    run_twice(start)
    last = FILES - 1
    expected = {}
    for i in range(ROWS_PER_FILE):
        expected[i % KEYS] = f"{last}-{i}"  # the greatest i of each key, in the last file
    for name, reader in READERS.items():
        rows = reader(target)
        assert len(rows) == KEYS, name
        assert {r["user_id"]: r["v"] for r in rows} == expected, name
    assert txns(target) == [("feed", b) for b in range(FILES)]
    table = DeltaTable(target)
    assert table.to_pyarrow_table().num_rows == KEYS
    assert table.metadata().partition_columns == (["region"] if partitioned else [])
