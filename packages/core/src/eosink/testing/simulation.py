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

Kits with ``simulation_writer_shapes`` give each writer a shape of its own: its own options
(:meth:`SinkSimulation.simulation_writer_options`, merged over the shared ones for its sink,
built by :attr:`SimTarget.sink_for`; the key ``fingerprint`` is the core's replay check),
batch ids that jump (an availableNow query after a pause, a copied checkpoint: the ``jump``
step) and a zombie's abort that runs late, after its restarted writer replayed the batch and
committed more (``abort_late``). A writer whose options the target cannot take (another
format in a folder, say) must be refused with a clear error, which
:meth:`SinkSimulation.simulation_refusal` tells from a failure: the writer then stops.

Between steps, the judge also reads with a filter (``filtered_read``) through each of the
target's filtered readers (:attr:`SimTarget.filtered`: delta-rs' pyarrow dataset, pyiceberg's
``row_filter``, SQL's ``WHERE``...): a predicate on one column (equal to a value the table
holds, ``IS NULL``, between two held values) must return exactly the rows of a full scan the
predicate passes, whatever statistics or partition values the reader skips files by. Kits
with ``simulation_wide_values`` write the values where statistics and logs go wrong into data
columns: strings over 32 characters and over 4 KiB, U+2028/U+2029/U+0085, the timestamps of
years 1 and 9999 (and every kit gets ``decimal_fine``, a decimal of scale 10, zero among its
values). At a history's end the judge sweeps every column with every predicate kind, and the
row id equal to one row of each batch (another program may partition or bound by it).

Kits whose ``simulation_output_modes`` hold ``"complete"`` draw each history's output mode:
in a complete-mode history every batch replaces every row before it, so readers must see the
rows of one batch, whole, the last to land (the last commit seen to land, or an attempt in
doubt after it), and never a batch older than one its writer committed before it; rows a
foreign step appended, whole, until a batch of the stream lands after them, and never after.

A keyed sink (``simulation_upsert_key``, :mod:`eosink.testing.simulation_keyed`) is judged
by what a replace-by-key table holds: per key, the row of the latest visible batch that
carried it, each key once; batches meet on keys, replays and zombies must not bring an older
row back, and two writers upsert keys of their own.

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
                filtered={"my reader": lambda predicate: my_reader_where(path, predicate)},
            )

Between any two steps, other programs may act on the target
(:meth:`SinkSimulation.simulation_foreign_steps`, :mod:`eosink.testing.simulation_foreign`):
append rows of their own (the judge counts them: exactly once in every read after), run the
store's maintenance (which must change nothing a reader sees), evolve or damage the table (a
damage the sink must refuse clearly); and the clock may move past the store's retention.

Values a history's own shape makes unrepresentable (a partition transform whose result the
type cannot hold for its extremes) are left out by :meth:`SinkSimulation.simulation_values_of`;
the sink's own tests check that it refuses them clearly. A reader that gives values as text
(plain SQL) is compared at the column's precision: a float32 read back as ``1e+20`` is the
float32 the batch wrote.

In CI the number of examples is fixed and the run derandomized, so a red run is the same run
again; ``python -m eosink.testing.soak`` runs the same tests with new seeds for as long as
asked. A failing history is printed as the steps hypothesis shrank it to: make it a
regression test.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from eosink.testing.arrow_data import SCALAR_TYPES
from eosink.testing.faultfs import OPS, StoreFault
from eosink.testing.simulation_foreign import (
    FOREIGN_WRITER,
    ForeignHand,
    ForeignOutcome,
    ForeignStep,
)
from eosink.testing.simulation_history import History, WriterShapes
from eosink.testing.simulation_model import (
    BATCH_SPAN,
    EPOCH,
    PARTITION_SPAN,
    PHASE_POINTS,
    WRITER_SPAN,
    Attempt,
    CrashPoints,
    HistorySpec,
    Predicate,
    Script,
    SimClock,
    SimTarget,
    Writer,
    batch_of,
    row_id,
)


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
    #: Data columns also draw the values where statistics and logs go wrong (strings over
    #: 32 characters and over 4 KiB, U+2028/U+2029/U+0085, timestamps of years 1 and 9999:
    #: :func:`~eosink.testing.arrow_data.record_batches`' ``wide``).
    simulation_wide_values = False
    #: Each writer draws its own options (:meth:`simulation_writer_options`), its batch ids
    #: may jump and a zombie's abort may run late (the ``jump`` and ``abort_late`` steps).
    #: Off by default: the extra steps change every derandomized history of a kit.
    simulation_writer_shapes = False

    #: The column a keyed sink of this kit upserts by (:mod:`eosink.testing.simulation_keyed`):
    #: every history's schema gets it (int64, after ``id``), batches carry keys that meet
    #: earlier batches' keys, and where the sink built from a history's options is keyed by it
    #: (its ``upsert_key`` hook; e.g. options drawn with ``mode="upsert", key=<it>``), the
    #: judge expects per key the latest visible batch's row. ``None``: no key column.
    simulation_upsert_key: str | None = None
    #: The output modes a history draws for all its writers (Spark's ``outputMode``): with
    #: ``"complete"`` among them, a history may write complete-mode batches, each replacing
    #: every row before it; the judge then expects the rows of the batch that landed last
    #: (:meth:`~eosink.testing.simulation_judge.HistoryJudge.check_complete_rows`), and rows
    #: foreign steps appended until a batch lands after them. ``"mixed"``: each writer of
    #: the history draws append or complete, and appended rows are judged as foreign ones.
    #: Append only by default: another draw changes every derandomized history of a kit.
    simulation_output_modes: Sequence[str] = ("append",)

    #: The store's retention in seconds, where expiry or log cleanup may take what a slow
    #: batch relies on (``None``: none); the ``past_retention`` step moves the clock past it.
    simulation_retention_s: float | None = None

    def simulation_foreign_steps(
        self, spec: HistorySpec, target: SimTarget
    ) -> Mapping[str, ForeignStep]:
        """What other programs may do to ``target`` between any two steps of a history
        (:mod:`eosink.testing.simulation_foreign`): name -> a function of a
        :class:`ForeignHand` returning a :class:`ForeignOutcome` (rows it appended, or the
        target damaged). The default: none."""
        return {}

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        """Sink options drawn per history (e.g. small compaction intervals)."""
        return st.just({})

    def simulation_writer_options(self, spec: HistorySpec) -> st.SearchStrategy[dict[str, Any]]:
        """Options each writer of a history draws for itself, with
        :attr:`simulation_writer_shapes` (e.g. its format, compaction interval, file writer
        options), merged over :meth:`simulation_options`' for its sink
        (:attr:`SimTarget.sink_for`). The key ``fingerprint`` (``"off"``, ``"warn"``,
        ``"error"``) is the kit's: the core's replay check of that writer's batches. The
        failure report lists each writer's draw (``writer-0 options``)."""
        return st.just({})

    def simulation_refusal(self, spec: HistorySpec, writer: int, error: Exception) -> bool:
        """Whether ``error`` (an :class:`~eosink.errors.EosinkError` a batch of writer
        ``writer`` met) is the clear refusal the sink owes that writer's options on this
        target, e.g. a format other than the one another writer already wrote into the
        folder. The writer then writes no more; its batch must be whole or absent. Writer
        -1 is the operator's sink (``cleanup``), built from the shared options. Default:
        no refusal is expected (every error fails the history)."""
        return False

    def simulation_values_of(self, spec: HistorySpec) -> Mapping[str, st.SearchStrategy[Any]]:
        """The values a history's rows draw, where they depend on the history (e.g. a
        partition transform whose result a type cannot hold for its extremes, so the sink
        refuses them clearly: its own tests check that refusal, a history would only stop at
        it). Type name -> strategy, as :attr:`simulation_values`, which is the default."""
        return self.simulation_values

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
        value as null); the default: unchanged. ``spec``: the history's, its options those of
        the row's writer (:meth:`HistorySpec.of_writer`: writers may draw their own, a format
        say)."""
        return row

    @pytest.fixture
    def simulation_env(self) -> Any:
        """Whatever :meth:`simulation_target` needs from pytest (a server, a client)."""
        return None

    def test_generated_histories(self, simulation_env: Any) -> None:
        run_state_machine_as_test(
            self.history_machine(simulation_env), settings=self.simulation_settings()
        )

    def run_histories_unshrunk(self, env: Any = None) -> None:
        """This kit's histories as CI runs them (its fixed seed), without shrinking: a test
        of the simulation's teeth runs them against a sink broken on purpose and expects the
        first failure as it is raised."""
        run_state_machine_as_test(
            self.history_machine(env),
            settings=settings(self.simulation_settings(), phases=[Phase.generate]),
        )

    def history_machine(self, env: Any) -> type[History]:
        """The rule-based machine of this kit's histories against ``env``. A regression test
        replays a shrunk history with an instance of it, calling its steps in order with a
        :class:`Script` of the draws the failure report lists."""
        bases = (WriterShapes, History) if self.simulation_writer_shapes else (History,)
        return type(f"{type(self).__name__}History", bases, {"kit": self, "env": env})

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


__all__ = [
    "BATCH_SPAN",
    "EPOCH",
    "FOREIGN_WRITER",
    "PARTITION_SPAN",
    "PHASE_POINTS",
    "WRITER_SPAN",
    "Attempt",
    "CrashPoints",
    "ForeignHand",
    "ForeignOutcome",
    "ForeignStep",
    "History",
    "HistorySpec",
    "Predicate",
    "Script",
    "SimClock",
    "SimTarget",
    "SinkSimulation",
    "StoreFault",
    "Writer",
    "WriterShapes",
    "batch_of",
    "row_id",
]
