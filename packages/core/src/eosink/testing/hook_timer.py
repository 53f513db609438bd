"""A plugin that times a sink's driver hooks, batch by batch, for benchmarks.

The exactly-once price of a batch is the time the driver spends in a few hooks (the check
before the writes, the preparation, the publication after them); every benchmark that reports
it needs the same pluggy wrapper around those hooks. :class:`HookTimer` is that wrapper: the
caller names the hooks, passes the timer among a run's ``plugins`` (the driver's: it is not
meant to be pickled into write tasks), and reads the seconds of each hook per batch.

    timer = HookTimer(("is_committed", "commit"))
    run_batch(sink, ctx, schema, LocalRunner(parts), plugins=[timer])
    timer.total()  # seconds of is_committed + commit of that batch
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from typing import Any

from eosink.hookspecs import hookimpl
from eosink.model import BatchContext

#: The hooks a :class:`HookTimer` can time: those the driver runs with the batch's context.
DRIVER_HOOKS = ("is_committed", "init", "write_dataframe", "commit", "abort")

#: The driver's exactly-once work of a batch: the check, the preparation, the publication.
EXACTLY_ONCE_HOOKS = ("is_committed", "init", "commit")


class HookTimer:
    """Seconds spent in the chosen driver hooks, per hook, per batch.

    ``hooks``: the hooks to time (of :data:`DRIVER_HOOKS`); no other hook is wrapped.
    ``before``: called before each timed hook, outside its time (e.g. to drop a sink's cache,
    so that every hook pays for a cold start). ``cpu``: also record this process's CPU time
    in the hooks (on a shared machine the wall time also measures the neighbours' load).

    A batch is the run of hook calls with one :class:`~eosink.BatchContext`: a call with
    another context starts the next batch's record. A hook called twice in a batch (a retry)
    adds up. ``batches`` holds one ``{hook: seconds}`` per batch, oldest first; ``clear()``
    forgets them (after a warm-up).
    """

    def __init__(
        self,
        hooks: Iterable[str] = EXACTLY_ONCE_HOOKS,
        *,
        before: Callable[[], None] | None = None,
        cpu: bool = False,
    ) -> None:
        self.hooks = tuple(hooks)
        unknown = sorted(set(self.hooks) - set(DRIVER_HOOKS))
        if unknown or not self.hooks:
            raise ValueError(f"can time some of {DRIVER_HOOKS}, not {unknown or 'none'}")
        self.before = before
        self.cpu = cpu
        self.batches: list[dict[str, float]] = []
        self.cpu_batches: list[dict[str, float]] = []
        self._ctx: BatchContext | None = None
        for hook in self.hooks:  # pluggy finds the hook implementations by attribute name
            setattr(self, hook, self._wrapper(hook))

    def _wrapper(self, hook: str) -> Callable[[BatchContext], Generator[None, Any, Any]]:
        @hookimpl(wrapper=True)
        def timed(ctx: BatchContext) -> Generator[None, Any, Any]:
            if self.before is not None:
                self.before()
            started = time.perf_counter()
            cpu_started = time.process_time() if self.cpu else 0.0
            try:
                return (yield)
            finally:
                spent = time.perf_counter() - started
                cpu_spent = time.process_time() - cpu_started if self.cpu else 0.0
                self._record(ctx, hook, spent, cpu_spent)

        timed.__name__ = hook
        return timed

    def _record(self, ctx: BatchContext, hook: str, spent: float, cpu_spent: float) -> None:
        if ctx != self._ctx or not self.batches:
            self._ctx = ctx
            self.batches.append({})
            self.cpu_batches.append({})
        self.batches[-1][hook] = self.batches[-1].get(hook, 0.0) + spent
        if self.cpu:
            self.cpu_batches[-1][hook] = self.cpu_batches[-1].get(hook, 0.0) + cpu_spent

    @property
    def current(self) -> dict[str, float]:
        """``{hook: seconds}`` of the latest batch (empty before the first)."""
        return self.batches[-1] if self.batches else {}

    def total(self, batch: int = -1) -> float:
        """Seconds of every timed hook of one batch (by default the latest; 0 before any)."""
        return sum(self.batches[batch].values()) if self.batches else 0.0

    def cpu_total(self, batch: int = -1) -> float:
        """CPU seconds of every timed hook of one batch (needs ``cpu=True``)."""
        if not self.cpu:
            raise ValueError("this timer records no CPU time: make it with cpu=True")
        return sum(self.cpu_batches[batch].values()) if self.cpu_batches else 0.0

    def totals(self) -> list[float]:
        """Seconds of every timed hook, one sum per batch."""
        return [sum(batch.values()) for batch in self.batches]

    def seconds(self, hook: str) -> list[float]:
        """Seconds of ``hook`` in each batch that ran it."""
        if hook not in self.hooks:
            raise ValueError(f"{hook} is not timed (the timer's hooks: {self.hooks})")
        return [batch[hook] for batch in self.batches if hook in batch]

    def clear(self) -> None:
        """Forget every batch recorded so far."""
        self.batches.clear()
        self.cpu_batches.clear()
        self._ctx = None
