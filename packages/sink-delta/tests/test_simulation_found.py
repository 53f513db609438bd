"""Histories the kit's simulation (``test_simulation.py``) found, shrunk and replayed as plain
scenarios: each failed before the fix named in its docstring."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from eosink_delta.sink import DeltaSink

from eosink import BatchContext
from eosink.process import simulated_process
from eosink.protocol import WriteTask, driver_plugins, finish, prepare, run_batch
from eosink.registry import plugin_manager
from eosink.testing.local import LocalRunner

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.int8())])
#: A checkpoint every 2 commits, and every commit before it removed when it is written.
SHORT_LOG = {"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 seconds"}


def context(batch_id: int, writer_id: str = "writer-1") -> BatchContext:
    return BatchContext(
        sink="delta",
        writer_id=writer_id,
        batch_id=batch_id,
        query_id="00000000-0000-4000-8000-000000000001",
        checkpoint=f"/checkpoints/{writer_id}",
    )


def rows(batch_id: int) -> list[list[pa.RecordBatch]]:
    ids = pa.array([batch_id * 100 + i for i in range(3)], pa.int64())
    return [[pa.record_batch([ids, pa.array([1, 1, 2], pa.int8())], schema=SCHEMA)]]


def begin(path: str, ctx: BatchContext, data: list[list[pa.RecordBatch]]) -> tuple[Any, ...]:
    """is_committed, init and the writes of a batch, as a driver that commits later."""
    sink = DeltaSink(path=path, partition_by=["p"])
    pm = plugin_manager(sink, driver_plugins(()))
    prepared = prepare(pm, ctx, SCHEMA)
    assert prepared.skipped is None
    return pm, prepared.state, LocalRunner(data)(WriteTask(sink, ctx, prepared.state))


def test_a_zombie_commits_after_the_log_it_read_was_checkpointed_and_removed(tmp_path):
    """A driver reads the table (version 0), writes its batch, and stalls; its restart commits
    the batch (version 1), which writes a checkpoint and, with a log retention of zero, removes
    commit 0. The stalled driver (a zombie) commits at last on its snapshot of version 0, whose
    commit file is gone: delta-rs cannot check the commits since, and failed with a bare
    ``DeltaError: Invalid table version: 0``. The zombie must see its batch committed (the
    table's txn covers it) and skip it, keeping the table as it is.

    Fixed in ``DeltaSink.commit``: a commit whose snapshot the log no longer holds is decided
    again on the table brought up to date.
    """
    path = str(tmp_path / "table")
    DeltaTable.create(path, SCHEMA, partition_by=["p"], configuration=SHORT_LOG)
    ctx = context(0)
    with simulated_process("writer-1#0"):
        pm, state, results = begin(path, ctx, rows(0))
    with simulated_process("writer-1#1"):
        sink = DeltaSink(path=path, partition_by=["p"])
        assert run_batch(sink, ctx, SCHEMA, LocalRunner(rows(0))).status == "committed"
    assert not os.path.exists(os.path.join(path, "_delta_log", f"{0:020d}.json"))
    with simulated_process("writer-1#0"):
        assert finish(pm, ctx, state, results).status == "skipped"
    table = DeltaTable(path)
    assert (table.version(), table.transaction_version("writer-1")) == (1, 0)
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2]


def test_a_commit_on_a_snapshot_the_log_no_longer_holds_goes_through_when_its_batch_is_new(
    tmp_path,
):
    """The same stall, but another writer's batch moved the log on: the stalled driver's batch
    is not in the table, so its commit goes through on the table brought up to date, with the
    other writer's rows kept."""
    path = str(tmp_path / "table")
    DeltaTable.create(path, SCHEMA, partition_by=["p"], configuration=SHORT_LOG)
    ctx = context(0)
    with simulated_process("writer-1#0"):
        pm, state, results = begin(path, ctx, rows(0))
    with simulated_process("writer-2#0"):
        sink = DeltaSink(path=path, partition_by=["p"])
        other = context(0, "writer-2")
        assert run_batch(sink, other, SCHEMA, LocalRunner(rows(5))).status == "committed"
    assert not os.path.exists(os.path.join(path, "_delta_log", f"{0:020d}.json"))
    with simulated_process("writer-1#0"):
        assert finish(pm, ctx, state, results).status == "committed"
    table = DeltaTable(path)
    assert table.transaction_version("writer-1") == 0
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 500, 501, 502]
