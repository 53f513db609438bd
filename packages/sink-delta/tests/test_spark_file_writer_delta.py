"""Spark's own Parquet writer writes a DataFrame batch's files; delta-rs commits them.

Read back by delta-rs (an independent reader), with casts to the table's types, NOT NULL
checks, partition values, stats, a crash between staging and commit, and the fallbacks.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from delta_helpers import log_actions, log_version, txns

import eosink
from eosink import ConfigurationError
from eosink.testing.faults import FaultPlugin, InjectedCrash, assert_leftover_part_file_refused


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


def batch(spark, start: int, end: int):
    return spark.range(start, end).selectExpr(
        "cast(id as int) as id",
        "concat('c/', cast(id % 3 as string)) as country",
        "date_add(date'2024-01-01', cast(id % 2 as int)) as day",
        "timestamp_seconds(1700000000 + id) as ts",
    )


def data_files(path: str) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(folder, name), path)
        for folder, _dirs, names in os.walk(path)
        if "_delta_log" not in folder
        for name in names
        if name.endswith(".parquet")
    )


def spark_wrote(path: str) -> set[bool]:
    return {
        b"org.apache.spark.version" in (pq.read_metadata(os.path.join(path, f)).metadata or {})
        for f in data_files(path)
    }


def test_partitioned_batches_read_back_by_delta_rs(spark, tmp_path):
    path = str(tmp_path / "table")
    sink = eosink.sink("delta", path=path, partition_by=["country", "day"])
    for version, (start, end) in enumerate([(0, 40), (40, 100)], start=1):
        (outcome,) = eosink.write_batch(
            batch(spark, start, end), sink, writer_id="job", version=version
        )
        assert (outcome.status, outcome.rows) == ("committed", end - start)
    table = DeltaTable(path).to_pyarrow_table()
    assert sorted(table.column("id").to_pylist()) == list(range(100))
    assert set(table.column("country").to_pylist()) == {"c/0", "c/1", "c/2"}
    assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert spark_wrote(path) == {True}
    assert txns(path) == [("job", 1), ("job", 2)]
    adds = [a["add"] for _v, a in log_actions(path) if "add" in a]
    assert {a["partitionValues"]["country"] for a in adds} == {"c/0", "c/1", "c/2"}
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 100
    assert all("minValues" in json.loads(a["stats"]) for a in adds)
    assert all(f.startswith("country=c%2F") for f in data_files(path))  # the arrow path's layout
    assert not os.listdir(os.path.join(path, "_eosink_staging"))


def test_stream_types_are_cast_to_the_tables(spark, tmp_path):
    path = str(tmp_path / "table")
    DeltaTable.create(path, pa.schema([("id", pa.int64()), ("country", pa.string())]))
    df = batch(spark, 0, 10).select("id", "country")  # id is an int, the table's a long
    eosink.write_batch(df, eosink.sink("delta", path=path), writer_id="job", version=1)
    assert spark_wrote(path) == {True}
    table = DeltaTable(path).to_pyarrow_table()
    assert table.schema.field("id").type == pa.int64()
    assert sorted(table.column("id").to_pylist()) == list(range(10))


def test_nulls_in_a_not_null_column_commit_nothing(spark, tmp_path):
    path = str(tmp_path / "table")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("country", pa.string())])
    DeltaTable.create(path, schema)
    df = spark.range(0, 10).selectExpr("if(id = 7, null, id) as id", "'x' as country")
    with pytest.raises(ConfigurationError, match="'id' is NOT NULL"):
        eosink.write_batch(df, eosink.sink("delta", path=path), writer_id="job", version=1)
    assert log_version(path) == 0 and data_files(path) == []


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_crash_around_the_commit(spark, tmp_path, point):
    path = str(tmp_path / "table")
    sink = eosink.sink("delta", path=path)
    df = batch(spark, 0, 30)
    with pytest.raises(InjectedCrash):
        eosink.write_batch(df, sink, writer_id="job", version=1, plugins=[FaultPlugin(point)])
    if point == "before_commit":
        assert data_files(path) == []  # abort removed the staged files
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert outcome.status == ("committed" if point == "before_commit" else "skipped")
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == list(range(30))
    assert txns(path) == [("job", 1)]


def test_timestamp_partitions_fall_back_to_the_arrow_writer(spark, tmp_path):
    path = str(tmp_path / "table")
    df = batch(spark, 0, 10)
    eosink.write_batch(
        df, eosink.sink("delta", path=path, partition_by=["ts"]), writer_id="w", version=1
    )
    assert spark_wrote(path) == {False}
    assert DeltaTable(path).to_pyarrow_table().num_rows == 10
    forced = eosink.sink(
        "delta", path=str(tmp_path / "t2"), partition_by=["ts"], file_writer="spark"
    )
    with pytest.raises(ConfigurationError, match="file_writer='arrow'"):
        eosink.write_batch(df, forced, writer_id="w", version=1)


def test_stale_staging_of_a_killed_driver_is_removed(tmp_path):
    from eosink_delta import remove_stale_staging

    staging = tmp_path / "table" / "_eosink_staging"
    old, live = staging / "a1" / "country=x", staging / "a2"
    old.mkdir(parents=True)
    live.mkdir()
    (old / "part-00000-x.c000.snappy.parquet").write_bytes(b"PAR1")
    (live / "part-00000-y.c000.snappy.parquet").write_bytes(b"PAR1")
    then = 1_000_000_000
    for p in (old / "part-00000-x.c000.snappy.parquet", old, old.parent):
        os.utime(p, (then, then))
    table = str(tmp_path / "table")
    assert remove_stale_staging(table) == [str(old.parent)]  # a dry run by default
    assert old.exists()
    remove_stale_staging(table, dry_run=False)
    assert sorted(os.listdir(staging)) == ["a2"]


def test_checkpoints_at_the_tables_interval(spark, tmp_path):
    """Spark's file writer commits through the same delta-rs commit: checkpoints included."""
    path = str(tmp_path / "table")
    sink = eosink.sink("delta", path=path, file_writer="spark")
    eosink.write_batch(batch(spark, 0, 10), sink, writer_id="job", version=1)  # versions 0, 1
    DeltaTable(path).alter.set_table_properties({"delta.checkpointInterval": "2"})  # 2
    for version in (2, 3):  # table versions 3 (due: (3 + 1) % 2 == 0) and 4
        eosink.write_batch(
            batch(spark, version * 10, version * 10 + 10), sink, writer_id="job", version=version
        )
    assert spark_wrote(path) == {True}
    checkpoints = sorted(
        n for n in os.listdir(os.path.join(path, "_delta_log")) if "checkpoint." in n
    )
    assert checkpoints == [f"{3:020d}.checkpoint.parquet"]
    assert DeltaTable(path).transaction_version("job") == 3


def test_a_part_file_no_committed_attempt_wrote_is_not_committed(spark, tmp_path):
    path = str(tmp_path / "table")
    sink = eosink.sink("delta", path=path, file_writer="spark")
    df = batch(spark, 0, 30).repartition(2)

    def nothing_published():
        assert data_files(path) == []

    staging = os.path.join(path, "_eosink_staging")
    assert_leftover_part_file_refused(df, sink, staging, 30, nothing_published, id_type="int32")
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == list(range(30))


def test_a_string_beyond_the_bmp_is_found_through_the_stats(spark, tmp_path):
    """Spark's file writer path wrote its files' stats with ``\\u`` escapes: a string beyond
    Unicode's BMP became a surrogate pair, which delta-rs reads back as another string, so a
    filter on the file's only value pruned the file away and found nothing."""
    path = str(tmp_path / "table")
    far = "\U000a7b2b"
    df = spark.createDataFrame([(1, far), (2, "a")], "id long, s string").repartition(2, "id")
    (outcome,) = eosink.write_batch(df, eosink.sink("delta", path=path), writer_id="j", version=1)
    assert (outcome.status, outcome.rows) == ("committed", 2)
    assert spark_wrote(path) == {True}
    stats = [json.loads(a["add"]["stats"]) for _v, a in log_actions(path) if "add" in a]
    assert sorted(s["maxValues"]["s"] for s in stats) == sorted([far, "a"])
    from deltalake import QueryBuilder

    query = QueryBuilder().register("t", DeltaTable(path))
    found = query.execute(f"select id from t where s = '{far}'").read_all()
    assert found.column("id").to_pylist() == [1]


def test_stats_of_spark_written_files_bound_every_value(spark, tmp_path):
    """parquet-mr drops the min/max of a column chunk holding a value over 4 KiB: the bounds
    then come from the file's data (truncated as Delta's writers truncate them), never from
    the other values alone; booleans and long strings are bounded as delta-rs bounds them."""
    path = str(tmp_path / "table")
    big = "z" * 5000
    df = spark.createDataFrame(
        [(1, "a", True, "x" * 40), (2, big, False, "y" * 50)],
        "id int, s string, b boolean, l string",
    ).coalesce(1)
    sink = eosink.sink("delta", path=path, file_writer="spark")
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert outcome.status == "committed"
    assert spark_wrote(path) == {True}
    (add,) = [a["add"] for _v, a in log_actions(path) if "add" in a]
    stats = json.loads(add["stats"])
    assert stats["minValues"]["s"] == "a" and stats["maxValues"]["s"] >= big
    assert (stats["minValues"]["b"], stats["maxValues"]["b"]) == (False, True)
    table = DeltaTable(path)
    for column, value in [("s", big), ("b", True), ("l", "y" * 50)]:
        assert table.to_pyarrow_table(filters=[(column, "=", value)]).num_rows == 1, column
    from deltalake import QueryBuilder

    query = QueryBuilder().register("t", table)
    found = query.execute(f"select id from t where s = '{big}'").read_all()
    assert pa.table(found).column("id").to_pylist() == [2]
