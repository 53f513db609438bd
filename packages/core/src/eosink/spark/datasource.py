"""Front door 2: Spark 4 Python data sources, one per installed sink.

``eosink.spark.register(spark)`` registers ``eosink-<name>`` for every installed sink, so
users write::

    df.writeStream.format("eosink-files").option("writerId", "orders")
        .option("path", "/data/orders").option("checkpointLocation", ckpt).start()

and, for batch jobs, ``df.write.format("eosink-files").option("writerId", "dailyETL")
.option("version", 23424).mode("append").save()``.

How Spark runs a Python stream writer shapes this module: ``streamWriter()`` runs on the driver
side in a planning worker whose writer is pickled to the executors; ``write()`` runs on the
executors; ``commit()``/``abort()`` run in yet another fresh worker, on a new writer built from
the options, sharing only the commit messages. So the driver half of the protocol
(``is_committed``, then skip or ``init``) runs when the planning worker pickles the writer
(``__getstate__``), its outcome travels to the executors inside the writer and back to
``commit`` inside every commit message. The batch id is not given to ``streamWriter``: the
offset log in the checkpoint (written before the batch runs) tells it; every task checks it
against the batch id Spark sets on the task, and ``commit`` against the ``batchId`` Spark passes.
With ``fingerprint`` on, a batch already committed is not written again but counted and hashed
by the tasks, and ``commit`` compares the replay with the stored proof, as ``foreach_batch`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from eosink.errors import (
    BatchIdMismatchError,
    ConfigurationError,
    MissingWriterIdError,
    SinkError,
)
from eosink.logs import get_logger
from eosink.model import BatchContext, PartitionResult
from eosink.options import option_key
from eosink.protocol import (
    Prepared,
    WriteTask,
    abort_quietly,
    check_replay,
    driver_plugins,
    executor_plugins_of,
    finish,
    prepare,
)
from eosink.registry import (
    installed_sinks,
    installed_sources,
    plugin_manager,
    sink_class,
    sink_from_options,
)
from eosink.spark.checkpoint import hadoop_storage_options, spark_store_settings, stream_position
from eosink.spark.executor_env import check_executors
from eosink.spark.executors import spark_arrow_schema

log = get_logger("eosink")

#: Options the core consumes, or Spark's own (``queryName``: ``DataStreamWriter.queryName``
#: hands it to the data source); all others belong to the sink.
CORE_OPTIONS = {"writerid", "fingerprint", "version", "checkpointlocation", "queryname"}


@dataclass
class EosinkCommitMessage(WriterCommitMessage):
    """One task's result, plus what ``commit`` needs and cannot get elsewhere."""

    ctx: BatchContext
    prepared: Prepared
    result: PartitionResult | None


def _shippable(exc: BaseException) -> BaseException:
    """``exc`` with the driver-side traceback as a note, if it survives Spark's pickling, else
    a :class:`SinkError` that names its type and message."""
    import traceback

    from pyspark.serializers import CloudPickleSerializer

    where = "".join(traceback.format_exception(exc)).rstrip()
    exc.add_note(f"raised while eosink planned the batch (Spark's planning worker):\n{where}")
    serializer = CloudPickleSerializer()
    try:
        serializer.loads(serializer.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - an exception class that cannot be rebuilt elsewhere
        return SinkError(f"{type(exc).__name__}: {exc}\n{where}")


class _EosinkWriter:
    """The protocol halves shared by the stream and the batch writer."""

    def __init__(
        self,
        sink_name: str,
        options: Mapping[str, str],
        overwrite: bool,
        schema: Any,
        checkpoint_storage: Mapping[str, Any] | None = None,
    ):
        self.sink_name = sink_name
        #: fsspec options of the checkpoint's store, from Spark's settings (``fs.s3a.*``...):
        #: only those of the checkpoint's bucket or account travel with the writer
        self.checkpoint_storage = dict(checkpoint_storage or {})
        self.options = {k.lower(): v for k, v in options.items()}
        self.overwrite = overwrite
        self.spark_schema = schema
        self.writer_id = self.options.get("writerid")
        if not self.writer_id:
            raise MissingWriterIdError(sink_name)
        self.fingerprint = self.options.get("fingerprint", "off")
        if self.fingerprint not in ("off", "warn", "error"):
            raise ConfigurationError("option fingerprint: use off, warn or error")
        self.sink = sink_from_options(
            sink_name, {k: v for k, v in self.options.items() if option_key(k) not in CORE_OPTIONS}
        )
        self._ctx: BatchContext | None = None
        self._prepared: Prepared | None = None
        # Built here, in the planning worker, and pickled with the writer: the executors log at
        # the level this worker has (from EOSINK_LOG_LEVEL, see eosink.logs).
        self.executor_plugins = executor_plugins_of(())
        #: What planning raised, shipped to the executors to raise there (see __getstate__).
        self._plan_error: BaseException | None = None

    # -- driver side -------------------------------------------------------------------------
    def context(self, batch_id: int | None = None) -> BatchContext:
        raise NotImplementedError

    def arrow_schema(self) -> pa.Schema:
        return spark_arrow_schema(self.spark_schema, "UTC")

    def pm(self) -> Any:
        return plugin_manager(self.sink, driver_plugins(()))

    def prepared(self) -> tuple[BatchContext, Prepared]:
        if self._prepared is None:
            self._ctx = self.context()
            self._prepared = prepare(
                self.pm(), self._ctx, self.arrow_schema(), fingerprint=self.fingerprint
            )
        assert self._ctx is not None
        return self._ctx, self._prepared

    def __getstate__(self) -> dict[str, Any]:
        # Pickling happens exactly once per batch: when the planning worker ships this writer to
        # the executors. That is the moment to run the driver half of the protocol. An error it
        # raises here would reach the user as Spark's "PicklingError: Could not serialize
        # object", its type lost: it travels with the writer instead, and every task raises it
        # as itself (a batch without partitions plans again in ``commit`` and raises it there).
        if self._plan_error is None:
            try:
                self.prepared()
            except Exception as exc:  # noqa: BLE001 - re-raised on the executors, unchanged
                log.error("datasource.plan_failed", sink=self.sink_name, error=type(exc).__name__)
                self._plan_error = _shippable(exc)
        return self.__dict__

    # -- executor side -----------------------------------------------------------------------
    def _write(self, batches: Iterator[pa.RecordBatch]) -> EosinkCommitMessage:
        from pyspark import TaskContext

        if self._plan_error is not None:
            raise self._plan_error
        ctx, prepared = self.prepared()
        task = TaskContext.get()
        self.check_task(ctx, task)
        if prepared.skipped is not None and not prepared.checks_replay(self.fingerprint):
            for _ in batches:  # already committed: read nothing into the target
                pass
            return EosinkCommitMessage(ctx, prepared, None)
        # A committed batch with a fingerprint to check: count and hash, write nothing.
        run = WriteTask(
            self.sink,
            ctx,
            prepared.state,
            plugins=self.executor_plugins,
            fingerprint=self.fingerprint != "off",
            dry_run=prepared.skipped is not None,
        )
        # taskAttemptId, not attemptNumber: unique per task attempt (see executors.py)
        result = run(task.partitionId(), task.taskAttemptId(), batches)
        return EosinkCommitMessage(ctx, prepared, result)

    def check_task(self, ctx: BatchContext, task: Any) -> None:
        pass

    # -- commit side (a fresh process) -------------------------------------------------------
    def _planned(
        self, messages: list[EosinkCommitMessage | None], batch_id: int | None
    ) -> tuple[BatchContext, Prepared]:
        """The plan the messages carry, checked against each other and Spark's batch id."""
        if any(m is None for m in messages):
            raise RuntimeError(f"{self.sink_name}: a write task failed; batch not committed")
        present = [m for m in messages if m is not None]
        if present:
            ctx, prepared = present[0].ctx, present[0].prepared
            if any(m.ctx != ctx for m in present):
                raise BatchIdMismatchError(
                    f"{ctx.label}: the tasks' results come from different plans "
                    f"({sorted({m.ctx.label for m in present})}); nothing was committed"
                )
        else:  # no partitions at all: run the driver half here
            self._ctx, self._prepared = None, None
            ctx, prepared = self.prepared()
        if batch_id is not None and batch_id != ctx.batch_id:
            raise BatchIdMismatchError(
                f"{ctx.label}: Spark commits batch {batch_id} but eosink planned batch "
                f"{ctx.batch_id} from the offset log of checkpoint {ctx.checkpoint}; nothing was "
                "committed. The checkpointLocation option must be the query's own checkpoint."
            )
        return ctx, prepared

    def _commit(self, messages: list[EosinkCommitMessage | None], batch_id: int | None) -> None:
        ctx, prepared = self._planned(messages, batch_id)
        results = [m.result for m in messages if m is not None]
        if prepared.skipped is not None:
            if prepared.checks_replay(self.fingerprint):
                check_replay(ctx, prepared.proof, results, self.fingerprint)
            return
        finish(
            self.pm(),
            ctx,
            prepared.state,
            results,
            fingerprint=self.fingerprint != "off",
        )

    def _abort(self, messages: list[EosinkCommitMessage | None]) -> None:
        present = [m for m in messages if m is not None]
        if not present or present[0].prepared.skipped is not None:
            return
        ctx, prepared = present[0].ctx, present[0].prepared
        abort_quietly(
            self.pm(),
            ctx,
            prepared.state,
            [m.result.message if m.result else None for m in present],
        )


class EosinkStreamWriter(_EosinkWriter, DataSourceStreamArrowWriter):
    """Micro-batches: batch id from the checkpoint, query id from its metadata."""

    def context(self, batch_id: int | None = None) -> BatchContext:
        checkpoint = self.options.get("checkpointlocation")
        if not checkpoint:
            raise ConfigurationError(
                f"eosink-{self.sink_name}: set option checkpointLocation on the query"
            )
        running, query_id = stream_position(checkpoint, self.checkpoint_storage)
        return BatchContext(
            sink=self.sink_name,
            writer_id=str(self.writer_id),
            batch_id=running if batch_id is None else batch_id,
            kind="stream",
            mode="complete" if self.overwrite else "append",
            query_id=query_id,
            checkpoint=checkpoint,
        )

    def check_task(self, ctx: BatchContext, task: Any) -> None:
        spark_batch = task.getLocalProperty("streaming.sql.batchId") if task else None
        if spark_batch is not None and int(spark_batch) != ctx.batch_id:
            raise BatchIdMismatchError(
                f"{ctx.label}: Spark runs batch {spark_batch} but the checkpoint's offset log "
                f"said {ctx.batch_id}; refusing to write under the wrong batch id"
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> EosinkCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        self._commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        self._abort(messages)


class EosinkBatchWriter(_EosinkWriter, DataSourceArrowWriter):
    """Batch jobs: the version option plays the batch id (as Delta's ``txnVersion``)."""

    def context(self, batch_id: int | None = None) -> BatchContext:
        version = self.options.get("version")
        if version is None or not str(version).isdigit():
            raise ConfigurationError(
                f"eosink-{self.sink_name}: a batch write needs .option('version', N), a "
                "non-negative integer that orders this job's runs; versions at or below the last "
                "committed one of this writerId are skipped"
            )
        return BatchContext(
            sink=self.sink_name,
            writer_id=str(self.writer_id),
            batch_id=int(version),
            kind="batch",
            mode="complete" if self.overwrite else "append",
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> EosinkCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[Any]) -> None:
        self._commit(messages, None)

    def abort(self, messages: list[Any]) -> None:
        self._abort(messages)


class EosinkDataSource(DataSource):
    """Base of the per-sink data sources; ``sink_name`` is set on each generated subclass."""

    sink_name = ""
    #: Spark's object-store settings, captured by :func:`register` in the driver: the workers
    #: that plan and commit batches have no session to ask, and read the checkpoint with them.
    store_settings: Mapping[str, str] = {}

    @classmethod
    def name(cls) -> str:
        return f"eosink-{cls.sink_name}"

    def streamWriter(self, schema: Any, overwrite: bool) -> EosinkStreamWriter:  # noqa: N802
        checkpoint = next(
            (v for k, v in self.options.items() if k.lower() == "checkpointlocation"), None
        )
        storage = hadoop_storage_options(checkpoint, self.store_settings) if checkpoint else {}
        return EosinkStreamWriter(self.sink_name, self.options, overwrite, schema, storage)

    def writer(self, schema: Any, overwrite: bool) -> EosinkBatchWriter:
        return EosinkBatchWriter(self.sink_name, self.options, overwrite, schema)


def _class_name(sink_name: str) -> str:
    return (
        "Eosink"
        + "".join(p.capitalize() for p in sink_name.replace("_", "-").split("-"))
        + "DataSource"
    )


def _define_data_sources() -> dict[str, type[EosinkDataSource]]:
    # Module attributes, so that Spark pickles them by reference and executors find them.
    classes = {}
    for sink_name in installed_sinks():
        cls = type(_class_name(sink_name), (EosinkDataSource,), {"sink_name": sink_name})
        cls.__module__ = __name__
        globals()[cls.__name__] = cls
        classes[sink_name] = cls
    return classes


DATA_SOURCES = _define_data_sources()


def registered_data_source(sink_name: str, spark: Any) -> type[EosinkDataSource]:
    """The data source of ``sink_name`` as :func:`register` hands it to ``spark``.

    A subclass that holds the session's object-store settings. It is not a module attribute,
    so Spark's cloudpickle ships it by value (the settings with it) to the Python workers that
    plan and commit batches, where no session exists to ask; its base is found by reference.
    """
    base = DATA_SOURCES[sink_name]
    return type(
        f"{base.__name__}InSession",
        (base,),
        {"store_settings": spark_store_settings(spark), "__module__": __name__},
    )


def usable_sources() -> dict[str, Any]:
    """The installed sources (entry points by name) this pyspark can run. A source built on a
    newer pyspark's API than the one running (eosink-yt-queue needs Spark 4.2's streaming data
    source API) fails to import a pyspark module: it is left out with a warning that says why,
    so the sinks' data sources still register. Any other import error stays: the executors'
    probe and the load name it as before."""
    usable: dict[str, Any] = {}
    for name, entry_point in installed_sources().items():
        try:
            entry_point.load()
        except ImportError as exc:
            if (exc.name or "").split(".")[0] == "pyspark":
                log.warning(
                    "eosink.source_unavailable",
                    source=name,
                    error=f"{type(exc).__name__}: {exc}",
                    hint="the source needs a newer pyspark than this one",
                )
                continue
        usable[name] = entry_point
    return usable


def register(spark: Any) -> list[str]:
    """Register ``eosink-<name>`` for every installed sink, and every installed source (entry
    point group ``eosink.sources``, e.g. ``eosink-yt-queue``); returns the format names."""
    sources = usable_sources()
    check_executors(spark, [sink_class(name) for name in DATA_SOURCES], sources)
    classes = [
        *(registered_data_source(name, spark) for name in DATA_SOURCES),
        *(ep.load() for ep in sources.values()),
    ]
    for cls in classes:
        spark.dataSource.register(cls)
    return [cls.name() for cls in classes]
