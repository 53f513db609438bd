"""The end-to-end Spark scenarios every sink must pass, as an abstract pytest class.

A sink's end-to-end test module subclasses :class:`SparkEndToEnd` (as fsspec's abstract test
classes are used), names its sink and says how an independent reader reads the target back;
the scenarios run as the subclass's test methods, on a ``spark`` fixture the sink's tests
provide::

    class TestSqliteEndToEnd(SparkEndToEnd):
        sink_name = "sqlite"

        def read_ids(self, target):
            return [r["id"] for r in read_rows(target)]

        def assert_batches_recorded(self, target, writer_id, batches):
            assert sorted(p["batch_id"] for p in read_rows(target, "_eosink_commits")) == ...

Each scenario crashes a query (mid-batch, or after a commit Spark never recorded), restarts it
from its checkpoint, and checks that the sink holds every source row once
(:mod:`eosink.testing.replay` is the harness). Sink-specific checks hang on the ``check_*``
methods, which do nothing unless overridden.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import eosink
from eosink.testing.faults import FaultPlugin
from eosink.testing.replay import (
    FILES,
    ROWS_PER_FILE,
    SCHEMA,
    arm,
    assert_exactly,
    crash_once,
    json_stream,
    run_twice,
    write_json_source,
)
from eosink.testing.replay import default_row as _default_row


class SparkEndToEnd:
    """The scenarios; a subclass sets :attr:`sink_name` and implements :meth:`read_ids` and
    :meth:`assert_batches_recorded`."""

    #: The sink's entry-point name: ``eosink.sink(sink_name, ...)`` and format ``eosink-<name>``.
    sink_name: str
    #: The source's schema and row maker (:func:`eosink.testing.replay.write_json_source`).
    schema: str = SCHEMA
    rows_per_file: int = ROWS_PER_FILE

    # -- what a subclass provides --------------------------------------------------------------

    def row(self, n: int, i: int) -> dict[str, Any]:
        """Row ``i`` of source file ``n``; must hold the columns of :attr:`schema`."""
        return _default_row(n, i)

    def target(self, tmp_path: os.PathLike[str]) -> str:
        """Where the sink writes, under the test's temporary folder."""
        return os.path.join(tmp_path, "out")

    def sink(self, target: str) -> Any:
        """The sink writing to ``target``."""
        return eosink.sink(self.sink_name, path=target)

    def data_source_options(self) -> dict[str, str]:
        """Options the data-source scenario adds to ``writerId`` and ``path``."""
        return {}

    def read_ids(self, target: str) -> list[int]:
        """The ``id`` of every row the target holds, read by a reader independent of the sink."""
        raise NotImplementedError

    def assert_batches_recorded(self, target: str, writer_id: str, batches: list[int]) -> None:
        """The target records exactly ``batches`` (in order) as committed by ``writer_id``."""
        raise NotImplementedError

    def check_foreach_batch(self, target: str) -> None:
        """Sink-specific checks after the foreachBatch crash-and-restart scenario."""

    def check_data_source(self, target: str) -> None:
        """Sink-specific checks after the data-source crash-and-restart scenario."""

    def check_batch_versions(self, target: str) -> None:
        """Sink-specific checks after the batch-versions scenario."""

    @pytest.fixture
    def session_settings(self, spark: Any) -> Any:
        """Spark session settings the crash-and-restart scenarios run under (none by default)."""
        yield

    # -- helpers -------------------------------------------------------------------------------

    def write_source(self, folder: str) -> list[int]:
        """Write the source files (:func:`eosink.testing.replay.write_json_source`) of
        :meth:`row`'s rows; every id written."""
        return write_json_source(folder, rows_per_file=self.rows_per_file, row=self.row)

    def crashing_stream(self, spark: Any, tmp_path: Any, marker: str) -> Any:
        """The source under ``tmp_path/in`` as a stream that fails once while ``marker``
        exists."""
        return json_stream(spark, str(tmp_path / "in"), crash_once(marker), schema=self.schema)

    # -- the scenarios -------------------------------------------------------------------------

    def test_foreach_batch_crashed_mid_batch_and_restarted(self, spark, tmp_path, session_settings):
        expected = self.write_source(str(tmp_path / "in"))
        marker = arm(tmp_path / "armed")
        target = self.target(tmp_path)
        writer = eosink.foreach_batch(self.sink(target), writer_id="orders")

        def start():
            return (
                self.crashing_stream(spark, tmp_path, marker)
                .writeStream.foreachBatch(writer)
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(availableNow=True)
                .start()
            )

        run_twice(start)
        assert not os.path.exists(marker)
        assert_exactly(self.read_ids(target), expected)
        self.assert_batches_recorded(target, "orders", list(range(FILES)))
        assert writer.committed == FILES
        self.check_foreach_batch(target)

    def test_data_source_crashed_mid_batch_and_restarted(self, spark, tmp_path, session_settings):
        expected = self.write_source(str(tmp_path / "in"))
        marker = arm(tmp_path / "armed")
        target = self.target(tmp_path)
        assert f"eosink-{self.sink_name}" in eosink.register_data_sources(spark)

        def start():
            return (
                self.crashing_stream(spark, tmp_path, marker)
                .writeStream.format(f"eosink-{self.sink_name}")
                .option("writerId", "orders")
                .option("path", target)
                .options(**self.data_source_options())
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(availableNow=True)
                .start()
            )

        run_twice(start)
        assert_exactly(self.read_ids(target), expected)
        self.assert_batches_recorded(target, "orders", list(range(FILES)))
        self.check_data_source(target)

    def test_foreach_batch_crash_after_commit_is_skipped_on_replay(self, spark, tmp_path):
        """Committed, but Spark never recorded it: the replay is skipped, not written twice."""
        expected = self.write_source(str(tmp_path / "in"))
        target = self.target(tmp_path)
        writer = eosink.foreach_batch(
            self.sink(target),
            writer_id="orders",
            plugins=[FaultPlugin("after_commit", batch=1, times=1)],
        )

        def start():
            return (
                spark.readStream.schema(self.schema)
                .option("maxFilesPerTrigger", 1)
                .json(str(tmp_path / "in"))
                .writeStream.foreachBatch(writer)
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(availableNow=True)
                .start()
            )

        from pyspark.errors import StreamingQueryException

        with pytest.raises(StreamingQueryException, match="after commit"):
            start().awaitTermination()
        start().awaitTermination()
        assert_exactly(self.read_ids(target), expected)
        self.assert_batches_recorded(target, "orders", list(range(FILES)))
        assert [o.status for o in writer.outcomes].count("skipped") == 1

    def test_batch_job_versions_through_both_apis(self, spark, tmp_path):
        """Delta's txnAppId/txnVersion example, with Spark and any sink: dailyETL 23424 writes,
        23422 is skipped (and so is 23424 again, through the data source), anotherETL 23424
        writes."""
        target = self.target(tmp_path)
        df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string")
        sink = self.sink(target)
        statuses = [
            eosink.write_batch(df, sink, writer_id="dailyETL", version=v)[0].status
            for v in (23424, 23422)
        ]
        eosink.register_data_sources(spark)
        for writer_id, version in (("dailyETL", 23424), ("anotherETL", 23424)):
            (
                df.write.format(f"eosink-{self.sink_name}")
                .option("writerId", writer_id)
                .option("version", version)
                .option("path", target)
                .mode("append")
                .save()
            )
        assert statuses == ["committed", "skipped"]
        assert sorted(self.read_ids(target)) == [1, 1, 2, 2, 3, 3]
        self.check_batch_versions(target)
