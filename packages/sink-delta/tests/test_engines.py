"""Engine choice, and the delta-spark engine's shared parts against an emulated Delta writer.

Without a JVM (Delta's own connector runs in test_jvm_delta_*.py), ``EmulatedDeltaWriter`` plays
``df.write.format("delta")`` with Delta's documented txn semantics (a version at or below the
app id's last one is ignored; the txn carries ``lastUpdated``; ``userMetadata`` lands in
``commitInfo``), committing through delta-rs. What is tested is eosink's side: the identity,
the skip rule, the proof read back through delta-rs, the checks before writing.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from eosink_delta import delta_spark as engines
from eosink_delta.sink import DeltaSink, read_table
from delta_helpers import QUERY, rows, run, txns

from eosink import CheckpointMismatchError
from eosink.plugin import BatchContext, ConfigurationError


class EmulatedDeltaWriter:
    def __init__(self, table: pa.Table, calls: list):
        self.table, self.calls, self.options, self.partitions = table, calls, {}, []
        self.save_mode = "append"

    def format(self, name):
        assert name == "delta"
        return self

    def option(self, key, value):
        self.options[key] = value
        return self

    def mode(self, mode):
        self.save_mode = mode
        return self

    def partitionBy(self, *columns):  # noqa: N802 - Spark's name
        self.partitions = list(columns)
        return self

    def save(self, uri):
        self.calls.append(dict(self.options))
        app, version = self.options["txnAppId"], int(self.options["txnVersion"])
        exists = DeltaTable.is_deltatable(uri)
        if exists and (DeltaTable(uri).transaction_version(app) or -1) >= version:
            return  # Delta ignores it
        write_deltalake(
            uri,
            self.table,
            mode="overwrite" if self.save_mode == "overwrite" else "append",
            partition_by=self.partitions or None,
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app, version, int(time.time() * 1000))],
                custom_metadata={"userMetadata": self.options["userMetadata"]},
            ),
        )


class EmulatedDataFrame:
    def __init__(self, table: pa.Table, jars: bool = True):
        self.table, self.calls = table, []
        self.sparkSession = EmulatedSession(jars)

    @property
    def write(self):
        return EmulatedDeltaWriter(self.table, self.calls)


class EmulatedSession:
    def __init__(self, jars: bool):
        self.sparkContext = self
        self._jvm = self if jars else None
        self.org = self.apache = self.spark = self.util = self.Utils = self

    def classForName(self, name, initialize, no_spark_class_loader):  # noqa: N802 - Spark's
        """Spark's ``Utils.classForName``: the context or Spark class loader, which holds the
        jars Spark loaded itself (test_jvm_delta_spark_engine.py runs the real one)."""
        assert name == engines.DELTA_CLASS and no_spark_class_loader is False


def df_of(batch_id: int, jars: bool = True) -> EmulatedDataFrame:
    return EmulatedDataFrame(pa.Table.from_batches([rows(batch_id)]), jars)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "table")


def test_engine_choice():
    assert engines.choose_engine(EmulatedSession(jars=True), "auto") == "delta-spark"
    assert engines.choose_engine(EmulatedSession(jars=False), "auto") == "delta-rs"
    assert engines.choose_engine(EmulatedSession(jars=False), "delta-rs") == "delta-rs"
    with pytest.raises(ConfigurationError, match="jars are not on this Spark's classpath"):
        engines.choose_engine(EmulatedSession(jars=False), "delta-spark")


def test_sink_with_delta_spark_engine_names_the_front_door(path):
    """The error names front doors that exist, by their import path."""
    with pytest.raises(ConfigurationError, match="eosink_delta.delta_spark.foreach_batch") as err:
        run(DeltaSink(path=path, engine="delta-spark"), 0)
    assert "eosink_delta.delta_spark.write_batch" in str(err.value)
    assert callable(engines.foreach_batch) and callable(engines.write_batch)


def test_seed_002_through_delta_spark(path):
    jobs = [("dailyETL", 23424, 1), ("dailyETL", 23422, 2), ("anotherETL", 23424, 1)]
    outcomes = [
        engines.write_batch(df_of(data), path, writer_id=w, version=v, engine="delta-spark")
        for w, v, data in jobs
    ]
    assert [o.status for o in outcomes] == ["committed", "skipped", "committed"]
    assert txns(path) == [("dailyETL", 23424), ("anotherETL", 23424)]
    assert len(read_table(path)) == 10


def test_delta_spark_stream_records_and_reads_the_proof(path):
    opts = DeltaSink(path=path, engine="delta-spark").options
    ctx = BatchContext(sink="delta", writer_id="w", batch_id=0, query_id=QUERY, checkpoint="/c")
    df = df_of(0)
    assert engines.write_with_delta_spark(df, ctx, opts).status == "committed"
    assert (df.calls[0]["txnAppId"], df.calls[0]["txnVersion"]) == ("w", "0")
    proof = DeltaSink(path=path).is_committed(ctx=ctx)
    assert (proof.batch_id, proof.query_id, proof.checkpoint) == (0, QUERY, "/c")
    replay = df_of(0)
    assert engines.write_with_delta_spark(replay, ctx, opts).status == "skipped"
    assert replay.calls == []  # skipped before Spark runs anything
    other = BatchContext(sink="delta", writer_id="w", batch_id=0, query_id="other-query")
    with pytest.raises(CheckpointMismatchError, match="new writer id"):
        engines.write_with_delta_spark(df_of(0), other, opts)
    # The delta-rs engine continues the same writer's batches on the same table.
    assert run(DeltaSink(path=path), 1).status == "committed"
    assert txns(path) == [("w", 0), ("w", 1)]


def test_delta_spark_refuses_a_short_txn_retention(path):
    """Both engines stamp their txn with lastUpdated: both refuse a retention under 7 days."""
    DeltaTable.create(
        path,
        rows(0).schema,
        configuration={"delta.setTransactionRetentionDuration": "interval 1 hours"},
    )
    opts = DeltaSink(path=path, engine="delta-spark").options
    ctx = BatchContext(sink="delta", writer_id="w", batch_id=0, kind="batch")
    df = df_of(0)
    with pytest.raises(ConfigurationError, match="at least 7 days"):
        engines.write_with_delta_spark(df, ctx, opts)
    assert df.calls == []
    with pytest.raises(ConfigurationError, match="at least 7 days"):
        run(DeltaSink(path=path), 0)


def test_delta_spark_writes_under_a_long_txn_retention(path):
    DeltaTable.create(
        path,
        rows(0).schema,
        configuration={"delta.setTransactionRetentionDuration": "interval 7 days"},
    )
    opts = DeltaSink(path=path, engine="delta-spark").options
    ctx = BatchContext(sink="delta", writer_id="w", batch_id=0, kind="batch")
    engines.write_with_delta_spark(df_of(0), ctx, opts)
    assert txns(path) == [("w", 0)]


def test_delta_spark_checks_partitions_and_paths(path, tmp_path):
    run(DeltaSink(path=path, partition_by=["name"]), 0)
    opts = DeltaSink(path=path, engine="delta-spark", partition_by=["id"]).options
    ctx = BatchContext(sink="delta", writer_id="w2", batch_id=0, kind="batch")
    with pytest.raises(ConfigurationError, match="partitionBy is \\[id\\]"):
        engines.write_with_delta_spark(df_of(0), ctx, opts)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "x.csv").write_text("1")
    with pytest.raises(ConfigurationError, match="not a Delta table"):
        engines.write_with_delta_spark(
            df_of(0), ctx, DeltaSink(path=str(plain), engine="delta-spark").options
        )


def test_foreach_batch_auto_without_jars_uses_delta_rs(path, monkeypatch):
    """The delta-rs branch delegates to the core's foreachBatch front door."""
    calls: list[Any] = []

    class CoreWriter:
        outcomes: list = []

        def __call__(self, df, batch_id):
            calls.append(batch_id)
            self.outcomes.append(batch_id)

    monkeypatch.setattr(
        engines.eosink,
        "foreach_batch",
        lambda sink, **kw: calls.append((sink.options.engine, kw["writer_id"])) or CoreWriter(),
    )
    writer = engines.foreach_batch(path, writer_id="w")
    writer(df_of(0, jars=False), 0)
    assert writer.engine == "delta-rs"
    assert calls == [("delta-rs", "w"), 0]
