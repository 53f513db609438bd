"""The sink's view of a folder's manifest log, kept between batches so a batch costs the same
whatever the history or the batch rate.

A stream commits for months, and ``_spark_metadata`` holds every log file younger than
``log_cleanup_delay_s`` (a 100 ms trigger keeps 6,000 within the default 10 minutes). Listing
and re-reading them for every decision would make each batch cost O(log files). Instead:

* :class:`LogFolder` reads the log's files (a listing, one file, a compact's proof header and
  closing line, a byte range of a compact's entries): no state.
* :class:`LogView` lists the folder once per process, then keeps what the decisions need: the
  ids of the log files that exist, and the files Spark's reader reads now (the latest compact's
  proof header, the deltas after it), parsed. Published log files never change, so the view
  stays true; it is brought up to date by **probing the next ids** (a commit of any writer in
  any process publishes the next free id), a fresh read of the target on every decision, and
  re-lists the folder when the latest files it knows are gone (a folder replaced or damaged).
  The same read takes the latest file's last bytes, so a latest file cut since (by hand, by a
  tool) is refused as it is by a process that reads it for the first time.
* Log files older than the second-latest compact are deleted a few per commit once
  ``log_cleanup_delay_s`` has passed since they were written, oldest first, so no commit
  unlinks thousands of files.

One view per folder and process (:func:`view_of`), shared by the sink instances of that
process (the data-source front door builds a new instance for every batch), used under its
lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from itertools import islice

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError, clock
from eosink.process import process_state
from eosink_files.log import (
    LOG_DIR,
    LogFile,
    ManifestError,
    ProofEntry,
    check_size,
    check_tail,
    header_end,
    log_files,
    log_name,
    parse,
    reader_plan,
)
from eosink_files.layout import first_file_path
from eosink_files.store import Store, safe_url

log = get_logger("eosink.files")

HEADER_CHUNK = 64 * 1024
TAIL_CHUNK = 4096  # holds a closing line
COPY_CHUNK = 1 << 20
#: Log files deleted at most per commit: more than the one file a commit adds, so a backlog
#: drains, few enough that a commit never waits on a mass deletion.
EXPIRE_PER_COMMIT = 4
#: New log files found by probing one id after the other before :meth:`LogView.refresh` lists
#: the log instead: a process that catches up with another writer's many commits pays one
#: listing, not a round trip per log file.
PROBES_BEFORE_LISTING = 3
#: A view confirmed by a read of the target less than this fraction of the cleanup delay ago
#: may decide where the next log file goes. A log file created after that read cannot be
#: expired before the whole delay has passed since it; the rest of the delay is the margin for
#: writers' and the store's clocks that disagree. See :meth:`LogView.confirmed_within`.
TRUST_FRACTION = 0.5

#: Hidden folders that mean "this folder belongs to another table format".
FOREIGN_MARKERS = {"_delta_log": "a Delta table (use the delta sink)", ".hoodie": "a Hudi table"}


class LogFolder:
    """Reads the log files of one folder, fresh on every call.

    ``single_writer``: the folder's filesystem cannot publish atomically, so the latest log
    file may be torn by a crash; :class:`LogView` then reads it as absent and the replay
    publishes its id again.
    """

    def __init__(self, store: Store, compact_interval: int, single_writer: bool = False) -> None:
        self.store, self.interval, self.single_writer = store, compact_interval, single_writer

    @property
    def log_uri(self) -> str:
        return self.store.uri(LOG_DIR)

    def listing(self) -> dict[int, bool]:
        return log_files(name for name, is_dir in self.store.listdir(LOG_DIR) if not is_dir)

    def present(self, ids: set[tuple[int, bool]]) -> set[tuple[int, bool]]:
        """Which of these ``(log id, is compact)`` files exist (one round trip for all)."""
        return self.probe(ids)[0]

    def probe(
        self, ids: set[tuple[int, bool]], tail_of: tuple[str, int] | None = None
    ) -> tuple[set[tuple[int, bool]], bytes | None]:
        """Which of these files exist, and the bytes of ``tail_of`` = (name, offset) from that
        offset to its end (None if it is absent): one round trip for all on object stores."""
        names = {f"{LOG_DIR}/{log_name(i, c)}": (i, c) for i, c in ids}
        tail = (f"{LOG_DIR}/{tail_of[0]}", tail_of[1]) if tail_of is not None else None
        found, data = self.store.probe(list(names), tail)
        return {names[n] for n in found}, data

    def read(self, log_id: int, compact: bool, *, header_only: bool = False) -> LogFile:
        """One log file; ``header_only`` reads just its proof lines and its closing line.

        A compact read this way records where its file entries lie (``body_start``,
        ``body_end``), so a compaction copies them as bytes without reading them here.
        """
        name = log_name(log_id, compact)
        relpath = f"{LOG_DIR}/{name}"
        try:
            if not header_only:
                data = self.store.read_bytes(relpath)
                out = parse(data, log_id, compact)
                out.size = len(data)
                return out
            head = self._read_header(relpath)
            out = parse(head, log_id, compact, header_only=True)
            size, tail = self.store.read_tail(relpath, TAIL_CHUNK)
            before = check_tail(name, log_id, bool(out.proofs), tail, whole=len(tail) >= size)
            out.body_start = len(head) - len(out.body)
            out.body_end = size - len(tail) + len(before.rstrip(b"\n"))
            out.body = b""
            out.size = size
            return out
        except FileNotFoundError:
            raise ManifestError(
                f"{relpath} disappeared while being read (a cleanup of old log files ran "
                "concurrently); retry the operation"
            ) from None

    def _read_header(self, relpath: str) -> bytes:
        data = b""
        with self.store.open_read(relpath) as f:
            while True:
                chunk = f.read(HEADER_CHUNK)
                data += chunk
                if not chunk or header_end(data) is not None:
                    return data

    def entries(self, log_file: LogFile) -> Iterator[bytes]:
        """The file-entry lines of a compact read with ``header_only``, as raw byte chunks."""
        relpath = f"{LOG_DIR}/{log_name(log_file.log_id, log_file.compact)}"
        left = log_file.body_end - log_file.body_start
        with self.store.open_read(relpath) as f:
            f.seek(log_file.body_start)
            while left > 0:
                chunk = f.read(min(COPY_CHUNK, left))
                if not chunk:
                    raise ManifestError(f"{relpath} became shorter while being copied")
                left -= len(chunk)
                yield chunk

    def first_file_path(self, log_file: LogFile) -> str | None:
        """The path of the first data file a log file lists (None: it lists none)."""
        if not log_file.compact or log_file.files is not None:
            return first_file_path(log_file.body)
        relpath = f"{LOG_DIR}/{log_name(log_file.log_id, log_file.compact)}"
        body = log_file.body_end - log_file.body_start
        if body <= 0:
            return None
        with self.store.open_read(relpath) as f:
            f.seek(log_file.body_start)
            head = f.read(min(HEADER_CHUNK, body))
        return first_file_path(head if len(head) >= body else head.rpartition(b"\n")[0])

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


def _torn(read: LogFile | None) -> bool:
    """Whether a latest log file may be a torn write: unreadable, or a compact cut after ``v1``.

    (A delta cut after ``v1`` is an empty delta, harmless; a compact cut there would hide
    every file before it.)
    """
    return read is None or (read.compact and not read.proofs and read.body_end <= read.body_start)


class LogView:
    """The log files that exist and the ones Spark's reader reads, kept up to date."""

    def __init__(self, folder: LogFolder) -> None:
        self.folder = folder
        self.lock = threading.RLock()
        self.loaded = False
        self.files: dict[int, bool] = {}  # id -> is compact, of every known file, ids ascending
        self.compacts: list[int] = []  # the compacts among them, ascending
        self.plan: list[LogFile] = []  # what Spark's reader reads now, parsed
        self.torn: int | None = None  # single-writer mode: a torn latest file, read as absent
        #: when (eosink.clock) the last read of the target that brought the view up to date began
        self.confirmed_at: float | None = None
        #: (log id, is compact) -> the path of one data file it lists (log files never change)
        self._samples: dict[tuple[int, bool], str | None] = {}

    @property
    def latest(self) -> int:
        """The latest log id (-1 for an empty log)."""
        return next(reversed(self.files), -1)

    def proofs(self) -> list[ProofEntry]:
        return [p for f in self.plan for p in f.proofs]

    def window(self) -> dict[int, bool]:
        """The files from the second-latest compact on: all that Spark's reader rules look at."""
        start = self.compacts[-2] if len(self.compacts) >= 2 else 0
        if start == 0:
            return dict(self.files)
        return {i: self.files[i] for i in range(start, self.latest + 1) if i in self.files}

    def foreign_samples(self) -> list[tuple[str, str]]:
        """``(log file name, path of one data file it lists)`` for each log file Spark's reader
        reads now that carries no proof: one another program wrote (Spark's own file sink).

        Its paths are the only record of the folder's format and partition layout. A delta
        is read whole already; a compact costs one short read, once per process.
        """
        out = []
        for f in self.plan:
            if f.proofs:
                continue
            key = (f.log_id, f.compact)
            if key not in self._samples:
                self._samples[key] = self.folder.first_file_path(f)
            path = self._samples[key]
            if path is not None:
                out.append((log_name(f.log_id, f.compact), path))
        return out

    def confirmed_within(self, delay_s: float) -> bool:
        """Whether the view may place the next log file without reading the target again.

        Expiry (of any writer) deletes only log files older than ``delay_s``, oldest first, and
        log ids are dense. The view's latest id ``N - 1`` was there and ``N`` was free when
        the last read began, so a file at ``N`` is younger than that read and cannot have been
        expired less than ``delay_s`` after it. Past that, ``N`` may be a slot that was taken
        and expired since: a log file published there is never read (Spark's reader starts at
        the latest compact), so the view must be read again. ``delay_s`` < 0: nothing expires.
        """
        if not self.loaded or self.confirmed_at is None:
            return False
        if delay_s < 0:
            return True
        return clock.now() - self.confirmed_at < delay_s * TRUST_FRACTION

    # -- bringing the view up to date ----------------------------------------------------------
    def refresh(self, cleanup_delay_s: float) -> None:
        """A fresh read of the target: the log files published since the last call.

        One round trip on object stores when nothing is new: the latest file and the latest
        compact are still there (else the log is listed again) and the next id is absent,
        asked together. Probing the next ids is sound only while every id published since
        the last read is sure to be there (:meth:`confirmed_within` the cleanup delay): past
        that, an expiry may have removed the latest file and the ones after it between two
        of the probes, and a free-looking id would be an expired one; the log is listed again.
        """
        if not self.confirmed_within(cleanup_delay_s):
            self.reload()
            return
        began = clock.now()
        known = {(i, self.files[i]) for i in [self.latest, *self.compacts[-1:]] if i >= 0}
        latest = next((f for f in self.plan if f.log_id == self.latest), None)
        tail_of = None
        if latest is not None and latest.size is not None:
            tail_of = (log_name(latest.log_id, latest.compact), max(0, latest.size - TAIL_CHUNK))
        log_id = self.latest + 1
        present, tail = self.folder.probe(known | self._candidates(log_id), tail_of)
        if not known <= present:
            self._load(self.folder.listing())
            self.confirmed_at = began
            return
        if latest is not None and tail_of is not None and tail is not None:
            self._check_latest(latest, tail_of[1], tail)
        found = {}
        while (compact := self._found(log_id, present)) is not None:
            found[log_id] = compact
            log_id += 1
            if len(found) >= PROBES_BEFORE_LISTING:  # far behind: one listing costs less
                self._load(self.folder.listing(), self.plan)
                self.confirmed_at = began
                return
            present = self.folder.present(self._candidates(log_id))
        if found:
            self._add(found)
        self.confirmed_at = began

    def _check_latest(self, latest: LogFile, offset: int, tail: bytes) -> None:
        """Refuse a latest log file changed since it was read or published (they never
        change): the view would not read it again, Spark's reader may fail on it, and a
        commit on top of it would report a batch readers never get. ``tail``: its bytes from
        ``offset`` on."""
        name = log_name(latest.log_id, latest.compact)
        check_tail(name, latest.log_id, bool(latest.proofs), tail, whole=offset == 0)
        check_size(name, offset + len(tail), latest.size)

    def reload(self) -> None:
        """List the log again and read what Spark's reader reads, as on a first use."""
        began = clock.now()
        self._load(self.folder.listing())
        self.confirmed_at = began

    @staticmethod
    def _candidates(log_id: int) -> set[tuple[int, bool]]:
        return {(log_id, True), (log_id, False)}

    def _found(self, log_id: int, present: set[tuple[int, bool]]) -> bool | None:
        """Whether ``log_id`` is present as a compact (True), a delta (False), or not (None)."""
        expected = (log_id + 1) % self.folder.interval == 0
        for compact in (expected, not expected):
            if (log_id, compact) in present:
                return compact
        return None

    @contextlib.contextmanager
    def _whole_or_forgotten(self) -> Iterator[None]:
        """An update that fails (a log Spark's reader cannot read, a file gone while read)
        leaves no view: half updated, it would know the new ids but not the files Spark's
        reader reads, and a later commit in this process would place a compact on it that
        lists none of the files it missed. The next use reads the target as on a first use."""
        try:
            yield
        except BaseException:
            self.loaded, self.confirmed_at = False, None
            self.files, self.compacts, self.plan, self.torn = {}, [], [], None
            raise

    def _load(self, listing: dict[int, bool], parsed: list[LogFile] = ()) -> None:
        """Take a listing as the files that exist; ``parsed``: log files already read (they
        never change, so they are not read again)."""
        with self._whole_or_forgotten():
            self.files = dict(sorted(listing.items()))
            self.compacts = [i for i, c in self.files.items() if c]
            self.plan, self.torn, self.loaded = [], None, True
            self._read_plan(parsed)

    def _add(self, found: dict[int, bool], parsed: list[LogFile] = ()) -> None:
        with self._whole_or_forgotten():
            if self.torn is not None:  # the torn file was published again
                self.torn = None
            for log_id, compact in found.items():
                self.files[log_id] = compact
                if compact:
                    self.compacts.append(log_id)
            self._read_plan(parsed)

    def record(self, log_file: LogFile) -> None:
        """A log file this process just published (no need to read it back)."""
        self.files.pop(log_file.log_id, None)
        if log_file.log_id in self.compacts:
            self.compacts.remove(log_file.log_id)
        self._add({log_file.log_id: log_file.compact}, [log_file])

    def _forget(self, log_id: int) -> None:
        if self.files.pop(log_id, False):
            self.compacts.remove(log_id)

    def _read_plan(self, parsed: list[LogFile] = ()) -> None:
        """Read (or keep) the files Spark's reader reads; a torn latest one is set aside."""
        known = {(f.log_id, f.compact): f for f in [*self.plan, *parsed]}
        plan = []
        for log_id, compact in reader_plan(self.window(), self.folder.interval):
            read = known.get((log_id, compact))
            if read is None:
                try:
                    read = self.folder.read(log_id, compact, header_only=compact)
                except ManifestError:
                    if not self.folder.single_writer or log_id != self.latest:
                        raise
            if self.folder.single_writer and log_id == self.latest and _torn(read):
                log.warning("files.torn_log_file", entry=log_id)
                self._forget(log_id)
                self.torn = log_id
                return self._read_plan(parsed)
            plan.append(read)
        self.plan = plan

    # -- expiry ----------------------------------------------------------------------------
    def expire(self, delay_s: float, budget: int = EXPIRE_PER_COMMIT) -> int:
        """Delete up to ``budget`` of the oldest log files no reader needs any more.

        Those are older than the second-latest compact (readers that listed the log before
        the latest compact was published read the second-latest one and the deltas after it)
        and were written at least ``delay_s`` ago (readers in flight may still need them).
        """
        if delay_s < 0 or len(self.compacts) < 2:
            return 0
        keep_from = self.compacts[-2]
        cutoff = (clock.now() - delay_s) * 1000
        store, removed = self.folder.store, 0
        for log_id in list(islice(self.files, budget)):
            if log_id >= keep_from:
                break
            relpath = f"{LOG_DIR}/{log_name(log_id, self.files[log_id])}"
            try:
                _, mtime = store.stat(relpath)
            except FileNotFoundError:  # another process expired it
                self._forget(log_id)
                continue
            if mtime > cutoff:
                break
            store.delete(relpath)
            self._forget(log_id)
            removed += 1
        return removed


#: Guards the views of every process (see :func:`view_of`).
_views_lock = threading.Lock()


def _views() -> dict[tuple[str, int, bool], LogView]:
    """This process's views: a restarted driver or another query has views of its own (the
    conformance kit's simulation runs several such processes in one Python process)."""
    return process_state("eosink_files.views")


def view_of(store: Store, compact_interval: int, single_writer: bool) -> LogView:
    """The view of this folder's log in this process (created on first use)."""
    key = (store.root_uri, compact_interval, single_writer)
    with _views_lock:
        views = _views()
        view = views.get(key)
        if view is None or view.folder.store.location != store.location:
            view = views[key] = LogView(LogFolder(store, compact_interval, single_writer))
        return view


def forget_views() -> None:
    """Drop this process's views, as a restart of the process does (tests that tear a log
    file use it)."""
    with _views_lock:
        _views().clear()
