"""The contract between the eosink core and a sink: ten pluggy hooks, five for every batch, an
optional sixth that stages a batch with Spark's writers, an optional seventh that says the sink
replaces rows by a key, and three optional operator hooks.

These docstrings are the one source of the contract's prose: ``docs/hooks.md`` is generated
from them (``packages/core/tests/hooks_doc.py``), and a test fails when the two differ.

For every micro-batch (or batch-job version) the core, on the driver, runs::

    proof = is_committed(ctx)            # driver
    if proof covers the batch: skip      # logged and counted, nothing else runs
    state = init(ctx, schema)            # driver
    messages = [write(ctx, state, partition_id, attempt, batches) for each partition]
        # executors; or, where the sink offers it and the front door holds a DataFrame:
        # messages = [write_dataframe(ctx, state, df).message]                  # driver
    commit(ctx, state, messages, proof)  # driver: data + proof in one atomic step
    on any failure: abort(ctx, state, messages), then re-raise

A sink is a class registered under the entry point group ``eosink.sinks``; one instance of it is
registered in a plugin manager of its own, so a hook call reaches exactly one sink. It marks
its implementations with :data:`eosink.plugin.hookimpl` (deriving from
:class:`eosink.plugin.Sink` gives the usual shape). Other plugins (logging, metrics, fault
injection, a user's own) may wrap any phase with ``@hookimpl(wrapper=True)``. As in pluggy and
pytest, an implementation may accept any subset of a hook's arguments, by name.

Every argument and return value crosses a process boundary somewhere (driver to executor,
executor to driver, or driver to a fresh Spark worker in the data-source front door), so states
and messages must be small and picklable, and a sink instance must be re-creatable from its
options alone.

The operator hooks serve the ``eosink`` command: ``eosink status|verify|cleanup SINK TARGET``
builds the sink from TARGET (its ``path`` option) and the connection options on the command
line (``--proxy``, ``--token``, ``-o key=value``: the sink's own option names), then calls one
of them on it, on the operator's machine, not in a Spark job. A sink that does not implement
one makes the command say so; third-party sinks may implement any subset (the example
``sqlite`` sink has no ``cleanup_target``). They return the attrs reports of
:mod:`eosink.reports` (``TargetStatus``, ``Verification``, ``CleanupReport``), which
:mod:`eosink.plugin` offers too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import pyarrow as pa

    from eosink.model import BatchContext, Proof, Staged
    from eosink.reports import CleanupReport, TargetStatus, Verification

PROJECT = "eosink"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The hooks every sink implements, in the order the core calls them for a batch.
BATCH_HOOKS = ("is_committed", "init", "write", "commit", "abort")
#: Optional: the whole batch staged with Spark's own writers instead of ``write``.
DATAFRAME_HOOKS = ("write_dataframe",)
#: Optional: the key a sink replaces rows by (keyed upserts, Spark's ``update`` output mode).
KEY_HOOKS = ("upsert_key",)
#: Optional: what the ``eosink`` command's ``status``, ``verify`` and ``cleanup`` ask a sink.
OPERATOR_HOOKS = ("target_status", "verify_target", "cleanup_target")


@hookspec(firstresult=True)
def is_committed(ctx: BatchContext) -> Proof | None:
    """Tell whether the target already holds the proof of ``ctx.batch_id`` for ``ctx.writer_id``.

    Runs on the driver, before anything else of the batch, and again whenever the core needs to
    re-check (for instance after losing a commit race).

    Returns the stored :class:`~eosink.model.Proof` when the target holds a proof of this
    writer whose ``batch_id >= ctx.batch_id`` (the skip rule), else ``None``. When several
    proofs qualify, return the one of exactly ``ctx.batch_id`` if the sink keeps it (the core
    then compares replay fingerprints), else the latest. The core compares the proof's query id
    with the running query's to catch a new checkpoint pointed at old output.

    Guarantees: the answer reflects a fresh read of the target (no cache that could be stale
    after a crash). Must never write, and must never depend on a side store that can disagree
    with the data: the proof lives where the data lives.
    """


@hookspec(firstresult=True)
def init(ctx: BatchContext, schema: pa.Schema) -> Any:
    """Prepare the target for the batch and return a state that every ``write`` receives.

    Runs on the driver, once per attempt of a batch, after ``is_committed`` said the batch is
    not committed. ``schema`` is the Arrow schema of the rows that ``write`` will get.

    Returns a small picklable state (a transaction id, a staging path, ``None``...). It may be
    called again for the same batch after a crash or in a fresh process; it must then return an
    equivalent state and create nothing twice (resume or restart, never duplicate).

    Must never make data visible to readers and never touch the proof. Validate the
    configuration against the target here (schema, table kind, partition columns...) and raise
    :class:`~eosink.errors.ConfigurationError` naming the fix before anything is written.
    """


@hookspec(firstresult=True)
def write(
    ctx: BatchContext,
    state: Any,
    partition_id: int,
    attempt: int,
    batches: Iterator[pa.RecordBatch],
) -> Any:
    """Write one partition of the batch; return a small picklable commit message.

    Runs on an executor, once per task attempt (Spark may run a task more than once: retries,
    speculation, a resubmitted stage while the old stage's tasks still run). ``batches`` yields
    Arrow record batches of the schema given to ``init``; consume it fully. ``attempt`` is the
    task attempt's id (Spark's ``taskAttemptId``), unique among all attempts of the application:
    name every staged object after it (with ``partition_id`` and the init state), so that no
    attempt ever overwrites, truncates or deletes what another attempt staged. It is not a retry
    counter: Spark's ``attemptNumber`` restarts at 0 when a stage is resubmitted.

    Returns a message describing what was staged (file names and sizes, a staging key, row
    counts): the driver's memory holds one per partition, so it must not hold the rows.

    Guarantees: nothing written here is visible to readers before ``commit``. Must never
    publish data, write the proof, or assume it runs in the driver's process.
    """


@hookspec(firstresult=True)
def write_dataframe(ctx: BatchContext, state: Any, df: Any) -> Staged | None:
    """Optionally stage the whole batch with Spark's own (JVM) writers instead of ``write``.

    Runs on the driver, once per attempt, after ``init``, in the front doors that hold the
    batch as a DataFrame (``foreach_batch`` and ``write_batch``; the data-source front door
    only sees Arrow batches, so there ``write`` runs). The core calls it only when no replay
    fingerprint is asked for (that needs every row in Python). Why it exists: handing rows from
    the JVM to Python as Arrow costs more than a Spark writer spends on the whole write, so a
    sink whose store Spark can write (a file format, a table format with a Spark writer) is
    faster letting Spark stage the data.

    How: stage through :func:`eosink.plugin.stage_dataframe` (Spark writes the batch into a
    staging folder of the attempt; the core counts the rows, and that count becomes the
    proof's; executor plugins such as fault injection wrap its tasks), move the part files it
    returns where ``commit`` expects them, and describe them in the message.

    Returns ``None`` to let the core run ``write`` on every partition (the default when no
    sink implements it), or a :class:`~eosink.model.Staged` holding one small picklable
    commit message for the whole batch; ``commit`` then receives ``[staged.message]``. A
    ``Staged`` without a staging the core observed is an error.

    Guarantees: the same as ``write``'s. Nothing staged is visible to readers before
    ``commit``, and a failure leaves only objects that ``abort`` or the sink's cleanup remove.
    Must never publish data, write the proof, or collect the rows to the driver.
    """


@hookspec(firstresult=True)
def commit(ctx: BatchContext, state: Any, messages: list[Any], proof: Proof) -> None:
    """Publish everything the messages describe **and** ``proof``, in one atomic step.

    Runs on the driver (in the data-source front door: in a fresh Spark worker process, with
    only the options, the messages and the state carried inside them). ``messages`` holds one
    message per partition, from the successful attempt of each task, in partition order.

    Guarantees required: after it returns, the data and the proof are visible together; after
    it fails, neither is (or both are, if the failure came after the atomic step). It must be
    safe to call again for the same batch: if the proof of this batch (or a later one) of this
    writer is already in the target, publish nothing and raise
    :class:`~eosink.errors.AlreadyCommitted` (the core then treats the attempt as skipped).
    Sinks may call :func:`eosink.plugin.crash_point` between internal steps so the conformance
    kit can crash there. Must never publish data without the proof or the proof without the data.
    """


@hookspec(firstresult=True)
def abort(ctx: BatchContext, state: Any, messages: list[Any]) -> None:
    """Clean up after a failed or superseded attempt; best effort.

    Runs on the driver after any failure of ``init``, ``write`` or ``commit`` (Spark also calls
    it after a failing commit), and after :class:`~eosink.errors.AlreadyCommitted`.
    ``messages`` may contain ``None`` for tasks that failed; ``state`` may be ``None`` when
    ``init`` failed.

    The rule: a ``commit`` that raised may have landed (its reply was lost, or it failed after
    the atomic step), and ``abort`` may run in another process than ``commit`` (Spark's
    data-source ``abort`` runs in a fresh worker with only the messages), more than once, and
    late. So ``abort`` never trusts memory: it asks the target whether *this attempt's* commit
    landed, and removes nothing if it did.

    The pattern: ``init`` draws an attempt tag (a random id) and returns it in the state;
    ``write`` names staged objects after the tag, ``partition_id`` and ``attempt``; ``commit``
    records the tag with the proof, in the same atomic step. ``abort`` looks for its tag among
    the proofs of this writer (``batch_id`` and later): found means "my commit landed", keep
    everything; not found means no proof references its staged objects, so it may delete them.
    The files and delta sinks do this (a store whose commit *moves* the staged data inside its
    transaction has nothing staged left after a landed commit: ``examples/sink-sqlite``). The
    conformance kit's ``test_abort_after_landed_commit_keeps_published_data`` fails a sink that
    does not.

    Guarantees: errors raised here are logged and swallowed, never hiding the original failure.
    Must never delete or change anything a commit published: an attempt's staged objects that
    no proof references are the only things it may remove. Leftovers it cannot remove are
    orphans that the sink's cleanup removes later.
    """


@hookspec(firstresult=True)
def upsert_key() -> tuple[str, ...] | None:
    """The columns by which the sink replaces rows, or ``None`` when it appends.

    Runs on the driver when a front door starts (once per sink, before any batch).

    A keyed sink upserts: after batch N commits, the target holds, for each key, the row of the
    latest committed batch that carried that key (replace, never accumulate: a replayed batch
    writes the same rows again over themselves, and the proof skips it anyway). That is what
    Spark's ``outputMode("update")`` needs, whose batches hold the changed rows of the result
    table: the core accepts that output mode only when every sink of the query returns a key
    here, and refuses it otherwise, naming the sink option that makes it keyed (``mode="upsert"``
    with ``key``). Rows of one batch with the same key must be refused by the sink, naming the
    key (or reduced by an ordering the user named): which one would win is otherwise Spark's
    partitioning, not the user's query.

    Guarantees: the key is the same for every batch of the sink's life, and its commit
    publishes the replaced rows, the new rows and the proof in one atomic step.

    Must never return a key the sink does not replace rows by: the core would let an
    update-mode query append changed rows beside their older versions.
    """


@hookspec(firstresult=True)
def target_status() -> TargetStatus | None:
    """Describe the target: the proofs it holds and the sink's own bookkeeping.

    Runs in the ``eosink`` command (``eosink status``), on the operator's machine, with the
    sink built from the target and connection options only.

    Returns a :class:`~eosink.reports.TargetStatus`: one proof per writer id (its last
    committed batch, when, rows, fingerprint), and ``details`` with what only this sink knows
    (a manifest's latest entry and size, Delta txns, open transactions of this sink).

    Must never write to the target, take locks, or print credentials.
    """


@hookspec(firstresult=True)
def verify_target() -> Verification | None:
    """Check that what the proofs say is in the target is there.

    Runs in the ``eosink`` command (``eosink verify``, exit code 0 or 1).

    Returns a :class:`~eosink.reports.Verification`: how many objects were checked and one line
    per problem (a listed file missing or of another size, a txn without its commit, a proof
    without its rows).

    Must never write to the target or repair anything: it only reports.
    """


@hookspec(firstresult=True)
def cleanup_target(older_than_s: float, delete: bool) -> CleanupReport | None:
    """Find (and with ``delete``, remove) what failed attempts left behind.

    Runs in the ``eosink`` command (``eosink cleanup``; a dry run unless ``--delete``).

    Returns a :class:`~eosink.reports.CleanupReport`: removable leftovers (orphan files,
    staging folders, transactions of dead attempts) older than ``older_than_s`` seconds, and
    the leftovers kept because they are younger.

    Must never remove anything a proof references, and never anything younger than
    ``older_than_s``: a live writer may still publish it.
    """
