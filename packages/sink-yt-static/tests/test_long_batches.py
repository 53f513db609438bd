"""Long batches and stragglers: the driver keeps every transaction of the batch alive.

The emulator expires a master transaction ``timeout`` after its last ping, as YT does; the
sinks here run with one-second timeouts, and the batch takes several of them: an upstream
stage before any task starts, and a straggler task that finishes long after the others.
"""

from __future__ import annotations

import time

from test_faults import FAST, KIT, ThreadedRunner, assert_clean, ctx

from eosink import run_batch
from eosink.testing.local import LocalRunner

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
