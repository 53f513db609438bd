"""The options of the ``files`` sink, from Python keywords or Spark's string options."""

from __future__ import annotations

import re
from typing import Any

import attrs

from eosink.plugin import ConfigurationError
from eosink.options import location, masked, names, storage_options

FORMATS = ("parquet", "json", "csv")
FILE_WRITERS = ("auto", "spark", "arrow")

#: Codecs per format, as users spell them; Spark's reader handles each of these.
COMPRESSIONS = {
    "parquet": ("snappy", "zstd", "gzip", "lz4", "none"),
    "json": ("none", "gzip"),
    "csv": ("none", "gzip"),
}
DEFAULT_COMPRESSION = {"parquet": "snappy", "json": "none", "csv": "none"}

MiB = 1 << 20


def _location(path: str) -> str:
    """The folder, as every process must see it (see :func:`eosink.options.location`)."""
    if not path or not str(path).strip():
        raise ConfigurationError("sink 'files': option path is empty; set it to the output folder")
    return location(path)


def fsspec_options(options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the fsspec filesystem, from ``storage_options``.

    Spark options are flat strings: a dotted key is a nested dict (``client_kwargs.region_name``
    is ``{"client_kwargs": {"region_name": ...}}``) and ``"true"``/``"false"`` are booleans
    (``anon``, ``use_ssl``), at the top level. Nested dicts from Python pass through as they are.
    """
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        *parents, leaf = key.split(".")
        target = out
        for parent in parents:
            target = target.setdefault(parent, {})
        if isinstance(value, dict) and isinstance(target.get(leaf), dict):
            target[leaf] = {**target[leaf], **value}
        else:
            target[leaf] = value
    return out


def _lower(value: object) -> str:
    return str(value).strip().lower()


def _scheme(value: object) -> str | None:
    text = "" if value is None else _lower(value)
    return text or None


def _optional_lower(value: object) -> str | None:
    return None if value is None else _lower(value)


#: Old option names, still accepted, and the option each one now is.
ALIASES = {"engine": "file_writer"}


def _compression(value: object) -> str | None:
    if value is None:
        return None
    text = _lower(value)
    return {"uncompressed": "none", "": "none", "gz": "gzip", "lz4_raw": "lz4"}.get(text, text)


@attrs.frozen
class FilesOptions:
    """Options of the ``files`` sink.

    ``path``: the output folder (local path, ``file://`` or any fsspec URL such as
    ``memory://``, ``s3://``). ``format``: ``parquet`` (default), ``json`` (JSON lines) or
    ``csv``. ``partition_by``: Hive-style partition columns (Spark's ``partitionBy``).
    ``compression``: the codec (default snappy for Parquet, none for JSON and CSV).
    ``target_file_size``: a part file is closed and a new one started once it holds this many
    bytes. ``row_group_size``: rows per Parquet row group (batches are buffered up to it).
    ``compact_interval``: every this many log entries one is a ``.compact`` holding the whole
    list; it must equal the readers' ``spark.sql.streaming.fileSink.log.compactInterval``
    (10 by default). ``single_writer``: accept a filesystem that cannot create a file
    atomically-if-absent, on the promise that one query at a time writes the folder.
    ``log_cleanup_delay_s``: log entries made obsolete by a compaction are deleted after this
    delay (readers in flight may still need them); a negative value keeps them forever.
    ``csv_header``: write a header line in CSV files. ``file_writer`` (old name ``engine``,
    still accepted; giving both with different values is an error): who writes the part files
    where the batch is a DataFrame (``foreachBatch``, ``write_batch``): ``spark`` (Spark's
    own file writer, the fastest; a local or shared path and classic Spark), ``arrow`` (this
    package's Arrow writers on the executors, any fsspec URL, ``target_file_size`` and
    ``row_group_size`` honoured) or ``auto`` (default: ``spark`` where it can, else ``arrow``).
    The data-source front door always uses ``arrow``. ``manifest_scheme``: for a URL path, the
    scheme of the paths the manifest lists, for the Hadoop filesystem Spark's readers use
    (default: ``s3a`` for S3, ``gs`` for GCS, ``abfss`` for Azure, the URL's own otherwise;
    e.g. ``s3`` for EMRFS, ``abfs`` or ``wasbs`` for Azure). Local paths are always ``file:``.
    ``storage_options``: keyword arguments of the fsspec filesystem (credentials, endpoint,
    region: s3fs' ``key``, ``secret``, ``endpoint_url``, ``client_kwargs``; gcsfs' ``token``,
    ``project``; adlfs' ``account_name``, ``account_key``...); from Spark, one option
    ``storage.<key>`` per entry (dotted keys nest: ``storage.client_kwargs.region_name``).
    They travel with the sink to the executors; values of credential-like names never show
    in its ``repr``.
    """

    path: str = attrs.field(converter=_location)
    format: str = attrs.field(default="parquet", converter=_lower)
    partition_by: tuple[str, ...] = attrs.field(default=(), converter=names)
    compression: str | None = attrs.field(default=None, converter=_compression)
    target_file_size: int = 1024 * MiB
    row_group_size: int = 1_048_576
    compact_interval: int = 10
    single_writer: bool = False
    log_cleanup_delay_s: float = 600.0
    csv_header: bool = True
    file_writer: str | None = attrs.field(default=None, converter=_optional_lower)
    manifest_scheme: str | None = attrs.field(default=None, converter=_scheme)
    storage_options: dict[str, Any] = attrs.field(
        factory=dict,
        converter=storage_options,
        repr=lambda value: repr(masked(value)),
        hash=False,
    )
    #: The old name of ``file_writer`` (None once resolved, so ``attrs.evolve`` keeps working).
    engine: str | None = attrs.field(
        default=None, converter=_optional_lower, repr=False, eq=False, hash=False
    )

    def __attrs_post_init__(self) -> None:
        self._resolve_file_writer()
        if self.format not in FORMATS:
            raise ConfigurationError(
                f"sink 'files': unknown format {self.format!r}; use one of {', '.join(FORMATS)} "
                "(e.g. .option('format', 'parquet'))"
            )
        if self.compression is not None and self.compression not in COMPRESSIONS[self.format]:
            raise ConfigurationError(
                f"sink 'files': compression {self.compression!r} is not available for "
                f"{self.format}; use one of {', '.join(COMPRESSIONS[self.format])}"
            )
        if self.file_writer not in FILE_WRITERS:
            raise ConfigurationError(
                f"sink 'files': unknown file_writer {self.file_writer!r}; use one of "
                f"{', '.join(FILE_WRITERS)}"
            )
        if self.manifest_scheme is not None and not re.fullmatch(
            r"[a-z][a-z0-9+.-]*", self.manifest_scheme
        ):
            raise ConfigurationError(
                f"sink 'files': manifest_scheme {self.manifest_scheme!r} is not a URI scheme; "
                "give one such as 's3a', 's3', 'gs' or 'abfss' (without '://')"
            )
        if self.storage_options and "://" not in self.path:
            raise ConfigurationError(
                f"sink 'files': storage_options are for an object store's URL, but path "
                f"{self.path!r} is local; give the path as s3://, gs:// or abfss://... (or "
                "drop storage_options)"
            )
        for name, value, low in (
            ("target_file_size", self.target_file_size, 1),
            ("row_group_size", self.row_group_size, 1),
            ("compact_interval", self.compact_interval, 1),
        ):
            if value < low:
                raise ConfigurationError(
                    f"sink 'files': option {name} must be >= {low}, got {value}"
                )
        seen = set()
        for column in self.partition_by:
            if column in seen:
                raise ConfigurationError(
                    f"sink 'files': partition column {column!r} is given twice in partition_by"
                )
            seen.add(column)
            if column in ("", ".", "..") or "/" in column or "\\" in column or "\x00" in column:
                raise ConfigurationError(
                    f"sink 'files': partition column name {column!r} cannot name a folder level "
                    "(it contains '/' or is '.' or '..'); rename the column, e.g. "
                    "df.withColumnRenamed(old, 'day')"
                )

    def _resolve_file_writer(self) -> None:
        """``engine`` is ``file_writer``'s old name: take it, unless both disagree."""
        writer, alias = self.file_writer, self.engine
        if alias is not None and writer is not None and alias != writer:
            raise ConfigurationError(
                f"sink 'files': file_writer={writer!r} and engine={alias!r} disagree; engine is "
                "the old name of file_writer: give file_writer only"
            )
        object.__setattr__(self, "file_writer", writer or alias or "auto")
        object.__setattr__(self, "engine", None)

    @property
    def codec(self) -> str:
        return self.compression or DEFAULT_COMPRESSION[self.format]


def default_sizes(options: FilesOptions) -> bool:
    """Whether file and row-group sizes are left to the writer (as the spark file writer needs)."""
    fields = attrs.fields(FilesOptions)
    return (
        options.target_file_size == fields.target_file_size.default
        and options.row_group_size == fields.row_group_size.default
    )
