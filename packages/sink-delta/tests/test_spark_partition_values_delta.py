"""Partition values nobody picks on purpose, through every Spark door of the delta sink: the
Arrow path (``file_writer="arrow"``, the data source) and Spark's own file writer. delta-rs
reads each row back once, with its value; both writers write the same partition values.
"""

from __future__ import annotations

from collections import Counter

import pytest
from deltalake import DeltaTable
from delta_helpers import log_actions

import eosink
from eosink.testing.partition_values import HIVE_NULL, same, tricky, write_tricky


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


def check_read_back(path: str, df, columns: list[str]) -> None:
    """delta-rs reads every id once, with its partition values ("" and Hive's name as null)."""
    want = {
        r.id: tuple(None if r[c] in ("", HIVE_NULL) else r[c] for c in columns)
        for r in df.select("id", *columns).collect()
    }
    table = DeltaTable(path).to_pyarrow_table()
    ids = table.column("id").to_pylist()
    assert not [i for i, n in Counter(ids).items() if n > 1], "rows read back twice"
    assert set(ids) == set(want), f"{len(set(want) - set(ids))} rows missing"
    back = zip(ids, *(table.column(c).to_pylist() for c in columns))
    wrong = {i: (got, want[i]) for i, *got in back if not all(map(same, got, want[i]))}
    assert not wrong


def partition_values(path: str) -> set[tuple]:
    return {
        tuple(sorted(a["add"]["partitionValues"].items()))
        for _v, a in log_actions(path)
        if "add" in a
    }


@pytest.mark.parametrize("door", ["arrow", "data_source"])
def test_arrow_path_floats_and_strings_read_back_once(spark, tmp_path, door):
    path = str(tmp_path / "table")
    df = tricky(spark)
    write_tricky(df, "delta", path, door)
    check_read_back(path, df, ["s", "f"])
    floats = {dict(v)["f"] for v in partition_values(path)}
    assert floats == {"NaN", "-0.0", "0.0", "Infinity", "1.5", "1.0E20", None}


@pytest.mark.parametrize("file_writer", ["arrow", "spark"])
def test_string_partitions_read_back_once_from_both_writers(spark, tmp_path, file_writer):
    """Spark's file writer stages by folder text: null, "" and Hive's name are one folder, and
    its writer no longer opens one file name twice (FileAlreadyExistsException)."""
    path = str(tmp_path / "table")
    df = tricky(spark).drop("f").selectExpr("*", "cast(id % 3 as int) as n")
    sink = eosink.sink("delta", path=path, partition_by=["s", "n"], file_writer=file_writer)
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert (outcome.status, outcome.rows) == ("committed", 420)
    check_read_back(path, df, ["s", "n"])
    assert partition_values(path) == {
        (("n", n), ("s", s)) for n in ("0", "1", "2") for s in (None, "a/b", "ü", "%", "x")
    }
