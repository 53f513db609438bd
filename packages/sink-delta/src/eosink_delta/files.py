"""The table's live files at a version, as the log's add actions describe them.

An upsert must find the files that may hold a batch's keys: it needs each live file's path (as
the log spells it, which a ``remove`` must repeat), partition values, statistics and deletion
vector. delta-rs' file listing gives neither the log's path nor the deletion vector, so the
index is read here: the add actions of the newest checkpoint (its ``add`` column only), then
the commits after it. It is kept per process and table and moved forward by the commits after
it (one GET each), so a batch reads the log's new commits, not the table's whole file list.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from eosink.logs import get_logger
from eosink.plugin import SinkError
from eosink.process import process_state
from eosink_delta.log_view import LAST_CHECKPOINT, LogView, TableLog, checkpoint_paths

log = get_logger("eosink.delta")

#: The name of this process's kept file indexes (table URI -> :class:`FileIndex`); used under
#: the table's lock of :func:`eosink_delta.log_view.viewed`.
KEPT = "eosink_delta.file_indexes"


@attrs.frozen
class TableFile:
    """One live file of the table, as its add action describes it."""

    path: str  # as the log spells it (URI-encoded); a remove names the file by this
    partition_values: dict[str, str | None]
    size: int
    stats: dict[str, Any] | None  # the parsed stats JSON; None when the add has none
    deletion_vector: dict[str, Any] | None


def _pairs(value: Any) -> dict[str, Any]:
    """A map as JSON has it, also when read from a checkpoint (a list of pairs)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    return dict(value)


def table_file(add: dict[str, Any]) -> TableFile:
    stats = add.get("stats")
    try:
        parsed = json.loads(stats, parse_float=decimal.Decimal) if stats else None
    except ValueError:
        parsed = None  # unreadable stats: the file is treated as holding any key
    return TableFile(
        path=add["path"],
        partition_values=_pairs(add.get("partitionValues")),
        size=int(add.get("size") or 0),
        stats=parsed if isinstance(parsed, dict) else None,
        deletion_vector=add.get("deletionVector") or None,
    )


def dv_id(descriptor: dict[str, Any] | None) -> str | None:
    """A deletion vector's unique id, as the protocol builds it (storage type, path or inline
    bitmap, ``@offset`` when there is one); ``None`` for a file without one."""
    if not descriptor:
        return None
    offset = descriptor.get("offset")
    text = f"{descriptor.get('storageType')}{descriptor.get('pathOrInlineDv')}"
    return text if offset is None else f"{text}@{offset}"


FileKey = tuple[str, str | None]


def file_key(action: dict[str, Any]) -> FileKey:
    """What identifies a file in the log: its path and its deletion vector's id. A commit that
    puts a deletion vector on a file (Delta's DELETE) holds an ``add`` of the path with the
    vector and a ``remove`` of the path without it, in either order."""
    return action["path"], dv_id(action.get("deletionVector"))


@attrs.define
class FileIndex:
    """The live files at ``version`` by (path, deletion vector id)."""

    version: int
    files: dict[FileKey, TableFile] = attrs.field(factory=dict)

    def apply(self, version: int, actions: list[dict[str, Any]]) -> None:
        if version != self.version + 1:
            raise ValueError(f"commit {version} does not follow the index's {self.version}")
        removed = [file_key(a["remove"]) for a in actions if "remove" in a]
        for key in removed:
            self.files.pop(key, None)
        for action in actions:
            if "add" in action:
                self.files[file_key(action["add"])] = table_file(action["add"])
        self.version = version


def _from_checkpoint(table_log: TableLog) -> FileIndex:
    """The index at the newest checkpoint (at -1, empty, when the table has none)."""
    hint = table_log.get(LAST_CHECKPOINT)
    if hint is not None:
        last = json.loads(hint)
        found: tuple[int, int | None] | None = (int(last["version"]), last.get("parts"))
    else:
        found = table_log._listed_checkpoint()  # noqa: SLF001 - the same package's log reader
    if found is None:
        return FileIndex(version=-1)
    index = FileIndex(version=found[0])
    for path in checkpoint_paths(*found):
        data = table_log.get(path)
        if data is None:
            if hint is None:
                raise SinkError(f"the checkpoint {path} of {table_log.uri} is gone")
            found = table_log._listed_checkpoint()  # noqa: SLF001 - a hint ahead of its files
            if found is None:
                return FileIndex(version=-1)
            return _read_checkpoint(table_log, found)
        _read_adds(index, data)
    return index


def _read_checkpoint(table_log: TableLog, found: tuple[int, int | None]) -> FileIndex:
    index = FileIndex(version=found[0])
    for path in checkpoint_paths(*found):
        data = table_log.get(path)
        if data is None:
            raise SinkError(f"the checkpoint {path} of {table_log.uri} is gone")
        _read_adds(index, data)
    return index


def _read_adds(index: FileIndex, data: bytes) -> None:
    """Only the checkpoint's ``add`` column: a checkpoint's adds are the live files."""
    names = pq.ParquetFile(pa.BufferReader(data)).schema_arrow.names
    if "add" not in names:
        return
    column = pq.read_table(pa.BufferReader(data), columns=["add"]).column("add")
    for add in column.to_pylist():
        if add is not None:
            index.files[file_key(add)] = table_file(add)


def _advance(table_log: TableLog, index: FileIndex, version: int) -> bool:
    """Move ``index`` to ``version`` by the commits between; False when one of them is gone
    (log cleanup: the index must be read anew from a checkpoint)."""
    while index.version < version:
        actions = table_log.commit(index.version + 1)
        if actions is None:
            return False
        index.apply(index.version + 1, actions)
    return True


def files_at(table_log: TableLog, view: LogView) -> FileIndex:
    """The live files at the view's version (the view moves forward if the newest checkpoint
    is past it, read anew from it when the log no longer holds the commits after the view).
    Call under the table's lock (:func:`eosink_delta.log_view.viewed`)."""
    kept: dict[str, FileIndex] = process_state(KEPT)
    index = kept.get(table_log.uri)
    if index is not None and (
        index.version > view.version or not _advance(table_log, index, view.version)
    ):
        index = None
    if index is None:
        index = _from_checkpoint(table_log)
        if index.version > view.version:
            table_log.advance(view)
            if view.version < index.version:
                # The commits after the view are gone: another writer checkpointed and
                # cleaned the log up since the view was read (in a new process, with no
                # index kept, the view is all there is). The checkpoint holds the view's
                # state too: read the view anew from it, as publish would.
                log.info("delta.log_view_reopened", table=table_log.uri, version=view.version)
                table_log.reopen(view)
        if not _advance(table_log, index, view.version) or index.version != view.version:
            kept.pop(table_log.uri, None)
            raise SinkError(
                f"the log of {table_log.uri} changed while its files were read (a checkpoint "
                "and log cleanup); nothing was committed, the batch is tried again"
            )
        log.debug("delta.file_index_read", table=table_log.uri, version=index.version)
    kept[table_log.uri] = index
    return index


def applied(table_log: TableLog, version: int, actions: list[dict[str, Any]]) -> None:
    """Move the kept index by our own commit at ``version`` (dropped when it does not follow)."""
    kept: dict[str, FileIndex] = process_state(KEPT)
    index = kept.get(table_log.uri)
    if index is None:
        return
    if index.version + 1 == version:
        index.apply(version, actions)
    else:
        kept.pop(table_log.uri, None)


def forget(uri: str) -> None:
    process_state(KEPT).pop(uri, None)
