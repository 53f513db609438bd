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
* ``is_committed`` reads the proofs from the log files Spark's reader would read (the latest
  compact, which carries every writer's latest proofs, and the deltas after it).
* ``abort`` removes the attempt's files unless the log lists them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
import structlog

import eosink
from eosink import AlreadyCommitted, BatchContext, ConfigurationError, Proof, crash_point, hookimpl
from eosink_files.log import (
    LOG_DIR,
    LogFile,
    ManifestError,
    ProofEntry,
    FileEntry,
    latest_proofs,
    header_end,
    log_files,
    log_name,
    parse,
    plan_is_valid,
    reader_plan,
    render,
)
from eosink_files import spark_engine
from eosink_files.cli import FilesCommands
from eosink_files.options import FilesOptions
from eosink_files.store import Store, open_store, safe_url
from eosink_files.writers import PartitionWriter, WrittenFile

log = structlog.get_logger("eosink.files")

HEADER_CHUNK = 64 * 1024

#: Hidden folders that mean "this folder belongs to another table format".
FOREIGN_MARKERS = {"_delta_log": "a Delta table (use the delta sink)", ".hoodie": "a Hudi table"}


@attrs.frozen
class FilesState:
    """The init state: the attempt token that names this attempt's files and proof."""

    attempt: str


@attrs.frozen
class FilesMessage:
    """What one task wrote: its part files (relative paths, sizes, times) and row count."""

    files: tuple[WrittenFile, ...]
    rows: int


class SinkLog:
    """The log of one folder, read fresh on every call (no cache: it must survive crashes)."""

    def __init__(self, store: Store, compact_interval: int) -> None:
        self.store, self.interval = store, compact_interval

    @property
    def log_uri(self) -> str:
        return self.store.uri(LOG_DIR)

    def listing(self) -> dict[int, bool]:
        return log_files(name for name, is_dir in self.store.listdir(LOG_DIR) if not is_dir)

    def read(self, log_id: int, compact: bool, *, header_only: bool = False) -> LogFile:
        """One log file; ``header_only`` reads just the proof lines at its top."""
        name = log_name(log_id, compact)
        try:
            if header_only:
                data = self._read_header(f"{LOG_DIR}/{name}")
            else:
                data = self.store.read_bytes(f"{LOG_DIR}/{name}")
        except FileNotFoundError:
            raise ManifestError(
                f"{LOG_DIR}/{name} disappeared while being read (a cleanup of old log files ran "
                "concurrently); retry the operation"
            ) from None
        return parse(data, log_id, compact, header_only=header_only)

    def _read_header(self, relpath: str) -> bytes:
        data = b""
        with self.store.open_read(relpath) as f:
            while True:
                chunk = f.read(HEADER_CHUNK)
                data += chunk
                if not chunk or header_end(data) is not None:
                    return data

    def current(
        self, files: dict[int, bool] | None = None
    ) -> tuple[dict[int, bool], list[LogFile]]:
        """The listing and the files Spark's reader reads (of a compact: only its proof lines)."""
        files = self.listing() if files is None else files
        plan = reader_plan(files, self.interval)
        return files, [self.read(i, c, header_only=c) for i, c in plan]

    def check_folder(self) -> None:
        """Refuse a folder that is neither empty, nor an eosink-files or Spark file-sink folder."""
        store = self.store
        where = safe_url(store.location)
        if store.is_file():
            raise ConfigurationError(
                f"sink 'files': path {where!r} is a file; give a folder path (it is created if "
                "missing)"
            )
        entries = store.listdir("")
        names = {name for name, _ in entries}
        for marker, what in FOREIGN_MARKERS.items():
            if marker in names:
                raise ConfigurationError(
                    f"sink 'files': {where!r} is {what}, not a file-sink folder; write to a new "
                    "or empty folder"
                )
        if LOG_DIR in names:
            return
        foreign = sorted(
            name
            for name, is_dir in entries
            if not name.startswith(("_", "."))
            and not (is_dir and "=" in name)
            and not (not is_dir and name.startswith("part-"))
        )
        if foreign:
            raise ConfigurationError(
                f"sink 'files': {where!r} already holds files that no manifest log lists (e.g. "
                f"{', '.join(repr(n) for n in foreign[:3])}) and has no {LOG_DIR} folder, so it is "
                "not an eosink-files or Spark file-sink folder: its files would be mixed with the "
                "output and ignored by Spark's reader. Write to a new or empty folder, or move "
                "those files away."
            )


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


class FilesSink(FilesCommands, eosink.Sink):
    """Exactly-once files in a folder; each batch is published by one manifest log file."""

    name = "files"
    Options = FilesOptions

    # -- helpers -----------------------------------------------------------------------------
    def _store(self) -> Store:
        store = self.__dict__.get("_store_cache")
        if store is None:
            store = open_store(self.options.path)
            self.__dict__["_store_cache"] = store
        return store

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_store_cache"}

    def _log(self) -> SinkLog:
        return SinkLog(self._store(), self.options.compact_interval)

    def _check_publishable(self) -> None:
        store = self._store()
        if not store.atomic_publish() and not self.options.single_writer:
            raise ConfigurationError(
                f"sink 'files': filesystem {store.kind()!r} cannot create a file only if it is "
                "absent, atomically, so two writers (or a restarted query and its zombie) could "
                "both publish the same log entry. Use local files, memory://, S3, GCS or Azure, "
                "or, if exactly one query at a time writes this folder, set single_writer=true."
            )

    # -- driver ------------------------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        sink_log = self._log()
        files = sink_log.listing()
        if not files:
            sink_log.check_folder()
            return None
        _, current = sink_log.current(files)
        found = _proof_of([p for f in current for p in f.proofs], ctx)
        return found.proof if found else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> FilesState:
        opts = self.options
        self._check_publishable()
        names = list(schema.names)
        missing = [c for c in opts.partition_by if c not in names]
        if missing:
            raise ConfigurationError(
                f"sink 'files': partition column(s) {missing} are not in the stream's columns "
                f"{names}; fix partitionBy or select those columns"
            )
        if opts.partition_by and len(opts.partition_by) == len(names):
            raise ConfigurationError(
                "sink 'files': every column is a partition column, so the files would hold no "
                "data; leave at least one column out of partitionBy"
            )
        sink_log = self._log()
        files = sink_log.listing()
        if not files:
            sink_log.check_folder()
        else:
            _, current = sink_log.current(files)
            proofs = [p for f in current for p in f.proofs]
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
        store = self._store()
        if store.kind() in ("file", "memory"):
            store.makedirs(LOG_DIR)  # marks the folder as a sink folder; nothing readable yet
        return FilesState(attempt=uuid.uuid4().hex)

    @hookimpl
    def commit(
        self,
        ctx: BatchContext,
        state: FilesState,
        messages: list[FilesMessage | None],
        proof: Proof,
    ) -> None:
        store, opts = self._store(), self.options
        self._check_publishable()
        sink_log = self._log()
        written = [f for m in messages if m is not None for f in m.files]
        file_lines = [
            FileEntry(store.uri(f.relpath), f.size, f.modification_time).to_line() for f in written
        ]
        for round_ in range(1000):
            files = sink_log.listing()
            if not files and round_ == 0:
                sink_log.check_folder()
            current = sink_log.current(files)[1] if files else []
            proofs = [p for f in current for p in f.proofs]
            done = _proof_of(proofs, ctx)
            if done is not None:
                raise AlreadyCommitted(
                    f"{ctx.label}: the log already holds batch {done.proof.batch_id} of this "
                    f"writer (entry {done.log_id})"
                )
            next_id = max(files) + 1 if files else 0
            log_id, compact, fillers = placement(files, next_id, ctx.mode, opts.compact_interval)
            lost = False
            for filler in fillers:  # empty deltas: nothing for readers, a place for the compact
                if not store.publish(f"{LOG_DIR}/{filler}", render([], [])):
                    lost = True
                    break
            if lost:
                continue
            entry = ProofEntry(
                proof, state.attempt, log_id, opts.format, opts.partition_by, ctx.mode
            )
            started = time.monotonic()
            if compact:
                carried = latest_proofs([*proofs, entry])
                body = b""
                if ctx.mode != "complete":  # the entries so far, copied as raw bytes
                    bodies = [self._log_body(sink_log, f) if f.compact else f.body for f in current]
                    body = b"\n".join(b.strip(b"\n") for b in bodies if b.strip())
                data = render([p.to_line(sink_log.log_uri) for p in carried], file_lines, body)
            else:
                data = render([entry.to_line(sink_log.log_uri)], file_lines)
            published = store.publish(
                f"{LOG_DIR}/{log_name(log_id, compact)}",
                data,
                crash=lambda: crash_point("commit:manifest-staged"),
            )
            if not published:
                log.info(
                    "files.commit_race", writer=ctx.writer_id, batch=ctx.batch_id, entry=log_id
                )
                continue
            crash_point("commit:manifest-published")
            if compact:
                log.info(
                    "files.log_compacted",
                    entry=log_id,
                    bytes=len(data),
                    mode=ctx.mode,
                    duration_ms=round((time.monotonic() - started) * 1000, 2),
                )
                self._expire_log({**files, **{f: False for f in fillers}, log_id: True})
            return
        raise ManifestError(f"{ctx.label}: could not publish a log entry after 1000 races")

    @staticmethod
    def _log_body(sink_log: SinkLog, header: LogFile) -> bytes:
        relpath = f"{LOG_DIR}/{log_name(header.log_id, header.compact)}"
        data = sink_log.store.read_bytes(relpath)  # no JSON parsing: the entries are copied
        return parse(data, header.log_id, header.compact, header_only=True).body

    def _expire_log(self, files: dict[int, bool]) -> None:
        """Delete log files no reader needs any more: older than the second-latest compact."""
        delay = self.options.log_cleanup_delay_s
        compacts = sorted((i for i, c in files.items() if c), reverse=True)
        if delay < 0 or len(compacts) < 3:
            return
        keep_from = compacts[1]
        store = self._store()
        cutoff = (time.time() - delay) * 1000
        removed = 0
        try:
            for log_id, compact in files.items():
                if log_id >= keep_from:
                    continue
                rel = f"{LOG_DIR}/{log_name(log_id, compact)}"
                _, mtime = store.stat(rel)
                if mtime <= cutoff:
                    store.delete(rel)
                    removed += 1
        except Exception as exc:  # noqa: BLE001 - best effort; the next compaction retries
            log.warning("files.log_expire_failed", error=type(exc).__name__)
        if removed:
            log.debug("files.log_expired", removed=removed, kept_from=keep_from)

    @hookimpl
    def abort(self, ctx: BatchContext, state: FilesState | None, messages: list[Any]) -> None:
        if state is None:
            return
        written = [
            f.relpath for m in messages or () if isinstance(m, FilesMessage) for f in m.files
        ]
        if not written:
            return
        sink_log = self._log()
        files = sink_log.listing()
        if files:
            _, current = sink_log.current(files)
            if any(p.attempt == state.attempt for f in current for p in f.proofs):
                return  # this attempt's commit went through: its files are published data
        store = self._store()
        for relpath in written:
            store.delete(relpath)
        log.info(
            "files.abort_removed", writer=ctx.writer_id, batch=ctx.batch_id, files=len(written)
        )

    @hookimpl
    def write_dataframe(self, state: FilesState, df: Any) -> eosink.Staged | None:
        store = self._store()
        if not spark_engine.chooses_spark(self.options, store, df):
            return None
        files, rows = spark_engine.stage(store, self.options, df, state.attempt)
        return eosink.Staged(FilesMessage(files=tuple(files), rows=rows), rows)

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
