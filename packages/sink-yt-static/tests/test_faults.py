"""Faults injected through the emulator: lost replies, 503s, expired transactions, dead drivers.

Every scenario ends with the same check: the table holds each source row exactly once, no
staging table is visible and no transaction is left open.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest
from conftest import TABLE
from yt_static_helpers import leftovers, open_transactions, read_rows

from eosink.plugin import BatchContext, hookimpl
from eosink.testing import run_batch
from eosink.crash import set_crash_handler
from eosink.protocol import WriteTask, driver_plugins, prepare
from eosink.registry import plugin_manager
from eosink.testing.conformance import SinkConformance
from eosink.testing.local import LocalRunner

KIT = SinkConformance()
FAST = {
    "proxy": {"retries": {"backoff": {"policy": "constant_time", "constant_time": 50}}},
    "write_retries": {"backoff": {"policy": "constant_time", "constant_time": 50}},
    "start_operation_retries": {"backoff": {"policy": "constant_time", "constant_time": 50}},
    "operation_tracker": {"poll_period": 100},
}


def ctx(batch_id: int, writer: str = "faults") -> BatchContext:
    return BatchContext(sink="yt-static", writer_id=writer, batch_id=batch_id)


def run(sink, batch_id: int, plugins=(), runner=None):
    runner = runner or LocalRunner(KIT.partitions_of(batch_id))
    return run_batch(sink, ctx(batch_id), KIT.schema(), runner, plugins=plugins)


def assert_clean(yt, batches, copies=1):
    held = Counter(KIT.comparable(r) for r in read_rows(yt, TABLE))
    assert held == KIT.expected_rows(batches, copies)
    assert leftovers(yt) == []
    assert open_transactions(yt) == []


def top_level(tx) -> bool:
    """MainTx is the only top-level transaction the sink commits (nested ones have type 4)."""
    try:
        return int(str(tx).split("-")[2], 16) & 0xFFFF == 1
    except (IndexError, ValueError):
        return False


@pytest.fixture
def sink(make_sink):
    return lambda **kw: make_sink(**{"client_config": FAST, **kw})


# -- lost replies ------------------------------------------------------------------------------
def test_lost_main_tx_commit_reply_is_answered_by_the_response_keeper(sink, yt, yt_emulator):
    run(sink(), 0)
    yt_emulator.faults.lose_reply(
        "commit_transaction", match=lambda p: top_level(p.get("transaction_id"))
    )
    assert run(sink(), 1).status == "committed"
    assert_clean(yt, [0, 1])
    assert any(e["retry"] for e in yt_emulator.requests.of("commit_transaction"))


def test_lost_main_tx_commit_reply_for_good_is_resolved_by_the_proof(sink, yt, yt_emulator):
    """Every reply to the MainTx commit is lost (the client gives up): the commit happened,
    the proof on the table says so, and the batch must not fail (transferia fails here)."""
    run(sink(), 0)
    yt_emulator.faults.lose_reply(
        "commit_transaction", times=None, match=lambda p: top_level(p.get("transaction_id"))
    )
    outcome = run(sink(client_config={**FAST, "proxy": {"retries": {"count": 2}}}), 1)
    yt_emulator.faults.clear()
    assert outcome.status == "committed"
    assert run(sink(), 1).status == "skipped"
    assert_clean(yt, [0, 1])


def test_lost_reply_before_the_commit_applied_retries_and_commits(sink, yt, yt_emulator):
    yt_emulator.faults.lose_reply(
        "commit_transaction", when="before", match=lambda p: top_level(p.get("transaction_id"))
    )
    assert run(sink(), 0).status == "committed"
    assert_clean(yt, [0])


@pytest.mark.parametrize("sub", ["init", "commit"])
def test_a_sub_transaction_whose_commit_fails_is_aborted_before_the_retry(
    sink, yt, yt_emulator, sub
):
    """Every try of the client to commit the first Init (or Commit) SubTx is cut before the
    proxy applies it, so the commit request fails. That SubTx must be aborted there and then:
    left open (and pinged by the batch's keeper), it holds its locks, and the retried unit
    waits for them the whole ``lock_wait_timeout_s`` and blames another writer's commit."""
    run(sink(), 0)
    txm = yt_emulator.state.txm
    failing: list[str] = []

    def the_first_sub_tx(params) -> bool:
        tx = str(params.get("transaction_id"))
        found = txm.txs.get(tx)
        title = str(found.attributes.get("title", "")) if found is not None else ""
        if not failing and title.startswith(f"{sub} "):
            failing.append(tx)
        return tx in failing

    yt_emulator.faults.lose_reply(
        "commit_transaction", times=None, when="before", match=the_first_sub_tx
    )
    config = {**FAST, "proxy": {"retries": {"count": 2}}}
    started = time.monotonic()
    outcome = run(sink(client_config=config, lock_wait_timeout_s=10), 1)
    yt_emulator.faults.clear()
    assert outcome.status == "committed"
    assert failing and time.monotonic() - started < 10
    assert failing[0] not in open_transactions(yt)
    assert_clean(yt, [0, 1])


# -- 503s --------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["write_table", "start_operation", "move", "set", "lock"])
def test_503s_are_retried(sink, yt, yt_emulator, command):
    yt_emulator.faults.respond_503(command, times=3)
    assert run(sink(key_columns=("id",)), 0).status == "committed"
    assert run(sink(key_columns=("id",)), 1).status == "committed"
    assert_clean(yt, [0, 1])
    assert any(e["command"] == command and e["status"] == 503 for e in yt_emulator.requests)


# -- expired transactions ----------------------------------------------------------------------
def test_part_tx_expiring_mid_write_is_retried_as_a_unit(sink, yt, yt_emulator):
    """The PartTx expires while its TableWriter runs; the part is rewritten from its spill."""
    state = yt_emulator.state
    expired: list[str] = []

    def expire_part(params):
        part = state.txm.txs.get(str(params.get("transaction_id")))
        while part is not None and "part 1." not in str(part.attributes.get("title", "")):
            part = state.txm.txs.get(part.parent) if part.parent else None
        if expired or part is None:
            return False
        expired.append(part.id)
        threading.Thread(target=yt_emulator.faults.expire_transaction, args=(part.id,)).start()
        time.sleep(0.2)
        return False

    yt_emulator.faults.delay("write_table", 0, match=expire_part)
    assert run(sink(), 0).status == "committed"
    assert expired
    assert_clean(yt, [0])


def test_part_tx_expiring_before_commit_fails_the_batch_and_the_replay_writes_it(
    sink, yt, yt_emulator
):
    class ExpireOnePart:
        @hookimpl(wrapper=True)
        def commit(self, messages):
            yt_emulator.faults.expire_transaction(messages[1].part_tx)
            return (yield)

    run(sink(), 0)
    with pytest.raises(Exception, match="part_tx_timeout_s"):
        run(sink(), 1, plugins=[ExpireOnePart()])
    assert run(sink(), 1).status == "committed"
    assert_clean(yt, [0, 1])


def test_main_tx_expiring_before_commit_fails_the_batch_and_the_replay_writes_it(
    sink, yt, yt_emulator
):
    class ExpireMain:
        @hookimpl(wrapper=True)
        def commit(self, state):
            yt_emulator.faults.expire_transaction(state.main_tx)
            return (yield)

    with pytest.raises(Exception, match="main_tx_timeout_s"):
        run(sink(), 0, plugins=[ExpireMain()])
    assert run(sink(), 0).status == "committed"
    assert_clean(yt, [0])


def test_task_retry_leaves_the_failed_attempts_rows_out(sink, yt):
    """A task whose PartTx was written but whose result was lost: its PartTx is aborted."""
    from eosink.testing.faults import FaultPlugin

    outcome = run_batch(
        sink(),
        ctx(0),
        KIT.schema(),
        LocalRunner(KIT.partitions_of(0)),
        plugins=[FaultPlugin("task_retry", partition=2)],
        executor_plugins=[FaultPlugin("task_retry", partition=2)],
    )
    assert outcome.status == "committed"
    assert_clean(yt, [0])


# -- a driver that dies with MainTx open ------------------------------------------------------
def _prepare_and_write(sink, batch_id):
    """The first half of a batch, as a driver runs it before dying: init and all writes."""
    pm = plugin_manager(sink, driver_plugins(()))
    prepared = prepare(pm, ctx(batch_id), KIT.schema())
    results = LocalRunner(KIT.partitions_of(batch_id))(
        WriteTask(sink, ctx(batch_id), prepared.state)
    )
    return pm, prepared.state, results


def test_driver_dead_after_writes_restart_resumes_main_tx(sink, yt):
    run(sink(), 0)
    _, state, _ = _prepare_and_write(sink(), 1)  # ... and the driver is gone (no abort)
    new_state = []

    class Spy:
        @hookimpl(wrapper=True)
        def init(self):
            result = yield
            new_state.append(result)
            return result

    assert run(sink(), 1, plugins=[Spy()]).status == "committed"
    assert new_state[0].resumed and new_state[0].main_tx == state.main_tx
    assert_clean(yt, [0, 1])


def test_driver_dead_with_prepared_commit_inside_main_tx(sink, yt):
    """Dead after the Commit SubTx set data + proof inside MainTx, before MainTx committed:
    the restarted driver finishes that commit and reports the batch as skipped."""
    run(sink(), 0)
    s = sink()
    pm, state, results = _prepare_and_write(s, 1)

    class Die(BaseException):
        pass

    def handler(name):
        if name == "commit:proof-set":
            raise Die()

    set_crash_handler(handler)
    try:
        with pytest.raises(Die):
            from eosink.protocol import finish

            finish(pm, ctx(1), state, results)
    finally:
        set_crash_handler(None)
    assert read_rows(yt, TABLE) and len(read_rows(yt, TABLE)) == 12  # only batch 0 visible
    outcome = run(sink(), 1)
    assert outcome.status == "skipped"
    assert_clean(yt, [0, 1])


def test_driver_dead_on_a_newer_batch_aborts_the_stale_main_tx(sink, yt):
    _prepare_and_write(sink(), 0)  # dead; Spark then replays batch 0 ... or skips to another
    assert run(sink(), 1).status == "committed"
    assert_clean(yt, [1])


KILLER = textwrap.dedent(
    """
    import os, pickle, sys
    from eosink.plugin import BatchContext
    from eosink.testing import run_batch
    from eosink.crash import set_crash_handler
    from eosink.testing.conformance import SinkConformance
    from eosink.testing.local import LocalRunner
    from eosink_yt_static.sink import YtStaticSink

    url, point, batch_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kit = SinkConformance()
    sink = YtStaticSink(proxy=url, proxy_discovery=False, path=sys.argv[4], key_columns=("id",))
    ctx = BatchContext(sink="yt-static", writer_id="faults", batch_id=batch_id)

    def die(name):
        if name == point:
            os._exit(17)

    set_crash_handler(die)

    class DieAfterWrites:
        from eosink.plugin import hookimpl
        @hookimpl(wrapper=True)
        def commit(self):
            if point == "before-commit":
                os._exit(17)
            set_crash_handler(die)
            return (yield)

    run_batch(sink, ctx, kit.schema(), LocalRunner(kit.partitions_of(batch_id)),
              plugins=[DieAfterWrites()])
    os._exit(0)
    """
)


@pytest.mark.parametrize(
    "point",
    [
        "before-commit",
        "commit:sorted",
        "commit:published",
        "commit:proof-set",
        "commit:main-tx-committed",
    ],
)
def test_driver_process_killed_then_restarted(sink, yt, yt_emulator, point):
    """A real process kill (no abort runs): the restarted driver gets each row in once."""
    run(sink(key_columns=("id",)), 0)
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, yt_emulator.url, point, "1", TABLE],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == 17, killed.stderr[-2000:]
    outcome = run(sink(key_columns=("id",)), 1)
    assert outcome.status in ("committed", "skipped")
    assert_clean(yt, [0, 1])
    rows = read_rows(yt, TABLE)
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)


# -- parallel writers --------------------------------------------------------------------------
class ThreadedRunner(LocalRunner):
    """Partitions written at the same time, like Spark executors (each a pickled task)."""

    def __call__(self, task):
        results = [None] * len(self.partitions)

        def one(pid):
            shipped = pickle.loads(pickle.dumps(task))
            results[pid] = pickle.loads(pickle.dumps(shipped(pid, 0, iter(self.partitions[pid]))))

        threads = [threading.Thread(target=one, args=(p,)) for p in range(len(self.partitions))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        return results


def test_part_tx_writers_run_in_parallel(sink, yt, yt_emulator):
    """Four partitions, each write request held 1 s by the proxy: sibling PartTxs append to
    _tmp at the same time (shared locks), so the writes overlap instead of queueing."""
    partitions = [[KIT.source_batch(0, p, 50)] for p in range(4)]
    yt_emulator.faults.delay("write_table", 1.0)
    outcome = run_batch(sink(), ctx(0), KIT.schema(), ThreadedRunner(partitions))
    assert outcome.status == "committed" and outcome.rows == 200
    writes = sorted(e["time"] for e in yt_emulator.requests.of("write_table"))
    assert len(writes) == 4
    assert writes[-1] - writes[0] < 1.0, "write_table requests were serialized"
    assert len(read_rows(yt, TABLE)) == 200
    assert leftovers(yt) == [] and open_transactions(yt) == []
