"""The manifest commit: Spark's ``ManifestFileCommitProtocol`` role, job side.

In Spark's file sink, ``ManifestFileCommitProtocol`` lets tasks write part files under unique
names and, at ``commitJob``, adds the batch's files to ``FileStreamSinkLog``
(``_spark_metadata``); ``abortJob`` deletes the files. Here the tasks' side is
:meth:`eosink_files.sink.FilesSink.write` (or Spark's own writer,
:mod:`eosink_files.spark_file_writer`), the abort side is ``FilesSink.abort``, and this module
is ``commitJob`` with exactly-once added: :meth:`ManifestCommit.commit` publishes the next log
file, ``_spark_metadata/<id>``, holding the batch's file entries **and** its proof line
(:mod:`eosink_files.proof`), in one atomic create-if-absent. A lost race re-reads the log: the
winner's proof of this batch makes the attempt ``AlreadyCommitted``; another writer's commit
just moves this one to the next id. Before that it checks that every file it lists is there
with its reported size. Where Spark's reader expects a ``.compact``, the commit writes one
(:func:`placement`), streaming the previous compact's entries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import attrs

from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    SinkError,
    crash_point,
)
from eosink.logs import get_logger
from eosink_files.log import (
    LOG_DIR,
    VERSION_LINE,
    FileEntry,
    LogFile,
    ManifestError,
    log_name,
    plan_is_valid,
    render,
)
from eosink_files.layout import check_layout
from eosink_files.log_view import LogView
from eosink_files.options import FilesOptions
from eosink_files.proof import ProofEntry, closing_line, latest_proofs, proof_of
from eosink_files.store import Store
from eosink_files.writers import WrittenFile

log = get_logger("eosink.files")


class _SteppedBack:
    """What :meth:`ManifestCommit._publish` returns when its id was taken under the other name."""


_OTHER_NAME = _SteppedBack()


class UnreadableFilesError(SinkError):
    """A file a writer reported is not in the folder as the driver sees it: nothing published."""


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


@attrs.frozen
class ManifestCommit:
    """The commit of one batch into a folder's manifest log, through the sink's log view."""

    store: Store
    options: FilesOptions
    view: LogView

    def check_publishable(self) -> None:
        """Refuse a store that cannot create a log file only if absent (unless single_writer)."""
        store = self.store
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
        if rows and not written:  # the spark file writer moved none of the files Spark wrote
            raise UnreadableFilesError(
                f"{ctx.label}: refusing to commit {rows} row(s) but no file: the driver found "
                "none of the files Spark's writer wrote, so the executors wrote them where the "
                "driver cannot see them (a local path that is not one folder shared by every "
                "machine). Write to a shared folder, or an object store with file_writer='arrow'. "
                "Nothing was published."
            )
        by_folder: dict[str, dict[str, int]] = {}
        for f in written:
            folder, _, name = f.relpath.rpartition("/")
            by_folder.setdefault(folder, {})[name] = f.size
        problems = []
        for folder, expected in by_folder.items():
            found = self.store.sizes(folder, list(expected))
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
                "batch: raise `eosink cleanup --older-than`), or the executors wrote them "
                "where the driver cannot see them (memory://, or a local path that is not one "
                "folder shared by every machine): write to a shared folder or an object store. "
                "Nothing was published; the batch's replay writes it again."
            )

    def commit(
        self, ctx: BatchContext, attempt: str, written: list[WrittenFile], rows: int, proof: Proof
    ) -> None:
        """Publish the batch's files and proof as the next log file (Spark's ``commitJob``).

        Checks first that the store can publish atomically and that every file is there with
        its reported size; a lost race reads the log again and tries the next id.
        """
        self.check_publishable()
        store, view = self.store, self.view
        self._check_readable(ctx, written, rows)
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
                created = self._publish(ctx, attempt, proof, view, file_lines)
                if created is None:
                    log.info(
                        "files.commit_race",
                        writer=ctx.writer_id,
                        batch=ctx.batch_id,
                        entry=view.latest,
                    )
                    continue
                if created is _OTHER_NAME:
                    # Both writers of one id may see each other's name and both step back:
                    # a short random pause keeps them from meeting again at the next round.
                    time.sleep(random.uniform(0, 0.05))
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
        store = self.store
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
        attempt: str,
        proof: Proof,
        view: LogView,
        file_lines: list[str],
    ) -> list[tuple[int, bool]] | _SteppedBack | None:
        """Publish this batch's log file at the next free id.

        Returns the ``(log id, is compact)`` of every log file published (empty deltas of
        complete mode first): none when this attempt's proof is already in the log, None when
        another writer took an id first, ``_OTHER_NAME`` when it took it under the other name.
        """
        opts, store = self.options, self.store
        proofs = view.proofs()
        done = proof_of(proofs, ctx)
        if done is not None and done.attempt == attempt:
            return []  # an earlier round published it (and its log file was carried forward)
        if done is not None:
            raise AlreadyCommitted(
                f"{ctx.label}: the log already holds batch {done.proof.batch_id} of this "
                f"writer (entry {done.log_id})"
            )
        # the checks init made, on the log as it stands now: a writer of another format or
        # partitioning may have committed while this batch was written
        check_layout(opts, proofs, view.foreign_samples(), store.relpath_of)
        files = view.window()
        log_id, compact, fillers = placement(
            files, view.latest + 1, ctx.mode, opts.compact_interval
        )
        created: list[tuple[int, bool]] = []
        for filler in fillers:  # empty deltas: nothing for readers, a place for the compact
            empty = render([], [])
            if not store.publish(f"{LOG_DIR}/{filler}", empty, overwrite=filler == view.torn):
                return None
            if self._lost_to_other_name(ctx, view, filler, False):
                return _OTHER_NAME
            view.record(LogFile(filler, False, [], files=[], size=len(empty)))
            created.append((filler, False))
        entry = ProofEntry(proof, attempt, log_id, opts.format, opts.partition_by, ctx.mode)
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
        try:
            published = store.publish(
                f"{LOG_DIR}/{log_name(log_id, compact)}",
                data,
                crash=lambda: crash_point("commit:manifest-staged"),
                overwrite=log_id == view.torn,
            )
        except FileNotFoundError:
            if not compact:
                raise
            # The compact this one streams was expired meanwhile by a faster writer, whose
            # commits took this id long ago: nothing was published, publish after them.
            log.info("files.compact_source_expired", writer=ctx.writer_id, entry=log_id)
            return None
        if not published:
            return None
        if self._lost_to_other_name(ctx, view, log_id, compact):
            return _OTHER_NAME
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

    def _lost_to_other_name(
        self, ctx: BatchContext, view: LogView, log_id: int, compact: bool
    ) -> bool:
        """Whether the log file just published at ``log_id`` lost the id to its other name.

        The atomic create arbitrates a *name*, but ``<id>`` and ``<id>.compact`` are two names
        of one id, and readers read only one of them: two writers that place an id differently
        (another ``compact_interval``, an append beside a complete-mode commit) would both
        succeed, and one batch would vanish though reported committed. So each creator looks
        for the other name after its create: whoever sees it steps back (deletes its file,
        reads the log again). Of two creators at least one sees the other, so at most one
        keeps the id; both may step back, and both publish again.
        """
        if self.options.single_writer:
            return False  # one writer: nobody else places an id
        if not view.folder.present({(log_id, not compact)}):
            return False
        self.store.delete(f"{LOG_DIR}/{log_name(log_id, compact)}")
        log.warning(
            "files.commit_id_taken_by_other_name",
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            entry=log_name(log_id, not compact),
        )
        return True

    def _expire(self, view: LogView) -> None:
        """Delete a few obsolete log files; best effort (the next commit carries on)."""
        try:
            removed = view.expire(self.options.log_cleanup_delay_s)
        except Exception as exc:  # noqa: BLE001 - the batch is committed; never fail it here
            log.warning("files.log_expire_failed", error=type(exc).__name__)
            return
        if removed:
            log.debug("files.log_expired", removed=removed)
