"""The exactly-once protocol for one batch into one sink, run on the driver.

``run_batch`` is the whole story: ``prepare`` (is_committed, skip or init), the writes on the
executors, ``finish`` (commit, or abort and re-raise). The data-source front door runs the
same two halves in different processes, which is why they exist as functions of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import attrs
import pyarrow as pa

from eosink.logs import get_logger
from eosink.errors import (
    AlreadyCommitted,
    CheckpointMismatchError,
    MissingWriterIdError,
    ReplayMismatchError,
)
from eosink.fingerprint import counting
from eosink.logs import PhaseLogger
from eosink.model import BatchContext, BatchOutcome, Fingerprint, PartitionResult, Proof
from eosink.registry import plugin_manager
from eosink.staging import observing

log = get_logger("eosink")

FingerprintMode = Literal["off", "warn", "error"]


@attrs.frozen
class WriteTask:
    """The executor half of a batch: picklable, called once per partition attempt."""

    sink: Any
    ctx: BatchContext
    state: Any
    plugins: tuple[Any, ...] = ()
    fingerprint: bool = False
    dry_run: bool = False  # only count and fingerprint (replay check), write nothing

    def __call__(
        self, partition_id: int, attempt: int, batches: Iterator[pa.RecordBatch]
    ) -> PartitionResult:
        counted, box = counting(batches, self.fingerprint)
        message = None
        if not self.dry_run:
            pm = plugin_manager(self.sink, self.plugins)
            message = pm.hook.write(
                ctx=self.ctx,
                state=self.state,
                partition_id=partition_id,
                attempt=attempt,
                batches=counted,
            )
        for _ in counted:  # drain what the sink did not read, so counts are complete
            pass
        result = box[0]
        return PartitionResult(
            partition_id=partition_id,
            attempt=attempt,
            rows=result.rows,
            fingerprint=result if self.fingerprint else None,
            message=message,
            state=self.state,
        )


RunWrites = Callable[[WriteTask], list[PartitionResult]]


@attrs.frozen
class Prepared:
    """What ``prepare`` decided: skip (with the outcome and the proof) or write (with the state)."""

    skipped: BatchOutcome | None
    state: Any = None
    proof: Proof | None = None

    def checks_replay(self, fingerprint: FingerprintMode) -> bool:
        """Whether this skipped batch's replay must be counted and hashed against its proof."""
        return (
            fingerprint != "off"
            and self.skipped is not None
            and self.proof is not None
            and self.proof.batch_id == self.skipped.ctx.batch_id
        )


def driver_plugins(plugins: Iterable[Any]) -> tuple[Any, ...]:
    """The cross-cutting plugins of a run: the caller's, plus phase logging."""
    plugins = tuple(plugins)
    if not any(isinstance(p, PhaseLogger) for p in plugins):
        plugins += (PhaseLogger(),)
    return plugins


def executor_plugins_of(plugins: Iterable[Any]) -> tuple[Any, ...]:
    """The plugins of every write task: the caller's, plus phase logging. Pickled with the task,
    the :class:`PhaseLogger` also carries this process's logging settings to the executors."""
    plugins = tuple(plugins)
    if not any(isinstance(p, PhaseLogger) for p in plugins):
        plugins += (PhaseLogger(),)
    return plugins


def check_identity(ctx: BatchContext, proof: Proof) -> None:
    """Refuse a new checkpoint whose batch ids restart at or below what this writer committed."""
    if ctx.kind != "stream" or not proof.query_id or not ctx.query_id:
        return
    if proof.query_id != ctx.query_id:
        raise CheckpointMismatchError(
            f"{ctx.sink}: writer {ctx.writer_id!r} already committed batch {proof.batch_id} into "
            f"this target from query {proof.query_id} "
            f"(checkpoint {proof.checkpoint or 'unknown'}), "
            f"but this query {ctx.query_id} (checkpoint {ctx.checkpoint or 'unknown'}) is at "
            f"batch {ctx.batch_id}: every batch up to {proof.batch_id} would be skipped as already "
            "written. To proceed: restart from the original checkpoint; or give this query a new "
            "writer id (its rows are then added to what the target holds); or write to a new, "
            "empty target."
        )


def check_replay(
    ctx: BatchContext,
    proof: Proof,
    results: Iterable[PartitionResult | None],
    mode: FingerprintMode,
) -> None:
    """Compare the replay's rows (dry-run results of every partition) with the stored proof."""
    replay = Fingerprint()
    for result in results:
        if result is not None:
            replay = replay.combine(result.fingerprint or Fingerprint())
    if proof.fingerprint is None or proof.fingerprint == replay.hex():
        return
    text = (
        f"{ctx.label}: the replayed batch differs from the committed one (committed "
        f"rows:hash {proof.fingerprint}, replay {replay.hex()}); the source is not deterministic "
        "for this batch, so the target keeps the first version. Check the source for replays "
        "that change data (e.g. a mutable file source or a non-deterministic transformation)."
    )
    if mode == "error":
        raise ReplayMismatchError(text)
    log.warning("batch.replay_mismatch", sink=ctx.sink, writer=ctx.writer_id, batch=ctx.batch_id)


def prepare(
    pm: Any,
    ctx: BatchContext,
    schema: pa.Schema,
    *,
    fingerprint: FingerprintMode = "off",
    run_writes: RunWrites | None = None,
    sink: Any = None,
) -> Prepared:
    """Driver, first half: check the proof, then skip or init.

    With ``fingerprint`` on and a proof of exactly this batch, the replay's rows are counted and
    hashed (through ``run_writes``, writing nothing) and compared with the stored fingerprint.
    Without ``run_writes`` (the data source, whose writes are Spark's job) the caller checks
    later: see :meth:`Prepared.checks_replay` and :func:`check_replay`.
    """
    if not ctx.writer_id:
        raise MissingWriterIdError(ctx.sink)
    proof = pm.hook.is_committed(ctx=ctx)
    if proof is not None and proof.batch_id >= ctx.batch_id:
        check_identity(ctx, proof)
        outcome = BatchOutcome(ctx, "skipped", reason=f"committed up to batch {proof.batch_id}")
        prepared = Prepared(skipped=outcome, proof=proof)
        if prepared.checks_replay(fingerprint) and run_writes is not None:
            dry = WriteTask(sink, ctx, None, fingerprint=True, dry_run=True)
            check_replay(ctx, proof, run_writes(dry), fingerprint)
        _log_outcome(outcome)
        return prepared
    try:
        state = pm.hook.init(ctx=ctx, schema=schema)
    except BaseException:
        # what init opened in the target before it failed (a transaction, a lock) is the
        # sink's to release: abort runs with no state, as the hook spec says
        abort_quietly(pm, ctx, None, [])
        raise
    return Prepared(skipped=None, state=state)


def finish(
    pm: Any,
    ctx: BatchContext,
    state: Any,
    results: list[PartitionResult | None],
    *,
    fingerprint: bool = False,
    started: float | None = None,
) -> BatchOutcome:
    """Driver, second half: commit data and proof, or abort; ``None`` results are failed tasks."""
    started = time.monotonic() if started is None else started
    if any(r is None for r in results):
        raise RuntimeError(f"{ctx.label}: a write task failed; the batch is not committed")
    done = sorted((r for r in results if r is not None), key=lambda r: r.partition_id)
    rows = sum(r.rows for r in done)
    fp = None
    if fingerprint:
        total = Fingerprint()
        for r in done:
            total = total.combine(r.fingerprint or Fingerprint())
        fp = total.hex()
    proof = Proof(
        writer_id=ctx.writer_id,
        batch_id=ctx.batch_id,
        query_id=ctx.query_id,
        checkpoint=ctx.checkpoint,
        rows=rows,
        fingerprint=fp,
    )
    messages = [r.message for r in done]
    try:
        pm.hook.commit(ctx=ctx, state=state, messages=messages, proof=proof)
    except AlreadyCommitted as exc:
        abort_quietly(pm, ctx, state, messages)
        outcome = BatchOutcome(ctx, "skipped", rows=rows, partitions=len(done), reason=str(exc))
        _log_outcome(outcome)
        return outcome
    outcome = BatchOutcome(
        ctx,
        "committed",
        rows=rows,
        partitions=len(done),
        duration_s=time.monotonic() - started,
    )
    _log_outcome(outcome)
    return outcome


def abort_quietly(pm: Any, ctx: BatchContext, state: Any, messages: list[Any]) -> None:
    """Call ``abort``; its own failure is logged, never raised over the original error."""
    try:
        pm.hook.abort(ctx=ctx, state=state, messages=messages)
    except Exception as exc:  # noqa: BLE001 - best effort by contract
        log.warning(
            "batch.abort_failed",
            sink=ctx.sink,
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            error=repr(exc),
        )


def run_batch(
    sink: Any,
    ctx: BatchContext,
    schema: pa.Schema,
    run_writes: RunWrites,
    *,
    plugins: Iterable[Any] = (),
    executor_plugins: Iterable[Any] = (),
    fingerprint: FingerprintMode = "off",
    df: Any = None,
) -> BatchOutcome:
    """Run one batch into one sink exactly once; the single driver-side entry of every front door.

    ``run_writes`` runs a :class:`WriteTask` on every partition (Spark's ``mapInArrow`` in the
    front doors, a plain loop in tests) and returns the partition results.
    ``executor_plugins`` must pickle: they are registered around ``write`` on the executors.
    ``df``, the batch as a DataFrame where the front door has one, is offered to the sink's
    ``write_dataframe`` first (see :mod:`eosink.hookspecs` for when); the proof's row count
    then comes from what :func:`eosink.spark.stage_dataframe` observed.
    """
    started = time.monotonic()
    pm = plugin_manager(sink, driver_plugins(plugins))
    prepared = prepare(pm, ctx, schema, fingerprint=fingerprint, run_writes=run_writes, sink=sink)
    if prepared.skipped is not None:
        return prepared.skipped
    state, results = prepared.state, []
    executor_plugins = tuple(executor_plugins)
    try:
        task = WriteTask(
            sink,
            ctx,
            state,
            plugins=executor_plugins_of(executor_plugins),
            fingerprint=fingerprint != "off",
        )
        staged = None
        if df is not None and fingerprint == "off":
            # only the caller's executor plugins wrap Spark's staging tasks: the phase logger
            # alone must not put a Python pass-through in front of Spark's own writer
            with observing(ctx, state, executor_plugins) as observed:
                staged = pm.hook.write_dataframe(ctx=ctx, state=state, df=df)
        if staged is not None:
            rows = observed.rows_of(staged)  # the core's count, not the sink's
            results = [PartitionResult(0, 0, rows, None, staged.message, state)]
        else:
            results = run_writes(task)
        return finish(pm, ctx, state, results, fingerprint=fingerprint != "off", started=started)
    except BaseException:
        abort_quietly(pm, ctx, state, [r.message if r else None for r in results])
        log.warning("batch.failed", sink=ctx.sink, writer=ctx.writer_id, batch=ctx.batch_id)
        raise


def _log_outcome(outcome: BatchOutcome) -> None:
    ctx = outcome.ctx
    log.info(
        f"batch.{outcome.status}",
        sink=ctx.sink,
        writer=ctx.writer_id,
        batch=ctx.batch_id,
        kind=ctx.kind,
        rows=outcome.rows,
        partitions=outcome.partitions,
        duration_ms=round(outcome.duration_s * 1000, 1),
        skipped=outcome.status == "skipped",
        reason=outcome.reason,
    )
