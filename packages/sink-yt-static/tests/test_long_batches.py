"""Long batches and stragglers: the driver keeps every transaction of the batch alive.

The emulator expires a master transaction ``timeout`` after its last ping, as YT does; the
sinks here run with one-second timeouts, and the batch takes several of them: an upstream
stage before any task starts, and a straggler task that finishes long after the others.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from test_faults import FAST, KIT, ThreadedRunner, assert_clean, ctx
from yt_static_helpers import keepers

from eosink.testing import run_batch
from eosink.testing.local import LocalRunner
from eosink_yt_static import keeper
from eosink_yt_static import tx as txs

SHORT = {"main_tx_timeout_s": 1, "part_tx_timeout_s": 1, "sub_tx_timeout_s": 1}


class SlowStages(ThreadedRunner):
    """An upstream stage (a shuffle) before the tasks, and one straggler among them."""

    def __init__(self, partitions, upstream_s: float, straggler: int, straggle_s: float):
        super().__init__(partitions)
        self.upstream_s, self.straggler, self.straggle_s = upstream_s, straggler, straggle_s

    def __call__(self, task):
        time.sleep(self.upstream_s)
        slow = self.partitions[self.straggler]

        def late():
            time.sleep(self.straggle_s)
            yield from slow

        self.partitions = [
            late() if p == self.straggler else part for p, part in enumerate(self.partitions)
        ]
        return super().__call__(task)


def test_upstream_stage_and_straggler_outlast_the_timeouts(make_sink, yt):
    sink = make_sink(client_config=FAST, **SHORT)
    runner = SlowStages(KIT.partitions_of(0), upstream_s=3.5, straggler=1, straggle_s=3.5)
    outcome = run_batch(sink, ctx(0), KIT.schema(), runner)
    assert outcome.status == "committed"
    assert_clean(yt, [0])


def test_zombie_part_tx_opened_before_the_main_commit_does_not_lose_the_batch(
    make_sink, yt, yt_emulator
):
    """A task attempt Spark gave up on (a zombie) opens its PartTx after the driver aborted
    the nested transactions, right before MainTx commits."""
    zombie = yt_emulator.client()
    opened: list[str] = []

    def zombie_task(main_tx):
        def start_part():
            opened.append(zombie.start_transaction(parent_transaction=main_tx, timeout=60_000))

        return start_part

    class Watch(LocalRunner):
        def __call__(self, task):
            yt_emulator.faults.on_next(
                "commit_transaction",
                zombie_task(task.state.main_tx),
                match=lambda p: str(p.get("transaction_id")) == task.state.main_tx,
            )
            return super().__call__(task)

    sink = make_sink(client_config=FAST)
    outcome = run_batch(sink, ctx(0), KIT.schema(), Watch(KIT.partitions_of(0)))
    assert opened, "the zombie never ran"
    assert outcome.status == "committed"
    assert_clean(yt, [0])


# -- the detached keeper: the data-source door's pinger between planning and commit -------------


@pytest.fixture
def driver():
    """A stand-in for the process a Spark worker belongs to (the driver)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def wait_until(condition, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def start_keeper(make_sink, yt, watch_pid: int, max_s: float = 60.0) -> str:
    """A MainTx with a 1 s timeout and its detached keeper, started as ``init`` starts it:
    while a thread of this process pings MainTx."""
    o = make_sink(client_config=FAST).options
    main_tx = str(yt.start_transaction(timeout=1000))
    with txs.Pinger(o.connection(), [main_tx], 0.2):
        keeper.start(o.connection(), main_tx, 0.3, 1.0, max_s, watch_pid=watch_pid)
    return main_tx


def test_detached_keeper_keeps_the_batch_alive_until_released(make_sink, yt, driver):
    main_tx = start_keeper(make_sink, yt, driver.pid)
    part_tx = str(yt.start_transaction(parent_transaction=main_tx, timeout=1000))
    time.sleep(4)  # four timeouts
    assert yt.exists(f"#{main_tx}") and yt.exists(f"#{part_tx}")
    assert keepers(main_tx)
    keeper.release(main_tx)
    assert wait_until(lambda: not keepers(main_tx), 5), "the keeper outlived its release"
    assert wait_until(lambda: not yt.exists(f"#{main_tx}"), 5)


def test_detached_keeper_stops_when_the_driver_is_gone(make_sink, yt, driver):
    main_tx = start_keeper(make_sink, yt, driver.pid)
    time.sleep(3)
    assert yt.exists(f"#{main_tx}")
    driver.kill()
    driver.wait()
    assert wait_until(lambda: not keepers(main_tx), 5), "the keeper outlived the driver"
    assert wait_until(lambda: not yt.exists(f"#{main_tx}"), 6), "MainTx kept alive"
    keeper.release(main_tx)


def test_detached_keeper_is_bounded_by_keepalive_max_s(make_sink, yt, driver):
    main_tx = start_keeper(make_sink, yt, driver.pid, max_s=3)
    time.sleep(2)
    assert yt.exists(f"#{main_tx}")
    assert wait_until(lambda: not keepers(main_tx), 8), "the keeper outlived keepalive_max_s"
    assert wait_until(lambda: not yt.exists(f"#{main_tx}"), 6), "MainTx kept alive"
    keeper.release(main_tx)


def test_detached_keeper_stops_when_main_tx_ends(make_sink, yt, driver):
    main_tx = start_keeper(make_sink, yt, driver.pid)
    yt.abort_transaction(main_tx)
    assert wait_until(lambda: not keepers(main_tx), 5), "the keeper outlived MainTx"
    assert not os.path.exists(keeper.marker(main_tx))


def test_init_starts_a_detached_keeper_only_in_a_spark_worker(make_sink, yt, monkeypatch):
    sink = make_sink(client_config=FAST)
    state = sink.init(ctx(0), KIT.schema())
    assert keepers(state.main_tx) == []  # the driver process runs the batch: a thread keeps it
    sink.abort(ctx(0), state, [])
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "planning worker")
    state = sink.init(ctx(1), KIT.schema())
    assert keepers(state.main_tx)
    sink.abort(ctx(1), state, [])
    assert wait_until(lambda: not keepers(state.main_tx), 5), "abort did not release it"
