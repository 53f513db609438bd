"""The options of the ``delta`` sink, from Python keywords or Spark's string options."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from eosink.plugin import ConfigurationError
from eosink.options import location, masked, names, storage_options

Engine = Literal["delta-rs", "delta-spark", "auto"]
ENGINES = ("delta-rs", "delta-spark", "auto")
FILE_WRITERS = ("auto", "spark", "arrow")
COMPRESSIONS = ("snappy", "zstd", "gzip", "lz4", "brotli", "none")
MODES = ("append", "upsert")


def table_uri(path: str) -> str:
    """The table's folder, as every process must see it (see :func:`eosink.options.location`)."""
    if not path or not str(path).strip():
        raise ConfigurationError("sink 'delta': option path is empty; set it to the table's folder")
    return location(path)


def _optional_name(value: object) -> str | None:
    """A column name, ``None`` when absent or blank (Spark passes every option as a string)."""
    if value is None:
        return None
    return str(value).strip() or None


@attrs.frozen
class DeltaOptions:
    """Options of the ``delta`` sink.

    ``path``: the table's folder (created as a Delta table on the first write).
    ``partition_by``: partition columns of a new table; for an existing one, if given, they
    must match the table's. ``merge_schema``: add the stream's new columns to the table
    (Delta's ``mergeSchema``); without it a schema difference is an error. ``engine``:
    ``delta-rs`` (default), ``delta-spark`` (Delta's own Spark writer, when its jars are on the
    classpath) or ``auto``. ``compression``, ``row_group_rows`` and ``stats`` shape the Parquet
    files the executors write. ``file_writer``: who writes the data files of the delta-rs
    engine where the batch is a DataFrame (``foreachBatch``, ``write_batch``): ``spark``
    (Spark's own Parquet writer, the fastest; a local or shared path, classic Spark, partition
    columns that are strings, integers, dates or booleans), ``arrow`` (the executors write Arrow
    batches with pyarrow; any store) or ``auto`` (default: ``spark`` where it can). The
    data-source front door always uses ``arrow``. ``storage_options``: delta-rs' options of the
    table's object store (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_REGION``,
    ``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_NAME``...; any case); from Spark, one
    option ``storage.<key>`` per entry. They travel with the sink to the executors; values of
    credential-like names never show in its ``repr``. ``single_writer``: accept a store that
    cannot arbitrate two writers racing for one table version (one that ignores conditional
    creates, or ``AWS_S3_ALLOW_UNSAFE_RENAME``), on the promise that one query at a time
    writes the table.

    ``mode``: ``append`` (default) or ``upsert``: keyed upserts (:mod:`eosink_delta.upsert`),
    where after each batch the table holds, for each ``key`` (one or more columns), the row of
    the latest committed batch that carried it; Spark's ``update`` output mode needs it.
    ``order_by``: in upsert mode, a column whose greatest value picks the row of a key a batch
    holds more than once (without it such a batch is refused).
    """

    path: str = attrs.field(converter=table_uri)
    partition_by: tuple[str, ...] = attrs.field(default=(), converter=names)
    merge_schema: bool = False
    engine: str = "delta-rs"
    compression: str = "snappy"
    row_group_rows: int = 1_000_000
    stats: bool = True
    file_writer: str = attrs.field(default="auto", converter=lambda v: str(v).strip().lower())
    storage_options: dict[str, Any] = attrs.field(
        factory=dict,
        converter=storage_options,
        repr=lambda value: repr(masked(value)),
        hash=False,
    )
    single_writer: bool = False
    mode: str = attrs.field(default="append", converter=lambda v: str(v).strip().lower())
    key: tuple[str, ...] = attrs.field(default=(), converter=names)
    order_by: str | None = attrs.field(default=None, converter=lambda v: _optional_name(v))

    @property
    def upsert(self) -> bool:
        return self.mode == "upsert"

    def __attrs_post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigurationError(
                f"sink 'delta': engine {self.engine!r} is unknown; use one of {', '.join(ENGINES)}"
            )
        if self.file_writer not in FILE_WRITERS:
            raise ConfigurationError(
                f"sink 'delta': file_writer {self.file_writer!r} is unknown; use one of "
                f"{', '.join(FILE_WRITERS)}"
            )
        if self.compression.lower() not in COMPRESSIONS:
            raise ConfigurationError(
                f"sink 'delta': compression {self.compression!r} is unknown; use one of "
                f"{', '.join(COMPRESSIONS)}"
            )
        if self.storage_options and "://" not in self.path:
            raise ConfigurationError(
                f"sink 'delta': storage_options are for an object store's URL, but path "
                f"{self.path!r} is local; give the path as s3://, gs:// or abfss://... (or drop "
                "storage_options)"
            )
        if self.row_group_rows < 1:
            raise ConfigurationError("sink 'delta': row_group_rows must be a positive integer")
        self._check_upsert()

    def _check_upsert(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(
                f"sink 'delta': mode {self.mode!r} is unknown; use one of {', '.join(MODES)} "
                "(Spark's complete output mode needs no option)"
            )
        if self.upsert and not self.key:
            raise ConfigurationError(
                "sink 'delta': mode 'upsert' needs option key, the columns that identify a row, "
                "e.g. key=['user_id'] (from Spark: .option('key', 'user_id'))"
            )
        if self.key and not self.upsert:
            raise ConfigurationError(
                "sink 'delta': option key is for mode 'upsert'; set mode='upsert' or drop key"
            )
        if self.order_by is not None and not self.upsert:
            raise ConfigurationError(
                "sink 'delta': option order_by is for mode 'upsert'; set mode='upsert' (with "
                "key) or drop order_by"
            )
        if len(set(self.key)) != len(self.key):
            raise ConfigurationError(
                f"sink 'delta': option key names a column twice ({list(self.key)}); name each "
                "key column once"
            )
        if self.order_by is not None and self.order_by in self.key:
            raise ConfigurationError(
                f"sink 'delta': order_by {self.order_by!r} is a key column, so it cannot order "
                "the rows of one key; name another column (e.g. an event time or a version)"
            )
