"""Keyed upserts on the ``delta-spark`` engine: Delta's own MERGE, with the batch's txn and
eosink's proof in its commit, the txn settings scoped to that one statement.

Delta's MERGE takes its app transaction only from the session's SQL settings
``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` (and the commit's ``userMetadata``
from ``spark.databricks.delta.commitInfo.userMetadata``): Delta 4.4's ``DeltaCommand`` reads
them from ``sparkSession.sessionState.conf`` of the session that runs the command, and resets
nothing after it (``write.txnVersion.autoReset.enabled``, off by default, unsets the version
alone). Set on the user's session they would stamp every later Delta statement of that session
with the batch's txn, and two queries sharing the session would commit with each other's.
So each MERGE runs in a clone of the batch's session (``cloneSession``: the same SparkContext,
a copy of the user's SQL settings, SQL settings of its own), set there and dropped with it:
nothing is ever set on the user's session.

The batch is refused as the delta-rs engine refuses it (:mod:`eosink_delta.upsert`: a null key,
a key held twice unless ``order_by`` names the row that wins, a tie on it) before anything is
written; Spark answers those questions with one aggregation over the (persisted) batch.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from eosink.plugin import BatchContext, ConfigurationError
from eosink_delta.options import DeltaOptions
from eosink_delta.upsert import (
    check_options,
    check_table_key,
    doubled_key_error,
    null_key_error,
    null_order_error,
    tied_key_error,
)

#: Delta's SQL settings of an idempotent DML statement (DeltaSQLConf, Delta 4.4).
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
#: The column a batch's rows are ranked by ``order_by`` in (dropped before the MERGE).
_TOP = "_eosink_top"


def _arrow_schema(schema: Any, options: DeltaOptions) -> pa.Schema:
    """The stream's columns as the delta-rs engine's checks see them. Only the key and
    ``order_by`` columns' types matter there; a type Arrow has none for (a variant) stands as
    null elsewhere."""
    from pyspark.sql.pandas.types import to_arrow_type

    wanted = {*options.key, options.order_by}
    fields = []
    for f in schema.fields:
        try:
            t = to_arrow_type(f.dataType)
        except Exception:  # noqa: BLE001 - no Arrow type: refused below if it is a key
            if f.name in wanted:
                raise
            t = pa.null()
        fields.append(pa.field(f.name, t))
    return pa.schema(fields)


def check_upsert(
    df: Any,
    uri: str,
    ctx: BatchContext,
    options: DeltaOptions,
    partition_by: Sequence[str],
    configuration: dict[str, str] | None,
    table_columns: Sequence[str] | None,
) -> None:
    """Refuse, before any Spark job, what an upsert of this stream into this table cannot be:
    the delta-rs engine's option checks, a key the table lacks, an append-only table."""
    check_options(uri, options, _arrow_schema(df.schema, options), partition_by, ctx.mode)
    if table_columns is not None:
        check_table_key(uri, options, table_columns)
    if str((configuration or {}).get("delta.appendOnly", "false")).lower() == "true":
        raise ConfigurationError(
            f"sink 'delta': mode 'upsert' cannot write the table at {uri}: it is append-only "
            "(delta.appendOnly=true) and an upsert replaces rows. Write to a table without it, "
            "or use mode='append'. Nothing was written."
        )


def batch_rows(
    df: Any, ctx: BatchContext, options: DeltaOptions, partition_by: Sequence[str]
) -> Any:
    """The batch's rows to merge, one per key: refuses null keys and keys held twice (or
    tied on ``order_by``, whose greatest value otherwise picks the row). One Spark job: an
    aggregation by the key (after a window by it with ``order_by``) that keeps the first
    offending key."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    key, order_by = list(options.key), options.order_by
    types = {f.name: f.dataType for f in df.schema.fields}

    def null(c: str) -> Any:
        # Delta writes an empty string in a partition column as null.
        if c in partition_by and isinstance(types[c], StringType):
            return F.col(c).isNull() | (F.col(c) == "")
        return F.col(c).isNull()

    def count(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    any_null = functools.reduce(operator.or_, [null(c) for c in key])
    if order_by is None:
        rows, stats = df, df.groupBy(*key).agg(F.count(F.lit(1)).alias("n"))
        bad = any_null | (F.col("n") > 1)
    else:
        ranked = df.withColumn(_TOP, F.max(order_by).over(Window.partitionBy(*key)))
        rows = ranked.where(F.col(order_by) == F.col(_TOP)).drop(_TOP)
        stats = ranked.groupBy(*key).agg(
            count(F.col(order_by).isNull()).alias("nulls"),
            count(F.col(order_by) == F.col(_TOP)).alias("n"),
            F.max(_TOP).alias("top"),
        )
        bad = any_null | (F.col("nulls") > 0) | (F.col("n") > 1)
    for row in stats.where(bad).limit(1).collect():
        k = tuple(None if c in partition_by and row[c] == "" else row[c] for c in key)
        if any(v is None for v in k):
            raise null_key_error(ctx, options.key, k)
        if order_by is None:
            raise doubled_key_error(ctx, options.key, k)
        if row["nulls"]:
            raise null_order_error(ctx, options.key, k, order_by)
        raise tied_key_error(ctx, options.key, k, order_by, row["top"])
    return rows


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def merge(source: Any, uri: str, ctx: BatchContext, options: DeltaOptions, metadata: str) -> None:
    """``MERGE INTO <uri> t USING source s ON <key> WHEN MATCHED UPDATE SET * WHEN NOT MATCHED
    INSERT *``, committed with ``txn(writer, batch)`` and ``metadata`` as its ``userMetadata``,
    in a clone of the batch's session that holds those settings for this statement alone."""
    session = source.sparkSession._jsparkSession.cloneSession()  # noqa: SLF001
    conf = session.conf()
    conf.set(TXN_APP_ID, ctx.writer_id)
    conf.set(TXN_VERSION, str(ctx.batch_id))
    conf.set(USER_METADATA, metadata)
    if options.merge_schema:
        conf.set(AUTO_MERGE, "true")
    jvm = source.sparkSession.sparkContext._jvm  # noqa: SLF001
    on = " AND ".join(f"t.{_quoted(c)} = s.{_quoted(c)}" for c in options.key)
    target = jvm.io.delta.tables.DeltaTable.forPath(session, uri).alias("t")
    (
        target.merge(source._jdf.alias("s"), on)  # noqa: SLF001
        .whenMatched()
        .updateAll()
        .whenNotMatched()
        .insertAll()
        .execute()
    )
