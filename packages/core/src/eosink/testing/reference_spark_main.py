"""The process of :mod:`eosink.testing.reference_spark`: runs in a Python environment of
another Spark (``build-support/spark-env``), where eosink is not installed, so it imports
pyspark and the standard library only.

    python reference_spark_main.py REQUEST.json RESULT.json

The request holds the session's settings (``conf``, ``spark.jars`` among them) and the steps,
run in order in one session: ``{"sql": ...}``, ``{"read": {"format", "path", "where",
"options"}}`` or ``{"stream": {"format", "schema", "source", "options", "sink", "table",
"checkpoint"}}`` (:func:`run_stream`). The result holds, per step, its rows as plain JSON values,
or its error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import sys
import tempfile
from typing import Any


def plain(value: Any) -> Any:
    """A value of a Row as JSON holds it: decimals as text (exact), dates and timestamps in ISO
    form (the session's time zone is UTC), binary as hex, NaN and the infinities by name."""
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=False)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def session(conf: dict[str, str], java_options: str) -> Any:
    from pyspark.sql import SparkSession

    scratch = tempfile.mkdtemp(prefix="eosink-reference-")
    java_options = f"-Duser.home={scratch} -Duser.timezone=UTC {java_options}".strip()
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("eosink-reference")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", scratch)
        .config("spark.driver.extraJavaOptions", java_options)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_stream(spark: Any, stream: dict[str, Any]) -> list[dict[str, Any]]:
    """A streaming query of the engine's own sink, run to the end of its input: files of
    ``format`` (read with ``schema`` and ``options``, e.g. ``maxFilesPerTrigger``) from the
    folder ``source``, written by ``writeStream.format(sink)`` into the catalog table ``table``,
    its checkpoint at ``checkpoint``, with ``trigger(availableNow=True)``: it processes what its
    checkpoint has not (a batch the checkpoint's offsets hold but its commits do not, again
    first), then stops. Its rows: one per micro-batch it ran (the query's id and run id, the
    batch id, its input rows); a failed query's error is the step's error."""
    reader = spark.readStream.format(stream["format"]).options(**stream.get("options", {}))
    if stream.get("schema"):
        reader = reader.schema(stream["schema"])
    query = (
        reader.load(stream["source"])
        .writeStream.format(stream["sink"])
        .outputMode("append")
        .option("checkpointLocation", stream["checkpoint"])
        .trigger(availableNow=True)
        .toTable(stream["table"])
    )
    query.awaitTermination()
    return [
        {
            "id": str(query.id),
            "runId": str(query.runId),
            "batchId": progress.batchId,
            "numInputRows": progress.numInputRows,
        }
        for progress in query.recentProgress
    ]


def run_step(spark: Any, step: dict[str, Any]) -> list[dict[str, Any]]:
    if "stream" in step:
        return run_stream(spark, step["stream"])
    if "sql" in step:
        frame = spark.sql(step["sql"])
    else:
        read = step["read"]
        frame = spark.read.format(read["format"]).options(**read.get("options", {}))
        frame = frame.load(read["path"])
        if read.get("where"):
            frame = frame.where(read["where"])
    return [plain(row) for row in frame.collect()]


def main(request_path: str, result_path: str) -> None:
    with open(request_path) as f:
        request = json.load(f)
    archive_to = request.get("archive_to")
    partial = f"{archive_to}.{os.getpid()}.partial"
    writes = f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off" if archive_to else ""
    spark = session(request["conf"], f"{request.get('java_options', '')} {writes}")
    results = []
    for step in request["steps"]:
        try:
            results.append({"rows": run_step(spark, step)})
        except Exception as error:  # noqa: BLE001 - handed back, the caller judges it
            results.append({"error": f"{type(error).__name__}: {error}"[:4000]})
    with open(result_path, "w") as f:
        json.dump({"version": spark.version, "results": results}, f)
    spark.stop()
    if archive_to:
        write_archive(partial, archive_to)


def write_archive(partial: str, archive: str) -> None:
    """After ``spark.stop()``: let the JVM exit cleanly (the gateway exits it at its stdin's
    end), which writes its classes to ``partial``, and publish that as ``archive`` only then:
    a truncated archive would crash the JVMs that map it (the JVM is spark-submit's process,
    which execs java; see :mod:`eosink.testing.spark_class_archive`)."""
    from pyspark import SparkContext

    jvm = SparkContext._gateway.proc
    jvm.stdin.close()
    if jvm.wait(timeout=240) == 0 and os.path.exists(partial):
        os.replace(partial, archive)
    elif os.path.exists(partial):
        os.remove(partial)


if __name__ == "__main__":
    main(*sys.argv[1:3])
