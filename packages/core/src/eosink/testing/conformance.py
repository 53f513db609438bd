"""The conformance kit: abstract pytest tests that prove a sink exactly-once.

Subclass :class:`SinkConformance` in your sink's tests and provide two fixtures::

    class TestMySinkConformance(SinkConformance):
        @pytest.fixture
        def make_sink(self, tmp_path):
            # a fresh, empty target per test; every call returns a sink on that same target
            return lambda **options: MySink(path=str(tmp_path / "out"), **options)

        @pytest.fixture
        def read_rows(self, tmp_path):
            # what the target holds, read back by an independent reader, as dicts
            return lambda: my_reader(tmp_path / "out").to_pylist()

Every scenario runs batches of known rows through the real protocol (without Spark: the
executor half runs in-process through a pickle boundary), injects a crash where the scenario
says, replays like Spark would, and asserts with ``read_rows`` that every source row is in
the target exactly once: no duplicate and no loss.

Override :meth:`SinkConformance.source_batch` when the sink needs other columns (the rows must
keep a unique ``id`` column); set ``supports_complete = False`` and others to opt out of
scenarios the sink does not claim to support.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pyarrow as pa
import pytest

from eosink.errors import CheckpointMismatchError, ConfigurationError, ReplayMismatchError
from eosink.hookspecs import hookimpl
from eosink.model import BatchContext, BatchOutcome
from eosink.protocol import WriteTask, driver_plugins, finish, prepare, run_batch
from eosink.registry import plugin_manager
from eosink.testing.faults import CrashPointRecorder, FaultPlugin, InjectedCrash
from eosink.testing.local import LocalRunner, run_attempt

QUERY = "00000000-0000-4000-8000-000000000001"
OTHER_QUERY = "00000000-0000-4000-8000-000000000002"


@attrs.define
class CommitRecorder:
    """Keeps what ``commit`` was called with, to call ``abort`` with it again later."""

    calls: list[tuple[BatchContext, Any, list[Any]]] = attrs.field(factory=list)

    @hookimpl(wrapper=True)
    def commit(self, ctx: BatchContext, state: Any, messages: list[Any]) -> Any:
        self.calls.append((ctx, state, list(messages)))
        return (yield)


def _crashing(batches: list[pa.RecordBatch]):
    """A task's input that breaks after its first batch (a task killed half-way)."""
    yield from batches[:1]
    raise InjectedCrash("task of an old stage attempt killed half-way")


def stale_attempt(task: WriteTask, partition_id: int, batches: Iterable[pa.RecordBatch]) -> None:
    """An attempt of an old stage attempt: Spark ignores its outcome, so may the sink (it may
    refuse to write once the batch is committed); only what it does to the target counts."""
    try:
        run_attempt(task, partition_id, batches)
    except Exception:  # noqa: BLE001, S110 - its outcome is not what the scenario checks
        pass


class SinkConformance:
    """Abstract exactly-once tests; subclasses provide the ``make_sink``/``read_rows`` fixtures."""

    partitions = 3
    rows_per_partition = 4
    writer_id = "conformance"
    #: True for sinks keyed by the source row (an idempotent receiver): two writers of the same
    #: rows leave them once, not twice.
    same_rows_share_keys = False

    # -- data --------------------------------------------------------------------------------
    def source_batch(self, batch_id: int, partition: int, rows: int) -> pa.RecordBatch:
        """The rows of one partition of a batch; deterministic, so a replay is identical."""
        ids = [batch_id * 1_000_000 + partition * 1_000 + i for i in range(rows)]
        return pa.record_batch(
            {
                "id": pa.array(ids, pa.int64()),
                "name": pa.array([f"row-{i}" for i in ids], pa.string()),
                "amount": pa.array([i / 4 for i in ids], pa.float64()),
            }
        )

    def partitions_of(self, batch_id: int, rows: int | None = None) -> list[list[pa.RecordBatch]]:
        rows = self.rows_per_partition if rows is None else rows
        return [[self.source_batch(batch_id, p, rows)] for p in range(self.partitions)]

    def schema(self) -> pa.Schema:
        return self.source_batch(0, 0, 1).schema

    # -- driving the protocol ------------------------------------------------------------------
    def run(
        self,
        sink: Any,
        batch_id: int,
        *,
        writer_id: str | None = None,
        kind: str = "stream",
        query_id: str | None = QUERY,
        fault: FaultPlugin | None = None,
        partitions: list[list[pa.RecordBatch]] | None = None,
        fingerprint: str = "off",
        mode: str = "append",
    ) -> BatchOutcome:
        ctx = self.context(sink, batch_id, writer_id=writer_id, kind=kind, query_id=query_id)
        ctx = attrs.evolve(ctx, mode=mode)
        faults = (fault,) if fault else ()
        return run_batch(
            sink,
            ctx,
            self.schema(),
            LocalRunner(self.partitions_of(batch_id) if partitions is None else partitions),
            plugins=faults,
            executor_plugins=faults,
            fingerprint=fingerprint,  # type: ignore[arg-type]
        )

    def context(
        self,
        sink: Any,
        batch_id: int,
        *,
        writer_id: str | None = None,
        kind: str = "stream",
        query_id: str | None = QUERY,
    ) -> BatchContext:
        return BatchContext(
            sink=sink.name,
            writer_id=self.writer_id if writer_id is None else writer_id,
            batch_id=batch_id,
            kind=kind,  # type: ignore[arg-type]
            query_id=query_id if kind == "stream" else None,
            checkpoint=f"/checkpoints/{query_id}" if kind == "stream" and query_id else None,
        )

    def crash_then_replay(self, make_sink: Callable[..., Any], batch_id: int, fault: FaultPlugin):
        with pytest.raises(InjectedCrash):
            self.run(make_sink(), batch_id, fault=fault)
        # A restarted query builds everything anew from the options: so do we.
        return self.run(make_sink(), batch_id)

    # -- assertions ----------------------------------------------------------------------------
    def expected_rows(self, batch_ids: Iterable[int], copies: int = 1) -> Counter:
        expected: Counter = Counter()
        for batch_id in batch_ids:
            for batches in self.partitions_of(batch_id):
                for batch in batches:
                    for row in batch.to_pylist():
                        expected[self.comparable(row)] += copies
        return expected

    def comparable(self, row: dict[str, Any]) -> tuple:
        """The part of a row that must come back unchanged (the source columns)."""
        return tuple(row[name] for name in self.schema().names)

    def assert_exactly(self, read_rows: Callable[[], list[dict]], expected: Counter) -> None:
        held = Counter(self.comparable(row) for row in read_rows())
        duplicates = {row: n - expected[row] for row, n in held.items() if n > expected[row]}
        lost = {row: n - held[row] for row, n in expected.items() if held[row] < n}
        assert not duplicates and not lost, (
            f"{sum(duplicates.values())} duplicate and {sum(lost.values())} lost rows; "
            f"duplicates: {list(duplicates)[:3]}, lost: {list(lost)[:3]}"
        )

    # -- scenarios -----------------------------------------------------------------------------
    def test_batches_commit_and_read_back(self, make_sink, read_rows):
        for batch_id in range(3):
            assert self.run(make_sink(), batch_id).status == "committed"
        self.assert_exactly(read_rows, self.expected_rows(range(3)))

    def test_proof_records_writer_batch_and_query(self, make_sink):
        self.run(make_sink(), 0)
        sink = make_sink()
        proof = plugin_manager(sink).hook.is_committed(ctx=self.context(sink, 0))
        assert proof is not None, "is_committed returned None for a committed batch"
        assert (proof.writer_id, proof.batch_id, proof.query_id) == (self.writer_id, 0, QUERY)
        assert proof.rows == self.partitions * self.rows_per_partition
        assert plugin_manager(sink).hook.is_committed(ctx=self.context(sink, 1)) is None

    def test_replay_of_committed_batch_is_skipped(self, make_sink, read_rows):
        self.run(make_sink(), 0)
        self.run(make_sink(), 1)
        assert self.run(make_sink(), 0).status == "skipped"
        assert self.run(make_sink(), 1).status == "skipped"
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_crash_before_write(self, make_sink, read_rows):
        self.run(make_sink(), 0)
        self.crash_then_replay(make_sink, 1, FaultPlugin("after_init"))
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_crash_mid_write(self, make_sink, read_rows):
        self.run(make_sink(), 0)
        self.crash_then_replay(make_sink, 1, FaultPlugin("mid_write", partition=1))
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_crash_after_write_before_commit(self, make_sink, read_rows):
        self.run(make_sink(), 0)
        self.crash_then_replay(make_sink, 1, FaultPlugin("before_commit"))
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_crash_inside_commit(self, make_sink, read_rows):
        recorder = CrashPointRecorder()
        sink = make_sink()
        ctx = self.context(sink, 0)
        run_batch(sink, ctx, self.schema(), LocalRunner(self.partitions_of(0)), plugins=[recorder])
        points = list(dict.fromkeys(recorder.seen))
        for n, name in enumerate(points, start=1):
            outcome = self.crash_then_replay(make_sink, n, FaultPlugin("inside_commit", name=name))
            assert outcome.status in ("committed", "skipped")
            self.assert_exactly(read_rows, self.expected_rows(range(n + 1)))

    def test_crash_after_commit_before_spark_records_it(self, make_sink, read_rows):
        self.run(make_sink(), 0)
        outcome = self.crash_then_replay(make_sink, 1, FaultPlugin("after_commit"))
        assert outcome.status == "skipped"
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_task_retry(self, make_sink, read_rows):
        outcome = self.run(make_sink(), 0, fault=FaultPlugin("task_retry", partition=1))
        assert outcome.status == "committed"
        self.assert_exactly(read_rows, self.expected_rows([0]))

    def test_repeated_crashes_then_success(self, make_sink, read_rows):
        for point in ("after_init", "mid_write", "before_commit"):
            with pytest.raises(InjectedCrash):
                self.run(make_sink(), 0, fault=FaultPlugin(point))
        self.run(make_sink(), 0)
        self.run(make_sink(), 0)
        self.assert_exactly(read_rows, self.expected_rows([0]))

    def test_empty_batch(self, make_sink, read_rows):
        assert self.run(make_sink(), 0, partitions=self.partitions_of(0, rows=0)).status == (
            "committed"
        )
        assert self.run(make_sink(), 1, partitions=[]).status == "committed"
        assert self.run(make_sink(), 1, partitions=[]).status == "skipped"
        self.run(make_sink(), 2)
        self.assert_exactly(read_rows, self.expected_rows([2]))

    def test_batch_job_versions(self, make_sink, read_rows):
        """Batch jobs, as Delta's txnAppId/txnVersion: version <= last is skipped; another
        writer id writes."""
        daily = self.run(make_sink(), 23424, writer_id="dailyETL", kind="batch")
        older = self.run(make_sink(), 23422, writer_id="dailyETL", kind="batch")
        same = self.run(make_sink(), 23424, writer_id="dailyETL", kind="batch")
        other = self.run(make_sink(), 23424, writer_id="anotherETL", kind="batch")
        assert [o.status for o in (daily, older, same, other)] == [
            "committed",
            "skipped",
            "skipped",
            "committed",
        ]
        copies = 1 if self.same_rows_share_keys else 2
        self.assert_exactly(read_rows, self.expected_rows([23424], copies=copies))

    def test_new_checkpoint_on_old_output_fails(self, make_sink, read_rows):
        self.run(make_sink(), 0)
        self.run(make_sink(), 1)
        with pytest.raises(CheckpointMismatchError, match="new writer id"):
            self.run(make_sink(), 0, query_id=OTHER_QUERY)
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_missing_writer_id_fails(self, make_sink, read_rows):
        with pytest.raises(ConfigurationError, match="writer id"):
            self.run(make_sink(), 0, writer_id="")
        self.assert_exactly(read_rows, Counter())

    def test_concurrent_attempts_same_identity(self, make_sink, read_rows):
        """Two attempts of one batch, interleaved: both prepare and write, both commit."""
        attempts = []
        for _ in range(2):
            sink = make_sink()
            ctx = self.context(sink, 0)
            pm = plugin_manager(sink, driver_plugins(()))
            prepared = prepare(pm, ctx, self.schema())
            assert prepared.skipped is None
            attempts.append((sink, ctx, pm, prepared.state))
        results = []
        for sink, ctx, _pm, state in attempts:
            results.append(LocalRunner(self.partitions_of(0))(WriteTask(sink, ctx, state)))
        outcomes = [
            finish(pm, ctx, state, res) for (sink, ctx, pm, state), res in zip(attempts, results)
        ]
        assert sorted(o.status for o in outcomes) == ["committed", "skipped"]
        self.assert_exactly(read_rows, self.expected_rows([0]))

    def test_concurrent_commits_race(self, make_sink, read_rows):
        """Two writers with the same identity commit the same batch at the same moment."""
        barrier = threading.Barrier(2)
        outcomes: list[Any] = []
        errors: list[BaseException] = []

        class Gate:
            @hookimpl(wrapper=True)
            def commit(self):
                barrier.wait(timeout=300)  # generous: slow stores on loaded machines
                return (yield)

        def attempt() -> None:
            try:
                sink = make_sink()
                ctx = self.context(sink, 0)
                outcomes.append(
                    run_batch(
                        sink,
                        ctx,
                        self.schema(),
                        LocalRunner(self.partitions_of(0)),
                        plugins=[Gate()],
                    )
                )
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                barrier.abort()  # the other attempt must not wait for this one at the gate

        threads = [threading.Thread(target=attempt) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # The loser may skip (AlreadyCommitted) or fail cleanly (a store's conflict error);
        # either way the target holds the batch once.
        assert len([o for o in outcomes if o.status == "committed"]) == 1, (outcomes, errors)
        self.assert_exactly(read_rows, self.expected_rows([0]))
        assert self.run(make_sink(), 0).status == "skipped"

    def test_replay_with_other_data_is_detected(self, make_sink, read_rows):
        self.run(make_sink(), 0, fingerprint="error")
        changed = self.partitions_of(0)
        changed[0] = [self.source_batch(0, 7, self.rows_per_partition)]
        with pytest.raises(ReplayMismatchError):
            self.run(make_sink(), 0, partitions=changed, fingerprint="error")
        assert self.run(make_sink(), 0, fingerprint="error").status == "skipped"
        self.assert_exactly(read_rows, self.expected_rows([0]))

    def test_attempt_names_unique_per_task_attempt(self, make_sink, read_rows):
        """Spark resubmits a stage (fetch failure, lost executor): its tasks run again with the
        same ``attemptNumber`` while tasks of the old stage attempt may still run. Only the task
        attempt id (the ``attempt`` given to ``write``) tells them apart, so a sink that names
        staged objects after anything less lets an old attempt overwrite, truncate or delete
        what the reported attempt staged. Here old attempts of some partitions run to the end
        or break half-way, before and after the commit (where a sink may refuse them); the
        target must hold the batch once."""
        sink = make_sink()
        ctx = self.context(sink, 0)
        pm = plugin_manager(sink, driver_plugins(()))
        prepared = prepare(pm, ctx, self.schema())
        assert prepared.skipped is None
        task = WriteTask(sink, ctx, prepared.state)
        partitions = self.partitions_of(0)
        reported = LocalRunner(partitions)(task)
        stale_attempt(task, 0, partitions[0])  # runs to the end; Spark ignores its result
        stale_attempt(task, 1, _crashing(partitions[1]))
        assert finish(pm, ctx, prepared.state, reported).status == "committed"
        stale_attempt(task, 2, _crashing(partitions[2]))
        stale_attempt(task, 1, partitions[1])
        self.assert_exactly(read_rows, self.expected_rows([0]))
        assert self.run(make_sink(), 0).status == "skipped"
        self.run(make_sink(), 1)
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))

    def test_abort_after_landed_commit_keeps_published_data(self, make_sink, read_rows):
        """A commit that landed and then raised (a lost reply, a crash right after) is followed
        by ``abort``: the core calls it on the same sink, Spark's data source calls it in a fresh
        process with only the messages, maybe more than once. ``abort`` cannot trust memory; it
        must tell from the target whether its attempt's commit landed (see ``abort`` in
        :mod:`eosink.hookspecs`) and never remove what was published."""
        self.run(make_sink(), 0)
        recorder = CommitRecorder()
        sink = make_sink()
        with pytest.raises(InjectedCrash):
            run_batch(
                sink,
                self.context(sink, 1),
                self.schema(),
                LocalRunner(self.partitions_of(1)),
                plugins=[FaultPlugin("after_commit"), recorder],
            )
        ((ctx, state, messages),) = recorder.calls
        for _ in range(2):  # Spark's abort, in fresh workers
            plugin_manager(make_sink()).hook.abort(ctx=ctx, state=state, messages=messages)
        self.assert_exactly(read_rows, self.expected_rows([0, 1]))
        assert self.run(make_sink(), 1).status == "skipped"
        self.run(make_sink(), 2)
        self.assert_exactly(read_rows, self.expected_rows([0, 1, 2]))
