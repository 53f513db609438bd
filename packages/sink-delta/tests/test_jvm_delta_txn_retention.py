"""eosink's proof under Delta's txn retention, judged by Delta's own Spark connector.

A table written by eosink-delta; a user sets ``delta.setTransactionRetentionDuration`` (the
documented companion of idempotent writes) with delta-spark, which then writes a checkpoint.
Delta's log replay keeps a ``txn`` only if its ``lastUpdated`` is newer than the retention's
cut-off (``InMemoryLogReplay.getTransactions``): a txn without one is dropped at once, and the
query's replayed batch is then written a second time.
"""

from __future__ import annotations

import glob
import os

import pyarrow.parquet as pq
import eosink
from eosink_delta.sink import DeltaSink
from eosink_delta import delta_spark as engines

RETENTION = "delta.setTransactionRetentionDuration"


def checkpoint_txns(table: str) -> list[tuple[str, int]]:
    """The txns of the table's newest checkpoint (whoever wrote it)."""
    parts = sorted(glob.glob(os.path.join(table, "_delta_log", "*.checkpoint*.parquet")))
    assert parts, "no checkpoint written"
    newest = os.path.basename(parts[-1]).split(".")[0]
    found = []
    for part in parts:
        if os.path.basename(part).startswith(newest):
            for row in pq.read_table(part, columns=["txn"]).column("txn").to_pylist():
                if row is not None:
                    found.append((row["appId"], row["version"]))
    return sorted(found)


def set_retention_and_checkpoint(spark, table: str, retention: str) -> None:
    """What the user does with delta-spark: set the retention; delta-spark's checkpoint follows
    (every commit of its own here, ``delta.checkpointInterval=1``)."""
    spark.sql(
        f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES "
        f"('{RETENTION}' = '{retention}', 'delta.checkpointInterval' = '1')"
    )


def test_txn_survives_delta_spark_checkpoint_and_replay_is_skipped(delta_runs, tmp_path):
    target = str(tmp_path / "table")
    sink = DeltaSink(path=target)
    df = delta_runs.createDataFrame([(i,) for i in range(8)], "id long")
    for version in range(3):
        [outcome] = eosink.write_batch(df, sink, writer_id="job", version=version)
        assert outcome.status == "committed"
    set_retention_and_checkpoint(delta_runs, target, "interval 30 days")
    assert checkpoint_txns(target) == [("job", 2)]
    # The query's replay of its last batch (a restart after a crash before Spark's commit log).
    [replayed] = eosink.write_batch(df, sink, writer_id="job", version=2)
    assert replayed.status == "skipped"
    assert delta_runs.read.format("delta").load(target).count() == 24


def test_txn_survives_delta_spark_checkpoint_complete_mode(delta_runs, tmp_path):
    target = str(tmp_path / "table")
    sink = DeltaSink(path=target)
    df = delta_runs.createDataFrame([(i,) for i in range(8)], "id long")
    for version in range(2):
        [outcome] = eosink.write_batch(df, sink, writer_id="job", version=version, mode="complete")
        assert outcome.status == "committed"
    set_retention_and_checkpoint(delta_runs, target, "interval 30 days")
    assert checkpoint_txns(target) == [("job", 1)]
    [replayed] = eosink.write_batch(df, sink, writer_id="job", version=1, mode="complete")
    assert replayed.status == "skipped"


def test_delta_spark_engine_keeps_its_proof_under_retention(delta_runs, tmp_path):
    target = str(tmp_path / "table")
    df = delta_runs.createDataFrame([(i,) for i in range(8)], "id long")
    for version in range(2):
        outcome = engines.write_batch(df, target, writer_id="job", version=version)
        assert outcome.status == "committed"
    set_retention_and_checkpoint(delta_runs, target, "interval 30 days")
    assert checkpoint_txns(target) == [("job", 1)]
    assert engines.write_batch(df, target, writer_id="job", version=1).status == "skipped"
    assert engines.write_batch(df, target, writer_id="job", version=2).status == "committed"
    assert delta_runs.read.format("delta").load(target).count() == 24
