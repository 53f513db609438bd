"""Fault injection for crash tests: a cross-cutting plugin that crashes a batch at a chosen point.

Points between phases are pluggy wrappers; points inside a sink's ``commit`` are the sink's own
:func:`eosink.plugin.crash_point` calls, reached through a crash handler.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from eosink.crash import set_crash_handler
from eosink.hookspecs import hookimpl

#: The points between phases that ``FaultPlugin`` understands.
POINTS = (
    "after_init",  # before any write
    "mid_write",  # partitions below ``partition`` are written, then one fails
    "before_commit",  # all writes done
    "inside_commit",  # at the sink's crash point ``name``
    "after_commit",  # committed, but Spark never hears of it
    "task_retry",  # partition ``partition``'s first attempt writes, then fails; Spark retries
)

_task = threading.local()


@contextmanager
def task_attempt(number: int) -> Iterator[None]:
    """Run a task attempt in this thread as Spark's attempt ``number`` (for ``attempt_number``)."""
    _task.number = number
    try:
        yield
    finally:
        _task.number = None


def attempt_number() -> int:
    """Spark's ``attemptNumber`` of the running task: 0 for the first attempt, 1 for its retry.

    Sinks get the task attempt's unique id (``taskAttemptId``), which says nothing about retries;
    faults that fire on "the first attempt" ask here: Spark's task context on an executor, the
    local runner's attempt otherwise.
    """
    number = getattr(_task, "number", None)
    if number is not None:
        return number
    try:
        from pyspark import TaskContext
    except ImportError:  # no Spark: only the local runner runs tasks
        return 0
    context = TaskContext.get()
    return context.attemptNumber() if context is not None else 0


class InjectedCrash(RuntimeError):
    """The crash a test asked for."""


class RetryableTaskError(RuntimeError):
    """A task failure that the runner retries (as Spark retries failed tasks)."""


@attrs.define
class FaultPlugin:
    """Crash at ``point`` (one of :data:`POINTS`); ``partition`` and ``name`` refine it.

    ``after_commit`` may be narrowed to one ``batch`` and to the first ``times`` crashes, so a
    streaming query crashes once and its restart runs on.
    """

    point: str
    partition: int = 1
    name: str | None = None
    batch: int | None = None
    times: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.point not in POINTS:
            raise ValueError(f"unknown fault point {self.point!r}; known: {', '.join(POINTS)}")

    @hookimpl(wrapper=True)
    def init(self) -> Generator[None, Any, Any]:
        state = yield
        if self.point == "after_init":
            raise InjectedCrash("after init, before write")
        return state

    @hookimpl(wrapper=True)
    def write(self, partition_id: int) -> Generator[None, Any, Any]:
        if self.point == "mid_write" and partition_id >= self.partition:
            raise InjectedCrash(f"mid-write, partition {partition_id}")
        message = yield
        first = attempt_number() == 0
        if self.point == "task_retry" and partition_id == self.partition and first:
            raise RetryableTaskError(f"task of partition {partition_id} lost after writing")
        return message

    @hookimpl(wrapper=True)
    def commit(self, ctx: Any) -> Generator[None, Any, Any]:
        if self.point == "before_commit":
            raise InjectedCrash("after write, before commit")
        if self.point == "inside_commit":
            set_crash_handler(self._crash_inside)
        try:
            result = yield
        finally:
            set_crash_handler(None)
        if self.point == "after_commit" and self._fires(ctx):
            raise InjectedCrash("after commit, before Spark records the batch")
        return result

    def _fires(self, ctx: Any) -> bool:
        if self.batch is not None and ctx.batch_id != self.batch:
            return False
        if self.times is not None:
            if self.times <= 0:
                return False
            self.times -= 1
        return True

    def _crash_inside(self, name: str) -> None:
        if name == self.name:
            raise InjectedCrash(f"inside commit at {name}")


@attrs.frozen
class BeforeCommit:
    """Runs ``action()`` on the driver after the batch's tasks wrote and before the sink's
    ``commit`` begins: another program acting on the target while the batch waits."""

    action: Callable[[], Any]

    @hookimpl(wrapper=True)
    def commit(self) -> Generator[None, Any, Any]:
        self.action()
        return (yield)


@attrs.define
class CrashPointRecorder:
    """Records the crash points a sink's ``commit`` passes (to crash at each in turn)."""

    seen: list[str] = attrs.field(factory=list)

    @hookimpl(wrapper=True)
    def commit(self, ctx: Any) -> Generator[None, Any, Any]:
        set_crash_handler(self.seen.append)
        try:
            return (yield)
        finally:
            set_crash_handler(None)


#: A part file named as Spark's file writer names them (``part-<task>-<job uuid>-c<n>``).
FOREIGN_PART_FILE = "part-00000-0f0e0d0c-0b0a-0908-0706-050403020100-c000.snappy.parquet"


@attrs.frozen
class LeftoverPartFile:
    """An executor plugin for sinks that let Spark's file writer stage a batch's files: in the
    first task's write it leaves, in the batch's staging folder under ``staging_root``, the
    part file of a task attempt that was not the committed one (one that committed in place,
    then lost to its speculative copy). The sink must count the staged rows against the rows
    its tasks reported and refuse the batch, never publish the stray file.

    ``ids`` are the stray file's rows (an ``id`` column of ``id_type``: the stream's own type).
    """

    staging_root: str
    ids: tuple[int, ...] = (-1, -2, -3)
    id_type: str = "int64"

    @hookimpl(wrapper=True)
    def write(self, partition_id: int) -> Generator[None, Any, Any]:
        if partition_id == 0:
            import pyarrow as pa
            import pyarrow.parquet as pq

            (staging,) = os.listdir(self.staging_root)
            ids = pa.array(list(self.ids), getattr(pa, self.id_type)())
            path = os.path.join(self.staging_root, staging, FOREIGN_PART_FILE)
            pq.write_table(pa.table({"id": ids}), path)
        return (yield)


def assert_leftover_part_file_refused(
    df: Any,
    sink: Any,
    staging_root: str,
    rows: int,
    nothing_published: Callable[[], None],
    *,
    id_type: str = "int64",
) -> None:
    """Write ``df`` (``rows`` rows, over several tasks) to ``sink`` with a
    :class:`LeftoverPartFile` in its staging folder: the batch must be refused, its staged rows
    counted against the tasks' own, and ``nothing_published`` (the caller's check of the
    target) must pass; written again without the stray file, the batch must commit."""
    import pytest

    import eosink
    from eosink.errors import StagedRowsMismatchError

    stray = LeftoverPartFile(staging_root, id_type=id_type)
    with pytest.raises(
        StagedRowsMismatchError, match=f"staged {rows + len(stray.ids)} rows.*counted {rows}"
    ):
        eosink.write_batch(df, sink, writer_id="job", version=1, executor_plugins=[stray])
    nothing_published()
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert outcome.status == "committed"
