"""The parts of a generated history (:mod:`eosink.testing.simulation`): what it writes, its
target, its clock, its writers and their attempts, the crash points met inside commits, and
the ids that tell which writer's batch a row came from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pyarrow as pa

from eosink.crash import set_crash_handler
from eosink.hookspecs import hookimpl
from eosink.model import BatchContext
from eosink.testing.faults import FaultPlugin, InjectedCrash
from eosink.testing.faultfs import FaultTarget

#: Points between phases where a batch may crash (``inside_commit`` is drawn from the sink's
#: own crash points, as commits reveal them).
PHASE_POINTS = ("after_init", "mid_write", "before_commit", "after_commit", "task_retry")
#: ids: writer * WRITER_SPAN + batch * BATCH_SPAN + partition * PARTITION_SPAN + row
PARTITION_SPAN, BATCH_SPAN, WRITER_SPAN = 1_000, 100_000, 10**9
#: Batch ids a row id can tell apart (a writer's batch ids may jump, but stay below this).
MAX_BATCH = WRITER_SPAN // BATCH_SPAN
EPOCH = 1_800_000_000.0
#: Keys of a writer's options that the kit takes itself, not the sink: ``fingerprint``, the
#: core's replay check (``run_batch``'s ``fingerprint``: ``"off"``, ``"warn"``, ``"error"``).
KIT_OPTIONS = ("fingerprint",)


@attrs.frozen
class HistorySpec:
    """What one history writes: the rows' schema, partition columns, writers, sink options.

    ``options``: the sink options every writer shares; ``writer_options``: each writer's own
    (:meth:`~eosink.testing.simulation.SinkSimulation.simulation_writer_options`), merged over
    the shared ones for that writer's sink (empty: every writer uses ``options`` alone);
    ``output_mode``: the mode of every writer's batches, or ``"mixed"``: each writer's own
    in ``writer_modes``."""

    schema: pa.Schema
    partition_by: tuple[str, ...]
    writers: int
    options: dict[str, Any] = attrs.field(factory=dict)
    writer_options: tuple[dict[str, Any], ...] = ()
    #: Every writer's output mode (``"append"`` or ``"complete"``), or ``"mixed"``.
    output_mode: str = "append"
    #: Each writer's output mode where ``output_mode`` is ``"mixed"``.
    writer_modes: tuple[str, ...] = ()

    def mode_of(self, writer: int) -> str:
        """The output mode of writer ``writer``'s batches (a foreign writer appends)."""
        if not 0 <= writer < self.writers:
            return "append"
        return self.writer_modes[writer] if self.output_mode == "mixed" else self.output_mode

    def own_options(self, writer: int) -> dict[str, Any]:
        """The options writer ``writer`` drew for itself (kit keys included)."""
        return dict(self.writer_options[writer]) if writer < len(self.writer_options) else {}

    def sink_options(self, writer: int) -> dict[str, Any] | None:
        """The options of writer ``writer``'s sink: its own merged over the shared ones, kit
        keys left out; None when it drew none (its sink is then :attr:`SimTarget.sink`'s)."""
        own = {k: v for k, v in self.own_options(writer).items() if k not in KIT_OPTIONS}
        return {**self.options, **own} if own else None

    def of_writer(self, writer: int) -> HistorySpec:
        """This spec as writer ``writer`` wrote: its options are that writer's sink's (this
        very spec when the writer drew none of its own, as a foreign writer)."""
        own = self.sink_options(writer)
        return self if own is None else attrs.evolve(self, options=own)

    def fingerprint(self, writer: int) -> str:
        """The core's replay check for writer ``writer`` (``"off"`` unless it drew one)."""
        return str(self.own_options(writer).get("fingerprint", "off"))


@attrs.frozen
class Predicate:
    """A filter on one column, as a reader pushes it down: ``op`` is ``"eq"`` (equal to
    ``value``), ``"is_null"``, or ``"between"`` (``value`` <= it <= ``high``, both ends in).
    Values are of the column's type as Arrow gives them back (``to_pylist``)."""

    column: str
    op: str
    value: Any = None
    high: Any = None

    def matches(self, value: Any) -> bool:
        """Whether a row holding ``value`` passes (SQL's meaning: null and NaN pass no
        comparison; the bounds are never null nor NaN)."""
        if self.op == "is_null":
            return value is None
        if value is None or value != value:  # NaN
            return False
        if self.op == "eq":
            return bool(value == self.value)
        return bool(self.value <= value <= self.high)

    def __str__(self) -> str:
        if self.op == "is_null":
            return f"{self.column} IS NULL"
        if self.op == "eq":
            return f"{self.column} = {_short(self.value)}"
        return f"{self.column} BETWEEN {_short(self.value)} AND {_short(self.high)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


@attrs.define
class SimTarget:
    """One fresh, empty target for one history.

    ``sink``: a new sink instance on the target, built from options alone (as a restarted
    query, an executor or Spark's data-source worker builds it). ``read``: every row a reader
    of the target sees, by a reader independent of the sink (Spark's semantics for files,
    delta-rs for Delta, the store itself...): a ``pyarrow.Table`` or a list of dicts with at
    least the spec's columns. ``store``: where store faults can be armed (a
    :class:`~eosink.testing.faultfs.FaultTarget`; ``None``: the target takes none).
    ``damage``: changes the target as a careless user or a broken tool would (``None``: not
    simulated). ``close``: removes the target. ``filtered``: independent readers that push a
    :class:`Predicate` down (reader name -> function of the predicate returning rows as
    ``read`` does, or ``None`` for a predicate the reader cannot push down): each must return
    exactly the rows of ``read`` that the predicate passes, whatever the files' statistics,
    partition values or indexes let it skip. ``sink_for``: a new sink instance built from a
    writer's options (the shared ones with the writer's own merged over them, see
    :attr:`HistorySpec.writer_options`); needed only by kits whose writers draw options of
    their own (``None``: every sink is ``sink()``).
    """

    sink: Callable[[], Any]
    read: Callable[[], Any]
    store: FaultTarget | None = None
    damage: Callable[[], None] | None = None
    close: Callable[[], None] = attrs.field(default=lambda: None)
    filtered: dict[str, Callable[[Predicate], Any]] = attrs.field(factory=dict)
    sink_for: Callable[[dict[str, Any]], Any] | None = None

    def make_sink(self, options: dict[str, Any] | None = None) -> Any:
        """A writer's sink: ``sink_for(options)`` for a writer with options of its own, else
        ``sink()``."""
        if options is None:
            return self.sink()
        if self.sink_for is None:
            raise TypeError("writers draw options of their own, but the SimTarget has no sink_for")
        return self.sink_for(options)


class SimClock:
    """The time of a history: starts at a fixed instant, moves 1 ms per reading (so that
    modification times differ) and jumps when the history says so."""

    def __init__(self) -> None:
        self.t = EPOCH

    def now(self) -> float:
        self.t += 0.001
        return self.t


@attrs.define
class CrashPoints:
    """Records the sink's crash points inside ``commit`` and crashes at ``crash_at``."""

    seen: set[str] = attrs.field(factory=set)
    crash_at: str | None = None
    #: Called first at every point reached (a foreign step armed inside the commit).
    also: Callable[[str], None] | None = None
    #: How many foreign steps acted inside a commit so far.
    foreign_acted: int = 0

    @hookimpl(wrapper=True)
    def commit(self) -> Any:
        set_crash_handler(self._reached)
        try:
            return (yield)
        finally:
            set_crash_handler(None)

    def _reached(self, name: str) -> None:
        self.seen.add(name)
        if self.also is not None:
            self.also(name)
        if name == self.crash_at:
            self.crash_at = None
            raise InjectedCrash(f"inside commit at {name}")


@attrs.define
class Attempt:
    """A batch attempt begun (prepared, written) and not committed yet."""

    writer: int
    batch: int
    pid: str
    pm: Any
    ctx: BatchContext
    state: Any
    results: list[Any]
    #: How many landings the history had seen when the attempt began (commits after them
    #: overtook it: its view is older than the log it commits to).
    landings_seen: int = 0


@attrs.define
class Writer:
    index: int
    writer_id: str
    query_id: str
    generation: int = 0
    batch: int = 0  # the batch it runs now (Spark's current batch id)
    live: Attempt | None = None  # its current process's attempt in flight
    #: Why the sink refused this writer for good, clearly, as the kit expects
    #: (:meth:`~eosink.testing.simulation.SinkSimulation.simulation_refusal`): it writes no more.
    refused: str | None = None

    @property
    def pid(self) -> str:
        return f"{self.writer_id}#{self.generation}"


def _fault_kind(fault: Any) -> str:
    if fault is None:
        return "none"
    if isinstance(fault, str):
        return "inside_commit"
    if isinstance(fault, FaultPlugin):
        return fault.point
    return f"store_{fault.kind}"


def row_id(writer: int, batch: int, partition: int, row: int) -> int:
    if not (0 <= batch < MAX_BATCH and 0 <= partition < BATCH_SPAN // PARTITION_SPAN):
        raise ValueError(f"batch {batch}, partition {partition}: beyond what a row id can tell")
    return writer * WRITER_SPAN + batch * BATCH_SPAN + partition * PARTITION_SPAN + row


def batch_of(row_id: int) -> tuple[int, int]:
    return row_id // WRITER_SPAN, row_id % WRITER_SPAN // BATCH_SPAN


class Script:
    """The draws of a shrunk history, replayed in order: a stand-in for hypothesis's ``data``.

    A failure report lists each step with its draws; a regression test calls the same steps
    with the same values (``history.run(Script(writer, [2], rows, None), batches=1)``), which
    keeps reproducing after the strategies change, unlike a ``@reproduce_failure`` blob.
    Running out of draws raises :class:`IndexError`, as hypothesis stops a history whose
    draws overrun its budget.
    """

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.values.pop(0)
