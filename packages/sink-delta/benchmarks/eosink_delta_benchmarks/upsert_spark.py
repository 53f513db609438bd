"""Keyed upserts into Delta through Spark, beside the MERGE users write in foreachBatch.

Delta's documented exactly-once MERGE sets ``txnAppId``/``txnVersion`` in the session around
the statement (settings that leak into every later statement of the session and are shared
between its queries); eosink-delta's ``mode="upsert"`` scopes the txn to its own commit, on
Delta's engine or on delta-rs. All three stream the same change feed
(``eosink.testing.change_feed``) in one process of Spark 4.2 with Delta 4.4's jars
(:mod:`eosink_delta_benchmarks.upsert_spark_child`); per batch, Spark's ``addBatch`` time.

    ./pants run packages/sink-delta/benchmarks:upsert_spark -- --batches 60 --rows 2000
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from typing import Any

import structlog

from eosink.testing.change_feed import print_result
from eosink.testing.spark_child import run_scenarios, scenario
from eosink_delta_benchmarks import upsert_spark_child as child

#: The Spark line Delta 4.4's connector is built for.
SPARK_VERSION = "4.2.0"
#: Delta's session, as its documentation sets one up, its table state rebuilt in one task
#: (``snapshotPartitions``; Delta's default of 50 tasks costs a local 2-core JVM seconds a
#: batch, for each of the three paths: section 6 says the same of its Delta runs).
SESSION = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.showConsoleProgress": "false",
}
ANCHOR, PATHS = child.ANCHOR, (child.ANCHOR, child.SPARK_ENGINE, child.RS_ENGINE)


def measure(folder: str, batches: int, rows: int) -> dict[str, Any]:
    """Seconds per batch of each path (``seconds``), the anchor's name, the table's rows."""
    name = f"upsert:{batches}:{rows}"
    runs = run_scenarios(child.__file__, SPARK_VERSION, [name], folder, ["delta"], SESSION)
    result = scenario(runs, name)
    return {"seconds": result["batch_seconds"], "anchor": ANCHOR, "rows": result["rows"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--rows", type=int, default=2000, help="rows per batch")
    parser.add_argument("--window", type=int, default=10, help="batches per median")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    folder = tempfile.mkdtemp(prefix="eosink-delta-upsert-spark-", dir=args.dir)
    try:
        result = measure(folder, args.batches, args.rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print_result(result, args.batches, args.rows, args.window)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
