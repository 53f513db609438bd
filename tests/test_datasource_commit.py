"""The data source's commit side checks what Spark tells it against what was planned.

No JVM here: the stream writer is driven the way Spark drives it (planned and pickled, the
executor half called per partition, ``commit(messages, batchId)`` on a writer rebuilt from the
options), with a checkpoint folder holding an offset log.
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from eosink_sqlite.sink import read_rows
from pyspark.sql.types import LongType, StructField, StructType

from eosink.errors import BatchIdMismatchError
from eosink.protocol import WriteTask
from eosink.spark.datasource import EosinkCommitMessage, EosinkStreamWriter

SCHEMA = StructType([StructField("id", LongType())])


def checkpoint_at(tmp_path, batch_id):
    offsets = tmp_path / "ckpt" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / str(batch_id)).write_text("v1\n{}\n")
    return str(tmp_path / "ckpt")


def writer(tmp_path, checkpoint):
    options = {
        "writerId": "w",
        "path": str(tmp_path / "out.db"),
        "checkpointLocation": checkpoint,
    }
    return EosinkStreamWriter("sqlite", options, False, SCHEMA)


def task_messages(planning, partitions):
    """What the executors send back: the pickled writer's executor half, run per partition."""
    shipped = pickle.loads(pickle.dumps(planning))
    ctx, prepared = shipped.prepared()
    messages = []
    for partition_id, ids in enumerate(partitions):
        batch = pa.record_batch({"id": pa.array(ids, pa.int64())})
        result = WriteTask(shipped.sink, ctx, prepared.state)(
            partition_id, 100 + partition_id, iter([batch])
        )
        messages.append(EosinkCommitMessage(ctx, prepared, result))
    return messages


def test_commit_refuses_a_batch_id_other_than_the_planned_one(tmp_path):
    checkpoint = checkpoint_at(tmp_path, 3)
    messages = task_messages(writer(tmp_path, checkpoint), [[1, 2], [3]])
    with pytest.raises(BatchIdMismatchError, match="batch 4.*batch 3"):
        writer(tmp_path, checkpoint).commit(messages, 4)
    assert read_rows(str(tmp_path / "out.db")) == []
    writer(tmp_path, checkpoint).commit(messages, 3)
    assert sorted(r["id"] for r in read_rows(str(tmp_path / "out.db"))) == [1, 2, 3]


def test_zero_partition_batch_is_checked_too(tmp_path):
    checkpoint = checkpoint_at(tmp_path, 5)
    with pytest.raises(BatchIdMismatchError, match="batch 4.*batch 5"):
        writer(tmp_path, checkpoint).commit([], 4)
    assert read_rows(str(tmp_path / "out.db"), "_eosink_commits") == []
    writer(tmp_path, checkpoint).commit([], 5)
    proofs = read_rows(str(tmp_path / "out.db"), "_eosink_commits")
    assert [p["batch_id"] for p in proofs] == [5]


def test_commit_refuses_messages_of_different_plans(tmp_path):
    checkpoint = checkpoint_at(tmp_path, 3)
    first = task_messages(writer(tmp_path, checkpoint), [[1]])
    (tmp_path / "ckpt" / "offsets" / "4").write_text("v1\n{}\n")
    second = task_messages(writer(tmp_path, checkpoint), [[2]])
    with pytest.raises(BatchIdMismatchError, match="different plans"):
        writer(tmp_path, checkpoint).commit(first + second, 4)
    assert read_rows(str(tmp_path / "out.db")) == []


def test_an_error_while_planning_reaches_the_user_as_itself(tmp_path):
    """Planning runs when Spark pickles the writer; what it raises must not become Spark's
    ``PicklingError: Could not serialize object``: every task raises it, type and message."""
    from pyspark.serializers import CloudPickleSerializer

    from eosink.errors import ConfigurationError

    (tmp_path / "ckpt").mkdir()  # a checkpoint without an offset log: planning fails
    spark_pickle = CloudPickleSerializer()  # what Spark's planning worker ships the writer with
    shipped = spark_pickle.loads(spark_pickle.dumps(writer(tmp_path, str(tmp_path / "ckpt"))))
    with pytest.raises(ConfigurationError, match="holds no offset log") as info:
        shipped.write(iter([pa.record_batch({"id": pa.array([1], pa.int64())})]))
    assert any("planned the batch" in note for note in info.value.__notes__)
    assert read_rows(str(tmp_path / "out.db")) == []


def test_a_named_querys_name_is_not_taken_for_a_sink_option(tmp_path):
    """``writeStream.queryName("orders")`` hands the data source Spark's option ``queryName``:
    every named query through any sink's data-source door failed with "unknown option
    'queryname'" (found by Delta's streaming sink beside eosink-delta)."""
    checkpoint = checkpoint_at(tmp_path, 0)
    options = {"writerId": "w", "path": str(tmp_path / "out.db"), "queryName": "orders"}
    named = EosinkStreamWriter(
        "sqlite", {**options, "checkpointLocation": checkpoint}, False, SCHEMA
    )
    named.commit(task_messages(named, [[1]]), 0)
    assert [r["id"] for r in read_rows(str(tmp_path / "out.db"))] == [1]
