"""The manifest oracle reads what Spark's reader reads: folders written by Spark's own
FileStreamSink and by the files sink, odd partition values, compacts, stray files, and the hand-made
logs where Spark 4 does something surprising (a file listed twice, a "delete" entry)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from decimal import Decimal
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eosink_files.sink import FilesSink
from files_helpers import run
from spark_manifest_oracle import OracleError, assert_exactly_once, read_committed, rows_of

INTERVAL = "spark.sql.streaming.fileSink.log.compactInterval"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("x", pa.float64()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),
        ("amount", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("name", pa.string()),
        ("part", pa.string()),
    ]
)
DDL = (
    "id long, x double, flag boolean, day date, amount decimal(10,2), ts timestamp, name string, "
    "part string"
)
ODD = ["a/b", "%", "ü", " ", "x=y", "", None]
FLOATS = [0.5, float("nan"), -0.0, float("inf"), float("-inf"), 1e20, -1.5e-7]


def batch(b: int, n: int = 7, part: bool = True) -> pa.Table:
    """Batch ``b``: one row of each odd value (floats, partition values, nulls)."""
    start = dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone.utc)
    table = pa.table(
        {
            "id": pa.array([b * 100 + i for i in range(n)], pa.int64()),
            "x": FLOATS[:n],
            "flag": [None if i == 3 else i % 2 == 0 for i in range(n)],
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=b + i) for i in range(n)],
            "amount": pa.array([Decimal(f"{i}.{b % 100:02d}") for i in range(n)], SCHEMA[4].type),
            "ts": pa.array(
                [start + dt.timedelta(seconds=b, microseconds=i * 1001) for i in range(n)],
                SCHEMA[5].type,
            ),
            "name": [f"r{i}" if i % 3 else None for i in range(n)],
            "part": [ODD[(b + i) % len(ODD)] for i in range(n)],
        }
    )
    return table if part else table.drop_columns(["part"])


def spark_read(
    spark, out: str, fmt: str = "parquet", ddl: str = DDL, **options
) -> tuple[pa.Table, list[str]]:
    """What Spark reads (with the source's schema, as the oracle does) and its input files."""
    df = spark.read.schema(ddl).options(**options).format(fmt).load(out)
    names = [c.split()[0] for c in ddl.split(", ")]
    return df.select(*names).toArrow(), sorted(unquote(urlsplit(u).path) for u in df.inputFiles())


def assert_same_as_spark(
    spark, out: str, expected: pa.Table, partition_by=("part",), fmt="parquet", **opts
) -> list[str]:
    """The oracle and Spark read the same rows from the same files: exactly ``expected``."""
    schema = expected.schema
    ddl = ", ".join(c for c in DDL.split(", ") if c.split()[0] in schema.names)
    header = opts.get("header", "true") == "true"
    table, files = read_committed(out, schema, partition_by, format=fmt, csv_header=header)
    spark_table, spark_files = spark_read(spark, out, fmt, ddl, **opts)
    assert rows_of(table, partition_by) == rows_of(spark_table, partition_by)
    assert sorted(set(files)) == spark_files
    assert_exactly_once(table, rows_of(expected, partition_by), partition_by)
    return files


def tasks(table: pa.Table) -> list[list[pa.RecordBatch]]:
    """One task per row: the sink writes a task's "" and None partition values into one file
    name (see test_manifest_oracle.py's xfail), which this keeps out of the agreement tests."""
    return [[rb] for rb in table.to_batches(max_chunksize=1)]


def add_strays(out: str, files: list[str]) -> None:
    """Copies of committed files under names no log lists, at the top and in a Hive folder."""
    for i, path in enumerate(files[:2]):
        shutil.copy(path, os.path.join(os.path.dirname(path), f"part-stray-{i}.parquet"))
    shutil.copy(files[0], os.path.join(out, "part-stray-top.parquet"))


def test_spark_file_sink_folder(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("src", "out", "ck"))
    for b in range(7):
        spark.createDataFrame(batch(b)).coalesce(1).write.mode("append").parquet(src)
    spark.conf.set(INTERVAL, "3")
    try:
        stream = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(src)
        query = (
            stream.writeStream.format("parquet")
            .partitionBy("part")
            .option("checkpointLocation", ck)
            .trigger(availableNow=True)
            .start(out)
        )
        query.awaitTermination()
    finally:
        spark.conf.unset(INTERVAL)
    assert {"2.compact", "5.compact", "6"} <= set(os.listdir(os.path.join(out, "_spark_metadata")))
    expected = pa.concat_tables(batch(b) for b in range(7))
    files = assert_same_as_spark(spark, out, expected)
    add_strays(out, files)
    assert assert_same_as_spark(spark, out, expected) == files


def test_files_sink_folder_with_compacts_and_strays(spark, tmp_path):
    out = str(tmp_path / "out")
    for b in range(23):
        sink = FilesSink(path=out, partition_by=["part"], log_cleanup_delay_s=0)
        assert run(sink, b, tasks(batch(b))).status == "committed"
    names = set(os.listdir(os.path.join(out, "_spark_metadata")))
    assert {"9.compact", "19.compact", "22"} <= names and "0" not in names
    expected = pa.concat_tables(batch(b) for b in range(23))
    files = assert_same_as_spark(spark, out, expected)
    add_strays(out, files)
    assert assert_same_as_spark(spark, out, expected) == files


@pytest.mark.parametrize(
    ("fmt", "header", "partitioned"),
    [("json", True, True), ("json", True, False), ("csv", True, True), ("csv", False, False)],
)
def test_files_sink_text_formats(spark, tmp_path, fmt, header, partitioned):
    out = str(tmp_path / "out")
    tables = []
    for b in range(4):
        table = batch(b, part=partitioned)
        if fmt == "csv":  # Spark's CSV reader takes neither "nan" nor "inf" (it reads null)
            table = table.set_column(1, "x", pa.array([0.5, -0.0, 1e20, -1.5e-7, None, 2.0, 3.0]))
            table = table.set_column(6, "name", pa.array(["r", "a,b", None, "ü", "x", "y", "z"]))
        tables.append(table)
        sink = FilesSink(
            path=out, format=fmt, csv_header=header, partition_by=["part"] if partitioned else []
        )
        assert run(sink, b, tasks(table)).status == "committed"
    partition_by = ("part",) if partitioned else ()
    opts = {"header": str(header).lower()} if fmt == "csv" else {}
    assert_same_as_spark(spark, out, pa.concat_tables(tables), partition_by, fmt, **opts)


def test_csv_nan_and_infinities_are_read_back_by_spark(spark, tmp_path):
    """pyarrow writes NaN and the infinities as "nan", "inf", "-inf", which Spark's CSV
    reader reads as null: the sink writes Java's NaN, Infinity, -Infinity (as Spark's own CSV
    writer does), which it reads back as the values, float32 columns too."""
    out = str(tmp_path / "out")
    table = batch(0, part=False)  # x holds NaN, -0.0 and both infinities
    table = table.append_column("y", pa.array(FLOATS, pa.float32()))
    assert run(FilesSink(path=out, format="csv"), 0, tasks(table)).status == "committed"
    ddl = DDL.rsplit(", ", 1)[0] + ", y float"
    spark_table, _ = spark_read(spark, out, "csv", ddl, header="true")
    assert spark_table.column("x").null_count == 0 and spark_table.column("y").null_count == 0
    assert rows_of(spark_table) == rows_of(table)
    oracle, _ = read_committed(out, table.schema, format="csv")
    assert rows_of(oracle) == rows_of(table)


def test_csv_empty_strings_are_read_back_as_null(spark, tmp_path):
    """The sink writes a CSV empty string as ``""`` and null as nothing (as Spark's own CSV
    writer does); Spark's reader gives both back as null, and the oracle with it (the kit's
    files simulation expects them so: its ``simulation_row``)."""
    out = str(tmp_path / "out")
    table = batch(0, part=False).set_column(6, "name", pa.array(["", None, "a", "", "b", "c", "d"]))
    assert run(FilesSink(path=out, format="csv"), 0, tasks(table)).status == "committed"
    spark_table, _ = spark_read(spark, out, "csv", DDL.rsplit(", ", 1)[0], header="true")
    oracle, _ = read_committed(out, table.schema, format="csv")
    for read in (spark_table, oracle):
        assert read.sort_by("id").column("name").to_pylist() == [
            None,
            None,
            "a",
            None,
            "b",
            "c",
            "d",
        ]


# -- hand-made logs: Spark 4's own rules -------------------------------------------------------
def write_log(out: str, name: str, entries: list[tuple[str, int, str]], first: str = "v1") -> None:
    lines = [first] + [
        json.dumps(
            {"path": "file://" + p, "size": size, "isDir": False, "modificationTime": 1,
             "blockReplication": 1, "blockSize": 1, "action": action}  # fmt: skip
        )
        for p, size, action in entries
    ]
    os.makedirs(os.path.join(out, "_spark_metadata"), exist_ok=True)
    with open(os.path.join(out, "_spark_metadata", name), "w") as f:
        f.write("\n".join(lines) + "\n")


def part_file(out: str, name: str, ids: list[int]) -> tuple[str, int]:
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    return path, os.path.getsize(path)


ID = pa.schema([("id", pa.int64())])


def oracle_and_spark_ids(spark, out: str) -> tuple[list[int], list[int]]:
    table, _ = read_committed(out, ID)
    spark_table, _ = spark_read(spark, out, ddl="id long")
    return sorted(table.column("id").to_pylist()), sorted(spark_table.column("id").to_pylist())


def test_spark_rules_for_listed_files(spark, tmp_path):
    """Listed twice: read twice. Size 0 in the log, ``_name``, a subfolder of an unpartitioned
    folder, a directory entry: not read."""
    out = str(tmp_path / "out")
    a, b = part_file(out, "part-a.parquet", [1]), part_file(out, "part-b.parquet", [2])
    hidden, sub = part_file(out, "_part-c.parquet", [3]), part_file(out, "sub/part-d.parquet", [4])
    empty = part_file(out, "part-e.parquet", [5])
    write_log(out, "0", [(*a, "add"), (*hidden, "add"), (empty[0], 0, "add")])
    write_log(out, "1", [(*a, "add"), (*b, "add"), (*sub, "add")])
    assert oracle_and_spark_ids(spark, out) == ([1, 1, 2], [1, 1, 2])
    assert read_committed(out, ID)[1] == [a[0], a[0], b[0]]


def test_delete_entry_is_read_by_spark_and_refused(spark, tmp_path):
    out = str(tmp_path / "out")
    a, b = part_file(out, "part-a.parquet", [1]), part_file(out, "part-b.parquet", [2])
    write_log(out, "0", [(*a, "add"), (*b, "add")])
    write_log(out, "1", [(*b, "delete")])
    assert sorted(spark_read(spark, out, ddl="id long")[0].column("id").to_pylist()) == [1, 2, 2]
    with pytest.raises(OracleError, match="'delete'"):
        read_committed(out, ID)


@pytest.mark.parametrize(
    "damage",
    ["missing delta", "missing compact", "v2", "torn line", "empty file"],
)
def test_logs_spark_cannot_read(spark, tmp_path, damage):
    out = str(tmp_path / "out")
    a = part_file(out, "part-a.parquet", [1])
    for i in range(12):
        write_log(out, f"{i}.compact" if i == 9 else str(i), [(*a, "add")] if i == 0 else [])
    log = os.path.join(out, "_spark_metadata")
    if damage == "missing delta":
        os.remove(os.path.join(log, "10"))
    elif damage == "missing compact":
        os.rename(os.path.join(log, "9.compact"), os.path.join(log, "9"))
    elif damage == "v2":
        write_log(out, "11", [], first="v2")
    elif damage == "torn line":
        with open(os.path.join(log, "11"), "a") as f:
            f.write('{"path":"file:///x","size":1')
    else:
        open(os.path.join(log, "11"), "w").close()
    with pytest.raises(OracleError):
        read_committed(out, ID)
    with pytest.raises(Exception):  # noqa: B017 - Spark's error classes vary; it must fail
        spark_read(spark, out, ddl="id long")


def test_no_log_spark_reads_every_file(spark, tmp_path):
    out = str(tmp_path / "out")
    part_file(out, "part-a.parquet", [1])
    assert spark_read(spark, out, ddl="id long")[0].num_rows == 1
    with pytest.raises(OracleError, match="no _spark_metadata"):
        read_committed(out, ID)


def test_json_binary_is_read_as_spark_reads_it(spark, tmp_path):
    """Binary in JSON lines is base64, as Spark's JSON writer writes it, and Spark's reader
    (Jackson's ``getBinaryValue``) decodes it. The oracle refused it ("Spark cannot read the
    JSON value 'AA==' as binary"), and the generated histories failed on it (files kit, soak
    mode, ``--hypothesis-seed=21``, 150 examples): the oracle's gap, not the sink's."""
    out = str(tmp_path / "out")
    values = [b"\x00", b"", None, b"\xffab", bytes(range(256))]
    table = pa.table(
        {"id": pa.array(range(len(values)), pa.int64()), "b": pa.array(values, pa.binary())}
    )
    assert run(FilesSink(path=out, format="json"), 0, tasks(table)).status == "committed"
    read, files = read_committed(out, table.schema, (), format="json")
    spark_table, spark_files = spark_read(spark, out, "json", "id long, b binary")
    assert rows_of(read) == rows_of(spark_table) == rows_of(table)
    assert sorted(set(files)) == spark_files
