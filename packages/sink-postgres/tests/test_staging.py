"""One staging table per batch attempt: every task attempt COPYs into it, tagged with itself,
and the commit moves exactly the task attempts its messages name."""

from __future__ import annotations

import contextlib
import threading

import pyarrow as pa
import pytest
from eosink_postgres import store
from eosink_postgres.sink import PostgresSink
from pg_helpers import batch_rows, ids, read_table, staging_tables

from eosink.plugin import BatchContext, Proof, SinkError
from eosink.registry import plugin_manager


def hooks(database: str, batch_id: int):
    sink = PostgresSink(url=database, table="events")
    ctx = BatchContext(sink="postgres", writer_id="w", batch_id=batch_id)
    return plugin_manager(sink).hook, ctx


def write(hook, ctx, state, partition: int, attempt: int, rows: list[pa.RecordBatch]):
    return hook.write(
        ctx=ctx, state=state, partition_id=partition, attempt=attempt, batches=iter(rows)
    )


def commit(hook, ctx, state, messages) -> None:
    rows = sum(m.rows for m in messages if m is not None)
    hook.commit(
        ctx=ctx, state=state, messages=messages, proof=Proof(ctx.writer_id, ctx.batch_id, rows=rows)
    )


def test_many_tasks_stage_into_one_table_and_only_the_reported_attempts_land(database):
    parts = batch_rows(0, partitions=6)
    hook, ctx = hooks(database, 0)
    state = hook.init(ctx=ctx, schema=parts[0][0].schema)
    assert staging_tables(database) == []  # nothing made before a task has rows
    messages = [write(hook, ctx, state, p, 100 + p, part) for p, part in enumerate(parts)]
    # Spark retried partition 2 after its first attempt had staged its rows (lost executor):
    # the retry's rows are the batch's, the first attempt's are not
    retry = write(hook, ctx, state, 2, 200, parts[2])
    messages[2] = retry
    empty = write(hook, ctx, state, 6, 106, [parts[0][0].slice(0, 0)])
    assert empty.rows == 0
    assert staging_tables(database) == [state.staging]
    commit(hook, ctx, state, [*messages, empty, None])
    assert sorted(ids(read_table(database, "events"))) == sorted(
        i for part in parts for batch in part for i in batch.column("id").to_pylist()
    )
    assert staging_tables(database) == []


def test_tasks_racing_to_create_the_table_all_stage(database):
    parts = batch_rows(0, partitions=8, rows=50)
    hook, ctx = hooks(database, 0)
    state = hook.init(ctx=ctx, schema=parts[0][0].schema)
    messages: list = [None] * len(parts)
    failures: list[BaseException] = []
    start = threading.Barrier(len(parts))

    def task(p: int) -> None:
        start.wait()
        try:
            messages[p] = write(hook, ctx, state, p, p, parts[p])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=task, args=(p,)) for p in range(len(parts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert staging_tables(database) == [state.staging]
    commit(hook, ctx, state, messages)
    assert len(read_table(database, "events")) == 8 * 50


def test_a_task_attempt_after_the_commit_stages_nothing(database):
    parts = batch_rows(0)
    hook, ctx = hooks(database, 0)
    state = hook.init(ctx=ctx, schema=parts[0][0].schema)
    commit(hook, ctx, state, [write(hook, ctx, state, p, p, part) for p, part in enumerate(parts)])
    with pytest.raises(SinkError, match="already committed; this late task attempt"):
        write(hook, ctx, state, 0, 9, parts[0])
    assert staging_tables(database) == []
    assert len(read_table(database, "events")) == 6


def test_a_task_whose_table_went_away_names_why(database):
    parts = batch_rows(0)
    hook, ctx = hooks(database, 0)
    state = hook.init(ctx=ctx, schema=parts[0][0].schema)
    write(hook, ctx, state, 0, 0, parts[0])
    hook.abort(ctx=ctx, state=state, messages=[])
    assert staging_tables(database) == []
    # a task attempt that passed its check before the abort dropped the table
    sink = PostgresSink(url=database, table="events")
    table = store.ident(sink.options.meta_schema, state.staging)
    with pytest.raises(SinkError, match="staging table of .* is gone"):
        with sink.connect() as conn, contextlib.ExitStack() as stack:
            sink._start_copy(conn, stack, ctx, table, parts[0][0].schema)


def test_a_stream_column_named_like_a_task_column_is_refused(database):
    hook, ctx = hooks(database, 0)
    schema = pa.schema([("id", pa.int64()), ("eosink:attempt", pa.int64())])
    with pytest.raises(Exception, match="rename them in the query"):
        hook.init(ctx=ctx, schema=schema)
