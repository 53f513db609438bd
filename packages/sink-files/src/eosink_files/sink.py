"""The ``files`` sink: part files through fsspec, published by a Spark-compatible manifest log.

* ``write`` (executors) writes a partition's part files into the folder under names no other
  attempt uses; where the batch is a DataFrame, ``write_dataframe`` lets Spark's own writer
  do it instead (:mod:`eosink_files.spark_file_writer`). Spark's reader (and
  :mod:`eosink_files.reader`) reads only files the log lists, so these files are invisible
  until the commit lists them.
* ``commit`` (driver) publishes the next log file, ``_spark_metadata/<id>``, holding the batch's
  file entries **and** its proof line (:mod:`eosink_files.proof`), in one atomic
  create-if-absent: Spark's ``ManifestFileCommitProtocol.commitJob``, in
  :mod:`eosink_files.manifest_commit`.
* ``is_committed`` reads the proofs from the log files Spark's reader would read (the latest
  compact, which carries every writer's latest proofs, and the deltas after it), through the
  view of the log kept between batches (:mod:`eosink_files.log_view`).
* ``target_status``, ``verify_target``, ``cleanup_target`` (``eosink status|verify|cleanup``)
  are inherited from :mod:`eosink_files.operator_hooks`.
* ``abort`` removes the attempt's files only when it is sure no log file lists them
  (:func:`_maybe_published`); otherwise they stay for ``eosink cleanup``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import (
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    SinkError,
    Staged,
    hookimpl,
)
from eosink.logs import get_logger
from eosink.process import process_state
from eosink_files import spark_file_writer
from eosink_files.layout import check_layout
from eosink_files.log import LOG_DIR
from eosink_files.log_view import LogView, view_of
from eosink_files.manifest_commit import ManifestCommit
from eosink_files.operator_hooks import FilesOperatorHooks
from eosink_files.options import FilesOptions
from eosink_files.proof import ProofEntry, proof_of
from eosink_files.spark_process import in_spark_application
from eosink_files.store import Store, open_store
from eosink_files.writers import (
    PartitionWriter,
    WrittenFile,
    unsupported_csv_type,
    unsupported_partition_type,
)

log = get_logger("eosink.files")

#: The object that makes ``_spark_metadata`` exist on object stores before the first commit;
#: Spark's log reads only names that are numbers (and ``.compact``), so it never reads it.
FOLDER_MARKER = ".eosink-files"
FOLDER_MARKER_TEXT = b"A folder written by eosink-files: Spark reads the files its log lists.\n"


def _maybe_published(proofs: list[ProofEntry], ctx: BatchContext, attempt: str) -> str | None:
    """Why this attempt's files may be published data (None: they are surely not).

    An abort may run late (a zombie driver), after the restarted query has committed many more
    batches: a compact keeps only the latest :data:`~eosink_files.proof.KEEP_PROOFS` proofs of
    a writer, so this attempt's own proof may be gone while its files are listed. One batch of
    a writer is published at most once (the commit's race check), so the files are surely
    unpublished only when the log proves this batch by another attempt, or proves that the
    writer never got this far. Otherwise they are kept: an orphan costs space until cleanup,
    a deleted listed file breaks every read.
    """
    done = proof_of(proofs, ctx)
    if done is None:
        return None  # the writer's latest proof is below this batch: it was never committed
    if done.proof.batch_id == ctx.batch_id:
        return "its commit is in the log" if done.attempt == attempt else None
    return (
        f"the log no longer holds the proof of batch {ctx.batch_id} (the writer is at batch "
        f"{done.proof.batch_id}), so it cannot tell whether this attempt committed it; "
        "`eosink cleanup` removes the files if no log file lists them"
    )


_access_lock = threading.Lock()


def _options_key(storage_options: dict[str, Any]) -> str:
    """Storage options as a key (a digest: credentials stay out of the process's state)."""
    text = json.dumps(storage_options, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.frozen
class FilesState:
    """The init state: the attempt token that names this attempt's files and proof."""

    attempt: str


@attrs.frozen
class FilesMessage:
    """What one task wrote: its part files (relative paths, sizes, times) and row count."""

    files: tuple[WrittenFile, ...]
    rows: int


class FilesSink(FilesOperatorHooks, Sink):
    """Exactly-once files in a folder; each batch is published by one manifest log file."""

    name = "files"
    Options = FilesOptions

    # -- helpers -----------------------------------------------------------------------------
    def _store(self) -> Store:
        store = self.__dict__.get("_store_cache")
        if store is None:
            opts = self.options
            store = open_store(opts.path, opts.manifest_scheme, opts.storage_options)
            self.__dict__["_store_cache"] = store
        return store

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_store_cache"}

    def _view(self) -> LogView:
        opts = self.options
        return view_of(self._store(), opts.compact_interval, opts.single_writer)

    def _manifest_commit(self) -> ManifestCommit:
        return ManifestCommit(self._store(), self.options, self._view())

    def _check_access(self) -> None:
        """Write, read back and delete a probe object: refuse a store this process cannot use
        before any data is written. Once per process and store (the data-source front door
        builds a new sink for every batch), and never in ``is_committed``, which must not
        write."""
        key = self._access_key()
        with _access_lock:
            checked = process_state("eosink_files.access_checked")
            if key in checked:
                return
            self._store().check_access(conditional=not self.options.single_writer)
            checked[key] = True

    def _access_key(self) -> tuple[str, bool, str]:
        opts = self.options
        return (self._store().root_uri, opts.single_writer, _options_key(opts.storage_options))

    def _access_checked(self) -> bool:
        with _access_lock:
            return self._access_key() in process_state("eosink_files.access_checked")

    # -- driver ------------------------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        self._manifest_commit().check_publishable()
        view = self._view()
        try:
            with view.lock:
                view.refresh(self.options.log_cleanup_delay_s)
                if not view.files:
                    view.folder.check_folder()
                    return None
                found = proof_of(view.proofs(), ctx)
        except SinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - a store this process cannot read
            # Before init's access check has passed in this process, an error of the store's
            # client is the store's configuration: refused as init's check refuses it.
            refusal = None if self._access_checked() else self._store().access_refusal(exc)
            if refusal is None:
                raise
            raise ConfigurationError(refusal) from None
        return found.proof if found else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> FilesState:
        opts = self.options
        self._manifest_commit().check_publishable()
        self._check_access()
        if self._store().kind() == "memory" and in_spark_application():
            raise ConfigurationError(
                "sink 'files': memory:// lives in one process, but Spark runs the write tasks "
                "in other processes (its executors' Python workers), so the driver would never "
                "see their files. Write to a folder the driver and every executor share (a "
                "shared mount, s3://, gs://, abfss://); memory:// serves runs that write in "
                "the driver's own process (eosink.testing.local.LocalRunner)."
            )
        names = list(schema.names)
        missing = [c for c in opts.partition_by if c not in names]
        if missing:
            raise ConfigurationError(
                f"sink 'files': partition column(s) {missing} are not in the stream's columns "
                f"{names}; fix partitionBy or select those columns"
            )
        for column in opts.partition_by:
            problem = unsupported_partition_type(schema.field(column).type)
            if problem:
                raise ConfigurationError(
                    f"sink 'files': partition column {column!r} has type "
                    f"{schema.field(column).type}, which cannot name a folder: {problem}"
                )
        if opts.format == "csv":
            for field in schema:
                problem = unsupported_csv_type(field.type)
                if problem and field.name not in opts.partition_by:
                    raise ConfigurationError(
                        f"sink 'files': column {field.name!r} has type {field.type}, which "
                        f"cannot be written as CSV: {problem}. Use format='parquet' or "
                        "'json', or turn the column into text in the query (e.g. to_json). "
                        "Nothing was written."
                    )
        if opts.partition_by and len(opts.partition_by) == len(names):
            raise ConfigurationError(
                "sink 'files': every column is a partition column, so the files would hold no "
                "data; leave at least one column out of partitionBy"
            )
        view = self._view()
        with view.lock:
            if not view.loaded:  # is_committed read the log just before, in this process
                view.refresh(self.options.log_cleanup_delay_s)
            if not view.files:
                view.folder.check_folder()
            proofs, empty_log = view.proofs(), not view.files
            foreign = view.foreign_samples()
        check_layout(self.options, proofs, foreign, self._store().relpath_of)
        self._mark_folder(empty_log)
        return FilesState(attempt=uuid.uuid4().hex)

    def _mark_folder(self, empty_log: bool) -> None:
        """Make ``_spark_metadata`` exist before any part file is written.

        Spark's reader reads a folder without it as plain files, every one of them: the part
        files of a first batch not committed yet (or of one that crashed) would be read. On
        local disks a folder marks it; object stores have no folders, only keys, so the
        first batch publishes a small object inside it (a name Spark's log ignores).
        """
        store = self._store()
        if store.kind() in ("file", "memory"):
            store.makedirs(LOG_DIR)
        elif empty_log:
            store.publish(f"{LOG_DIR}/{FOLDER_MARKER}", FOLDER_MARKER_TEXT)

    @hookimpl
    def commit(
        self,
        ctx: BatchContext,
        state: FilesState,
        messages: list[FilesMessage | None],
        proof: Proof,
    ) -> None:
        written = [f for m in messages if m is not None for f in m.files]
        rows = sum(m.rows for m in messages if m is not None)
        self._manifest_commit().commit(ctx, state.attempt, written, rows, proof)

    @hookimpl
    def abort(self, ctx: BatchContext, state: FilesState | None, messages: list[Any]) -> None:
        if state is None:
            return
        written = [
            f.relpath for m in messages or () if isinstance(m, FilesMessage) for f in m.files
        ]
        if not written:
            return
        view = self._view()
        with view.lock:
            view.refresh(self.options.log_cleanup_delay_s)
            published = _maybe_published(view.proofs(), ctx, state.attempt)
        if published:
            log.warning(
                "files.abort_kept",
                writer=ctx.writer_id,
                batch=ctx.batch_id,
                files=len(written),
                reason=published,
            )
            return
        store = self._store()
        for relpath in written:
            store.delete(relpath)
        log.info(
            "files.abort_removed", writer=ctx.writer_id, batch=ctx.batch_id, files=len(written)
        )

    @hookimpl
    def write_dataframe(self, state: FilesState, df: Any) -> Staged | None:
        store = self._store()
        if not spark_file_writer.chooses_spark(self.options, store, df):
            return None
        files, rows = spark_file_writer.stage(store, self.options, df, state.attempt)
        return Staged(FilesMessage(files=tuple(files), rows=rows), rows)

    # -- executors ---------------------------------------------------------------------------
    @hookimpl
    def write(
        self, state: FilesState, partition_id: int, attempt: int, batches: Iterator[pa.RecordBatch]
    ) -> FilesMessage:
        store = self._store()
        prefix = f"part-{partition_id:05d}-{state.attempt}-{attempt}"
        writer: PartitionWriter | None = None
        rows = 0
        try:
            for batch in batches:
                if writer is None:
                    writer = PartitionWriter(store, prefix, batch.schema, self.options)
                writer.add(batch)
                rows += batch.num_rows
            files = writer.close() if writer is not None else []
        except BaseException:
            if writer is not None:
                writer.discard()
            raise
        return FilesMessage(files=tuple(f for f in files if f.rows or f.size), rows=rows)
