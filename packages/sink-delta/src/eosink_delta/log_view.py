"""eosink's own view of a Delta table's log: what a blind append needs, read incrementally.

A blind append (add actions, a ``txn``, a ``commitInfo``) needs three things from the log:
each app id's latest txn version (the skip rule), the table's ``metaData`` (schema, partition
columns, configuration) and its ``protocol`` (the features a writer must honour). None of them
needs the table's files, and none needs a listing of ``_delta_log``:

* **opened** once per process: the last checkpoint (``_delta_log/_last_checkpoint`` names it;
  only its ``txn``, ``metaData`` and ``protocol`` columns are read), then the commits after it,
  one GET each until the next is missing (Delta's commit files are numbered without gaps);
* **brought up to date** before a batch: one GET of commit ``v + 1`` (missing: nothing new; else
  it is applied and ``v + 2`` is asked) and one HEAD of ``v``, the view's own commit, whose
  absence means the table moved on past what its log keeps (log cleanup keeps every commit
  from the last checkpoint on) or was replaced: the view is then opened anew;
* **advanced by our own commit** without reading it back (what delta-spark does with its own
  commits): the commit eosink just created is applied as written.

So a batch costs the same whatever the number of files in the table or commits in the log
(delta-rs 1.6's snapshot lists the whole log and rebuilds the file list on each update).

Views are kept per process (:func:`eosink.process.process_state`), like the delta-rs snapshots
of :mod:`eosink_delta.snapshot`, and used under their table's lock.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from eosink.logs import get_logger
from eosink.plugin import AlreadyCommitted, BatchContext, SinkError
from eosink.process import process_state
from eosink_delta.store import is_local, object_store

log = get_logger("eosink.delta")

LAST_CHECKPOINT = "_delta_log/_last_checkpoint"


def commit_path(version: int) -> str:
    return f"_delta_log/{version:020d}.json"


def checkpoint_paths(version: int, parts: int | None) -> list[str]:
    """The files of a (classic, single or multi-part) checkpoint, as the protocol names them."""
    if not parts or parts == 1:
        return [f"_delta_log/{version:020d}.checkpoint.parquet"]
    return [
        f"_delta_log/{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet"
        for i in range(1, parts + 1)
    ]


def parse_commit(data: bytes) -> list[dict[str, Any]]:
    """A commit file's actions (newline-delimited JSON), split on ``\\n`` only: ``str.splitlines``
    also splits on U+2028, U+2029, U+0085 and other breaks, which Delta's writers (eosink's,
    delta-rs') write raw inside a value's JSON string."""
    return [json.loads(line) for line in data.decode("utf-8").split("\n") if line.strip()]


def _normalized(action: dict[str, Any] | None) -> dict[str, Any] | None:
    """A ``metaData``/``protocol`` action as its JSON has it, also when read from a checkpoint
    (where maps come as lists of pairs and absent fields as nulls)."""
    if action is None:
        return None
    out = dict(action)
    config = out.get("configuration")
    if isinstance(config, list):
        out["configuration"] = dict(config)
    return out


@attrs.define
class LogView:
    """The state of a table at ``version`` that a blind append is checked against."""

    version: int
    txns: dict[str, int] = attrs.field(factory=dict)
    metadata: dict[str, Any] = attrs.field(factory=dict)
    protocol: dict[str, Any] = attrs.field(factory=dict)

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.metadata.get("configuration") or {})

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.get("partitionColumns") or [])

    @property
    def schema_string(self) -> str:
        return str(self.metadata.get("schemaString", ""))

    def take(self, other: LogView) -> None:
        """Become ``other`` (a view read anew), in place: the view is shared by reference."""
        self.version, self.txns = other.version, dict(other.txns)
        self.metadata, self.protocol = dict(other.metadata), dict(other.protocol)

    def apply(self, version: int, actions: list[dict[str, Any]]) -> None:
        """Move the view to ``version`` by that commit's actions (which must follow it)."""
        if version != self.version + 1:
            raise ValueError(f"commit {version} does not follow the view's version {self.version}")
        for action in actions:
            if "txn" in action:
                txn = action["txn"]
                self.txns[txn["appId"]] = int(txn["version"])
            elif "metaData" in action:
                self.metadata = _normalized(action["metaData"]) or {}
            elif "protocol" in action:
                self.protocol = _normalized(action["protocol"]) or {}
        self.version = version


class TableLog:
    """Reads of one table's ``_delta_log`` through object_store's client (``obstore``)."""

    def __init__(self, uri: str, storage_options: dict[str, Any]) -> None:
        self.uri = uri
        if is_local(uri):
            # Paths from the file system's root: the folder may not exist yet (a store rooted
            # at it would have to create it before the table is).
            from obstore.store import LocalStore

            self.store = LocalStore()
            self.base = os.path.abspath(uri).lstrip("/") + "/"
        else:
            self.store = object_store(uri, storage_options)
            self.base = ""

    def key(self, path: str) -> str:
        """The store's key of ``path`` (relative to the table folder)."""
        return self.base + path

    def get(self, path: str) -> bytes | None:
        """The object's bytes, ``None`` when there is none (one GET)."""
        import obstore

        if self.base:
            try:
                with open("/" + self.key(path), "rb") as f:
                    return f.read()
            except (FileNotFoundError, NotADirectoryError):
                return None
        try:
            return bytes(obstore.get(self.store, self.key(path)).bytes())
        except FileNotFoundError:
            return None

    def exists(self, path: str) -> bool:
        """Whether the object exists (one HEAD)."""
        import obstore

        if self.base:
            return os.path.isfile("/" + self.key(path))
        try:
            obstore.head(self.store, self.key(path))
        except FileNotFoundError:
            return False
        return True

    def log_names(self) -> list[str]:
        """The names in ``_delta_log`` (one listing; only where no checkpoint is named)."""
        import obstore

        if self.base:
            try:
                return os.listdir("/" + self.key("_delta_log"))
            except (FileNotFoundError, NotADirectoryError):
                return []
        return [
            entry["path"].rsplit("/", 1)[-1]
            for page in obstore.list(self.store, prefix=self.key("_delta_log/"))
            for entry in page
        ]

    def commit(self, version: int) -> list[dict[str, Any]] | None:
        data = self.get(commit_path(version))
        return None if data is None else parse_commit(data)

    def open(self) -> LogView | None:
        """The view at the table's latest version, ``None`` when there is no table."""
        start = self._from_checkpoint()
        view = start if start is not None else LogView(version=-1)
        self.advance(view)
        if view.version < 0:
            return None
        log.debug("delta.log_view_opened", table=self.uri, version=view.version)
        return view

    def advance(self, view: LogView) -> list[tuple[int, list[dict[str, Any]]]]:
        """Apply every commit after the view's version; the commits applied, in order."""
        applied = []
        while True:
            actions = self.commit(view.version + 1)
            if actions is None:
                return applied
            view.apply(view.version + 1, actions)
            applied.append((view.version, actions))

    def kept_past(self, view: LogView) -> bool:
        """Whether the log still holds the view's own commit (one HEAD).

        Log cleanup deletes expired commits from the oldest up to a checkpoint, so while the
        view's commit is there, so is every commit after it: the next version number is free
        only if no writer has taken it. Once it is gone, the table has a newer checkpoint and
        the numbers the cleanup freed lie below it."""
        return view.version < 0 or self.exists(commit_path(view.version))

    def reopen(self, view: LogView) -> list[tuple[int, list[dict[str, Any]]]]:
        """Read ``view`` anew from the newest checkpoint and the commits after it (in place);
        like :meth:`advance`, the commits read after the checkpoint."""
        start = self._from_checkpoint()
        fresh = start if start is not None else LogView(version=-1)
        view.take(fresh)
        return self.advance(view)

    def _from_checkpoint(self) -> LogView | None:
        """The view at the last checkpoint, or ``None`` when the table has none."""
        hint = self.get(LAST_CHECKPOINT)
        if hint is not None:
            last = json.loads(hint)
            version, parts = int(last["version"]), last.get("parts")
        else:
            found = self._listed_checkpoint()
            if found is None:
                return None
            version, parts = found
        view = LogView(version=version)
        for path in checkpoint_paths(version, parts):
            data = self.get(path)
            if data is None:  # a hint ahead of its checkpoint's files: read from the log
                return None if hint is None else self._without_hint()
            self._read_checkpoint(view, data)
        return view

    def _without_hint(self) -> LogView | None:
        found = self._listed_checkpoint()
        if found is None:
            return None
        view = LogView(version=found[0])
        for path in checkpoint_paths(*found):
            data = self.get(path)
            if data is None:
                return None
            self._read_checkpoint(view, data)
        return view

    def _listed_checkpoint(self) -> tuple[int, int | None] | None:
        """The newest complete checkpoint in a listing of the log (when no hint names one:
        a table delta-rs has not checkpointed yet, or an old writer's)."""
        names = self.log_names()
        parts_seen: dict[tuple[int, int | None], int] = {}
        for name in names:
            pieces = name.split(".")
            if len(pieces) == 3 and pieces[1:] == ["checkpoint", "parquet"]:
                parts_seen[(int(pieces[0]), None)] = 1
            elif len(pieces) == 5 and pieces[1] == "checkpoint" and pieces[4] == "parquet":
                key = (int(pieces[0]), int(pieces[3]))
                parts_seen[key] = parts_seen.get(key, 0) + 1
        complete = [k for k, n in parts_seen.items() if n == (k[1] or 1)]
        return max(complete) if complete else None

    @staticmethod
    def _read_checkpoint(view: LogView, data: bytes) -> None:
        """Only the checkpoint's txn, metaData and protocol columns (not its add actions)."""
        source = pa.BufferReader(data)
        names = pq.ParquetFile(source).schema_arrow.names
        wanted = [n for n in ("txn", "metaData", "protocol") if n in names]
        table = pq.read_table(pa.BufferReader(data), columns=wanted)
        for name in wanted:
            for value in table.column(name).to_pylist():
                if value is None:
                    continue
                if name == "txn":
                    view.txns[value["appId"]] = int(value["version"])
                elif name == "metaData":
                    view.metadata = _normalized(value) or {}
                else:
                    view.protocol = _normalized(value) or {}


@attrs.define
class _Kept:
    lock: threading.RLock = attrs.field(factory=threading.RLock)
    log: TableLog | None = None
    view: LogView | None = None
    fresh_for: Any = None  # the batch whose is_committed last brought it up to date


#: The name of this process's kept log views (table URI -> :class:`_Kept`).
KEPT = "eosink_delta.log_views"
#: :data:`eosink_delta.files.KEPT`: a table's file index goes with its view.
FILE_INDEXES = "eosink_delta.file_indexes"
_kept_lock = threading.Lock()


@attrs.frozen
class Viewed:
    """A table's log view (``None``: no table) with the client that reads and writes its log."""

    log: TableLog
    view: LogView | None


@contextmanager
def viewed(
    uri: str,
    storage_options: dict[str, Any] | None = None,
    *,
    fresh: bool = True,
    mark: Any = None,
    reuse: Any = None,
) -> Iterator[Viewed]:
    """The table's kept view, held under the table's lock (see :func:`snapshot.latest` for
    ``fresh``, ``mark`` and ``reuse``, which mean the same here)."""
    with _kept_lock:
        kept = process_state(KEPT).setdefault(uri, _Kept())
    with kept.lock:
        if kept.log is None:
            kept.log = TableLog(uri, storage_options or {})
        if kept.view is None:
            kept.view = kept.log.open()
        elif fresh and (reuse is None or kept.fresh_for != reuse):
            kept.view = _brought_up_to_date(kept.log, kept.view)
        if fresh:
            kept.fresh_for = mark
        yield Viewed(kept.log, kept.view)


def _brought_up_to_date(table_log: TableLog, view: LogView) -> LogView | None:
    """The view with the commits after it, or opened anew when its own commit is gone."""
    if not table_log.exists(commit_path(view.version)):
        log.info("delta.log_view_reopened", table=table_log.uri, version=view.version)
        process_state(FILE_INDEXES).pop(table_log.uri, None)
        return table_log.open()
    table_log.advance(view)
    return view


def refresh(uri: str) -> None:
    """Open the kept view anew at its next use (after a change not made by a blind append)."""
    with _kept_lock:
        kept = process_state(KEPT).get(uri)
    if kept is not None:
        with kept.lock:
            kept.view = None


def forget(uri: str) -> None:
    """Drop this process's kept view of ``uri`` (and its file index)."""
    with _kept_lock:
        process_state(KEPT).pop(uri, None)
        process_state(FILE_INDEXES).pop(uri, None)


def table_gone(ctx: BatchContext, uri: str) -> SinkError:
    """The error of a commit that finds no table where ``init`` found one."""
    return SinkError(
        f"{ctx.label}: the Delta table at {uri} disappeared after init; the batch is not "
        "committed and will be written again when the query restarts"
    )


def check_txn(ctx: BatchContext, view: LogView) -> None:
    """Refuse a batch the view's txn of its writer already covers."""
    last = view.txns.get(ctx.writer_id)
    if last is not None and last >= ctx.batch_id:
        raise AlreadyCommitted(f"{ctx.label}: the table's txn of this writer is at {last}")
