"""Generated histories: the conformance kit's simulation, which finds what no scenario thought of.

A scenario test checks one history someone imagined. Here hypothesis generates the histories
(a rule-based state machine) and the data (:mod:`eosink.testing.arrow_data`), and an
independent reader judges every step. A history is, on one empty target:

* a schema of the types the sink accepts and partition columns among them, nulls included;
* one to three writers (stream queries, each its own writer id, query id and process);
* steps, in any order: a whole batch of a writer, possibly with a crash at one of the
  protocol's points (``eosink.testing.faults.POINTS`` and the sink's own ``crash_point`` names)
  or a store fault armed below the sink (:mod:`eosink.testing.faultfs`, or the S3 test
  server's); a batch begun (prepared and written) but committed later, after other writers'
  batches, from the same process or from a fresh one (Spark's data-source door commits in
  another worker); a driver restart (its unfinished attempt becomes a zombie that may commit
  later); the clock moving on (:mod:`eosink.clock`: delays of minutes pass at once); the
  sink's cleanup; a target damaged by hand;
* at the end, Spark's recovery: every writer replays its unfinished batch and writes one more.

After every step the independent reader (the subclass's, never the sink's own) must see every
batch that reported success exactly once, every batch in doubt (a crash, a lost reply) wholly
or not at all, and nothing else. Audits ask ``is_committed`` from a fresh process: a proof
without its data, or data without its proof, fails the history. A damaged target must be
refused with a clear error (an :class:`~eosink.errors.EosinkError`), never written on.
An idempotent receiver (``simulation_visible_before_commit``) shows rows as it writes them:
there a batch in doubt may be seen in part, and rows without their proof, never a row twice.

A sink's tests subclass :class:`SinkSimulation` and say how to make a fresh target::

    class TestMySinkSimulation(SinkSimulation):
        simulation_partition_types = ("string", "int64")

        def simulation_target(self, spec, env):
            path = tempfile.mkdtemp()
            return SimTarget(
                sink=lambda: MySink(path=path, partition_by=spec.partition_by, **spec.options),
                read=lambda: my_independent_reader(path),
                close=lambda: shutil.rmtree(path),
            )

In CI the number of examples is fixed and the run derandomized, so a red run is the same run
again; ``python -m eosink.testing.soak`` runs the same tests with new seeds for as long as
asked. A failing history is printed as the steps hypothesis shrank it to: make it a
regression test.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from eosink import clock
from eosink.crash import set_crash_handler
from eosink.errors import EosinkError
from eosink.hookspecs import hookimpl
from eosink.model import BatchContext
from eosink.process import forget_process, simulated_process
from eosink.protocol import WriteTask, abort_quietly, driver_plugins, finish, prepare, run_batch
from eosink.registry import plugin_manager
from eosink.testing.arrow_data import SCALAR_TYPES, comparable, record_batches, schemas
from eosink.testing.faults import FaultPlugin, InjectedCrash
from eosink.testing.faultfs import OPS, FaultTarget, StoreFault
from eosink.testing.local import LocalRunner

#: Points between phases where a batch may crash (``inside_commit`` is drawn from the sink's
#: own crash points, as commits reveal them).
PHASE_POINTS = ("after_init", "mid_write", "before_commit", "after_commit", "task_retry")
#: ids: writer * WRITER_SPAN + batch * BATCH_SPAN + partition * PARTITION_SPAN + row
PARTITION_SPAN, BATCH_SPAN, WRITER_SPAN = 1_000, 100_000, 10**9
EPOCH = 1_800_000_000.0


@attrs.frozen
class HistorySpec:
    """What one history writes: the rows' schema, partition columns, writers, sink options."""

    schema: pa.Schema
    partition_by: tuple[str, ...]
    writers: int
    options: dict[str, Any] = attrs.field(factory=dict)


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
    simulated). ``close``: removes the target.
    """

    sink: Callable[[], Any]
    read: Callable[[], Any]
    store: FaultTarget | None = None
    damage: Callable[[], None] | None = None
    close: Callable[[], None] = attrs.field(default=lambda: None)


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

    @hookimpl(wrapper=True)
    def commit(self) -> Any:
        set_crash_handler(self._reached)
        try:
            return (yield)
        finally:
            set_crash_handler(None)

    def _reached(self, name: str) -> None:
        self.seen.add(name)
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


@attrs.define
class Writer:
    index: int
    writer_id: str
    query_id: str
    generation: int = 0
    batch: int = 0  # the batch it runs now (Spark's current batch id)
    live: Attempt | None = None  # its current process's attempt in flight

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
    return writer * WRITER_SPAN + batch * BATCH_SPAN + partition * PARTITION_SPAN + row


def batch_of(row_id: int) -> tuple[int, int]:
    return row_id // WRITER_SPAN, row_id % WRITER_SPAN // BATCH_SPAN


class SinkSimulation:
    """Abstract generated-history tests; subclasses implement :meth:`simulation_target`."""

    #: The column types the sink accepts (names of :data:`~eosink.testing.arrow_data.COLUMN_TYPES`).
    simulation_types: Sequence[str] = SCALAR_TYPES
    #: The types it can partition by (none: the sink takes no partition columns).
    simulation_partition_types: Sequence[str] = ()
    simulation_max_writers = 3
    #: Examples per run and steps per example in CI (``EOSINK_SIMULATION_EXAMPLES`` overrides).
    simulation_examples = 15
    simulation_steps = 25
    #: A store fault fires at one of the first this many matching requests of a batch: about
    #: what one batch of the sink asks of its store, so that most faults armed do fire.
    simulation_store_requests = 16
    #: Values of a type narrower than :data:`~eosink.testing.arrow_data.COLUMN_TYPES` draws,
    #: where the store holds less (type name -> strategy; e.g. YT's dates start in 1970). The
    #: sink's own tests then check that it refuses the rest with a clear error.
    simulation_values: Mapping[str, st.SearchStrategy[Any]] = {}
    #: True for a sink that writes rows straight into the target, keyed by their source row
    #: (an idempotent receiver, such as YT dynamic tables): a batch that has not committed may
    #: be partly visible, and its rows may be visible without its proof. Every row seen must
    #: still be a row of a written batch, seen once, and a committed batch must be whole.
    simulation_visible_before_commit = False

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        """Sink options drawn per history (e.g. small compaction intervals)."""
        return st.just({})

    def simulation_store_faults(self) -> st.SearchStrategy[StoreFault]:
        """The store faults a batch may meet (on targets with a ``store``): any request's
        error, lost reply or cut upload, at one of the first ``simulation_store_requests``
        requests. A kit adds faults aimed at its store's decisive requests (e.g. a catalog's
        commit), which a uniform draw would seldom hit."""
        return st.builds(
            StoreFault,
            kind=st.sampled_from(["error", "lost_reply", "short_write"]),
            after=st.integers(1, self.simulation_store_requests),
            ops=st.sampled_from([OPS, ("put",), ("get", "head"), ("list",), ("delete",)]),
        )

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        raise NotImplementedError("a SinkSimulation subclass says how to make a target")

    def simulation_batch(
        self, spec: HistorySpec, batch: pa.RecordBatch, writer: int, batch_id: int, partition: int
    ) -> pa.RecordBatch:
        """The record batch as the sink gets it, for sinks that need columns the generated rows
        lack (e.g. the source coordinates an idempotent receiver keys rows by). It must be the
        same on every replay; the judge compares the spec's columns only. The default:
        unchanged. The schema handed to ``init`` is this applied to an empty batch."""
        return batch

    def simulation_row(self, spec: HistorySpec, row: dict[str, Any]) -> dict[str, Any]:
        """A source row as the target's readers give it back (e.g. Spark reads a "" partition
        value as null); the default: unchanged."""
        return row

    @pytest.fixture
    def simulation_env(self) -> Any:
        """Whatever :meth:`simulation_target` needs from pytest (a server, a client)."""
        return None

    def test_generated_histories(self, simulation_env: Any) -> None:
        run_state_machine_as_test(
            self.history_machine(simulation_env), settings=self.simulation_settings()
        )

    def history_machine(self, env: Any) -> type[History]:
        """The rule-based machine of this kit's histories against ``env``. A regression test
        replays a shrunk history with an instance of it, calling its steps in order with a
        :class:`Script` of the draws the failure report lists."""
        return type(f"{type(self).__name__}History", (History,), {"kit": self, "env": env})

    def simulation_settings(self) -> settings:
        soak = os.environ.get("EOSINK_SIMULATION_SOAK") == "1"
        examples = int(os.environ.get("EOSINK_SIMULATION_EXAMPLES", self.simulation_examples))
        return settings(
            max_examples=examples,
            stateful_step_count=self.simulation_steps,
            derandomize=not soak,
            database=None,
            deadline=None,
            print_blob=True,
            suppress_health_check=list(HealthCheck),
        )


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


class History(RuleBasedStateMachine):
    """One generated history against one target (see the module's docstring)."""

    kit: SinkSimulation
    env: Any

    def __init__(self) -> None:
        super().__init__()
        self.target: SimTarget | None = None
        self.clock = SimClock()
        clock.set_clock(self.clock.now)
        self.crash_points = CrashPoints()
        self.zombies: list[Attempt] = []
        self.data: dict[tuple[int, int], list[list[pa.RecordBatch]]] = {}
        self.status: dict[tuple[int, int], str] = {}  # "committed" or "maybe"
        self.damaged = False
        self.workers = itertools.count()
        self.stats: Counter[str] = Counter()

    # -- set-up ----------------------------------------------------------------------------
    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        kit = self.kit
        schema, partition_by = data.draw(
            schemas(kit.simulation_types, kit.simulation_partition_types), label="schema"
        )
        spec = HistorySpec(
            schema=schema,
            partition_by=partition_by,
            writers=data.draw(st.integers(1, kit.simulation_max_writers), label="writers"),
            options=data.draw(kit.simulation_options(), label="options"),
        )
        self.spec = spec
        empty = pa.RecordBatch.from_pylist([], schema=spec.schema)
        self.input_schema = kit.simulation_batch(spec, empty, 0, 0, 0).schema
        self.writers = [
            Writer(i, f"writer-{i}", f"00000000-0000-4000-8000-{i:012d}")
            for i in range(spec.writers)
        ]
        self.target = kit.simulation_target(spec, self.env)

    def teardown(self) -> None:
        try:
            if self.target is not None and not self.damaged:
                self.recover()
        finally:
            clock.set_clock(None)
            forget_process()
            if self.target is not None:
                self.target.close()
                self._record_stats()

    def _record_stats(self) -> None:
        """One JSON line per history, where the soak command asks for them."""
        path = os.environ.get("EOSINK_SIMULATION_STATS")
        if not path:
            return
        self.stats.update(
            writers=len(self.writers),
            batches=len(self.data),
            store_faults_fired=self._fired(),
            damaged=int(self.damaged),
        )
        line = json.dumps({"kit": type(self.kit).__name__, **self.stats})
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    # -- the steps ---------------------------------------------------------------------------
    @precondition(lambda self: not self.damaged)
    @rule(data=st.data(), batches=st.integers(1, 6))
    def run(self, data: st.DataObject, batches: int) -> None:
        """Whole batches of one writer in a row, each maybe with a crash or a store fault;
        the first failed attempt ends the step (its driver may restart). Several batches in
        one step let the log and the other writers' views age by many commits (another
        writer's long batch outlives them; compactions and expiry come round)."""
        writer = self._idle_writer(data)
        for _ in range(batches if writer is not None else 0):
            if not self._run_one(data, writer):
                return

    def _run_one(self, data: st.DataObject, writer: Writer) -> bool:
        batches = self._batch_data(data, writer)
        fault = self._draw_fault(data)  # armed last: nothing but the batch may meet it
        sink = self._in(writer.pid, self.target.sink)
        ctx = self._context(writer, sink)
        plugins = [self.crash_points, *([fault] if isinstance(fault, FaultPlugin) else [])]
        fired_before = self._fired()
        try:
            with simulated_process(writer.pid):
                outcome = run_batch(
                    sink,
                    ctx,
                    self.input_schema,
                    self._runner(batches),
                    plugins=plugins,
                    executor_plugins=[p for p in plugins if isinstance(p, FaultPlugin)],
                )
        except Exception as exc:
            self._disarm()
            injected = isinstance(exc, InjectedCrash) or self._fired() > fired_before
            if not injected:
                raise
            self._failed(writer, restart=data.draw(st.booleans(), label="driver restarts"))
            return False
        finally:
            self.crash_points.crash_at = None
        self._disarm()
        self._done(writer, outcome.status)
        return True

    @precondition(lambda self: not self.damaged)
    @rule(data=st.data())
    def begin(self, data: st.DataObject) -> None:
        """Prepare and write a batch; its commit comes in a later step."""
        writer = self._idle_writer(data)
        if writer is None:
            return
        batches = self._batch_data(data, writer)
        with simulated_process(writer.pid):
            sink = self.target.sink()
            ctx = self._context(writer, sink)
            pm = plugin_manager(sink, driver_plugins([self.crash_points]))
            prepared = prepare(pm, ctx, self.input_schema)
            if prepared.skipped is not None:
                self._done(writer, "skipped")
                return
            try:
                results = self._runner(batches)(WriteTask(sink, ctx, prepared.state))
            except BaseException:
                abort_quietly(pm, ctx, prepared.state, [])
                raise
        writer.live = Attempt(
            writer.index, writer.batch, writer.pid, pm, ctx, prepared.state, results
        )

    @precondition(
        lambda self: not self.damaged and (any(w.live for w in self.writers) or self.zombies)
    )
    @rule(data=st.data())
    def commit_begun(self, data: st.DataObject) -> None:
        """Commit a begun attempt (a live one or a zombie), maybe from a fresh worker."""
        attempts = [w.live for w in self.writers if w.live] + self.zombies
        attempt = data.draw(st.sampled_from(attempts), label="attempt")
        fresh = data.draw(st.booleans(), label="commit in a fresh worker")
        writer = self.writers[attempt.writer]
        live = attempt is writer.live
        if live:
            writer.live = None
        else:
            self.zombies.remove(attempt)
        pid, pm = attempt.pid, attempt.pm
        if fresh:
            pid = f"{attempt.pid}/worker-{next(self.workers)}"
            pm = self._in(pid, lambda: plugin_manager(self.target.sink(), driver_plugins(())))
        try:
            with simulated_process(pid):
                outcome = finish(pm, attempt.ctx, attempt.state, attempt.results)
        except EosinkError:
            # a clean refusal (its files were cleaned up, the log moved on): Spark replays
            with simulated_process(pid):
                abort_quietly(pm, attempt.ctx, attempt.state, [r.message for r in attempt.results])
            self._mark(attempt.writer, attempt.batch, "maybe")
            return
        if live:
            self._done(writer, outcome.status)
        elif outcome.status == "committed":
            self._mark(attempt.writer, attempt.batch, "committed")

    @rule(data=st.data())
    def restart(self, data: st.DataObject) -> None:
        """A driver restarts: what it kept in memory is gone; its attempt in flight lives on
        as a zombie that may still commit."""
        writer = data.draw(st.sampled_from(self.writers), label="writer")
        if writer.live is not None:
            self.zombies.append(writer.live)
            writer.live = None
        writer.generation += 1

    @rule(seconds=st.sampled_from([0.5, 5.0, 61.0, 700.0, 4000.0, 90000.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.t += seconds

    @precondition(lambda self: not self.damaged)
    @rule(older_than=st.sampled_from([0.0, 60.0, 3600.0]))
    def cleanup(self, older_than: float) -> None:
        """The operator's ``eosink cleanup --delete`` (from its own process). On a target that
        holds no batch yet (no table, no log) a sink may refuse with a clear error instead."""
        pid = f"operator-{next(self.workers)}"
        with simulated_process(pid):
            pm = plugin_manager(self.target.sink())
            try:
                pm.hook.cleanup_target(older_than_s=older_than, delete=True)
            except EosinkError:
                if "committed" in self.status.values():
                    raise

    @precondition(
        lambda self: not self.damaged
        and self.target is not None
        and self.target.damage is not None
        and list(self.status.values()).count("committed") >= 2
    )
    @rule(data=st.data())
    def damage(self, data: st.DataObject) -> None:
        """The target is damaged by hand: the next batch must refuse it, with a clear error
        (or skip it, writing nothing, if the batch may be there already: a crash after its
        commit left it in doubt)."""
        self.target.damage()
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
        raise AssertionError(f"a batch into a damaged target was {outcome.status}, not refused")

    # -- the judge ---------------------------------------------------------------------------
    @invariant()
    def readers_see_each_batch_once(self) -> None:
        self.stats["steps"] += 1
        if self.target is None or self.damaged:
            return
        self.check_rows()

    @precondition(lambda self: not self.damaged)
    @rule()
    def audit(self) -> None:
        """``is_committed``, asked from a fresh process, agrees with what readers see."""
        held = self._held()
        pid = f"auditor-{next(self.workers)}"
        for writer in self.writers:
            for batch in range(writer.batch + 1):
                if (writer.index, batch) not in self.data:
                    continue
                sink = self._in(pid, self.target.sink)
                ctx = self._context(writer, sink, batch)
                with simulated_process(pid):
                    proof = plugin_manager(sink).hook.is_committed(ctx=ctx)
                rows = self._expected(writer.index, batch)
                has_rows = bool(held.get((writer.index, batch)))
                if self.kit.simulation_visible_before_commit and proof is None:
                    has_rows = False  # rows without their proof: a batch not committed yet
                if rows and (proof is not None) != has_rows:
                    raise AssertionError(
                        f"{writer.writer_id} batch {batch}: is_committed says "
                        f"{'committed' if proof else 'not committed'}, readers see "
                        f"{'its rows' if has_rows else 'none of its rows'}"
                    )
                if self.status.get((writer.index, batch)) == "committed" and proof is None:
                    raise AssertionError(
                        f"{writer.writer_id} batch {batch} reported success but has no proof"
                    )

    def check_rows(self) -> None:
        held = self._held()
        unknown = set(held) - set(self.data)
        assert not unknown, f"readers see rows of batches never written: {sorted(unknown)}"
        for key, rows in self.data.items():
            expected = self._expected(*key)
            got = held.get(key, Counter())
            status = self.status.get(key)
            writer_id = self.writers[key[0]].writer_id
            if got == expected or (not got and status != "committed"):
                continue
            partial = self.kit.simulation_visible_before_commit and status != "committed"
            if partial and not got - expected:
                continue  # part of a batch in doubt, each row once (every row has its own id)
            lost = expected - got
            extra = got - expected
            raise AssertionError(
                f"{writer_id} batch {key[1]} ({status or 'never reported'}): readers see "
                f"{sum(got.values())} of its {sum(expected.values())} rows, "
                f"{sum(extra.values())} extra (duplicates or changed values, e.g. "
                f"{list(extra)[:2]}), {sum(lost.values())} missing (e.g. {list(lost)[:2]})"
            )

    def recover(self) -> None:
        """Spark's recovery: zombies finish or die, every writer replays its unfinished
        batch and writes one more; then every batch must be there exactly once. No fault
        is armed any more (a history may end between arming one and running its batch)."""
        self._disarm()
        self.crash_points.crash_at = None
        for attempt in list(self.zombies):
            self.zombies.remove(attempt)
        for writer in self.writers:
            if writer.live is not None:
                writer.live = None
            writer.generation += 1
            for _ in range(2):
                self._replay(writer)
        self.check_rows()
        self.audit()
        for key, status in self.status.items():
            if self._expected(*key):
                assert status == "committed", f"batch {key} is still in doubt after recovery"

    def _replay(self, writer: Writer) -> None:
        sink = self._in(writer.pid, self.target.sink)
        with simulated_process(writer.pid):
            outcome = run_batch(
                sink,
                self._context(writer, sink),
                self.input_schema,
                self._runner(self._batch_data(None, writer)),
            )
        self._done(writer, outcome.status)

    # -- helpers ----------------------------------------------------------------------------
    def _in(self, pid: str, make: Callable[[], Any]) -> Any:
        with simulated_process(pid):
            return make()

    def _idle_writer(self, data: st.DataObject) -> Writer | None:
        idle = [w for w in self.writers if w.live is None]
        return data.draw(st.sampled_from(idle), label="writer") if idle else None

    def _context(self, writer: Writer, sink: Any, batch: int | None = None) -> BatchContext:
        return BatchContext(
            sink=sink.name,
            writer_id=writer.writer_id,
            batch_id=writer.batch if batch is None else batch,
            query_id=writer.query_id,
            checkpoint=f"/checkpoints/{writer.writer_id}",
        )

    def _batch_data(self, data: st.DataObject | None, writer: Writer) -> list[list[pa.RecordBatch]]:
        """The batch's partitions as the sink gets them (:meth:`SinkSimulation.simulation_batch`):
        drawn at its first attempt, the same on every replay."""
        key = (writer.index, writer.batch)
        if key not in self.data:
            partitions: list[list[pa.RecordBatch]] = []
            sizes = data.draw(st.lists(st.integers(0, 5), max_size=3), label="rows") if data else []
            for p, n in enumerate(sizes):
                ids = [row_id(writer.index, writer.batch, p, i) for i in range(n)]
                rows = record_batches(self.spec.schema, ids, values=self.kit.simulation_values)
                partitions.append([data.draw(rows, label="rows")])
            self.data[key] = partitions
        return [
            [self.kit.simulation_batch(self.spec, b, *key, p) for b in partition]
            for p, partition in enumerate(self.data[key])
        ]

    def _runner(self, partitions: list[list[pa.RecordBatch]]) -> Callable[[WriteTask], Any]:
        runner = LocalRunner(partitions)

        def run_writes(task: WriteTask) -> Any:
            with simulated_process("executors"):  # executors share no driver state
                return runner(task)

        return run_writes

    def _draw_fault(self, data: st.DataObject) -> Any:
        choices: list[st.SearchStrategy[Any]] = [
            st.none(),
            st.builds(FaultPlugin, st.sampled_from(PHASE_POINTS), st.integers(0, 2)),
        ]
        if self.crash_points.seen:
            choices.append(st.sampled_from(sorted(self.crash_points.seen)))
        store = self.target.store
        if store is not None:
            choices.append(self.kit.simulation_store_faults())
        # half of the batches without a fault: a history needs commits to break
        fault = data.draw(st.one_of(st.none(), st.one_of(choices)), label="fault")
        self.stats[f"fault_{_fault_kind(fault)}"] += 1
        if isinstance(fault, str):
            self.crash_points.crash_at = fault
        elif isinstance(fault, StoreFault):
            store.arm(fault)
        return fault

    def _fired(self) -> int:
        store = self.target.store
        if store is None:
            return 0
        fired = store.fired
        return fired if isinstance(fired, int) else len(fired)  # a count, or the faults fired

    def _disarm(self) -> None:
        store = self.target.store
        if store is not None:
            store.disarm()

    def _failed(self, writer: Writer, restart: bool) -> None:
        self._mark(writer.index, writer.batch, "maybe")
        if restart:
            writer.generation += 1

    def _done(self, writer: Writer, status: str) -> None:
        self._mark(writer.index, writer.batch, "committed")
        writer.batch += 1

    def _mark(self, writer: int, batch: int, status: str) -> None:
        if self.status.get((writer, batch)) != "committed":
            self.status[(writer, batch)] = status

    def _expected(self, writer: int, batch: int) -> Counter:
        rows: Counter = Counter()
        for partition in self.data.get((writer, batch), []):
            for record_batch in partition:
                for row in record_batch.to_pylist():
                    rows[self._comparable(self.kit.simulation_row(self.spec, row))] += 1
        return rows

    def _comparable(self, row: dict[str, Any]) -> tuple:
        return tuple(comparable(row.get(name)) for name in self.spec.schema.names)

    def _held(self) -> dict[tuple[int, int], Counter]:
        read = self.target.read()
        if isinstance(read, pa.Table):
            read = read.select(self.spec.schema.names).cast(self.spec.schema).to_pylist()
        held: dict[tuple[int, int], Counter] = {}
        for row in read:
            held.setdefault(batch_of(row["id"]), Counter())[self._comparable(row)] += 1
        return held


__all__ = [
    "CrashPoints",
    "History",
    "HistorySpec",
    "SimClock",
    "SimTarget",
    "SinkSimulation",
    "StoreFault",
]
