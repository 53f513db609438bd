"""eosink's delta-spark engine on the Spark Delta's connector is built for, in a process of
its own (one JVM for every scenario): the child of ``test_jvm_delta_spark_engine_runs.py``.

It runs on Spark 4.2 (``eosink.testing.spark_child``: pyspark 4.2 from
``build-support/spark-env``, eosink and the rest from the parent's path), its ``run`` called
per scenario in one session with Delta's jars and :data:`delta_spark_process.DELTA_CONF`; it
reports what each scenario observed (plain JSON values) or the error it met. The parent judges.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

from eosink.testing.spark_child import error_of

#: The SQL settings Delta's MERGE takes its txn and commit metadata from.
TXN_SETTINGS = (
    "spark.databricks.delta.write.txnAppId",
    "spark.databricks.delta.write.txnVersion",
    "spark.databricks.delta.commitInfo.userMetadata",
)


def plain(value: Any) -> Any:
    from eosink.testing.reference_spark_main import plain as reference_plain

    return reference_plain(value)


def rows_of(frame: Any) -> list[dict[str, Any]]:
    return [plain(r) for r in frame.collect()]


def outcome(call: Callable[[], Any]) -> dict[str, Any]:
    """A write's status, or the error it raised."""
    try:
        return {"status": call().status}
    except Exception as error:  # noqa: BLE001 - the parent judges it
        return {"error": error_of(error)}


def session_settings(spark: Any) -> dict[str, Any]:
    return {k: spark.conf.get(k, None) for k in TXN_SETTINGS}


# -- keyed upserts --------------------------------------------------------------------------------


def write_json(folder: str, name: str, records: list[dict[str, Any]]) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".tmp"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    os.rename(os.path.join(folder, name + ".tmp"), os.path.join(folder, name))
    # Spark's file source takes files in order of their times: one second apart, in order.
    stamp = time.time() - 100 + len(os.listdir(folder))
    os.utime(os.path.join(folder, name), (stamp, stamp))


def replay_last_batch(ckpt: str) -> None:
    """Drop the last batch's entry from the checkpoint's commit log, as a crash after the
    sink's commit and before Spark's leaves it: the restarted query runs that batch again."""
    commits = os.path.join(ckpt, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        if os.path.exists(os.path.join(commits, name)):
            os.remove(os.path.join(commits, name))


def run_available(frame_writer: Any) -> None:
    frame_writer.trigger(availableNow=True).start().awaitTermination()


def upsert_stream(spark: Any, root: str) -> dict[str, Any]:
    """An append stream upserted by key: three batches (one file each), then the last batch
    replayed by a restart (:func:`replay_last_batch`)."""
    from eosink_delta import delta_spark

    table, source, ckpt = (os.path.join(root, n) for n in ("table", "in", "ckpt"))
    writer = delta_spark.foreach_batch(
        table, writer_id="users", mode="upsert", key=["user_id"], engine="delta-spark"
    )

    def run() -> None:
        run_available(
            spark.readStream.schema("user_id long, v string")
            .option("maxFilesPerTrigger", 1)
            .json(source)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", ckpt)
        )

    write_json(source, "0.json", [{"user_id": i, "v": f"b0-{i}"} for i in (1, 2, 3)])
    write_json(source, "1.json", [{"user_id": i, "v": f"b1-{i}"} for i in (2, 4)])
    write_json(source, "2.json", [{"user_id": i, "v": f"b2-{i}"} for i in (3, 4, 5)])
    run()
    replay_last_batch(ckpt)
    run()
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version")
    return {
        "table": table,
        "engine": writer.engine,
        "statuses": [o.status for o in writer.outcomes],
        "batches": [o.ctx.batch_id for o in writer.outcomes],
        "rows": rows_of(spark.read.format("delta").load(table)),
        "operations": [r["operation"] for r in history.collect()],
        "settings": session_settings(spark),
    }


def upsert_batches(spark: Any, root: str) -> dict[str, Any]:
    """A batch job's upserts (``write_batch``): versions, a replayed version, ``order_by``, and
    what is refused; then Delta's own view of the table."""
    from eosink_delta import delta_spark

    table = os.path.join(root, "table")

    def upsert(rows: list[tuple], version: int, **options: Any) -> dict[str, Any]:
        df = spark.createDataFrame(rows, "user_id long, v string, seq long")
        return outcome(
            lambda: delta_spark.write_batch(
                df,
                table,
                writer_id="job",
                version=version,
                mode="upsert",
                key=["user_id"],
                engine="delta-spark",
                **options,
            )
        )

    steps = {
        "v0": upsert([(1, "a0", 0), (2, "a0", 0)], 0),
        "v1": upsert([(2, "a1", 0), (3, "a1", 0)], 1),
        "v1_again": upsert([(2, "zz", 0), (9, "zz", 0)], 1),
        "doubled": upsert([(4, "a2", 0), (4, "a2x", 1)], 2),
        "null_key": upsert([(None, "a2", 0)], 2),
        "ordered": upsert([(4, "old", 1), (4, "new", 2), (1, "a2", 0)], 2, order_by="seq"),
        "tied": upsert([(5, "x", 1), (5, "y", 1)], 3, order_by="seq"),
        "null_order": upsert([(6, "x", None), (6, "y", 1)], 3, order_by="seq"),
    }
    # A batch the user cached: eosink's own persist of the batch must not drop that cache.
    mine = spark.createDataFrame([(8, "c", 0)], "user_id long, v string, seq long").cache()
    steps["user_cached"] = outcome(
        lambda: delta_spark.write_batch(
            mine,
            table,
            writer_id="job",
            version=3,
            mode="upsert",
            key=["user_id"],
            engine="delta-spark",
        )
    )
    return {
        "table": table,
        "steps": steps,
        "still_cached": mine.is_cached,
        "rows": rows_of(spark.read.format("delta").load(table)),
        "settings": session_settings(spark),
    }


def upsert_settings(spark: Any, root: str) -> dict[str, Any]:
    """Delta's txn settings around an upsert: the user's own values stay as they were, after a
    committed upsert and after one Delta refuses (a row breaking a CHECK constraint)."""
    from eosink_delta import delta_spark

    table = os.path.join(root, "table")
    spark.sql(f"CREATE TABLE delta.`{table}` (user_id BIGINT, v STRING) USING delta")
    spark.sql(f"ALTER TABLE delta.`{table}` ADD CONSTRAINT short CHECK (length(v) < 5)")
    before = session_settings(spark)

    def upsert(rows: list[tuple], version: int) -> dict[str, Any]:
        df = spark.createDataFrame(rows, "user_id long, v string")
        return outcome(
            lambda: delta_spark.write_batch(
                df,
                table,
                writer_id="job",
                version=version,
                mode="upsert",
                key=["user_id"],
                engine="delta-spark",
            )
        )

    committed = upsert([(1, "a")], 0)
    after_commit = session_settings(spark)
    refused = upsert([(1, "much too long")], 1)
    after_refusal = spark.conf.get("spark.databricks.delta.write.txnVersion", None)
    # A user's own Delta write in the same session after eosink's upserts: it must carry no txn.
    spark.createDataFrame([(7, "u")], "user_id long, v string").write.format("delta").mode(
        "append"
    ).save(table)
    return {
        "table": table,
        "before": before,
        "committed": committed,
        "after_commit": after_commit,
        "refused": refused,
        "after_refusal": {**session_settings(spark), "txnVersion": after_refusal},
        "rows": rows_of(spark.read.format("delta").load(table)),
    }


def upsert_concurrent(spark: Any, root: str) -> dict[str, Any]:
    """Two streaming queries of one session upserting at the same time (each its own table and
    writer id), and two threads' batch upserts through one session at the same time."""
    from eosink_delta import delta_spark

    out: dict[str, Any] = {"tables": {}}
    queries = []
    for name in ("qa", "qb"):
        table, source = os.path.join(root, name), os.path.join(root, name + "-in")
        for b in range(2):
            write_json(source, f"{b}.json", [{"k": k, "v": f"{name}-{b}"} for k in range(b + 2)])
        writer = delta_spark.foreach_batch(
            table, writer_id=name, mode="upsert", key=["k"], engine="delta-spark"
        )
        queries.append(
            spark.readStream.schema("k long, v string")
            .option("maxFilesPerTrigger", 1)
            .json(source)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", os.path.join(root, name + "-ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        out["tables"][name] = table
    for q in queries:
        q.awaitTermination()
    results: dict[str, list[dict[str, Any]]] = {}

    def job(name: str) -> None:
        table = os.path.join(root, name)
        out["tables"][name] = table
        results[name] = []
        for version in range(2):
            df = spark.createDataFrame(
                [(k, f"{name}-{version}") for k in range(3)], "k long, v string"
            )
            results[name].append(
                outcome(
                    lambda: delta_spark.write_batch(
                        df,
                        table,
                        writer_id=name,
                        version=version,
                        mode="upsert",
                        key=["k"],
                        engine="delta-spark",
                    )
                )
            )

    threads = [threading.Thread(target=job, args=(n,)) for n in ("ja", "jb")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["jobs"] = results
    out["rows"] = {n: rows_of(spark.read.format("delta").load(t)) for n, t in out["tables"].items()}
    out["settings"] = session_settings(spark)
    return out


def update_aggregation(spark: Any, root: str) -> dict[str, Any]:
    """``groupBy(...).agg(...)`` in ``outputMode("update")`` into a table keyed by the
    aggregation's key: three batches, each upserting the totals it changed."""
    from pyspark.sql import functions as F

    from eosink_delta import delta_spark

    table, source, ckpt = (os.path.join(root, n) for n in ("table", "in", "ckpt"))
    writer = delta_spark.foreach_batch(
        table, writer_id="totals", mode="upsert", key=["user_id"], engine="delta-spark"
    )
    events = [
        [{"user_id": u, "amount": a} for u, a in ((1, 5), (2, 7), (1, 1))],
        [{"user_id": u, "amount": a} for u, a in ((2, 3), (3, 4))],
        [{"user_id": u, "amount": a} for u, a in ((1, 10), (3, 1), (4, 2))],
    ]

    def run() -> None:
        totals = (
            spark.readStream.schema("user_id long, amount long")
            .option("maxFilesPerTrigger", 1)
            .json(source)
            .groupBy("user_id")
            .agg(F.count("*").alias("events"), F.sum("amount").alias("total"))
        )
        run_available(
            totals.writeStream.outputMode("update")
            .foreachBatch(writer)
            .option("checkpointLocation", ckpt)
        )

    for i, batch in enumerate(events):
        write_json(source, f"{i}.json", batch)
    run()
    return {
        "table": table,
        "events": [e for batch in events for e in batch],
        "statuses": [o.status for o in writer.outcomes],
        "rows": rows_of(spark.read.format("delta").load(table)),
    }


def output_modes(spark: Any, root: str) -> dict[str, Any]:
    """Queries whose output mode the writer would corrupt the table with: an update-mode
    aggregation into an append (unkeyed) writer, which would append each changed row again."""
    from pyspark.sql import functions as F

    from eosink_delta import delta_spark

    table, source = os.path.join(root, "table"), os.path.join(root, "in")
    write_json(source, "0.json", [{"user_id": 1, "amount": 5}, {"user_id": 1, "amount": 2}])
    writer = delta_spark.foreach_batch(table, writer_id="totals", engine="delta-spark")
    totals = (
        spark.readStream.schema("user_id long, amount long")
        .json(source)
        .groupBy("user_id")
        .agg(F.sum("amount").alias("total"))
    )
    try:
        run_available(
            totals.writeStream.outputMode("update")
            .foreachBatch(writer)
            .option("checkpointLocation", os.path.join(root, "ckpt"))
        )
        error = None
    except Exception as failure:  # noqa: BLE001 - the parent judges it
        error = error_of(failure)
    return {"error": error, "table_exists": os.path.exists(table), "outcomes": len(writer.outcomes)}


# -- the feature matrix ---------------------------------------------------------------------------

#: Each feature: the columns and clauses of a table delta-spark creates with it.
FEATURES: dict[str, dict[str, str]] = {
    "columnMapping-name": {"tblprops": "'delta.columnMapping.mode' = 'name'"},
    "columnMapping-id": {"tblprops": "'delta.columnMapping.mode' = 'id'"},
    "uniform": {
        "tblprops": "'delta.columnMapping.mode' = 'name', 'delta.enableIcebergCompatV2' = "
        "'true', 'delta.universalFormat.enabledFormats' = 'iceberg'"
    },
    "checkConstraint": {"after": "ALTER TABLE {t} ADD CONSTRAINT positive CHECK (id > 0)"},
    "generatedColumns": {"extra": ", doubled BIGINT GENERATED ALWAYS AS (id * 2)"},
    "identityColumns": {"extra": ", n BIGINT GENERATED ALWAYS AS IDENTITY"},
    "rowTracking": {"tblprops": "'delta.enableRowTracking' = 'true'"},
    "liquidClustering": {"clauses": "CLUSTER BY (id)"},
    "v2Checkpoint": {"tblprops": "'delta.checkpointPolicy' = 'v2'", "checkpoint": "yes"},
    "typeWidening": {"tblprops": "'delta.enableTypeWidening' = 'true'", "id": "INT"},
    "deletionVectors": {"tblprops": "'delta.enableDeletionVectors' = 'true'"},
    "changeDataFeed": {"tblprops": "'delta.enableChangeDataFeed' = 'true'"},
    "appendOnly": {"tblprops": "'delta.appendOnly' = 'true'"},
    "timestampNtz": {"extra": ", at TIMESTAMP_NTZ"},
    "vacuumProtocolCheck": {"tblprops": "'delta.feature.vacuumProtocolCheck' = 'supported'"},
    "invariants-notNull": {"name": "STRING NOT NULL"},
    "inCommitTimestamp": {"tblprops": "'delta.enableInCommitTimestamps' = 'true'"},
}


def create_statement(table: str, spec: dict[str, str]) -> str:
    columns = f"id {spec.get('id', 'BIGINT')}, name {spec.get('name', 'STRING')}"
    props = f" TBLPROPERTIES ({spec['tblprops']})" if "tblprops" in spec else ""
    return (
        f"CREATE TABLE delta.`{table}` ({columns}{spec.get('extra', '')}) USING delta "
        f"{spec.get('clauses', '')}{props}"
    )


def feature(spark: Any, root: str, name: str) -> dict[str, Any]:
    """A table delta-spark creates with the feature, a row written by delta-spark itself, then
    eosink's delta-spark engine: a batch, the same batch again (skipped), the next batch; a
    batch that breaks the table's constraints; Delta's reads of the result."""
    import datetime as dt

    from eosink_delta import delta_spark

    spec = FEATURES[name]
    table = os.path.join(root, "table")
    t = f"delta.`{table}`"
    try:
        spark.sql(create_statement(table, spec))
        if "after" in spec:
            spark.sql(spec["after"].format(t=t))
    except Exception as error:  # noqa: BLE001 - cannot be created with the jars at hand
        return {"created": False, "error": error_of(error)}
    timestamp = ", at timestamp_ntz" if "TIMESTAMP_NTZ" in spec.get("extra", "") else ""
    schema = f"id {'int' if spec.get('id') == 'INT' else 'long'}, name string{timestamp}"

    def frame(ids: list[int | None], names: list[str | None]) -> Any:
        extra = (dt.datetime(2026, 1, 2, 3, 4, 5),) if timestamp else ()
        return spark.createDataFrame([(i, n, *extra) for i, n in zip(ids, names)], schema)

    def write(df: Any, version: int) -> dict[str, Any]:
        return outcome(
            lambda: delta_spark.write_batch(
                df, table, writer_id="w", version=version, engine="delta-spark"
            )
        )

    steps = {
        "v0": write(frame([1, 2], ["a", "b"]), 0),
        "v0_again": write(frame([1, 2], ["a", "b"]), 0),
    }
    if "checkpoint" in spec:
        spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")
        steps["v1_after_checkpoint"] = write(frame([3], ["c"]), 1)
        steps["v1_again"] = write(frame([3], ["c"]), 1)
    if name == "checkConstraint":
        steps["violating"] = write(frame([-5], ["x"]), 10)
    if name == "invariants-notNull":
        steps["violating"] = write(frame([5], [None]), 10)
    result: dict[str, Any] = {"created": True, "table": table, "steps": steps}
    if name == "uniform":  # Iceberg's metadata, written beside the Delta log
        result["iceberg_metadata"] = os.path.isdir(os.path.join(table, "metadata"))

    read = spark.read.format("delta").load(table)
    if name == "rowTracking":
        read = read.select("*", "_metadata.row_id")
    result["rows"] = rows_of(read)
    if name == "changeDataFeed":
        changes = spark.read.format("delta").option("readChangeFeed", "true")
        changes = changes.option("startingVersion", 1).load(table)
        result["changes"] = rows_of(changes.select("id", "_change_type"))
    result["settings"] = session_settings(spark)
    return result


SCENARIOS: dict[str, Callable[[Any, str], dict[str, Any]]] = {
    "upsert_stream": upsert_stream,
    "upsert_batches": upsert_batches,
    "upsert_settings": upsert_settings,
    "upsert_concurrent": upsert_concurrent,
    "update_aggregation": update_aggregation,
    "output_modes": output_modes,
}


def run(spark: Any, name: str, folder: str) -> dict[str, Any]:
    if name.startswith("feature:"):
        return feature(spark, folder, name.split(":", 1)[1])
    return SCENARIOS[name](spark, folder)
