"""A folder's layout (format, partition columns) as its log's file entries show it.

eosink's own log files carry the layout in their proofs, but a folder Spark's own file sink
wrote has no proofs: only the paths of its files say how Spark's reader must read it. A batch
in another format or partition layout would be committed and silently dropped by that reader
(it reads a folder in one format, under one set of Hive folders), so the sink compares its
options with those paths too: at ``init``, and again at each commit round on the log as it
stands then (another writer's commit may land while a batch is written).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote

import attrs

from eosink.plugin import ConfigurationError
from eosink_files.log import LOG_DIR

if TYPE_CHECKING:
    from eosink_files.options import FilesOptions
    from eosink_files.proof import ProofEntry

#: The words of a data file's name that give its format (``part-…c000.snappy.parquet``,
#: ``….json.gz``); Spark's text, ORC and Avro writers are listed to be refused by name.
FORMAT_WORDS = {
    "parquet": "parquet",
    "json": "json",
    "csv": "csv",
    "orc": "orc",
    "avro": "avro",
    "txt": "text",
}


@attrs.frozen
class Layout:
    """What one data file's path says: its format and its Hive folders' columns (None: unknown)."""

    format: str | None
    partition_by: tuple[str, ...] | None


def layout_of(relpath: str) -> Layout:
    """The layout of a data file at ``relpath`` (relative to the folder, as in a manifest URI)."""
    *folders, name = relpath.split("/")
    words = name.lower().split(".")[1:]
    fmt = next((FORMAT_WORDS[w] for w in reversed(words) if w in FORMAT_WORDS), None)
    columns = None
    if all("=" in f for f in folders):
        columns = tuple(unquote(unquote(f.partition("=")[0])) for f in folders)
    return Layout(fmt, columns)


def first_file_path(lines: bytes) -> str | None:
    """The path of the first data-file entry among raw log entry lines (None: no such entry)."""
    for line in lines.split(b"\n"):
        if not line.strip() or line.startswith(b"v"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and not entry.get("isDir") and "eosink" not in entry:
            path = entry.get("path")
            if isinstance(path, str):
                return path
    return None


def check_layout(
    opts: FilesOptions,
    proofs: Sequence[ProofEntry],
    foreign: Sequence[tuple[str, str]],
    relpath_of: Callable[[str], str | None],
) -> None:
    """Refuse a batch whose format or partitioning differs from the folder's: the latest
    eosink proof's, or the paths another program (Spark's own file sink) listed in the log
    (``foreign``: ``(log file name, data file URI)``). Spark's reader reads a folder in one
    format and one layout, and would silently drop one of the two."""
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
    for name, uri in foreign:
        relpath = relpath_of(uri)
        if relpath is None:
            continue
        layout = layout_of(relpath)
        where = f"{LOG_DIR}/{name} (written by another program, e.g. Spark's file sink)"
        if layout.format is not None and layout.format != opts.format:
            raise ConfigurationError(
                f"sink 'files': {where} lists {layout.format} files ({relpath!r}) but this "
                f"sink writes {opts.format}; Spark reads a folder in one format. Set format="
                f"{layout.format!r} or write to another folder."
            )
        if layout.partition_by is not None and layout.partition_by != opts.partition_by:
            raise ConfigurationError(
                f"sink 'files': {where} lists files partitioned by "
                f"{list(layout.partition_by)} ({relpath!r}) but this sink partitions by "
                f"{list(opts.partition_by)}; Spark's reader cannot mix layouts. Use the "
                "folder's partitionBy or write to another folder."
            )
