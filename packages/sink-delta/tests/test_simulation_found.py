"""Histories the kit's simulation (``test_simulation.py``) found, shrunk and replayed as plain
scenarios: each failed before the fix named in its docstring."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from delta_helpers import log_actions
from eosink_delta.sink import DeltaSink

from eosink.plugin import BatchContext, ConfigurationError
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


def stalled_writer_1(tmp_path):
    """A table keeping a short log, and writer-1's batch 0 written on its version 0 but not
    committed (the driver stalls): the table's path, the batch's context and the attempt."""
    path = str(tmp_path / "table")
    DeltaTable.create(path, SCHEMA, partition_by=["p"], configuration=SHORT_LOG)
    ctx = context(0)
    with simulated_process("writer-1#0"):
        return path, ctx, begin(path, ctx, rows(0))


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
    path, ctx, (pm, state, results) = stalled_writer_1(tmp_path)
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
    path, ctx, (pm, state, results) = stalled_writer_1(tmp_path)
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


def test_binary_partition_columns_are_refused_before_anything_is_written(tmp_path):
    """A binary partition value with a byte above 0x7f came back changed: the sink wrote
    ``b"\\x00\\xff"`` as the string ``"\\x00ÿ"`` and delta-rs read that back as its UTF-8 bytes
    ``b"\\x00\\xc3\\xbf"`` (delta-rs' own writer does not round-trip them either). No encoding
    round-trips through Delta's readers, so the sink refuses binary partition columns, of a new
    table and of an existing one, with the fix in the error."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("b", pa.binary())])
    batch = pa.record_batch([pa.array([1], pa.int64()), pa.array([b"\x00\xff"])], schema=schema)
    ctx = context(0)
    new = str(tmp_path / "new")
    with pytest.raises(ConfigurationError, match=r"binary.*hex\(col\)"):
        run_batch(DeltaSink(path=new, partition_by=["b"]), ctx, schema, LocalRunner([[batch]]))
    assert not os.path.exists(new)
    existing = str(tmp_path / "existing")
    DeltaTable.create(existing, schema, partition_by=["b"])
    with pytest.raises(ConfigurationError, match="binary"):
        run_batch(DeltaSink(path=existing), ctx, schema, LocalRunner([[batch]]))
    assert DeltaTable(existing).version() == 0


def test_negative_decimal_partition_values_are_written_as_the_protocol_says(tmp_path):
    """Why the simulation does not partition by decimals: deltalake 1.6's
    ``to_pyarrow_table`` cannot read a negative decimal partition value back (it makes
    ``-1.500`` into ``-1.-500`` and fails; its own writer fails the same way). The sink writes
    the value as the protocol says, and delta-rs' SQL reader reads it right."""
    from deltalake import QueryBuilder

    path = str(tmp_path / "table")
    decimal = pa.decimal128(12, 3)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("d", decimal)])
    values = pa.array([Decimal("-1.500"), Decimal("2.250"), None], decimal)
    batch = pa.record_batch([pa.array([0, 1, 2], pa.int64()), values], schema=schema)
    sink = DeltaSink(path=path, partition_by=["d"])
    assert run_batch(sink, context(0), schema, LocalRunner([[batch]])).status == "committed"
    written = [a["add"]["partitionValues"]["d"] for _, a in log_actions(path) if "add" in a]
    assert sorted(written, key=str) == ["-1.500", "2.250", None]
    read = QueryBuilder().register("t", DeltaTable(path))
    read = read.execute("select id, d from t order by id")
    assert pa.table(read.read_all()).to_pylist() == [
        {"id": 0, "d": Decimal("-1.500")},
        {"id": 1, "d": Decimal("2.250")},
        {"id": 2, "d": None},
    ]


def test_infinite_float_values_leave_the_file_stats_valid_json(tmp_path):
    """A float column holding infinity got ``"maxValues": {"f": Infinity}`` in its add action's
    stats, which is not JSON: delta-rs' SQL reader (and ``alter.add_constraint``, the damage
    step that met it) failed on the table with "Json error: Encountered unexpected 'I'".
    Found with the simulation's odd floats. Fixed in ``eosink_delta.parquet``: first by leaving
    such a column's bounds out (which delta-rs' pyarrow dataset then read as ``col >= null``,
    skipping the file for every filter on it), now by writing them as Delta's Spark writer
    does, the JSON strings ``"Infinity"`` and ``"-Infinity"``."""
    from deltalake import QueryBuilder

    path = str(tmp_path / "table")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("f", pa.float32())])
    values = pa.array([float("inf"), 1.0, float("-inf")], pa.float32())
    batch = pa.record_batch([pa.array([0, 1, 2], pa.int64()), values], schema=schema)
    run = run_batch(DeltaSink(path=path), context(0), schema, LocalRunner([[batch]]))
    assert run.status == "committed"
    [stats] = [json.loads(a["add"]["stats"]) for _, a in log_actions(path) if "add" in a]
    assert (stats["minValues"]["f"], stats["maxValues"]["f"]) == ("-Infinity", "Infinity")
    count = QueryBuilder().register("t", DeltaTable(path)).execute("select count(*) as n from t")
    assert pa.table(count.read_all()).to_pylist() == [{"n": 3}]


def test_the_kernel_reader_misses_doubles_it_cannot_carry(tmp_path):
    """Found by a soak (seed 2350168046): polars' delta-kernel-rs reader returned none of 5
    rows ``WHERE c1_float64 = 2.0181828166427216e-243`` on a table without statistics, where
    nothing could be pruned: the reader's limit, not the sink's. The same happens on a table
    delta-rs writes itself: the plugin's filter loses doubles off Clinger's fast path. The
    kit's kernel reader declines such predicates (``carried_exactly``); when this test fails,
    the plugin carries them, and the limit can go."""
    import polars as pl
    import polars_deltalake
    from deltalake import write_deltalake
    from test_simulation import carried_exactly

    missed = [2.0**70, 1.5e-243, 2.0181828166427216e-243]
    kept = [1.5, 0.1, 1e20]
    path = str(tmp_path / "table")
    write_deltalake(path, pa.table({"c": pa.array(missed + kept, pa.float64())}))
    frame = polars_deltalake.scan_delta(path)
    assert [frame.filter(pl.col("c") == v).collect().height for v in missed] == [0, 0, 0]
    assert [frame.filter(pl.col("c") == v).collect().height for v in kept] == [1, 1, 1]
    assert [carried_exactly(v) for v in missed + kept] == [False] * 3 + [True] * 3


def test_delta_rs_sql_tells_signed_zero_partitions_apart(tmp_path):
    """Found by the kit's delta-rs SQL reader (soak mode, ``--hypothesis-seed=12``, 30
    examples): ``WHERE c = 0.0`` on a float partition column leaves out the rows of partition
    ``-0.0`` (SQL says they are equal), on a table delta-rs writes itself too: DataFusion
    compares partition values in total order. The kit's SQL reader declines such predicates;
    when this test fails, the limit can go."""
    from deltalake import QueryBuilder, write_deltalake

    path = str(tmp_path / "table")
    rows = pa.table({"id": [0, 1], "c": pa.array([-0.0, 0.0], pa.float32())})
    write_deltalake(path, rows, partition_by=["c"])
    found = []
    for literal in ("-0.0", "0.0"):
        query = QueryBuilder().register("t", DeltaTable(path))
        result = query.execute(f"select id from t where c = CAST({literal} AS FLOAT)")
        found.append(sorted(pa.table(result.read_all()).column("id").to_pylist()))
    assert found == [[0], [1]]


def test_delta_rs_sql_skips_a_decimal_whose_double_bound_rounds_past_it(tmp_path):
    """delta-rs' SQL reader reads a decimal column's stats as doubles: the largest value of
    ``decimal(20, 10)`` rounds up to 1e10, past what the type holds, and the file is skipped
    for every value it holds, on a table delta-rs writes itself. The kit's SQL reader declines
    decimals of more than 15 digits (``datafusion_literal``); when this test fails, the limit
    can go."""
    from deltalake import QueryBuilder, write_deltalake

    path = str(tmp_path / "table")
    values = [Decimal("9999999999.9999999999"), Decimal("999999999.9999999999")]
    write_deltalake(path, pa.table({"d": pa.array(values, pa.decimal128(20, 10))}))
    found = []
    for value in values:
        query = QueryBuilder().register("t", DeltaTable(path))
        result = query.execute(f"select d from t where d = CAST('{value:f}' AS DECIMAL(20, 10))")
        found.append(pa.table(result.read_all()).num_rows)
    assert found == [0, 0]
