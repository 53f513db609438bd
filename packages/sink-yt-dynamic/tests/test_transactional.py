"""The transactional mode against the emulated proxy, with the real YT client: one sticky tablet
transaction per batch, the tasks attached to it, the proof in it; YT's limits as clear errors."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from conftest import make_sink_for

from eosink.plugin import BatchContext, ConfigurationError, SinkError
from eosink.registry import plugin_manager, upsert_key
from eosink.testing import LocalRunner, run_batch
from eosink.testing.faults import FaultPlugin, InjectedCrash
from eosink_yt_dynamic import YtDynamicSink, create_output_table
from eosink_yt_emulator import YtEmulator

OUT = "//home/eosink/totals"
SCHEMA = pa.schema([("user_id", pa.int64()), ("n", pa.int64()), ("last", pa.string())])


def rows(*items: tuple) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [dict(zip(SCHEMA.names, item)) for item in items], schema=SCHEMA
    )


@pytest.fixture
def totals(yt):
    create_output_table(yt, OUT, SCHEMA, key=["user_id"])
    return OUT


def sink_for(emulator, **options):
    return make_sink_for(emulator, OUT, mode="transactional", **options)


def held(yt) -> dict[int, tuple]:
    return {r["user_id"]: (r["n"], r["last"]) for r in yt.select_rows(f"* from [{OUT}]")}


def run(sink, batch_id: int, partitions, writer: str = "totals", **kwargs):
    ctx = BatchContext(sink=sink.name, writer_id=writer, batch_id=batch_id)
    return run_batch(sink, ctx, SCHEMA, LocalRunner(partitions), **kwargs)


def test_a_batch_is_one_sticky_transaction_the_tasks_attach_to(yt_emulator, yt, totals):
    sink = sink_for(yt_emulator)
    yt_emulator.requests.clear()
    run(sink, 0, [[rows((1, 1, "a"))], [rows((2, 1, "b"), (3, 1, "c"))]])
    starts = [r for r in yt_emulator.requests.of("start_transaction")]
    assert [(r["params"]["type"], str(r["params"]["sticky"]).lower()) for r in starts] == [
        ("tablet", "true")
    ]
    inserts = [r for r in yt_emulator.requests.of("insert_rows") if r["params"]["path"] == OUT]
    tx = inserts[0]["transaction_id"]
    assert {r["transaction_id"] for r in inserts} == {tx}  # both tasks, one transaction
    proof = [r for r in yt_emulator.requests.of("insert_rows") if r["params"]["path"] != OUT]
    assert [r["transaction_id"] for r in proof] == [tx]  # the proof row in it too
    assert [r["transaction_id"] for r in yt_emulator.requests.of("commit_transaction")] == [tx]
    assert held(yt) == {1: (1, "a"), 2: (1, "b"), 3: (1, "c")}


def test_update_mode_rows_replace_their_key_and_a_replay_is_skipped(yt_emulator, yt, totals):
    sink = sink_for(yt_emulator)
    run(sink, 0, [[rows((1, 1, "a"), (2, 1, "b"))]])
    run(sink, 1, [[rows((2, 2, "c"))], [rows((3, 1, "d"))]])
    assert held(yt) == {1: (1, "a"), 2: (2, "c"), 3: (1, "d")}
    outcome = run(sink, 1, [[rows((2, 99, "replayed"))]])
    assert outcome.status == "skipped" and held(yt)[2] == (2, "c")


def test_upsert_key_is_the_tables_key_in_the_transactional_mode_only(yt_emulator, totals):
    assert upsert_key(sink_for(yt_emulator)) == ("user_id",)
    assert upsert_key(make_sink_for(yt_emulator, OUT)) is None


@pytest.mark.parametrize("point", ["mid_write", "before_commit", "after_init"])
def test_a_failed_batch_leaves_nothing_visible_and_no_transaction(yt_emulator, yt, totals, point):
    sink = sink_for(yt_emulator)
    run(sink, 0, [[rows((1, 1, "a"))]])
    where = "executor_plugins" if point == "mid_write" else "plugins"
    with pytest.raises(InjectedCrash):
        run(sink, 1, [[rows((1, 2, "x"))], [rows((2, 2, "y"))]], **{where: [FaultPlugin(point)]})
    assert held(yt) == {1: (1, "a")}
    if point != "after_init":  # (the core calls no abort when init fails: the next init does)
        assert yt_emulator.state.txm.active_ids() == []  # aborted by the sink's abort
    run(sink, 1, [[rows((1, 2, "x"))], [rows((2, 2, "y"))]])
    assert held(yt) == {1: (2, "x"), 2: (2, "y")}
    assert yt_emulator.state.txm.active_ids() == []


def test_a_retried_task_writes_its_rows_once(yt_emulator, yt, totals):
    """Partition 1's first attempt inserts its rows, then fails; Spark runs it again, which
    inserts the same rows into the same transaction: in YT's upsert the later write of a key
    in a transaction replaces the earlier one, so each key is held once."""
    sink = sink_for(yt_emulator)
    partitions = [[rows((1, 1, "a"))], [rows((2, 1, "b"), (3, 1, "c"))]]
    run(sink, 0, partitions, executor_plugins=[FaultPlugin("task_retry", partition=1)])
    inserts = [r for r in yt_emulator.requests.of("insert_rows") if r["params"]["path"] == OUT]
    assert len(inserts) == 3  # partition 1 twice
    assert held(yt) == {1: (1, "a"), 2: (1, "b"), 3: (1, "c")}


def test_the_driver_keeps_the_transaction_alive_for_the_whole_batch(yt_emulator, yt, totals):
    sink = sink_for(yt_emulator, transaction_timeout_s=0.6)
    pm = plugin_manager(sink)
    ctx = BatchContext(sink=sink.name, writer_id="totals", batch_id=0)
    state = pm.hook.init(ctx=ctx, schema=SCHEMA)
    message = pm.hook.write(
        ctx=ctx, state=state, partition_id=0, attempt=1, batches=iter([rows((1, 1, "a"))])
    )
    time.sleep(1.5)  # two and a half timeouts: only the pinger keeps it
    pm.hook.commit(ctx=ctx, state=state, messages=[message], proof=proof_of(ctx))
    assert held(yt) == {1: (1, "a")}


def proof_of(ctx):
    from eosink.plugin import Proof

    return Proof(writer_id=ctx.writer_id, batch_id=ctx.batch_id, rows=1)


def test_an_expired_transaction_is_a_clear_error_and_nothing_is_visible(yt_emulator, yt, totals):
    sink = sink_for(yt_emulator)

    class Expire:
        from eosink.plugin import hookimpl

        @hookimpl(wrapper=True)
        def commit(self, state):
            yt_emulator.faults.expire_transaction(state.transaction_id)
            return (yield)

    with pytest.raises(SinkError, match=r"tablet transaction .* is gone.*transaction_timeout_s"):
        run(sink, 0, [[rows((1, 1, "a"))]], plugins=[Expire()])
    assert held(yt) == {}


def test_more_rows_than_a_transaction_takes_are_refused_naming_the_fix(yt_emulator, yt, totals):
    yt_emulator.state.config["max_rows_per_transaction"] = 3  # the cluster's limit
    with pytest.raises(ConfigurationError, match=r"1717.*max_batch_rows") as e:
        run(sink_for(yt_emulator), 0, [[rows((1, 1, "a"), (2, 1, "b"))], [rows((3, 1, "c"))]])
    assert "maxFilesPerTrigger" in str(e.value) and "mode='idempotent'" in str(e.value)
    assert held(yt) == {} and yt_emulator.state.txm.active_ids() == []
    # the option says the limit: a task refuses before sending the rest of its rows
    with pytest.raises(ConfigurationError, match="more than the 3 rows"):
        run(sink_for(yt_emulator, max_batch_rows=3), 0, [[rows(*[(i, 1, "x") for i in range(5)])]])
    assert held(yt) == {}


def test_null_and_shared_keys_and_missing_key_columns_are_refused(yt_emulator, yt, totals):
    sink = sink_for(yt_emulator)
    with pytest.raises(ConfigurationError, match=r"null 'user_id'.*na.drop"):
        run(sink, 0, [[rows((None, 1, "a"))]])
    with pytest.raises(ConfigurationError, match=r"key \(user_id=1\).*groupBy"):
        run(sink, 0, [[rows((1, 1, "a"), (1, 2, "b"))]])
    with pytest.raises(ConfigurationError, match=r"partitions 0 and 1 .*same key \(user_id\)"):
        run(sink, 0, [[rows((1, 1, "a"))], [rows((1, 2, "b"))]])
    assert held(yt) == {} and yt_emulator.state.txm.active_ids() == []
    ctx = BatchContext(sink=sink.name, writer_id="totals", batch_id=0)
    without_key = pa.schema([("n", pa.int64())])
    with pytest.raises(ConfigurationError, match=r"keyed by \['user_id'\].*lack \['user_id'\]"):
        run_batch(sink, ctx, without_key, LocalRunner([]))


def test_tables_that_cannot_take_upserts_are_refused(yt_emulator, yt):
    sink = sink_for(yt_emulator)
    with pytest.raises(ConfigurationError, match="does not exist.*key="):
        upsert_key(sink)
    yt.create(
        "table", OUT, recursive=True, attributes={"schema": [{"name": "user_id", "type": "int64"}]}
    )
    with pytest.raises(ConfigurationError, match="static table"):
        run(sink, 0, [[rows((1, 1, "a"))]])
    with pytest.raises(ConfigurationError, match="needs option key"):
        sink_for(yt_emulator, create_table=True)
    yt.remove(OUT)
    created = sink_for(yt_emulator, create_table=True, key="user_id")
    run(created, 0, [[rows((1, 1, "a"))]])
    assert held(yt) == {1: (1, "a")}
    with pytest.raises(ConfigurationError, match="differs from the key"):
        run(sink_for(yt_emulator, key="n"), 1, [[rows((1, 1, "a"))]])


def test_every_request_of_the_transaction_reaches_the_proxy_holding_it():
    """With proxy discovery on, the client sends heavy commands (insert_rows) to any proxy of
    the cluster; a sticky transaction is known only to the proxy that started it. The sink
    pins one proxy for the batch's transaction, so batches commit on a cluster of several."""
    with YtEmulator(proxies=3) as emu:
        yt = emu.client()
        create_output_table(yt, OUT, SCHEMA, key=["user_id"])
        sink = YtDynamicSink(
            proxy=emu.url,
            path=OUT,
            mode="transactional",
            client_config=emu.client_config(proxy={"enable_proxy_discovery": True}),
        )
        for batch in range(4):
            run(sink, batch, [[rows((1, batch, "p"))], [rows((9, batch, "q"))]])
        assert held(yt) == {1: (3, "p"), 9: (3, "q")}


def test_a_commit_that_landed_though_its_reply_says_the_transaction_is_gone(
    yt_emulator, yt, totals
):
    """The commit was applied, and its reply is lost in a way that reaches the sink as 'no
    such transaction' (the proxy's answer to a retry once the transaction is gone). The sink
    does not claim that nothing is visible: it reads the proof, finds its own, and the batch is
    committed."""
    sink = sink_for(yt_emulator)
    yt_emulator.faults.fail_next(
        "commit_transaction", when="after", code=11000, message="No such transaction"
    )
    outcome = run(sink, 0, [[rows((1, 1, "a"))]])
    assert outcome.status == "committed"
    assert held(yt) == {1: (1, "a")}
    assert run(sink, 0, [[rows((1, 1, "a"))]]).status == "skipped"


def test_the_idempotent_receivers_tablet_transactions_reach_one_proxy_too():
    """Found while building the transactional mode: the idempotent receiver's chunk and proof
    transactions (``client.Transaction(type="tablet")``) start on the configured proxy and
    send ``insert_rows`` to any proxy discovery gives, which does not know the transaction."""
    from conftest import rows_schema

    with YtEmulator(proxies=3) as emu:
        yt = emu.client()
        out = "//home/eosink/out"
        create_output_table(yt, out, rows_schema())
        sink = YtDynamicSink(
            proxy=emu.url,
            path=out,
            client_config=emu.client_config(proxy={"enable_proxy_discovery": True}),
        )
        for batch in range(4):
            part = pa.RecordBatch.from_pylist(
                [
                    {"tablet_index": 0, "row_index": batch * 10 + i, "id": i, "name": "x"}
                    for i in range(3)
                ],
                schema=rows_schema(),
            )
            ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=batch)
            run_batch(sink, ctx, rows_schema(), LocalRunner([[part], [part.slice(0, 0)]]))
        assert len(list(yt.select_rows(f"* from [{out}]"))) == 12


def attempt(sink, batch_id: int, batch: pa.RecordBatch, writer: str = "totals"):
    """A batch's attempt begun (init, one task written), its commit left to the caller; as if
    in another driver process (this process does not ping its transaction)."""
    from eosink_yt_dynamic.transactional import stop_pinger

    pm = plugin_manager(sink)
    ctx = BatchContext(sink=sink.name, writer_id=writer, batch_id=batch_id)
    state = pm.hook.init(ctx=ctx, schema=SCHEMA)
    stop_pinger(state.transaction_id)
    message = pm.hook.write(ctx=ctx, state=state, partition_id=0, attempt=1, batches=iter([batch]))

    def commit():
        from eosink.plugin import Proof

        proof = Proof(writer_id=writer, batch_id=batch_id, rows=batch.num_rows)
        try:
            pm.hook.commit(ctx=ctx, state=state, messages=[message], proof=proof)
        except Exception:
            pm.hook.abort(ctx=ctx, state=state, messages=[message])
            raise

    return commit


def test_a_zombie_attempt_committing_after_a_newer_batch_changes_nothing(yt_emulator, yt, totals):
    """A driver's attempt of batch 0 stalls (a zombie); the restarted query commits batch 0
    and batch 1; then the zombie commits: its transaction conflicts on the proof row (1700)
    and the commit is AlreadyCommitted, so batch 0's older rows never replace batch 1's."""
    from eosink.plugin import AlreadyCommitted

    zombie = attempt(sink_for(yt_emulator), 0, rows((1, 1, "old")))
    restarted = sink_for(yt_emulator)
    run(restarted, 0, [[rows((1, 1, "old"))]])
    run(restarted, 1, [[rows((1, 2, "new"))]])
    with pytest.raises(AlreadyCommitted):
        zombie()
    assert yt_emulator.requests.of("commit_transaction")[-1]["error_code"] == 1700
    assert held(yt) == {1: (2, "new")}
    assert yt_emulator.state.txm.active_ids() == []


def test_another_writer_upserting_the_same_keys_meanwhile_fails_the_batch_whole(
    yt_emulator, yt, totals
):
    mine = attempt(sink_for(yt_emulator), 0, rows((1, 1, "mine"), (2, 1, "mine")))
    run(sink_for(yt_emulator), 0, [[rows((2, 1, "theirs"))]], writer="other")
    with pytest.raises(SinkError, match=r"1700.*nothing of it is visible.*one writer own each key"):
        mine()
    assert held(yt) == {2: (1, "theirs")}
