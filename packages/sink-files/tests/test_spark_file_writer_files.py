"""The spark file writer: Spark's own writer stages a DataFrame batch, the manifest publishes it.

Read back by Spark's reader (and the reader helper), with crashes between staging and commit,
every format, ``partitionBy``, and the configurations the file writer refuses.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eosink
from eosink import ConfigurationError
from eosink.testing.faults import FaultPlugin, InjectedCrash, assert_leftover_part_file_refused
from eosink_files import committed_files, read_table


def batch(spark, start: int, end: int):
    return spark.range(start, end).selectExpr(
        "id",
        "concat('c', cast(id % 3 as string)) as country",
        "timestamp_seconds(1700000000 + id) as ts",
    )


def part_files(out) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(folder, name), out)
        for folder, dirs, names in os.walk(out)
        for name in names
        if name.startswith("part-")
    )


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_crash_around_the_commit(spark, tmp_path, point):
    out = str(tmp_path / "out")
    sink = eosink.sink("files", path=out, file_writer="spark")
    df = batch(spark, 0, 100)
    with pytest.raises(InjectedCrash):
        eosink.write_batch(df, sink, writer_id="job", version=1, plugins=[FaultPlugin(point)])
    assert not os.listdir(os.path.join(out, "_eosink_staging"))
    if point == "before_commit":
        assert part_files(out) == []  # abort removed the moved files
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert outcome.status == ("committed" if point == "before_commit" else "skipped")
    assert sorted(r.id for r in spark.read.parquet(out).collect()) == list(range(100))
    assert len(part_files(out)) == len(committed_files(out))  # nothing left behind


def test_partitioned_parquet_has_spark_layout_and_micros_timestamps(spark, tmp_path):
    out = str(tmp_path / "out")
    sink = eosink.sink("files", path=out, partition_by=["country"], compression="zstd")
    spark.conf.unset("spark.sql.parquet.outputTimestampType")
    eosink.write_batch(batch(spark, 0, 30), sink, writer_id="job", version=1)
    eosink.write_batch(batch(spark, 30, 60), sink, writer_id="job", version=2)
    files = part_files(out)
    assert {f.split("/")[0] for f in files} == {"country=c0", "country=c1", "country=c2"}
    assert all(f.endswith(".zstd.parquet") for f in files)
    schema = pq.read_schema(os.path.join(out, files[0]))
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
    # the session's setting is as it was
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "INT96"
    back = spark.read.parquet(out)
    assert back.count() == 60 and back.where("country = 'c1'").count() == 20
    table = read_table(out)
    assert sorted(table.column("id").to_pylist()) == list(range(60))
    assert table.column("ts")[0].as_py().tzinfo is not None


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_text_formats(spark, tmp_path, fmt):
    out = str(tmp_path / "out")
    sink = eosink.sink("files", path=out, format=fmt, compression="gzip", file_writer="spark")
    eosink.write_batch(batch(spark, 0, 50), sink, writer_id="job", version=1)
    files = part_files(out)
    assert files and all(f.endswith(f".{fmt}.gz") for f in files)
    reader = spark.read.schema("id long, country string, ts timestamp")
    if fmt == "csv":
        reader = reader.option("header", "true")
    rows = getattr(reader, fmt)(out).collect()
    assert sorted(r.id for r in rows) == list(range(50))
    assert rows[0].ts.replace(tzinfo=None) >= dt.datetime(2023, 11, 14)


def test_auto_falls_back_to_arrow_where_spark_cannot_write(spark, tmp_path):
    df = batch(spark, 0, 10)
    sized = str(tmp_path / "sized")
    eosink.write_batch(
        df, eosink.sink("files", path=sized, row_group_size=4), writer_id="w", version=1
    )
    meta = pq.read_metadata(os.path.join(sized, part_files(sized)[0]))
    assert b"org.apache.spark.version" not in (
        meta.metadata or {}
    )  # the arrow file writer wrote it
    assert sorted(r.id for r in spark.read.parquet(sized).collect()) == list(range(10))


def test_file_writer_spark_refuses_what_it_cannot_write(spark, tmp_path):
    path = str(tmp_path / "out")
    sink = eosink.sink("files", path=path, file_writer="spark", target_file_size=1 << 20)
    with pytest.raises(ConfigurationError, match="file_writer='arrow'"):
        eosink.write_batch(batch(spark, 0, 10), sink, writer_id="w", version=1)
    assert committed_files(path) == []


def test_a_part_file_no_committed_attempt_wrote_is_not_published(spark, tmp_path):
    out = str(tmp_path / "out")
    sink = eosink.sink("files", path=out, file_writer="spark")
    df = batch(spark, 0, 100).repartition(2)

    def nothing_published():
        assert committed_files(out) == [] and part_files(out) == []

    staging = os.path.join(out, "_eosink_staging")
    assert_leftover_part_file_refused(df, sink, staging, 100, nothing_published)
    assert sorted(r.id for r in spark.read.parquet(out).collect()) == list(range(100))


def test_both_file_writers_give_csv_values_back_alike(spark, tmp_path):
    """Values with blank ends, a backslash, an empty string: Spark's CSV writer trims blank
    ends by default, which the arrow writer does not; the spark file writer turns the
    trimming off, so a value reads back the same whichever writer wrote it."""
    values = [" lead", "trail ", "\tx\t", "   ", "a\\b", '"q"', "", None]
    df = spark.createDataFrame(list(enumerate(values)), "id long, s string")
    read = {}
    for writer in ("spark", "arrow"):
        out = str(tmp_path / writer)
        sink = eosink.sink("files", path=out, format="csv", file_writer=writer)
        eosink.write_batch(df, sink, writer_id="job", version=0)
        rows = spark.read.schema("id long, s string").option("header", "true").csv(out).collect()
        read[writer] = sorted((r.id, r.s) for r in rows)
    assert read["arrow"] == [(i, v or None) for i, v in enumerate(values)]
    assert read["spark"] == read["arrow"]
