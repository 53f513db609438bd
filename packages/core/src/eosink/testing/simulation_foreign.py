"""Foreign hands in a generated history (:mod:`eosink.testing.simulation`): between any two
steps of the protocol, another program acts on the target.

A sink shares its table with other programs: an application appending its own rows, the
store's maintenance (compaction, checkpoints, vacuum, snapshot expiry, ``VACUUM FULL``), a
schema or partition change, a migration. Each may run while a batch of the stream is half
done: between a ``begin`` (prepared and written) and its ``commit_begun``, inside a commit
between two of the sink's own points (its ``crash_point`` names: after its checks, before
its publication), between a crash and the replay, between two writers' batches. A kit
names its store's foreign steps in
:meth:`~eosink.testing.simulation.SinkSimulation.simulation_foreign_steps`; a history draws
one of them as a step of its own. The judge then holds the target to the same rule as ever,
with the foreign rows counted:

* rows a foreign step appends (:meth:`ForeignHand.rows` gives them ids of a writer no stream
  has, :data:`FOREIGN_WRITER`) are seen exactly once by every full and filtered read after it;
* maintenance changes nothing a reader sees;
* a step that leaves the target unusable for the sink (``ForeignOutcome(damaged=True)``) must
  make the next batch refuse with a clear :class:`~eosink.errors.EosinkError`, as the kit's
  ``damage`` step does.

``past_retention`` moves the history's clock past the store's retention
(:attr:`~eosink.testing.simulation.SinkSimulation.simulation_retention_s`), where expiry and
log cleanup take what a slow batch still relies on.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from eosink.crash import set_crash_handler
from eosink.errors import EosinkError
from eosink.process import simulated_process
from eosink.protocol import run_batch
from eosink.testing.arrow_data import record_batches
from eosink.testing.simulation_keyed import set_column
from eosink.testing.simulation_model import row_id

if TYPE_CHECKING:
    from eosink.testing.simulation import SinkSimulation
    from eosink.testing.simulation_model import (
        Attempt,
        CrashPoints,
        HistorySpec,
        SimClock,
        SimTarget,
        Writer,
    )

#: The writer index of foreign rows: no stream of a history has it (at most a few writers),
#: and its ids stay far inside int64 (``row_id(FOREIGN_WRITER, ...)`` < 2**40).
FOREIGN_WRITER = 999


@attrs.frozen
class ForeignOutcome:
    """What a foreign step did. ``appended``: the rows it made visible (those drawn from
    :meth:`ForeignHand.rows`; ``None``: none). ``damaged``: the target is now one the sink
    must refuse (the next batch must fail with a clear error). ``skipped``: why it did nothing
    (no table yet, a shape the foreign program cannot write), for the statistics."""

    appended: pa.Table | pa.RecordBatch | None = None
    damaged: bool = False
    skipped: str | None = None


@attrs.define
class ForeignHand:
    """What a foreign step gets: the history's draws, rows of its own, and whether a batch
    of the stream is in flight (begun, not committed: a vacuum of unreferenced files with no
    retention would delete its files, which Delta and Iceberg tell operators never to do)."""

    data: Any  # hypothesis's DataObject, or a Script in a regression test
    spec: HistorySpec
    clock: SimClock
    in_flight: bool
    #: The step runs inside a commit of the stream (between two of the sink's points).
    inside_commit: bool
    _kit: SinkSimulation
    _batch: int

    def draw(self, strategy: st.SearchStrategy[Any], label: str | None = None) -> Any:
        return self.data.draw(strategy, label=label)

    def rows(self, max_rows: int = 4) -> pa.Table:
        """1 to ``max_rows`` rows of the history's schema, with ids no writer of the stream
        has (:data:`FOREIGN_WRITER`), of the values the kit's stream rows draw."""
        n = self.draw(st.integers(1, max_rows), label="foreign rows")
        ids = [row_id(FOREIGN_WRITER, self._batch, 0, i) for i in range(n)]
        batch = self.draw(
            record_batches(
                self.spec.schema,
                ids,
                values=self._kit.simulation_values_of(self.spec),
                wide=self._kit.simulation_wide_values,
                partition_by=self.spec.partition_by,
            ),
            label="foreign rows",
        )
        key = self._kit.simulation_upsert_key
        if key:  # a key no stream batch carries (theirs are small: simulation_keyed.KEYS)
            batch = set_column(batch, key, ids)
        return pa.Table.from_batches([batch])


#: A foreign step: what another program does to the target.
ForeignStep = Callable[[ForeignHand], ForeignOutcome]


class ForeignHands:
    """The foreign steps of :class:`~eosink.testing.simulation_history.History` (a mixin:
    the history holds the state they change)."""

    kit: SinkSimulation
    spec: HistorySpec
    target: SimTarget | None
    clock: SimClock
    crash_points: CrashPoints
    writers: list[Writer]
    zombies: list[Attempt]
    data: dict[tuple[int, int], list[list[pa.RecordBatch]]]
    status: dict[tuple[int, int], str]
    #: every commit seen to land (or in doubt), in order: foreign appends among them
    landings: list[tuple[tuple[int, int], bool]]
    damaged: bool
    stats: Counter[str]
    _in: Callable[[str, Callable[[], Any]], Any]
    _context: Callable[..., Any]
    _runner: Callable[..., Any]
    input_schema: pa.Schema

    def foreign_steps(self) -> Mapping[str, ForeignStep]:
        """The kit's foreign steps for this history's target (asked once per history)."""
        steps = self.__dict__.get("_foreign_steps")
        if steps is None:
            steps = {}
            if self.target is not None:
                steps = dict(self.kit.simulation_foreign_steps(self.spec, self.target))
            self.__dict__["_foreign_steps"] = steps
            self.__dict__["_foreign_batches"] = itertools.count()
        return steps

    @precondition(lambda self: not self.damaged and bool(self.foreign_steps()))
    @rule(data=st.data())
    def foreign_step(self, data: st.DataObject) -> None:
        """Another program acts on the target (see the module's docstring)."""
        name = data.draw(st.sampled_from(sorted(self.foreign_steps())), label="foreign step")
        outcome = self._foreign(data, name, inside_commit=False)
        if outcome.damaged:
            self.expect_refusal(data, f"after the foreign step {name}")

    @precondition(
        lambda self: not self.damaged and bool(self.foreign_steps()) and self.crash_points.seen
    )
    @rule(data=st.data())
    def foreign_step_inside_commit(self, data: st.DataObject) -> None:
        """Arms a foreign step at one of the sink's points inside ``commit`` (its
        ``crash_point`` names, as commits reveal them): the next commit that reaches the point
        lets the other program act there, between the sink's checks and its publication
        (a commit from a fresh worker has no points armed)."""
        name = data.draw(st.sampled_from(sorted(self.foreign_steps())), label="foreign step")
        point = data.draw(st.sampled_from(sorted(self.crash_points.seen)), label="at point")

        def act(reached: str) -> None:
            if reached != point:
                return
            self.crash_points.also = None
            self.crash_points.foreign_acted += 1
            set_crash_handler(None)  # the other program's own points are not the commit's
            # nor are the store faults armed for the batch: they wait while it acts (a
            # store that cannot give them back, the S3 server's, drops them)
            store = self.target.store
            waiting = store.disarm() if store is not None else None
            try:
                outcome = self._foreign(data, name, inside_commit=True)
            finally:
                set_crash_handler(self.crash_points._reached)
                if waiting:
                    store.arm(*waiting)
            assert not outcome.damaged, (
                f"the foreign step {name} damaged the target inside a commit: a step that "
                "damages returns skipped when ForeignHand.inside_commit"
            )

        self.crash_points.also = act

    def _foreign(self, data: st.DataObject, name: str, inside_commit: bool) -> ForeignOutcome:
        self.foreign_steps()
        batch = next(self.__dict__["_foreign_batches"])
        hand = ForeignHand(
            data=data,
            spec=self.spec,
            clock=self.clock,
            in_flight=bool(self.zombies or any(w.live for w in self.writers)) or inside_commit,
            inside_commit=inside_commit,
            kit=self.kit,
            batch=batch,
        )
        with simulated_process(f"foreign-{batch}"):
            outcome = self.foreign_steps()[name](hand)
        self.stats[f"foreign_{name}{'_inside_commit' if inside_commit else ''}"] += 1
        if outcome.skipped is not None:
            self.stats["foreign_skipped"] += 1
            return outcome
        if outcome.appended is not None and outcome.appended.num_rows:
            table = outcome.appended
            batches = table.to_batches() if isinstance(table, pa.Table) else [table]
            self.data[(FOREIGN_WRITER, batch)] = [batches]
            self.status[(FOREIGN_WRITER, batch)] = "committed"
            # True: landed before every commit recorded after it; False (inside a commit):
            # before or after the commit around it, as the sink's point was before or after
            # its publication
            self.landings.append(((FOREIGN_WRITER, batch), not inside_commit))
            self.stats["foreign_rows"] += table.num_rows
        return outcome

    def expect_refusal(self, data: st.DataObject, why: str) -> None:
        """The target can no longer take batches: the next one must be refused with a clear
        error (or skipped, writing nothing, when it may be there already)."""
        self.damaged = True
        writer = data.draw(st.sampled_from(self.writers), label="writer")
        sink = self._in(writer.pid, self.target.sink)
        with simulated_process(writer.pid):
            try:
                outcome = run_batch(
                    sink, self._context(writer, sink), self.input_schema, self._runner([])
                )
            except EosinkError:
                return
        if outcome.status == "skipped" and (writer.index, writer.batch) in self.status:
            return
        raise AssertionError(f"a batch {why} was {outcome.status}, not refused")

    @precondition(lambda self: self.kit.simulation_retention_s is not None)
    @rule(extra=st.sampled_from([1.0, 3600.0]))
    def past_retention(self, extra: float) -> None:
        """The clock moves past the store's retention (log retention, snapshot expiry):
        whatever a slow batch relies on may be cleaned up from now on."""
        self.clock.t += self.kit.simulation_retention_s + extra
