"""The benchmarks' hook timer, in a real plugin manager around a sink with slow hooks."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from eosink.model import BatchContext
from eosink.plugin import Sink, hookimpl
from eosink.registry import plugin_manager
from eosink.testing import LocalRunner, run_batch
from eosink.testing.hook_timer import HookTimer
from sample_sinks import MemorySink

PAUSE = {"is_committed": 0.02, "init": 0.01, "commit": 0.04}


class SlowSink(Sink):
    """Sleeps a known time in each driver hook."""

    name = "slow"

    def __init__(self) -> None:
        self.options = None

    @hookimpl
    def is_committed(self, ctx):
        time.sleep(PAUSE["is_committed"])

    @hookimpl
    def init(self, ctx):
        time.sleep(PAUSE["init"])
        return "state"

    @hookimpl
    def commit(self, ctx, messages, proof):
        time.sleep(PAUSE["commit"])


def ctx(batch: int) -> BatchContext:
    return BatchContext("slow", "w", batch, query_id="q")


def run_hooks(pm, batch: int) -> None:
    pm.hook.is_committed(ctx=ctx(batch))
    pm.hook.init(ctx=ctx(batch), schema=pa.schema([]))
    pm.hook.commit(ctx=ctx(batch), state="state", messages=[], proof=None)


def test_durations_per_hook_per_batch():
    timer = HookTimer()
    pm = plugin_manager(SlowSink(), [timer])
    run_hooks(pm, 0)
    run_hooks(pm, 1)
    assert len(timer.batches) == 2
    for batch in timer.batches:
        assert set(batch) == set(PAUSE)
        for hook, pause in PAUSE.items():
            assert pause <= batch[hook] < pause + 0.5, (hook, batch)
    assert timer.current is timer.batches[-1]
    assert timer.total() == pytest.approx(sum(timer.batches[1].values()))
    assert timer.totals() == [pytest.approx(sum(b.values())) for b in timer.batches]
    assert timer.seconds("commit") == [b["commit"] for b in timer.batches]
    timer.clear()
    assert timer.batches == [] and timer.current == {} and timer.total() == 0.0


def test_only_the_chosen_hooks_are_wrapped():
    timer = HookTimer(("commit",))
    pm = plugin_manager(SlowSink(), [timer])
    assert sorted(caller.name for caller in pm.get_hookcallers(timer)) == ["commit"]
    run_hooks(pm, 0)
    assert list(timer.current) == ["commit"]
    assert timer.current["commit"] >= PAUSE["commit"]
    with pytest.raises(ValueError, match="not timed"):
        timer.seconds("init")


def test_a_hook_called_twice_in_a_batch_adds_up():
    timer = HookTimer(("is_committed",))
    pm = plugin_manager(SlowSink(), [timer])
    pm.hook.is_committed(ctx=ctx(7))
    pm.hook.is_committed(ctx=ctx(7))
    assert len(timer.batches) == 1
    assert timer.current["is_committed"] >= 2 * PAUSE["is_committed"]


def test_before_runs_outside_the_time_and_cpu_is_recorded():
    calls = []

    def before() -> None:
        calls.append(1)
        time.sleep(0.2)

    timer = HookTimer(("init",), before=before, cpu=True)
    pm = plugin_manager(SlowSink(), [timer])
    pm.hook.init(ctx=ctx(0), schema=pa.schema([]))
    assert calls == [1]
    assert PAUSE["init"] <= timer.total() < 0.2
    assert 0.0 <= timer.cpu_total() < timer.total()  # sleeping takes no CPU
    with pytest.raises(ValueError, match="cpu=True"):
        HookTimer().cpu_total()


def test_unknown_hooks_are_refused():
    with pytest.raises(ValueError, match="write"):
        HookTimer(("is_committed", "write"))
    with pytest.raises(ValueError):
        HookTimer(())


def test_times_a_whole_batch_through_run_batch():
    timer = HookTimer()
    sink = MemorySink(name="hook-timer")
    parts = [[pa.record_batch({"id": pa.array([1, 2], pa.int64())})]]
    outcome = run_batch(sink, ctx(0), parts[0][0].schema, LocalRunner(parts), plugins=[timer])
    assert outcome.status == "committed"
    assert len(timer.batches) == 1
    assert set(timer.current) == {"is_committed", "init", "commit"}
    assert all(seconds > 0 for seconds in timer.current.values())
