"""A folder's layout (format, partition columns) as its log's file entries show it.

eosink's own log files carry the layout in their proofs, but a folder Spark's own file sink
wrote has no proofs: only the paths of its files say how Spark's reader must read it. A batch
in another format or partition layout would be committed and silently dropped by that reader
(it reads a folder in one format, under one set of Hive folders), so the sink compares its
options with those paths too.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import attrs

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
