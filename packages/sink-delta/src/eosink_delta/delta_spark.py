"""The ``delta-spark`` engine: Delta's own Spark writer commits, through this package's front
doors (``foreach_batch``, ``write_batch``), which choose the engine: delta-rs (eosink's
protocol, :mod:`eosink_delta.sink`) or Delta's own Spark writer.

``engine="delta-spark"`` is Delta's own idempotent write across jobs (its ``txnAppId`` and
``txnVersion`` writer options), for Sparks that have the Delta jars::

    df.write.format("delta").option("txnAppId", writer_id).option("txnVersion", batch_id)

Delta itself then records the ``txn`` and skips versions at or below the last one. eosink adds
what it adds to every sink, shared with the delta-rs engine: the writer identity, the skip rule
checked (and logged) before anything runs, the check that a new checkpoint does not point at a
writer's old output, and the proof (query id, checkpoint) in the commit's ``userMetadata``, read
back through delta-rs. ``engine="auto"`` picks delta-spark when the jars are on the classpath,
else delta-rs. ``mode="upsert"`` (with ``key``) is Delta's own MERGE, its txn set for that one
statement (:mod:`eosink_delta.delta_spark_merge`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from eosink.logs import get_logger
import eosink
from eosink import BatchOutcome, MissingWriterIdError
from eosink.plugin import BatchContext, ConfigurationError, Proof
from eosink.protocol import check_identity
from eosink_delta import delta_spark_merge as merging
from eosink_delta.options import ENGINES, DeltaOptions
from eosink_delta.sink import DeltaSink
from eosink_delta.snapshot import latest
from eosink_delta.proof import PROOF_KEY, committed_proof
from eosink_delta.table import check_not_other_data, check_partitions, check_table_features

log = get_logger("eosink.delta")

DELTA_CLASS = "org.apache.spark.sql.delta.DeltaLog"
NO_JARS = (
    "Delta's Spark jars are not on this Spark's classpath: add them "
    "(spark.jars.packages=io.delta:delta-spark_2.13:<version>, or the jars in spark.jars) or use "
    "engine='delta-rs', which needs no jars"
)


def delta_jars_present(spark: Any) -> bool:
    """Whether ``spark`` (classic, with a JVM) can load Delta's Spark classes.

    Asked through Spark's own class loading (``Utils.classForName``: the context or Spark class
    loader), the way Spark finds ``format("delta")``: jars Spark loads itself (``spark.jars``,
    ``spark.jars.packages``) are on that loader only. ``Class.forName(name)`` through py4j
    asks the application class loader, which sees only the JVM's launch classpath."""
    try:
        jvm = spark.sparkContext._jvm  # noqa: SLF001
        jvm.org.apache.spark.util.Utils.classForName(DELTA_CLASS, False, False)
    except Exception:  # noqa: BLE001 - Spark Connect, or no jars
        return False
    return True


def choose_engine(spark: Any, engine: str) -> str:
    if engine not in ENGINES:
        raise ConfigurationError(f"engine {engine!r} is unknown; use one of {', '.join(ENGINES)}")
    if engine == "auto":
        return "delta-spark" if delta_jars_present(spark) else "delta-rs"
    if engine == "delta-spark" and not delta_jars_present(spark):
        raise ConfigurationError(f"engine 'delta-spark': {NO_JARS}")
    return engine


def write_with_delta_spark(df: Any, ctx: BatchContext, options: DeltaOptions) -> BatchOutcome:
    """One batch through Delta's Spark writer, with eosink's skip rule and proof around it."""
    if not ctx.writer_id:
        raise MissingWriterIdError("delta")
    uri, storage = options.path, options.storage_options
    if storage:
        raise ConfigurationError(
            "engine 'delta-spark' writes through Spark's Delta writer, which takes its store "
            "settings from Spark's Hadoop configuration (spark.hadoop.fs.s3a.*...), not from "
            "storage_options: set them there and drop storage_options, or use engine='delta-rs'"
        )
    with latest(uri, storage) as table:
        proof = committed_proof(uri, ctx, table) if table is not None else None
    if proof is not None and proof.batch_id >= ctx.batch_id:
        check_identity(ctx, proof)
        reason = f"committed up to batch {proof.batch_id}"
        log.info(
            "batch.skipped",
            sink="delta",
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            kind=ctx.kind,
            skipped=True,
            reason=reason,
            engine="delta-spark",
        )
        return BatchOutcome(ctx, "skipped", reason=reason)
    configuration, table_columns = None, None
    partition_by = list(options.partition_by)
    with latest(uri, storage, fresh=False) as table:
        if table is None:
            check_not_other_data(uri, storage)
        else:
            configuration = dict(table.metadata().configuration)
            check_table_features(uri, configuration, engine="delta-spark", mode=ctx.mode)
            partition_by = list(table.metadata().partition_columns)
            check_partitions(uri, partition_by, options.partition_by)
            table_columns = [f.name for f in table.schema().fields]
    if options.upsert:
        merging.check_upsert(df, uri, ctx, options, partition_by, configuration, table_columns)
    stored = Proof(
        writer_id=ctx.writer_id,
        batch_id=ctx.batch_id,
        query_id=ctx.query_id,
        checkpoint=ctx.checkpoint,
    )
    metadata = json.dumps({PROOF_KEY: stored.to_json()})
    try:
        if options.upsert:
            upsert_with_delta_spark(df, ctx, options, metadata, partition_by, table_columns)
        else:
            _write(df, ctx, options, metadata)
    except Exception as error:
        violated = constraint_violation(error)
        if violated is None:
            raise
        raise ConfigurationError(
            f"sink 'delta': a row of batch {ctx.batch_id} breaks a constraint of the table at "
            f"{uri}: {violated} Delta's writer refused the whole batch: nothing was committed. "
            "Filter or fix such rows before the sink (or change the constraint); the query's "
            "replay of the batch then writes it."
        ) from error
    log.info(
        "batch.committed",
        sink="delta",
        writer=ctx.writer_id,
        batch=ctx.batch_id,
        kind=ctx.kind,
        skipped=False,
        engine="delta-spark",
    )
    return BatchOutcome(ctx, "committed")


def _write(df: Any, ctx: BatchContext, options: DeltaOptions, metadata: str) -> None:
    """An append (or complete mode's overwrite) through Delta's writer, its txn and proof as
    the writer's options: scoped to this one write by Delta itself."""
    writer = (
        df.write.format("delta")
        .option("txnAppId", ctx.writer_id)
        .option("txnVersion", str(ctx.batch_id))
        .option("userMetadata", metadata)
        .mode("overwrite" if ctx.mode == "complete" else "append")
    )
    if options.merge_schema:
        writer = writer.option("mergeSchema", "true")
    if options.partition_by:
        writer = writer.partitionBy(*options.partition_by)
    writer.save(options.path)


def upsert_with_delta_spark(
    df: Any,
    ctx: BatchContext,
    options: DeltaOptions,
    metadata: str,
    partition_by: list[str],
    table_columns: list[str] | None,
) -> None:
    """A keyed upsert: the batch reduced to one row per key (or refused), then Delta's MERGE
    with the txn and proof (:mod:`eosink_delta.delta_spark_merge`). Into a table not yet
    there, the batch's rows are the table: one append creates it, with the txn and proof."""
    cached = df.is_cached  # the user's own cache stays theirs
    if not cached:
        df = df.persist()  # checked, then merged: the same rows both times
    try:
        rows = merging.batch_rows(df, ctx, options, partition_by)
        if table_columns is None:
            _write(rows, ctx, options, metadata)
        else:
            merging.merge(rows, options.path, ctx, options, metadata)
    finally:
        if not cached:
            df.unpersist()


#: Delta's error classes for a write whose rows break the table's constraints (Delta then
#: commits nothing): a CHECK constraint, a NOT NULL column.
CONSTRAINT_VIOLATIONS = (
    "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
    "DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
)
_VIOLATION = re.compile(
    r"\[(?:" + "|".join(CONSTRAINT_VIOLATIONS) + r")\]\s*(.*?)(?:\n\s*at |\n\tat |$)", re.S
)


def constraint_violation(error: BaseException) -> str | None:
    """Delta's own words for the constraint a write's rows broke (the constraint, the column,
    the row's values), found in the driver's error (Spark's "Job aborted" around the task's),
    or None for any other error."""
    found = _VIOLATION.search(str(error))
    if found is None:
        return None
    return " ".join(found.group(1).split())[:1000]


def _options(path: str, options: dict[str, Any]) -> DeltaOptions:
    return DeltaSink(dict(options, path=path)).options


def _modes(mode: str, options: dict[str, Any]) -> str:
    """The front doors' ``mode``: Spark's output mode (``append``, ``complete``) or the sink's
    ``upsert`` (with ``key``), whose batches are a query's appended or updated rows."""
    if mode == "upsert":
        options["mode"] = "upsert"
        return "append"
    return mode


@attrs.define
class DeltaForeachBatch:
    """The ``foreachBatch`` function; the engine is chosen on the first batch's session."""

    options: DeltaOptions
    writer_id: str
    mode: str = "append"
    plugins: tuple[Any, ...] = ()
    engine: str | None = None
    outcomes: list[BatchOutcome] = attrs.field(factory=list)
    _rs: Any = None

    def __call__(self, df: Any, batch_id: int) -> None:
        if self.engine is None:
            self.engine = choose_engine(df.sparkSession, self.options.engine)
            log.info("delta.engine", engine=self.engine, table=self.options.path)
        if self.engine == "delta-rs":
            if self._rs is None:
                sink = DeltaSink(attrs.evolve(self.options, engine="delta-rs"))
                self._rs = eosink.foreach_batch(
                    sink, writer_id=self.writer_id, mode=self.mode, plugins=self.plugins
                )
            self._rs(df, batch_id)
            self.outcomes.append(self._rs.outcomes[-1])
            return
        from eosink.spark.foreach_batch import check_output_mode, running_query

        query = running_query(df)
        # As the core's foreach_batch: an update-mode query's batches hold changed rows, which
        # only a keyed (upsert) writer puts in place; a complete one's, the whole result.
        mode: Any = self.mode
        check_output_mode(query.output_mode, mode, self.options.upsert)
        ctx = BatchContext(
            sink="delta",
            writer_id=self.writer_id,
            batch_id=int(batch_id),
            kind="stream",
            mode=self.mode,  # type: ignore[arg-type]
            query_id=query.id,
            checkpoint=query.checkpoint,
        )
        self.outcomes.append(write_with_delta_spark(df, ctx, self.options))


def foreach_batch(
    path: str, *, writer_id: str, mode: str = "append", plugins: tuple = (), **options: Any
) -> DeltaForeachBatch:
    """``df.writeStream.foreachBatch(delta_spark.foreach_batch(path, writer_id=...))``.

    Options as the ``delta`` sink's; ``engine="auto"`` (the default here) uses Delta's Spark
    writer when its jars are present, else delta-rs.
    """
    if not writer_id:
        raise MissingWriterIdError("delta")
    options.setdefault("engine", "auto")
    mode = _modes(mode, options)
    return DeltaForeachBatch(_options(path, options), str(writer_id), mode, tuple(plugins))


def write_batch(
    df: Any,
    path: str,
    *,
    writer_id: str,
    version: int,
    mode: str = "append",
    **options: Any,
) -> BatchOutcome:
    """A batch job's write, exactly once per (writer id, version), on either engine: Delta's
    ``txnAppId``/``txnVersion`` rule, a version at or below the last committed one skipped."""
    if not writer_id:
        raise MissingWriterIdError("delta")
    options.setdefault("engine", "auto")
    mode = _modes(mode, options)
    opts = _options(path, options)
    engine = choose_engine(df.sparkSession, opts.engine)
    if engine == "delta-rs":
        sink = DeltaSink(attrs.evolve(opts, engine="delta-rs"))
        return eosink.write_batch(df, sink, writer_id=writer_id, version=version, mode=mode)[0]
    if version is None or int(version) < 0:
        raise ConfigurationError("write_batch needs version=<non-negative int>")
    ctx = BatchContext(
        sink="delta",
        writer_id=str(writer_id),
        batch_id=int(version),
        kind="batch",
        mode=mode,  # type: ignore[arg-type]
    )
    return write_with_delta_spark(df, ctx, opts)
