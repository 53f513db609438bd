"""Reading a sink folder the way Spark's reader does, for readers that do not honour the log.

Spark's ``spark.read.parquet(folder)`` reads through ``_spark_metadata`` by itself; pyarrow,
pandas, DuckDB or Polars pointed at the folder would read every Parquet file in it, including
files of failed attempts and stray files. These helpers give them exactly the committed files::

    import eosink_files
    eosink_files.committed_files("/data/orders")          # [CommittedFile(...), ...]
    eosink_files.dataset("/data/orders").to_table()       # a pyarrow.dataset of those files
"""

from __future__ import annotations

from typing import Any

import attrs

from eosink_files.log import LOG_DIR, ManifestError, reader_plan
from eosink_files.options import FilesOptions
from eosink_files.log_view import LogFolder
from eosink_files.store import Store, open_store


@attrs.frozen
class CommittedFile:
    """A file the log lists: its manifest URI, its path relative to the folder, its size."""

    uri: str
    relpath: str
    size: int
    modification_time: int


@attrs.frozen
class LogState:
    """What the log says: the committed files, the proofs, the folder's format and layout."""

    files: tuple[CommittedFile, ...]
    proofs: tuple[Any, ...]
    latest_entry: int | None
    format: str | None
    partition_by: tuple[str, ...]


def _store(path: str, storage_options: dict[str, Any] | None = None) -> Store:
    opts = FilesOptions(path=path, storage_options=storage_options)
    return open_store(opts.path, storage_options=opts.storage_options)


def read_log(
    path: str, compact_interval: int = 10, storage_options: dict[str, Any] | None = None
) -> LogState:
    """Read the log of the folder at ``path`` exactly as Spark's reader would.

    ``storage_options``: the fsspec filesystem's options, as the sink takes them.
    """
    store = _store(path, storage_options)
    folder = LogFolder(store, compact_interval)
    files = folder.listing()
    if not files:
        if not store.exists(LOG_DIR):
            raise ManifestError(
                f"{path!r} has no {LOG_DIR} log: it is not a file-sink folder (or nothing was "
                "committed yet); check the path"
            )
        return LogState((), (), None, None, ())
    out: list[CommittedFile] = []
    proofs = []
    seen: set[str] = set()
    for log_id, compact in reader_plan(files, compact_interval):
        entry = folder.read(log_id, compact)
        proofs.extend(entry.proofs)
        for f in entry.files or ():
            uri = f["path"]
            if uri in seen:
                continue
            seen.add(uri)
            rel = store.relpath_of(uri)
            if rel is None:
                raise ManifestError(
                    f"{LOG_DIR}/{log_id} lists {uri!r}, outside the folder {path!r}; this reader "
                    "only reads files inside it"
                )
            out.append(CommittedFile(uri, rel, int(f["size"]), int(f.get("modificationTime", 0))))
    last = max(proofs, key=lambda p: p.log_id) if proofs else None
    return LogState(
        files=tuple(out),
        proofs=tuple(proofs),
        latest_entry=max(files),
        format=last.format if last else None,
        partition_by=tuple(last.partition_by) if last else (),
    )


def committed_files(
    path: str, compact_interval: int = 10, storage_options: dict[str, Any] | None = None
) -> list[CommittedFile]:
    """The files the log lists: exactly what Spark's reader reads."""
    return list(read_log(path, compact_interval, storage_options).files)


def _format_of(state: LogState, format: str | None) -> str:
    if format:
        return format
    if state.format:
        return state.format
    names = [f.relpath for f in state.files]
    for fmt in ("parquet", "json", "csv"):
        if any(n.endswith(f".{fmt}") or n.endswith(f".{fmt}.gz") for n in names):
            return fmt
    return "parquet"


def dataset(
    path: str,
    format: str | None = None,
    compact_interval: int = 10,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """A ``pyarrow.dataset.Dataset`` of exactly the committed files (Hive partitions decoded)."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    state = read_log(path, compact_interval, storage_options)
    store = _store(path, storage_options)
    fmt = _format_of(state, format)
    if fmt == "json":
        fmt_obj: Any = ds.JsonFileFormat()
    elif fmt == "csv":
        import pyarrow.csv as pcsv

        # as Spark's writer (and the sink) quote and escape: a backslash, never a doubled
        # quote; a line break only inside quotes. An empty field reads as null, as in Spark.
        fmt_obj = ds.CsvFileFormat(
            parse_options=pcsv.ParseOptions(
                escape_char="\\", double_quote=False, newlines_in_values=True
            ),
            convert_options=pcsv.ConvertOptions(strings_can_be_null=True),
        )
    else:
        fmt_obj = ds.ParquetFileFormat()
    if store.kind() == "file":
        filesystem: Any = pafs.LocalFileSystem()
        root = store.location
    else:
        filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(store.fs))  # type: ignore[attr-defined]
        root = store.root  # type: ignore[attr-defined]
    paths = [f"{root}/{f.relpath}" for f in state.files]
    partitioning = None
    if state.partition_by or any(
        "=" in f.relpath.split("/")[0] for f in state.files if "/" in f.relpath
    ):
        partitioning = ds.HivePartitioning.discover(
            infer_dictionary=False,
            segment_encoding="uri",
            null_fallback="__HIVE_DEFAULT_PARTITION__",
        )
    if not paths:
        import pyarrow as pa

        return ds.dataset(pa.table({}))
    return ds.dataset(
        paths,
        filesystem=filesystem,
        format=fmt_obj,
        partitioning=partitioning,
        partition_base_dir=root,
        **kwargs,
    )


def read_table(path: str, **kwargs: Any) -> Any:
    """The committed rows as a ``pyarrow.Table``."""
    return dataset(path, **kwargs).to_table()
