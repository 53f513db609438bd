"""Cleanup: remove the data files of failed attempts from a table's data folder, dry run first.

An attempt that fails (a killed executor or driver, a commit that lost) leaves Parquet files
no snapshot lists: invisible to readers, but taking space. ``cleanup`` lists the files under
the table's data folder whose names eosink gave (``eosink-...``; files of other writers are
never touched), keeps every file any snapshot still references (all snapshots, not only the
current one: time travel reads them), and reports, or with ``delete`` removes, the rest once
older than ``older_than_s`` by the eosink clock. A live batch's files are not in a snapshot
yet either: set the threshold above your longest batch. Files that a snapshot's expiry
released are Iceberg's own maintenance (``expire_snapshots`` with file cleanup), not this.

A data folder may be shared: after a rename, pyiceberg creates a new table of the old name at
the old location. So the files kept are those any table of the catalog lists whose data folder
is, holds or lies inside this one (O(catalog): one listing of its tables, each loaded). A
table that cannot be loaded makes the cleanup refuse rather than guess. Tables of other
catalogs on the same folder cannot be seen: give each catalog its own warehouse.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from eosink.plugin import ConfigurationError, clock
from eosink.logs import get_logger
from eosink.reports import CleanupReport, Leftover
from eosink_iceberg.files import FILE_PREFIX

log = get_logger("eosink.iceberg")

ORPHAN = "orphan file"  # a data file of an eosink attempt that no snapshot lists
DEFAULT_OLDER_THAN_S = 24 * 3600.0


def referenced(table: Any) -> set[str]:
    """Every data file path any snapshot of the table lists (O(table): an operator's job)."""
    paths: set[str] = set()
    seen: set[str] = set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(entry.data_file.file_path)
    return paths


def data_folder(table: Any) -> str:
    return f"{table.metadata.location.rstrip('/')}/data"


def _overlap(one: str, other: str) -> bool:
    """Whether two folders are the same, or one holds the other."""
    a, b = _same(one).rstrip("/") + "/", _same(other).rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _namespaces(catalog: Any) -> list[tuple[str, ...]]:
    found, todo = [], [()]
    while todo:
        parent = todo.pop()
        children = catalog.list_namespaces(parent) if parent else catalog.list_namespaces()
        for child in children:
            child = tuple(child)
            if child not in found and child != parent:
                found.append(child)
                todo.append(child)
    return found


def sharing_tables(options: Any, table: Any) -> list[Any]:
    """The catalog's other tables whose data folder overlaps ``table``'s."""
    from eosink_iceberg.catalog import catalog_of, scrub

    catalog = catalog_of(options)
    ours = tuple(table.name())
    out = []
    for namespace in _namespaces(catalog):
        for identifier in catalog.list_tables(namespace):
            if tuple(identifier) == ours:
                continue
            name = ".".join(identifier)
            try:
                other = catalog.load_table(identifier)
            except Exception as exc:  # noqa: BLE001 - any client error: refuse, never guess
                raise ConfigurationError(
                    f"sink 'iceberg': cleanup of {options.table} cannot load table {name} of "
                    f"the catalog ({type(exc).__name__}: {scrub(str(exc), options)}), which "
                    "may share its data folder; nothing was deleted. Fix the catalog, or "
                    "remove orphans with the engine's own orphan-file removal."
                ) from None
            if _overlap(data_folder(other), data_folder(table)):
                out.append(other)
    return out


def _listing(table: Any) -> list[tuple[str, int, float]]:
    """(location, size, mtime in seconds) of every file under the table's data folder."""
    from pyarrow import fs as pafs

    data = data_folder(table)
    parsed = urlparse(data)
    scheme = parsed.scheme or "file"
    filesystem = _filesystem(table.io, scheme, parsed.netloc)
    root = parsed.path if scheme == "file" else f"{parsed.netloc}{parsed.path}"
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    except FileNotFoundError:
        return []
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        location = f"{scheme}://{info.path}" if scheme != "file" else f"file://{info.path}"
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        out.append((location, int(info.size or 0), mtime))
    return out


def _filesystem(io: Any, scheme: str, netloc: str) -> Any:
    """A pyarrow filesystem of ``io``: pyiceberg's PyArrow FileIO has one per scheme; its
    fsspec FileIO (``py-io-impl=pyiceberg.io.fsspec.FsspecFileIO``) an fsspec one, wrapped."""
    if hasattr(io, "fs_by_scheme"):
        return io.fs_by_scheme(scheme, netloc)
    from pyarrow import fs as pafs

    return pafs.PyFileSystem(pafs.FSSpecHandler(io.get_fs(scheme)))


def _same(path: str) -> str:
    """A location compared without its ``file:`` scheme spelling."""
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def cleanup(options: Any, table: Any, older_than_s: float, delete: bool) -> CleanupReport:
    """Find (and with ``delete``, remove) eosink's data files that no snapshot lists."""
    if older_than_s < 0:
        raise ValueError("older_than_s must be >= 0")
    listed = {_same(p) for p in referenced(table)}
    neighbours = sharing_tables(options, table)
    for other in neighbours:
        listed |= {_same(p) for p in referenced(other)}
    if neighbours:
        log.info(
            "iceberg.cleanup_shared_folder",
            table=options.table,
            sharing=[".".join(t.name()) for t in neighbours],
        )
    now = clock.now()
    removable, kept = [], []
    for location, size, mtime in _listing(table):
        name = location.rsplit("/", 1)[-1]
        if not name.startswith(FILE_PREFIX) or _same(location) in listed:
            continue
        age = now - mtime
        item = Leftover(location, ORPHAN, size=size, age_s=age)
        (removable if age >= older_than_s else kept).append(item)
    if delete:
        for item in removable:
            try:
                table.io.delete(item.path)
            except OSError:
                log.warning("iceberg.cleanup_failed", path=item.path)
    log.info(
        "iceberg.cleanup",
        table=options.table,
        orphans=len(removable),
        kept=len(kept),
        dry_run=not delete,
    )
    return CleanupReport(options.table, tuple(removable), tuple(kept), deleted=delete)
