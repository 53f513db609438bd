"""The ``files`` sink: part files through fsspec, published by a Spark-compatible manifest log.

* ``write`` (executors) writes a partition's part files into the folder under names no other
  attempt uses; where the batch is a DataFrame, ``write_dataframe`` lets Spark's own writer
  do it instead (:mod:`eosink_files.spark_engine`). Spark's reader (and
  :mod:`eosink_files.reader`) reads only files the log lists, so these files are invisible
  until the commit lists them.
* ``commit`` (driver) publishes the next log file, ``_spark_metadata/<id>``, holding the batch's
  file entries **and** its proof line, in one atomic create-if-absent. A lost race re-reads the
  log: the winner's proof of this batch makes the attempt ``AlreadyCommitted``; another
  writer's commit just moves this one to the next id.
  Before that it checks that every file it lists is there with its reported size.
* ``is_committed`` reads the proofs from the log files Spark's reader would read (the latest
  compact, which carries every writer's latest proofs, and the deltas after it), through the
  view of the log kept between batches (:mod:`eosink_files.log_view`).
* ``abort`` removes the attempt's files unless the log lists them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.logs import get_logger
from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    SinkError,
    Staged,
    crash_point,
    hookimpl,
)
from eosink_files.log import (
    LOG_DIR,
    VERSION_LINE,
    FileEntry,
    LogFile,
    ManifestError,
    ProofEntry,
    closing_line,
    latest_proofs,
    log_name,
    plan_is_valid,
    render,
)
from eosink_files import spark_engine
from eosink_files.cli import FilesCommands
from eosink_files.log_view import LogView, view_of
from eosink_files.options import FilesOptions
from eosink_files.spark_process import in_spark_application
from eosink_files.store import Store, open_store
from eosink_files.writers import PartitionWriter, WrittenFile, unsupported_partition_type

log = get_logger("eosink.files")

#: The object that makes ``_spark_metadata`` exist on object stores before the first commit;
#: Spark's log reads only names that are numbers (and ``.compact``), so it never reads it.
FOLDER_MARKER = ".eosink-files"
FOLDER_MARKER_TEXT = b"A folder written by eosink-files: Spark reads the files its log lists.\n"


class UnreadableFilesError(SinkError):
    """A file a writer reported is not in the folder as the driver sees it: nothing published."""


@attrs.frozen
class FilesState:
    """The init state: the attempt token that names this attempt's files and proof."""

    attempt: str


@attrs.frozen
class FilesMessage:
    """What one task wrote: its part files (relative paths, sizes, times) and row count."""

    files: tuple[WrittenFile, ...]
    rows: int


def _proof_of(entries: list[ProofEntry], ctx: BatchContext) -> ProofEntry | None:
    """The proof the skip rule asks for: exactly this batch if kept, else the writer's latest."""
    mine = [
        e
        for e in entries
        if e.proof.writer_id == ctx.writer_id and e.proof.batch_id >= ctx.batch_id
    ]
    if not mine:
        return None
    exact = [e for e in mine if e.proof.batch_id == ctx.batch_id]
    return exact[0] if exact else max(mine, key=lambda e: e.proof.batch_id)


def placement(
    files: dict[int, bool], log_id: int, mode: str, interval: int
) -> tuple[int, bool, list[int]]:
    """Where the next commit goes: ``(log id, as compact, empty deltas to publish first)``.

    Appends are deltas, except where Spark's reader expects a ``.compact`` (every
    ``interval`` ids). A complete-mode commit must replace everything, so it is always a
    compact, at an id where Spark's reader reads that compact alone; when the next id is not
    one, empty deltas fill the ids before it.
    """
    fillers: list[int] = []
    files = dict(files)
    while True:
        if mode != "complete" and plan_is_valid({**files, log_id: False}, interval):
            return log_id, False, fillers
        if plan_is_valid({**files, log_id: True}, interval):
            return log_id, True, fillers
        if not plan_is_valid({**files, log_id: False}, interval) or len(fillers) > 4 * interval:
            raise ManifestError(
                f"{LOG_DIR}: no readable place for entry {log_id}; the log's compact files do "
                f"not follow compact interval {interval}. Set compact_interval to the interval "
                "the folder was written with."
            )
        files[log_id] = False
        fillers.append(log_id)
        log_id += 1


def _compact_chunks(
    view: LogView, head: bytes, plan: list[LogFile], file_lines: list[str], closing: str
) -> Iterator[bytes]:
    """A compact's bytes: the proofs, every entry so far copied as bytes, the new entries.

    The previous compact's entries are streamed from its file (never parsed, never held
    whole in memory); the deltas after it are already read.
    """
    yield head
    for f in plan:
        if f.compact:
            if f.body_end > f.body_start:
                yield b"\n"
                yield from view.folder.entries(f)
        elif f.body.strip(b"\n"):
            yield b"\n" + f.body.strip(b"\n")
    yield ("\n" + "\n".join([*file_lines, closing])).encode()


class _Counted:
    """Chunks passed through, counting their bytes."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.size = chunks, 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.size += len(chunk)
            yield chunk


class FilesSink(FilesCommands, Sink):
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

    def _check_store(self) -> None:
        """The checks of the store done before any batch reads or writes it (once per store)."""
        self._check_publishable()
        self._store().check_access(conditional=not self.options.single_writer)

    def _check_publishable(self) -> None:
        store = self._store()
        if not store.atomic_publish() and not self.options.single_writer:
            raise ConfigurationError(
                f"sink 'files': filesystem {store.kind()!r} cannot create a file only if it is "
                "absent, atomically, so two writers (or a restarted query and its zombie) could "
                "both publish the same log entry. Use local files, memory://, S3, GCS or Azure, "
                "or, if exactly one query at a time writes this folder, set single_writer=true."
            )

    def _check_readable(self, ctx: BatchContext, written: list[WrittenFile], rows: int) -> None:
        """Refuse to publish files the driver cannot read with the size a writer reported.

        One listing per folder (one ``stat`` per file on local disks, where a listing would
        cost the whole folder). Catches files deleted before their commit (a ``cleanup`` with
        a short age) and files written where the driver cannot see them (an executor's own
        memory or local disk): a proof over them would make readers fail or lose the batch.
        """
        if rows and not written:  # the spark engine moved none of the files Spark wrote
            raise UnreadableFilesError(
                f"{ctx.label}: refusing to commit {rows} row(s) but no file: the driver found "
                "none of the files Spark's writer wrote, so the executors wrote them where the "
                "driver cannot see them (a local path that is not one folder shared by every "
                "machine). Write to a shared folder, or an object store with engine='arrow'. "
                "Nothing was published."
            )
        by_folder: dict[str, dict[str, int]] = {}
        for f in written:
            folder, _, name = f.relpath.rpartition("/")
            by_folder.setdefault(folder, {})[name] = f.size
        problems = []
        for folder, expected in by_folder.items():
            found = self._store().sizes(folder, list(expected))
            for name, size in expected.items():
                relpath = f"{folder}/{name}" if folder else name
                if name not in found:
                    problems.append(f"{relpath!r} is missing")
                elif found[name] != size:
                    problems.append(
                        f"{relpath!r} has {found[name]} bytes, the writer reported {size}"
                    )
        if problems:
            raise UnreadableFilesError(
                f"{ctx.label}: refusing to commit {len(problems)} of {len(written)} file(s) the "
                f"driver cannot read as written ({'; '.join(problems[:3])}). Either they were "
                "deleted or changed before the commit (a cleanup younger than the longest "
                "batch: raise --older-than-hours), or the executors wrote them where the driver "
                "cannot see them (memory://, or a local path that is not one folder shared by "
                "every machine): write to a shared folder or an object store. Nothing was "
                "published; the batch's replay writes it again."
            )

    # -- driver ------------------------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        self._check_store()
        view = self._view()
        with view.lock:
            view.refresh(self.options.log_cleanup_delay_s)
            if not view.files:
                view.folder.check_folder()
                return None
            found = _proof_of(view.proofs(), ctx)
        return found.proof if found else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> FilesState:
        opts = self.options
        self._check_store()
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
        if proofs:
            last = max(proofs, key=lambda p: p.log_id)
            if last.format and last.format != opts.format:
                raise ConfigurationError(
                    f"sink 'files': the folder holds {last.format} files but this sink writes "
                    f"{opts.format}; Spark reads a folder in one format. Set format="
                    f"{last.format!r} or write to another folder."
                )
            if tuple(last.partition_by) != tuple(opts.partition_by):
                raise ConfigurationError(
                    f"sink 'files': the folder is partitioned by {list(last.partition_by)} but "
                    f"this sink partitions by {list(opts.partition_by)}; Spark's reader cannot "
                    "mix layouts. Use the folder's partitionBy or write to another folder."
                )
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
        self._check_publishable()
        store, view = self._store(), self._view()
        written = [f for m in messages if m is not None for f in m.files]
        self._check_readable(ctx, written, sum(m.rows for m in messages if m is not None))
        file_lines = [
            FileEntry(store.uri(f.relpath), f.size, f.modification_time).to_line() for f in written
        ]
        # A view read recently (by this batch's is_committed) need not be read again first
        # where publishing is atomic: log ids are dense, so if anything was published since,
        # the next id is taken, the create-if-absent fails and the next round reads the log.
        # That saves a round trip to an object store per batch. "Recently" is within the
        # cleanup delay (LogView.confirmed_within): an older view's next id may have been
        # taken and expired since, and a create there would succeed where no reader looks.
        delay = self.options.log_cleanup_delay_s
        with view.lock:
            trust_view = (
                store.atomic_publish()
                and not self.options.single_writer
                and view.confirmed_within(delay)
            )
            for round_ in range(1000):
                if round_ or not trust_view:
                    view.refresh(delay)
                if not view.files and round_ == 0:
                    view.folder.check_folder()
                created = self._publish(ctx, state, proof, view, file_lines)
                if created is None:
                    log.info(
                        "files.commit_race",
                        writer=ctx.writer_id,
                        batch=ctx.batch_id,
                        entry=view.latest,
                    )
                    continue
                if created and not self._readable_slot(view, created, delay):
                    self._withdraw(ctx, view, created)
                    continue
                crash_point("commit:manifest-published")
                self._expire(view)
                return
        raise ManifestError(f"{ctx.label}: could not publish a log entry after 1000 races")

    def _readable_slot(self, view: LogView, created: list[tuple[int, bool]], delay: float) -> bool:
        """Whether the log files just published are where readers read them.

        A publication that ended while the view was still :meth:`LogView.confirmed_within`
        the cleanup delay took ids that had never been used. One that ended later (a long
        compaction, a stalled store) may have re-created ids another writer had used and
        expired meanwhile: no reader reads those. Expiry deletes the oldest files first, so
        such ids have lost the log file before them: that one is looked for. (The first log
        file, id 0, has none before it; a publication there is a small one.)
        """
        first = created[0][0]
        if view.confirmed_within(delay) or first == 0:
            return True
        before = first - 1
        kinds = {view.files[before]} if before in view.files else {True, False}
        return bool(view.folder.present({(before, compact) for compact in kinds}))

    def _withdraw(self, ctx: BatchContext, view: LogView, created: list[tuple[int, bool]]) -> None:
        """Delete log files this attempt published into expired ids, then read the log again.

        Nobody reads them (the log has moved past them), so deleting them loses nothing and
        leaves no stale proof behind; the next round publishes after the latest log file.
        """
        store = self._store()
        for log_id, compact in reversed(created):
            store.delete(f"{LOG_DIR}/{log_name(log_id, compact)}")
        log.warning(
            "files.commit_expired_slot",
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            entries=[log_id for log_id, _ in created],
        )
        view.reload()

    def _publish(
        self,
        ctx: BatchContext,
        state: FilesState,
        proof: Proof,
        view: LogView,
        file_lines: list[str],
    ) -> list[tuple[int, bool]] | None:
        """Publish this batch's log file at the next free id.

        Returns the ``(log id, is compact)`` of every log file published (empty deltas of
        complete mode first): none when this attempt's proof is already in the log, None when
        another writer took an id first.
        """
        opts, store = self.options, self._store()
        proofs = view.proofs()
        done = _proof_of(proofs, ctx)
        if done is not None and done.attempt == state.attempt:
            return []  # an earlier round published it (and its log file was carried forward)
        if done is not None:
            raise AlreadyCommitted(
                f"{ctx.label}: the log already holds batch {done.proof.batch_id} of this "
                f"writer (entry {done.log_id})"
            )
        files = view.window()
        log_id, compact, fillers = placement(
            files, view.latest + 1, ctx.mode, opts.compact_interval
        )
        created: list[tuple[int, bool]] = []
        for filler in fillers:  # empty deltas: nothing for readers, a place for the compact
            empty = render([], [])
            if not store.publish(f"{LOG_DIR}/{filler}", empty, overwrite=filler == view.torn):
                return None
            view.record(LogFile(filler, False, [], files=[], size=len(empty)))
            created.append((filler, False))
        entry = ProofEntry(proof, state.attempt, log_id, opts.format, opts.partition_by, ctx.mode)
        uri = view.folder.log_uri
        closing = closing_line(log_id, uri)
        started = time.monotonic()
        if compact:
            carried = latest_proofs([*proofs, entry])
            head = "\n".join([VERSION_LINE, *(p.to_line(uri) for p in carried)]).encode()
            plan = view.plan if ctx.mode != "complete" else []  # complete: only the new files
            written = _Counted(_compact_chunks(view, head, plan, file_lines, closing))
            record = LogFile(log_id, True, carried, body_start=len(head) + 1)
            data: Any = written
        else:
            body = "\n".join(file_lines).encode()
            data = render([entry.to_line(uri)], file_lines, b"", closing)
            record = LogFile(log_id, False, [entry], body=body, size=len(data))
        published = store.publish(
            f"{LOG_DIR}/{log_name(log_id, compact)}",
            data,
            crash=lambda: crash_point("commit:manifest-staged"),
            overwrite=log_id == view.torn,
        )
        if not published:
            return None
        if compact:
            record.body_end = written.size - len(closing.encode()) - 1
            record.size = written.size
            log.info(
                "files.log_compacted",
                entry=log_id,
                bytes=written.size,
                mode=ctx.mode,
                duration_ms=round((time.monotonic() - started) * 1000, 2),
            )
        view.record(record)
        return [*created, (log_id, compact)]

    def _expire(self, view: LogView) -> None:
        """Delete a few obsolete log files; best effort (the next commit carries on)."""
        try:
            removed = view.expire(self.options.log_cleanup_delay_s)
        except Exception as exc:  # noqa: BLE001 - the batch is committed; never fail it here
            log.warning("files.log_expire_failed", error=type(exc).__name__)
            return
        if removed:
            log.debug("files.log_expired", removed=removed)

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
            if any(p.attempt == state.attempt for p in view.proofs()):
                return  # this attempt's commit went through: its files are published data
        store = self._store()
        for relpath in written:
            store.delete(relpath)
        log.info(
            "files.abort_removed", writer=ctx.writer_id, batch=ctx.batch_id, files=len(written)
        )

    @hookimpl
    def write_dataframe(self, state: FilesState, df: Any) -> Staged | None:
        store = self._store()
        if not spark_engine.chooses_spark(self.options, store, df):
            return None
        files, rows = spark_engine.stage(store, self.options, df, state.attempt)
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
