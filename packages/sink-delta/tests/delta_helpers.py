"""Driving the delta sink without Spark, and reading what the Delta log holds."""

from __future__ import annotations

import glob
import json
import os
from functools import partial
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from eosink_delta.proof import PROOF_KEY

from eosink.plugin import Proof
from eosink.testing.local import numbered_rows, run_local

QUERY = "00000000-0000-4000-8000-00000000000a"


rows = numbered_rows
#: ``run(sink, batch_id, parts=None, *, writer_id="w", kind="stream", mode="append",
#: query_id=QUERY, plugins=())``: one batch through the protocol in this process.
run = partial(run_local, sink_name="delta", query_id=QUERY)


def log_actions(table: str) -> list[tuple[int, dict[str, Any]]]:
    """Every action of every commit JSON in the log, with its table version."""
    out = []
    for name in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        version = int(os.path.basename(name).split(".")[0])
        with open(name) as f:
            out.extend((version, json.loads(line)) for line in f if line.strip())
    return out


def txns(table: str) -> list[tuple[str, int]]:
    return [(a["txn"]["appId"], a["txn"]["version"]) for _, a in log_actions(table) if "txn" in a]


def log_version(table: str) -> int:
    return len(glob.glob(os.path.join(table, "_delta_log", "*.json"))) - 1


def commit_elsewhere(path: str, batch_id: int, writer_id: str = "w") -> None:
    """Another process's attempt of a batch (its rows, txn and proof), committed by delta-rs."""
    proof = Proof(writer_id=writer_id, batch_id=batch_id, query_id=QUERY, rows=5)
    write_deltalake(
        path,
        pa.Table.from_batches([rows(batch_id)]),
        mode="append",
        commit_properties=CommitProperties(
            app_transactions=[Transaction(writer_id, batch_id)],
            custom_metadata={PROOF_KEY: proof.to_json()},
        ),
    )


def duckdb_with_delta() -> Any:
    """A DuckDB connection with the ``delta`` extension (``delta_scan``) loaded from the
    ``duckdb-extension-delta`` wheel, not downloaded at run time."""
    import duckdb
    import duckdb_extension_delta

    folder = os.path.dirname(duckdb_extension_delta.__file__)
    extension = glob.glob(os.path.join(folder, "**", "*.duckdb_extension"), recursive=True)[0]
    con = duckdb.connect()
    con.execute(f"LOAD '{extension}'")
    return con


#: A session of Delta's Spark connector (the reference engine, eosink.testing.reference_spark):
#: its SQL extension and catalog, as Delta's documentation sets them up, sized for one small
#: local JVM: the table's state rebuilt in one task, not 50 (a read of a few rows took 20-50 s
#: on a loaded 2-core machine), and VACUUM's listing in 2 tasks, not 10,000 (30-40 s a VACUUM).
DELTA_SESSION = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}
#: The Spark Delta's connector 4.4 is built for (3rdparty/jvm/spark-envs.txt).
DELTA_SPARK_VERSION = "4.2.0"
