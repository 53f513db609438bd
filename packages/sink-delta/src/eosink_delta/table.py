"""The table as both engines check it: is it a Delta table, may eosink write it (features,
partitioning), and the partition values of its files.

The proof of a batch (the ``txn`` and the ``commitInfo`` proof) is in
:mod:`eosink_delta.proof`."""

from __future__ import annotations

import datetime as dt
import decimal
import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError
from eosink.partitions import java_number_text
from eosink_delta.store import PROBE_DIR, delta_options, filesystem

log = get_logger("eosink.delta")

TXN_RETENTION = "delta.setTransactionRetentionDuration"


def is_delta_table(uri: str, storage_options: dict[str, Any] | None = None) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(uri, storage_options=delta_options(storage_options or {}))


def post_commit_hooks(table: Any) -> Any:
    """What delta-rs does after eosink's commit: checkpoints, and log cleanup with them only.

    Checkpoints follow the table's ``delta.checkpointInterval`` (delta-rs' default hook).
    Expired log files (``delta.logRetentionDuration``) are cleaned up when a checkpoint is due,
    as Delta's own writer does: delta-rs would otherwise list the whole ``_delta_log`` after
    every commit, a cost that grows with the log. Cleanup deletes only commits older than a
    checkpoint, which carries every txn on, so no replay loses its evidence.
    """
    from deltalake.transaction import PostCommitHookProperties

    config = table.metadata().configuration or {}
    interval = int(config.get("delta.checkpointInterval", 100))
    enabled = str(config.get("delta.enableExpiredLogCleanup", "true")).lower() == "true"
    due = (table.version() + 2) % interval == 0  # the checkpoint delta-rs writes after ours
    return PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=enabled and due)


def check_not_other_data(uri: str, storage_options: dict[str, Any] | None = None) -> None:
    """Refuse a folder that holds files but no Delta log: it is not a table eosink may create."""
    import pyarrow.fs as pafs

    fs, root = filesystem(uri, storage_options or {})
    info = fs.get_file_info(root) if root else None  # an object store has no folders
    if info is not None and info.type == pafs.FileType.NotFound:
        return
    if info is not None and info.type != pafs.FileType.Directory:
        raise ConfigurationError(
            f"sink 'delta': path {uri} is a file, not a Delta table folder; point option path at "
            "a folder (a new or empty one to create the table)"
        )
    entries = fs.get_file_info(pafs.FileSelector(root, recursive=False, allow_not_found=True))
    names = sorted(posixpath.basename(e.path) for e in entries)
    names = [n for n in names if n != PROBE_DIR]  # a store check of another writer
    if names == ["_delta_log"]:
        return  # a log without commits: a table another writer is creating at this moment
    if names:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise ConfigurationError(
            f"sink 'delta': path {uri} is not a Delta table: it has no _delta_log but holds "
            f"{len(names)} entries ({shown}). Point option path at the table's folder, or at a new "
            "or empty folder to create a table there; to turn existing Parquet files into a "
            "table use deltalake.convert_to_deltalake first."
        )


def check_table_features(
    uri: str, configuration: Mapping[str, str] | None, *, engine: str, mode: str
) -> None:
    """Refuse tables whose features (by the table's ``configuration``) this engine would
    silently violate."""
    config = dict(configuration or {})
    mapping = config.get("delta.columnMapping.mode", "none")
    # Delta's own writer (engine delta-spark) maps columns itself.
    if mapping not in (None, "none") and engine == "delta-rs":
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} uses column mapping ({mapping}), which the delta-rs "
            "engine cannot write correctly; use engine='delta-spark' on a Spark with Delta, or "
            "write to a table without column mapping"
        )
    constraints = sorted(k for k in config if k.startswith("delta.constraints."))
    if constraints and engine == "delta-rs":
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} has CHECK constraints ({', '.join(constraints)}) "
            "that the delta-rs engine does not enforce on the files it adds; use "
            "engine='delta-spark' on a Spark with Delta, or drop the constraints"
        )
    if mode == "complete" and str(config.get("delta.appendOnly", "false")).lower() == "true":
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} is append-only (delta.appendOnly=true) but the "
            "query's output mode is complete, which replaces the table's content; use append "
            "mode, or unset delta.appendOnly"
        )
    check_txn_retention(uri, config.get(TXN_RETENTION), engine=engine)


#: The shortest txn retention eosink writes under: a query stopped after a failure replays its
#: last batch when it restarts, and skips it only while the batch's txn is kept. Seven days,
#: Delta's own horizon for a writer still at work (``delta.deletedFileRetentionDuration``).
MIN_TXN_RETENTION = dt.timedelta(days=7)
#: Delta's interval units (``interval 30 days``), in seconds; months and years are refused
#: by Delta itself for durations.
_UNITS = {
    "week": 7 * 86400,
    "day": 86400,
    "hour": 3600,
    "minute": 60,
    "second": 1,
    "millisecond": 1e-3,
    "microsecond": 1e-6,
}


def txn_retention(value: str) -> dt.timedelta | None:
    """A ``delta.setTransactionRetentionDuration`` value (``interval 30 days``, ``2 weeks``,
    ``interval 1 day 12 hours``) as a duration; None if it is not one."""
    words = str(value).strip().lower().split()
    if words and words[0] == "interval":
        words = words[1:]
    if not words or len(words) % 2:
        return None
    seconds = 0.0
    for number, unit in zip(words[::2], words[1::2]):
        unit = unit[:-1] if unit.endswith("s") else unit
        try:
            seconds += float(number) * _UNITS[unit]
        except (KeyError, ValueError):
            return None
    return dt.timedelta(seconds=seconds)


def check_txn_retention(uri: str, retention: str | None, *, engine: str) -> None:
    """Refuse a txn retention shorter than :data:`MIN_TXN_RETENTION`.

    Both engines stamp their txn with ``lastUpdated`` (Delta's Spark connector keeps a txn
    without one for no time at all once a retention is set), so the retention decides how long
    a batch's evidence lives: a query that restarts later than that after a failure writes its
    replayed batch a second time. A longer retention is accepted with that horizon logged.
    """
    if not retention:
        return
    kept = txn_retention(retention)
    fix = (
        f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES ('{TXN_RETENTION}' = 'interval 7 days') "
        f"(or longer), or UNSET TBLPROPERTIES ('{TXN_RETENTION}') to keep txns for ever"
    )
    if kept is None:
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} sets {TXN_RETENTION}={retention!r}, which is not "
            f"a Delta interval (e.g. 'interval 30 days'); set it to one: {fix}"
        )
    if kept < MIN_TXN_RETENTION:
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} sets {TXN_RETENTION}={retention!r}: Delta drops a "
            "writer's txn that long after its last commit, and with it the evidence eosink skips "
            "a replayed batch by, so a query restarted later than that after a failure would "
            f"write its last batch twice. eosink needs at least 7 days: {fix}"
        )
    log.info(
        "delta.txn_retention",
        table=uri,
        retention=retention,
        engine=engine,
        horizon="a query restarted later than the retention after a failure writes its "
        "replayed batch again",
    )


def check_partitions(uri: str, table_columns: list[str], wanted: tuple[str, ...]) -> None:
    if wanted and list(wanted) != list(table_columns):
        have = ", ".join(table_columns) or "none"
        raise ConfigurationError(
            f"sink 'delta': the table at {uri} is partitioned by [{have}] but option partitionBy "
            f"is [{', '.join(wanted)}]; set partitionBy to [{have}] (or leave it out to use the "
            "table's), or write to a new table"
        )


# -- partition values ------------------------------------------------------------------------
#: Hive's folder of null. Delta's Spark writer reads partition values from such folders, and
#: delta-rs' writer too takes this string for null: a string holding it is written as null.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def partition_value(value: Any, type_: pa.DataType) -> str | None:
    """A partition value as the Delta protocol's ``partitionValues`` serializes it.

    The protocol reads an empty string as null, so ``""`` (and Hive's null folder name, which
    Delta's writers take for null) is written as null: those rows are one partition, as Spark's
    file writer (:mod:`eosink_delta.spark_file_writer`) writes them. Numbers print as the JVM prints
    them (``1.0E20``, ``NaN``, ``Infinity``, ``-0.0``): Delta's Spark reader parses them with
    Java, delta-rs with Rust's float parser, which takes these too (but Java rejects
    Python's ``inf``). Decimals in plain digits at the column's scale, dates ``yyyy-MM-dd``,
    timestamps ``yyyy-MM-dd HH:mm:ss.SSSSSS`` in UTC (naive ones as they are), binary as the
    text its bytes spell in UTF-8: Delta's Spark reader (a cast) and delta-rs both read the
    string back as its UTF-8 bytes, so other bytes cannot be a partition value (an error).
    """
    if value is None or value == "" or value == b"" or value == HIVE_NULL:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_number_text(value, single=pa.types.is_floating(type_) and type_.bit_width < 64)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigurationError(
                f"sink 'delta': binary partition value {value[:16]!r} is not UTF-8 text, and "
                "Delta's readers (Spark's and delta-rs) read a binary partition value back as "
                "the UTF-8 bytes of its string, so it would change. Partition by hex(col) or "
                "base64(col) instead. Nothing of this batch was committed."
            ) from None
    return str(value)


def unsupported_partition_type(type_: pa.DataType) -> str | None:
    """Why a column of ``type_`` cannot be a partition column of a Delta table (and the fix),
    or ``None`` when it can."""
    if pa.types.is_dictionary(type_):
        return unsupported_partition_type(type_.value_type)
    if pa.types.is_nested(type_):
        return "partition columns must be of simple types: partition by a simple column"
    if pa.types.is_null(type_):
        return "every value is null (a void column): cast it to the type it should have"
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        # The protocol writes a binary partition value as "a string of escaped binary values"
        # and its readers disagree on what that means: delta-rs reads any string back as its
        # UTF-8 bytes, so a value with a byte above 0x7f comes back changed however written.
        return (
            "Delta readers do not read binary partition values back as written (bytes above "
            "0x7f change): partition by a string made of it (e.g. hex(col) or base64(col))"
        )
    return None


def partition_dir(columns: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    """The Hive-style folder of a partition (``day=2024-01-01/...``), as delta-rs names it.

    Names and values are percent-encoded except for RFC 3986's unreserved characters, so a
    folder holds no space, ``:``, ``/``, ``=`` or non-ASCII character. This is the folder on
    disk; the add action's path is that folder once more URI-encoded (``%`` becomes ``%25``),
    which delta-rs does itself when it writes an ``AddAction`` (the add path a reader decodes,
    as the Delta protocol says, is the folder on disk).
    """
    parts = []
    for name, value in zip(columns, values):
        text = HIVE_NULL if value is None else quote(value, safe="")
        parts.append(f"{quote(name, safe='')}={text}")
    return "/".join(parts)
