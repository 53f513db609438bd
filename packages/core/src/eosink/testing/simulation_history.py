"""The rule-based state machine of a generated history (see :mod:`eosink.testing.simulation`):
its set-up, its steps, Spark's recovery at its end;
:class:`~eosink.testing.simulation_judge.HistoryJudge` judges it."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from eosink import clock
from eosink.errors import EosinkError
from eosink.model import BatchContext
from eosink.process import forget_process, simulated_process
from eosink.protocol import WriteTask, abort_quietly, driver_plugins, finish, prepare, run_batch
from eosink.registry import plugin_manager, upsert_key
from eosink.testing.arrow_data import record_batches, schemas
from eosink.testing.faults import FaultPlugin, InjectedCrash
from eosink.testing.faultfs import StoreFault
from eosink.testing.local import LocalRunner
from eosink.testing.simulation_foreign import ForeignHands
from eosink.testing.simulation_judge import HistoryJudge
from eosink.testing.simulation_keyed import batch_keys, set_column, with_key_column
from eosink.testing.simulation_model import (
    MAX_BATCH,
    PHASE_POINTS,
    Attempt,
    CrashPoints,
    HistorySpec,
    SimClock,
    SimTarget,
    Writer,
    _fault_kind,
    row_id,
)

if TYPE_CHECKING:
    from eosink.testing.simulation import SinkSimulation


class History(ForeignHands, HistoryJudge, RuleBasedStateMachine):
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
        self.keyed = False
        #: Batches in the order they may have landed: (key, True) for a commit seen to land
        #: now, (key, False) for an attempt that failed after it may have (complete mode's
        #: judge: the table holds the rows of the last to land).
        self.landings: list[tuple[tuple[int, int], bool]] = []
        self.workers = itertools.count()
        self.stats: Counter[str] = Counter()

    # -- set-up ----------------------------------------------------------------------------
    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        kit = self.kit
        schema, partition_by = data.draw(
            schemas(kit.simulation_types, kit.simulation_partition_types), label="schema"
        )
        if kit.simulation_upsert_key:
            schema = with_key_column(schema, kit.simulation_upsert_key)
        spec = HistorySpec(
            schema=schema,
            partition_by=partition_by,
            writers=data.draw(st.integers(1, kit.simulation_max_writers), label="writers"),
            options=data.draw(kit.simulation_options(), label="options"),
        )
        modes = list(kit.simulation_output_modes)
        if modes != ["append"]:
            mode = data.draw(st.sampled_from(modes), label="mode") if len(modes) > 1 else modes[0]
            spec = attrs.evolve(spec, output_mode=mode)
            self.stats[f"mode_{mode}"] += 1
            if mode == "mixed":  # each writer its own: an append beside a complete-mode writer
                own = st.sampled_from(["append", "complete"])
                drawn = [data.draw(own, label=f"writer-{i} mode") for i in range(spec.writers)]
                spec = attrs.evolve(spec, writer_modes=tuple(drawn))
        if kit.simulation_writer_shapes:
            own = kit.simulation_writer_options(spec)
            spec = attrs.evolve(
                spec,
                writer_options=tuple(
                    data.draw(own, label=f"writer-{i} options") for i in range(spec.writers)
                ),
            )
        self.spec = spec
        empty = pa.RecordBatch.from_pylist([], schema=spec.schema)
        self.input_schema = kit.simulation_batch(spec, empty, 0, 0, 0).schema
        self.writers = [
            Writer(i, f"writer-{i}", f"00000000-0000-4000-8000-{i:012d}")
            for i in range(spec.writers)
        ]
        self.target = kit.simulation_target(spec, self.env)
        self.keyed = self._keyed()

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

    def _run_one(self, data: st.DataObject | None, writer: Writer, faults: bool = True) -> bool:
        """One whole batch of ``writer`` (its rows drawn from ``data``; without: no rows,
        unless it replays a batch already drawn), maybe with a fault."""
        batches = self._batch_data(data, writer)
        # armed last: nothing but the batch may meet it
        fault = self._draw_fault(data) if faults else None
        sink = self._sink(writer)
        ctx = self._context(writer, sink)
        plugins = [self.crash_points, *([fault] if isinstance(fault, FaultPlugin) else [])]
        fired_before, acted_before = self._fired(), self.crash_points.foreign_acted
        try:
            with simulated_process(writer.pid):
                outcome = run_batch(
                    sink,
                    ctx,
                    self.input_schema,
                    self._runner(batches),
                    plugins=plugins,
                    executor_plugins=[p for p in plugins if isinstance(p, FaultPlugin)],
                    fingerprint=self.spec.fingerprint(writer.index),
                )
        except Exception as exc:
            self._disarm()
            # a clean error of a commit another program acted inside (a race lost with no
            # retries left) is that program's doing, as a store fault's is
            injected = (
                isinstance(exc, InjectedCrash)
                or self._fired() > fired_before
                or (isinstance(exc, EosinkError) and self.crash_points.foreign_acted > acted_before)
            )
            if not injected:
                if self._refused(writer, exc):
                    return False
                raise
            restart = data.draw(st.booleans(), label="driver restarts") if data else True
            self._failed(writer, restart=restart)
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
        if writer is not None:
            self._begin(data, writer)

    def _begin(self, data: st.DataObject, writer: Writer) -> None:
        batches = self._batch_data(data, writer)
        fingerprint = self.spec.fingerprint(writer.index)
        with simulated_process(writer.pid):
            sink = self._sink(writer)
            ctx = self._context(writer, sink)
            pm = plugin_manager(sink, driver_plugins([self.crash_points]))
            try:
                prepared = prepare(
                    pm,
                    ctx,
                    self.input_schema,
                    fingerprint=fingerprint,
                    run_writes=self._runner(batches),
                    sink=sink,
                )
            except Exception as exc:
                if self._refused(writer, exc):
                    return
                raise
            if prepared.skipped is not None:
                self._done(writer, "skipped")
                return
            try:
                task = WriteTask(sink, ctx, prepared.state, fingerprint=fingerprint != "off")
                results = self._runner(batches)(task)
            except BaseException:
                abort_quietly(pm, ctx, prepared.state, [])
                raise
        writer.live = Attempt(
            writer.index,
            writer.batch,
            writer.pid,
            pm,
            ctx,
            prepared.state,
            results,
            len(self.landings),
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
        self._commit(attempt, fresh)

    @precondition(lambda self: not self.damaged and len(self.writers) > 1)
    @rule(data=st.data(), batches=st.integers(1, 3))
    def overtaken(self, data: st.DataObject, batches: int) -> None:
        """A batch overtaken: a writer begins a batch, another writer commits ``batches``
        batches meanwhile, then the first commits from the view it began with (two queries
        racing for the next log id or version, each placing it by its own options)."""
        writer = self._idle_writer(data)
        if writer is None:
            return
        self._begin(data, writer)
        attempt = writer.live
        other = self._idle_writer(data) if attempt is not None else None
        if other is None:
            return  # skipped, refused, or no other writer idle: the attempt waits as begun
        for _ in range(batches):
            if not self._run_one(data, other):
                break
        if writer.live is attempt:
            self._commit(attempt, fresh=False)

    def _commit(self, attempt: Attempt, fresh: bool) -> None:
        overtaken = any(k[0] != attempt.writer for k, _ in self.landings[attempt.landings_seen :])
        self.stats["commits_overtaken" if overtaken else "commits_begun"] += 1
        writer = self.writers[attempt.writer]
        live = attempt is writer.live
        if live:
            writer.live = None
        else:
            self.zombies.remove(attempt)
        pid, pm = attempt.pid, attempt.pm
        if fresh:
            pid = f"{attempt.pid}/worker-{next(self.workers)}"
            pm = self._in(pid, lambda: plugin_manager(self._sink(writer), driver_plugins(())))
        fingerprint = self.spec.fingerprint(writer.index) != "off"
        try:
            with simulated_process(pid):
                outcome = finish(
                    pm, attempt.ctx, attempt.state, attempt.results, fingerprint=fingerprint
                )
        except EosinkError:
            # a clean refusal (its files were cleaned up, the log moved on): Spark replays
            with simulated_process(pid):
                abort_quietly(pm, attempt.ctx, attempt.state, [r.message for r in attempt.results])
            self._mark(attempt.writer, attempt.batch, "maybe")
            self.landings.append(((attempt.writer, attempt.batch), False))  # an unknown outcome
            return
        if live:
            self._done(writer, outcome.status)
        elif outcome.status == "committed":
            self._mark(attempt.writer, attempt.batch, "committed")
            self.landings.append(((attempt.writer, attempt.batch), True))

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
            except EosinkError as exc:
                # writer -1: the operator's sink, of the shared options (writers may differ)
                shapes = self.kit.simulation_writer_shapes
                if "committed" in self.status.values() and not (
                    shapes and self.kit.simulation_refusal(self.spec, -1, exc)
                ):
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
        sink = self._sink(writer)
        with simulated_process(writer.pid):
            try:
                outcome = run_batch(
                    sink,
                    self._context(writer, sink),
                    self.input_schema,
                    self._runner([]),
                    fingerprint=self.spec.fingerprint(writer.index),
                )
            except EosinkError:
                return
        if outcome.status == "skipped" and (writer.index, writer.batch) in self.status:
            return
        raise AssertionError(f"a batch into a damaged target was {outcome.status}, not refused")

    def recover(self) -> None:
        """Spark's recovery: zombies finish or die, every writer replays its unfinished
        batch and writes one more; then every batch must be there exactly once. No fault
        is armed any more (a history may end between arming one and running its batch)."""
        self._disarm()
        self.crash_points.crash_at = None
        self.crash_points.also = None  # nor is a foreign step armed inside a commit
        for attempt in list(self.zombies):
            self.zombies.remove(attempt)
        for writer in self.writers:
            if writer.live is not None:
                writer.live = None
            writer.generation += 1
            for _ in range(2):
                if writer.refused is None:
                    self._replay(writer)
        self.check_rows()
        self.check_filtered_sweep()
        self.audit()
        for key, status in self.status.items():
            foreign = key[0] >= len(self.writers)  # a foreign hand's rows (FOREIGN_WRITER)
            if self._expected(*key) and (foreign or self.writers[key[0]].refused is None):
                assert status == "committed", f"batch {key} is still in doubt after recovery"

    def _replay(self, writer: Writer) -> None:
        sink = self._sink(writer)
        try:
            with simulated_process(writer.pid):
                outcome = run_batch(
                    sink,
                    self._context(writer, sink),
                    self.input_schema,
                    self._runner(self._batch_data(None, writer)),
                    fingerprint=self.spec.fingerprint(writer.index),
                )
        except Exception as exc:
            if self._refused(writer, exc):
                return
            raise
        self._done(writer, outcome.status)

    # -- helpers ----------------------------------------------------------------------------
    def _in(self, pid: str, make: Callable[[], Any]) -> Any:
        with simulated_process(pid):
            return make()

    def _sink(self, writer: Writer) -> Any:
        """A new sink of ``writer`` (its own options, if it drew any), built in its process."""
        options = self.spec.sink_options(writer.index)
        return self._in(writer.pid, lambda: self.target.make_sink(options))

    def _refused(self, writer: Writer, exc: BaseException) -> bool:
        """Whether ``exc`` is a clear refusal the kit expects for this writer's options
        (:meth:`~eosink.testing.simulation.SinkSimulation.simulation_refusal`): the writer
        then stops for good and its batch stays in doubt (the judge still wants it whole or
        absent). Any other error is the history's failure."""
        if not isinstance(exc, EosinkError):
            return False
        if not self.kit.simulation_refusal(self.spec, writer.index, exc):
            return False
        self._mark(writer.index, writer.batch, "maybe")
        writer.refused = f"{type(exc).__name__}: {exc}"
        writer.live = None
        self.stats["writers_refused"] += 1
        return True

    def _idle_writer(self, data: st.DataObject) -> Writer | None:
        idle = [w for w in self.writers if w.live is None and w.refused is None]
        return data.draw(st.sampled_from(idle), label="writer") if idle else None

    def _context(self, writer: Writer, sink: Any, batch: int | None = None) -> BatchContext:
        return BatchContext(
            sink=sink.name,
            writer_id=writer.writer_id,
            batch_id=writer.batch if batch is None else batch,
            query_id=writer.query_id,
            checkpoint=f"/checkpoints/{writer.writer_id}",
            mode=self.spec.mode_of(writer.index),
        )

    def _keyed(self) -> bool:
        """Whether the history's sink replaces rows by the kit's key column (its
        ``upsert_key``); a sink keyed by anything else cannot be judged here."""
        key = upsert_key(self.target.make_sink(self.spec.sink_options(0)))
        if key is None:
            return False
        if key != (self.kit.simulation_upsert_key,):
            raise AssertionError(
                f"the sink upserts by {key}: the kit judges keyed sinks by its key column, "
                f"simulation_upsert_key ({self.kit.simulation_upsert_key!r}); key the sink's "
                "options by it"
            )
        return True

    def _batch_data(self, data: st.DataObject | None, writer: Writer) -> list[list[pa.RecordBatch]]:
        """The batch's partitions as the sink gets them (:meth:`SinkSimulation.simulation_batch`):
        drawn at its first attempt, the same on every replay."""
        key = (writer.index, writer.batch)
        if key not in self.data:
            partitions: list[list[pa.RecordBatch]] = []
            sizes = data.draw(st.lists(st.integers(0, 5), max_size=3), label="rows") if data else []
            for p, n in enumerate(sizes):
                ids = [row_id(writer.index, writer.batch, p, i) for i in range(n)]
                rows = record_batches(
                    self.spec.schema,
                    ids,
                    values=self.kit.simulation_values_of(self.spec),
                    wide=self.kit.simulation_wide_values,
                    partition_by=self.spec.partition_by,
                )
                partitions.append([data.draw(rows, label="rows")])
            if self.kit.simulation_upsert_key and sizes:
                keys = iter(data.draw(batch_keys(writer.index, sum(sizes)), label="keys"))
                partitions = [
                    [set_column(b, self.kit.simulation_upsert_key, [next(keys) for _ in range(n)])]
                    for (b,), n in zip(partitions, sizes)
                ]
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
        self.landings.append(((writer.index, writer.batch), False))
        if restart:
            writer.generation += 1

    def _done(self, writer: Writer, status: str) -> None:
        if status == "committed":  # landed now ("skipped": it had landed before)
            self.landings.append(((writer.index, writer.batch), True))
        self._mark(writer.index, writer.batch, "committed")
        writer.batch += 1

    def _mark(self, writer: int, batch: int, status: str) -> None:
        if self.status.get((writer, batch)) != "committed":
            self.status[(writer, batch)] = status


class WriterShapes:
    """The steps of histories whose writers have shapes of their own
    (:attr:`~eosink.testing.simulation.SinkSimulation.simulation_writer_shapes`): batch ids
    that jump, and a zombie's abort that runs late. A mixin of :class:`History`, added only
    for kits that ask for it (another step changes every derandomized history)."""

    writers: list[Writer]
    zombies: list[Attempt]
    data: dict[tuple[int, int], list[list[pa.RecordBatch]]]
    status: dict[tuple[int, int], str]
    stats: Counter[str]
    target: SimTarget | None
    damaged: bool
    workers: Any
    _sink: Callable[[Writer], Any]
    _run_one: Callable[..., bool]
    _begin: Callable[[st.DataObject, Writer], None]
    _idle_writer: Callable[[st.DataObject], Writer | None]
    _in: Callable[[str, Callable[[], Any]], Any]
    _mark: Callable[[int, int, str], None]

    def _jumpable(self) -> list[Writer]:
        return [
            w
            for w in self.writers
            if w.live is None and w.refused is None and (w.index, w.batch) not in self.data
        ]

    @precondition(lambda self: not self.damaged and self._jumpable())
    @rule(data=st.data(), gap=st.sampled_from([1, 2, 9, 10, 11, 250]))
    def jump(self, data: st.DataObject, gap: int) -> None:
        """A writer's next batch id skips ahead: an availableNow query run after a pause, a
        checkpoint copied from a later run. Only between batches (a batch in doubt is
        replayed by Spark under its own id, never skipped); row ids still tell each batch."""
        writer = data.draw(st.sampled_from(self._jumpable()), label="writer")
        writer.batch = min(writer.batch + gap, MAX_BATCH - 20)
        self.stats["batch_jumps"] += 1

    @precondition(
        lambda self: not self.damaged
        and (self.zombies or any(w.live is None and w.refused is None for w in self.writers))
    )
    @rule(data=st.data(), later=st.sampled_from([0, 1, 3, 11]))
    def abort_late(self, data: st.DataObject, later: int) -> None:
        """A zombie's abort runs late, from a fresh process. The zombie is one the history
        made, or a new one: a writer begins a batch (prepared, written) and its driver
        restarts. First its writer (restarted) replays the zombie's batch and commits
        ``later`` more (whole batches without rows, no fault), then the zombie's driver, back
        from a long pause, aborts its attempt. The hook contract lets abort run late and never
        lets it remove published data: the judge still sees every committed batch exactly
        once."""
        if self.zombies and data.draw(st.booleans(), label="an old zombie"):
            attempt = data.draw(st.sampled_from(self.zombies), label="attempt")
            self.zombies.remove(attempt)
        else:
            writer = self._idle_writer(data)
            if writer is None:
                return
            self._begin(data, writer)
            attempt = writer.live
            if attempt is None:
                return  # skipped or refused: nothing begun
            writer.live = None
            writer.generation += 1  # the driver restarts; its attempt lives on, a zombie
        writer = self.writers[attempt.writer]
        if data.draw(st.booleans(), label="its commit went through unheard"):
            self._commit_unheard(attempt)
        # the later batches hold no rows: they age the log (a compact keeps the latest proofs)
        # without spending the history's draws
        for _ in range(later + 1 if writer.live is None and writer.refused is None else 0):
            if not self._run_one(None, writer, faults=False):
                break
        pid = f"{attempt.pid}/late-abort-{next(self.workers)}"
        pm = self._in(pid, lambda: plugin_manager(self._sink(writer), driver_plugins(())))
        with simulated_process(pid):
            abort_quietly(pm, attempt.ctx, attempt.state, [r.message for r in attempt.results])
        self.stats["late_aborts"] += 1

    def _commit_unheard(self, attempt: Attempt) -> None:
        """The zombie's commit goes through, and its driver never hears of it (a lost reply,
        a pause right after): the restarted writer must find the batch committed, and the
        late abort must keep its files."""
        fingerprint = self.spec.fingerprint(attempt.writer) != "off"
        try:
            with simulated_process(attempt.pid):
                outcome = finish(
                    attempt.pm, attempt.ctx, attempt.state, attempt.results, fingerprint=fingerprint
                )
        except EosinkError:
            self._mark(attempt.writer, attempt.batch, "maybe")  # a clean refusal
            self.landings.append(((attempt.writer, attempt.batch), False))
            return
        if outcome.status == "committed":
            self._mark(attempt.writer, attempt.batch, "committed")
            self.landings.append(((attempt.writer, attempt.batch), True))
            self.stats["late_aborts_of_committed"] += 1
