"""The manifest oracle on its own (its agreement with Spark is test_manifest_oracle_spark.py):
Spark's log plan, the logs Spark cannot read, value parsing, the exactly-once assertion, other
stores, and what it found in the files sink (now regression tests)."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from decimal import Decimal
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pytest
from eosink_files.sink import FilesSink
from files_helpers import rows, run
from spark_manifest_oracle import (
    NAN,
    OracleError,
    _from_text,
    assert_exactly_once,
    derive_compact_interval,
    log_plan,
    read_committed,
    unescape_path_name,
)

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner

UTC = dt.timezone.utc
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def expected(batches, n=4):
    table = pa.Table.from_batches([rows(b, p, n) for b in batches for p in range(2)])
    return [(r["id"], r["name"]) for r in table.to_pylist()]


@pytest.mark.parametrize(
    ("default", "latest_compact", "interval"),
    [(10, 9, 10), (10, 2, 3), (5, 11, 6), (10, 29, 10), (10, 14, 15), (3, 20, 3), (4, 6, 7)],
)
def test_derive_compact_interval(default, latest_compact, interval):
    assert derive_compact_interval(default, latest_compact) == interval


@pytest.mark.parametrize(
    ("names", "plan"),
    [
        ([], []),
        (["0", "1", "2"], ["0", "1", "2"]),
        (["9.compact", "19.compact", "20", "21", ".21.crc", "22.tmp"], ["19.compact", "20", "21"]),
        (["2.compact", "3", "4"], ["2.compact", "3", "4"]),  # one compact: interval 3
        (["5", "6", "9.compact", "10"], ["9.compact", "10"]),
        (["8", "10", "11"], ["9.compact", "10", "11"]),  # Spark reads a compact that is not there
        (["3", "4.compact", "5"], ["4.compact", "5"]),  # default 10, 4.compact: interval 5
    ],
)
def test_log_plan(names, plan):
    assert log_plan(names, 10) == plan


def test_reads_what_the_sink_committed_with_compacts_and_expiry(tmp_path):
    out = str(tmp_path / "out")
    for b in range(25):
        run(FilesSink(path=out, log_cleanup_delay_s=0), b)
    table, files = read_committed(out, SCHEMA)
    assert len(files) == 50 and table.schema == SCHEMA
    assert_exactly_once(table, expected(range(25)))
    with pytest.raises(AssertionError, match="1 rows missing"):
        assert_exactly_once(table, expected(range(25)) + [(-1, "x")])
    with pytest.raises(AssertionError, match="1 extra or repeated"):
        assert_exactly_once(table, expected(range(25))[1:])


@pytest.mark.parametrize("damage", ["missing", "v2", "torn", "not a status", "empty", "size"])
def test_logs_spark_cannot_read(tmp_path, damage):
    out = str(tmp_path / "out")
    for b in range(12):
        run(FilesSink(path=out, log_cleanup_delay_s=-1), b)
    last = os.path.join(out, "_spark_metadata", "11")
    with open(last) as f:
        text = f.read()
    if damage == "missing":
        os.remove(os.path.join(out, "_spark_metadata", "10"))
    elif damage == "size":  # a listed file no longer of its logged size
        line = next(line for line in text.splitlines() if '"isDir":false' in line)
        with open(unquote(urlsplit(json.loads(line)["path"]).path), "ab") as f:
            f.write(b"x")
    else:
        with open(last, "w") as f:
            f.write(
                {
                    "v2": "v2" + text[2:],
                    "torn": text[: len(text) // 2],
                    "not a status": text + '{"path":"file:///x","size":1}\n',
                    "empty": "",
                }[damage]
            )
    with pytest.raises(OracleError):
        read_committed(out, SCHEMA)


def test_other_stores_memory(memory_url, monkeypatch):
    # Run alone or after the Spark tests in one process: the sink refuses memory:// wherever a
    # Spark session lives, and here every write runs in this process.
    monkeypatch.setattr("eosink_files.sink.in_spark_application", lambda: False)
    for b in range(3):
        run(FilesSink(path=memory_url), b)
    table, files = read_committed(memory_url, SCHEMA)
    assert_exactly_once(table, expected(range(3)))
    assert all(f.startswith("/eosink-files-tests/") for f in files)


def test_other_stores_s3(s3_bucket):
    """The manifest lists s3a:// URIs; the oracle reads them through s3fs."""
    opts = s3_bucket.endpoint.fsspec_options()
    for b in range(3):
        run(FilesSink(path=s3_bucket.uri("out"), storage_options=opts), b)
    table, _ = read_committed(s3_bucket.uri("out"), SCHEMA, storage_options=opts)
    assert_exactly_once(table, expected(range(3)))


@pytest.mark.parametrize(
    ("text", "typ", "value"),
    [
        ("1.0E20", pa.float64(), 1e20),
        ("-0.0", pa.float64(), -0.0),
        ("Infinity", pa.float64(), float("inf")),
        ("-Infinity", pa.float32(), float("-inf")),
        ("1e+20", pa.float64(), 1e20),
        ("-12", pa.int32(), -12),
        ("TRUE", pa.bool_(), True),
        ("2024-02-29", pa.date32(), dt.date(2024, 2, 29)),
        ("1.50", pa.decimal128(5, 2), Decimal("1.50")),
        (
            "2024-01-01 10:00:00.5",
            pa.timestamp("us", tz="UTC"),
            dt.datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=UTC),
        ),
        ("2024-01-01T10:00Z", pa.timestamp("us"), dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
    ],
)
def test_values_as_spark_casts_them(text, typ, value):
    assert _from_text(text, typ, "UTC") == value


@pytest.mark.parametrize(
    ("text", "typ"),
    [("nan", pa.float64()), ("inf", pa.float64()), ("1.5", pa.int64()), ("yes", pa.bool_())],
)
def test_values_spark_cannot_cast(text, typ):
    with pytest.raises(OracleError):
        _from_text(text, typ, "UTC")


def test_unescape_path_name():
    assert unescape_path_name("a%2Fb%25%3D%zz%2") == "a/b%=%zz%2"


def test_normalized_rows_compare_nan_and_empty_partition_values():
    table = pa.table({"x": [float("nan"), 1.0], "part": [None, "a"]})
    assert_exactly_once(table, Counter({(float("nan"), ""): 1, (1.0, "a"): 1}), ["part"])
    assert_exactly_once(table, [(NAN, None), (1.0, "a")])
    with pytest.raises(AssertionError):
        assert_exactly_once(table, [(float("nan"), ""), (1.0, "a")])  # "" is null only if asked


# -- what the oracle finds in the files sink ---------------------------------------------------
def test_empty_and_null_partition_values_in_one_task(tmp_path):
    """ "" and null share Hive's null folder: one group, one file, each row read once."""
    out = str(tmp_path / "out")
    batch = pa.record_batch({"id": pa.array([1, 2, 3], pa.int64()), "part": ["", None, "a"]})
    run(FilesSink(path=out, partition_by=["part"]), 0, [[batch]])
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    table, _ = read_committed(out, schema, ["part"])
    assert_exactly_once(table, [(1, ""), (2, None), (3, "a")], ["part"])


class HardCrash(BaseException):
    """The driver process dies: no abort runs."""


def crash_before_commit(sink, parts):
    runner = LocalRunner(parts)

    def run_writes(task):
        runner(task)
        raise HardCrash

    with pytest.raises(HardCrash):
        ctx = BatchContext("files", "w", 0, query_id="q1")
        run_batch(sink, ctx, parts[0][0].schema, run_writes)


def test_crash_before_the_first_commit_leaves_nothing_spark_reads(tmp_path):
    out = str(tmp_path / "out")
    crash_before_commit(FilesSink(path=out), [[rows(0, p)] for p in range(2)])
    assert any(n.startswith("part-") for n in os.listdir(out))
    assert read_committed(out, SCHEMA)[0].num_rows == 0  # _spark_metadata/ exists, empty


def test_crash_before_the_first_commit_on_s3(s3_bucket):
    """Object stores have no empty folders: the first batch marks _spark_metadata with an
    object of its own, so Spark's reader never lists the folder's part files."""
    opts = s3_bucket.endpoint.fsspec_options()
    sink = FilesSink(path=s3_bucket.uri("out"), storage_options=opts)
    crash_before_commit(sink, [[rows(0, p)] for p in range(2)])
    assert read_committed(s3_bucket.uri("out"), SCHEMA, storage_options=opts)[0].num_rows == 0
