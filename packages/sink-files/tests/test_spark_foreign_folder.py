"""What Spark's own writer and reader make of the files sink's folders: a folder Spark's file
sink wrote (its log files carry no eosink proof) and JSON values read back by Spark's reader."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from eosink_files.sink import FilesSink
from files_helpers import run

from eosink.plugin import ConfigurationError

DDL = "id long, name string, part string"


def table(b: int, n: int = 3) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([b * 100 + i for i in range(n)], pa.int64()),
            "name": [f"r{i}" for i in range(n)],
            "part": [f"p{i % 2}" for i in range(n)],
        }
    )


def spark_file_sink(spark, tmp_path, fmt: str, partition_by: list[str], batches: int = 2) -> str:
    """A folder written by Spark's own FileStreamSink (``batches`` micro-batches)."""
    src, out, ck = (str(tmp_path / d) for d in ("src", "out", "ck"))
    for b in range(batches):
        spark.createDataFrame(table(b).to_pandas()).coalesce(1).write.mode("append").parquet(src)
    stream = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(src)
    writer = stream.writeStream.format(fmt).option("checkpointLocation", ck)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.trigger(availableNow=True).start(out).awaitTermination()
    return out


def spark_ids(spark, out: str, fmt: str = "parquet") -> list[int]:
    return sorted(r.id for r in spark.read.schema(DDL).format(fmt).load(out).collect())


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"partition_by": []}, "partitioned by \\['part'\\]"),
        ({"partition_by": ["name"]}, "partitioned by \\['part'\\]"),
        ({"partition_by": ["part"], "format": "json"}, "lists parquet files"),
    ],
)
def test_a_spark_file_sink_folder_refuses_another_layout(spark, tmp_path, options, refusal):
    out = spark_file_sink(spark, tmp_path, "parquet", ["part"])
    before = spark_ids(spark, out)
    with pytest.raises(ConfigurationError, match=refusal):
        run(FilesSink(path=out, **options), 0, [[table(7).to_batches()[0]]])
    assert spark_ids(spark, out) == before


def test_a_spark_file_sink_folder_takes_the_same_layout(spark, tmp_path):
    out = spark_file_sink(spark, tmp_path, "json", [])
    sink = FilesSink(path=out, format="json")
    assert run(sink, 0, [[table(7).to_batches()[0]]]).status == "committed"
    assert spark_ids(spark, out, "json") == sorted([0, 1, 2, 100, 101, 102, 700, 701, 702])


def test_json_decimals_and_maps_as_spark_reads_them(spark, tmp_path):
    """Spark's JSON writer keeps decimals exact and writes maps as objects; its reader reads
    the sink's JSON the same way."""
    out = str(tmp_path / "out")
    amounts = [Decimal("12345678901234567.89"), Decimal("0.00"), Decimal("-0.01"), None]
    data = pa.table(
        {
            "id": pa.array(range(4), pa.int64()),
            "amount": pa.array(amounts, pa.decimal128(20, 2)),
            "tiny": pa.array([Decimal("1E-10"), Decimal(0), None, None], pa.decimal128(12, 10)),
            "m": pa.array(
                [[("a", 1), ("b", None)], [], None, [("c", 3)]], pa.map_(pa.string(), pa.int64())
            ),
            "s": pa.array(
                [{"d": Decimal("1.5"), "k": {"1": "x"}}, None, {"d": None, "k": None}, None],
                pa.struct([("d", pa.decimal128(5, 1)), ("k", pa.map_(pa.string(), pa.string()))]),
            ),
            "day": [dt.date(2024, 1, 1)] * 4,
        }
    )
    assert run(FilesSink(path=out, format="json"), 0, [[data.to_batches()[0]]]).status == (
        "committed"
    )
    ddl = (
        "id long, amount decimal(20,2), tiny decimal(12,10), m map<string,long>, "
        "s struct<d: decimal(5,1), k: map<string,string>>, day date"
    )
    got = sorted(spark.read.schema(ddl).json(out).collect(), key=lambda r: r.id)
    assert [r.amount for r in got] == amounts
    assert [r.tiny for r in got] == [Decimal("1E-10"), Decimal(0), None, None]
    assert [r.m for r in got] == [{"a": 1, "b": None}, {}, None, {"c": 3}]
    assert got[0].s.d == Decimal("1.5") and got[0].s.k == {"1": "x"}
    assert got[1].s is None and got[2].s.d is None and got[2].s.k is None
    assert [r.day for r in got] == [dt.date(2024, 1, 1)] * 4
