"""Bad input: a clear error naming the fix, and nothing committed."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from eosink_delta.sink import DeltaSink
from eosink_delta.proof import ForeignTransactionError
from delta_helpers import log_version, rows, run, txns

from eosink import CheckpointMismatchError, ConfigurationError


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "table")


@pytest.fixture
def table(path):
    """A table holding batches 0 and 1 of writer 'w'."""
    sink = DeltaSink(path=path)
    run(sink, 0)
    run(sink, 1)
    return path


def test_schema_mismatch(table):
    before = log_version(table)
    bad = pa.record_batch({"id": pa.array(["x"]), "name": pa.array(["y"])})
    with pytest.raises(ConfigurationError) as err:
        run(DeltaSink(path=table), 2, [bad])
    text = str(err.value)
    assert "column 'id' is long in the table but string in the stream" in text
    assert "cast it in the query" in text and "Nothing was written" in text
    assert log_version(table) == before


def test_not_null_column_missing_and_case_only_difference(tmp_path):
    path = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("Name", pa.string())])
    DeltaTable.create(path, schema)
    with pytest.raises(ConfigurationError) as err:
        run(DeltaSink(path=path), 0, [pa.record_batch({"name": pa.array(["a"])})])
    assert "'id' is NOT NULL in the table and missing" in str(err.value)
    assert "called 'Name' in the table" in str(err.value)
    assert log_version(path) == 0


def test_nulls_into_a_not_null_column(tmp_path):
    path = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    DeltaTable.create(path, schema)
    batch = pa.record_batch({"id": pa.array([1, None], pa.int64()), "name": pa.array(["a", "b"])})
    with pytest.raises(ConfigurationError, match="NOT NULL in the table but the batch holds nulls"):
        run(DeltaSink(path=path), 0, [batch])
    assert log_version(path) == 0
    assert not [n for n in os.listdir(path) if n.endswith(".parquet")]  # the attempt cleaned up


def test_path_that_is_not_a_delta_table(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "data.parquet").write_bytes(b"PAR1")
    with pytest.raises(ConfigurationError) as err:
        run(DeltaSink(path=str(folder)), 0)
    assert "is not a Delta table" in str(err.value)
    assert "convert_to_deltalake" in str(err.value)
    assert sorted(os.listdir(folder)) == ["data.parquet"]
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    with pytest.raises(ConfigurationError, match="is a file, not a Delta table folder"):
        run(DeltaSink(path=str(afile)), 0)


def test_a_table_being_created_by_another_writer_is_not_foreign_data(tmp_path):
    """Another writer's first commit is in flight: its _delta_log exists, no commit yet."""
    folder = tmp_path / "new"
    (folder / "_delta_log").mkdir(parents=True)
    assert run(DeltaSink(path=str(folder)), 0).status == "committed"
    assert txns(str(folder)) == [("w", 0)]


def test_wrong_partition_columns(tmp_path):
    path = str(tmp_path / "t")
    run(DeltaSink(path=path, partition_by=["name"]), 0)
    with pytest.raises(ConfigurationError) as err:
        run(DeltaSink(path=path, partition_by=["id"]), 1)
    assert "partitioned by [name] but option partitionBy is [id]" in str(err.value)
    with pytest.raises(ConfigurationError, match="the stream lacks"):
        run(DeltaSink(path=str(tmp_path / "new"), partition_by=["day"]), 0)
    assert not os.path.exists(tmp_path / "new")
    with pytest.raises(ConfigurationError, match="at least one data column"):
        run(DeltaSink(path=str(tmp_path / "new"), partition_by=["id", "name"]), 0)
    assert log_version(path) == 1


def test_same_writer_at_a_higher_version_from_a_new_checkpoint(table):
    """A new checkpoint restarts at batch 0 where this writer id is already at 1."""
    before = log_version(table)
    with pytest.raises(CheckpointMismatchError) as err:
        run(DeltaSink(path=table), 0, query_id="00000000-0000-4000-8000-0000000000ff")
    assert "new writer id" in str(err.value) and "already committed batch 0" in str(err.value)
    assert log_version(table) == before


def test_writer_id_taken_by_another_tool(tmp_path):
    """Another job (e.g. Spark with txnAppId) already wrote app id 'w' at version 9."""
    path = str(tmp_path / "t")
    write_deltalake(
        path,
        pa.table({"id": pa.array([1], pa.int64()), "name": ["x"]}),
        commit_properties=CommitProperties(app_transactions=[Transaction("w", 9)]),
    )
    with pytest.raises(ForeignTransactionError) as err:
        run(DeltaSink(path=path), 3)
    assert "not from eosink" in str(err.value) and "writer id no other job uses" in str(err.value)
    # A batch job follows Delta's rule (version <= last is skipped), and writes above it.
    assert run(DeltaSink(path=path), 9, kind="batch").status == "skipped"
    assert run(DeltaSink(path=path), 10, kind="batch").status == "committed"
    assert txns(path) == [("w", 9), ("w", 10)]


def test_append_only_table_refuses_complete_mode(tmp_path):
    path = str(tmp_path / "t")
    DeltaTable.create(path, rows(0).schema, configuration={"delta.appendOnly": "true"})
    with pytest.raises(ConfigurationError, match="append-only"):
        run(DeltaSink(path=path), 0, mode="complete")
    assert run(DeltaSink(path=path), 0).status == "committed"


def test_unsupported_column_type(tmp_path):
    batch = rows(0, t=pa.array([1, 2, 3, 4, 5], pa.time64("us")))
    with pytest.raises(ConfigurationError, match="column 't' has type time64"):
        run(DeltaSink(path=str(tmp_path / "t")), 0, [batch])
    assert not os.path.exists(tmp_path / "t")


def test_bad_options():
    with pytest.raises(ConfigurationError, match="engine 'delta-js' is unknown"):
        DeltaSink(path="/tmp/x", engine="delta-js")
    with pytest.raises(ConfigurationError, match="unknown option"):
        DeltaSink.from_options({"path": "/tmp/x", "partitionColumns": "a"})
    with pytest.raises(ConfigurationError, match="option path is empty"):
        DeltaSink(path="")


def test_unknown_file_writer(tmp_path):
    with pytest.raises(ConfigurationError, match="file_writer 'jvm' is unknown"):
        DeltaSink(path=str(tmp_path / "t"), file_writer="jvm")


@pytest.mark.parametrize(
    "arrow, delta", [(pa.uint8(), "byte"), (pa.uint16(), "short"), (pa.uint32(), "integer")]
)
def test_unsigned_integers_become_delta_rs_signed_types_with_their_values(path, arrow, delta):
    """Delta has no unsigned integers: delta-rs maps uintN to the signed type of its width
    and casts the values, checked; so does the sink (the file holds the signed type)."""
    top = 2 ** (arrow.bit_width - 1) - 1
    batch = pa.record_batch({"id": pa.array([1, 2], pa.int64()), "u": pa.array([0, top], arrow)})
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    table = DeltaTable(path)
    assert json.loads(table.schema().to_json())["fields"][1]["type"] == delta
    assert sorted(table.to_pyarrow_table().column("u").to_pylist()) == [0, top]
    assert table.to_pyarrow_table(filters=[("u", "=", top)]).num_rows == 1
    (name,) = [n for n in os.listdir(path) if n.endswith(".parquet")]
    signed = pa.int8() if delta == "byte" else pa.int16() if delta == "short" else pa.int32()
    assert pq.read_schema(os.path.join(path, name)).field("u").type == signed


@pytest.mark.parametrize(
    "arrow, value", [(pa.uint8(), 255), (pa.uint32(), 2**32 - 1), (pa.uint64(), 2**64 - 1)]
)
def test_unsigned_values_beyond_the_signed_type_are_refused(path, arrow, value):
    """uint64 2**64 - 1 must not wrap to -1 (nor uint8 255 to -1): the batch fails, naming the
    column and the fix, and nothing is committed."""
    batch = pa.record_batch({"id": pa.array([1, 2], pa.int64()), "u": pa.array([1, value], arrow)})
    with pytest.raises(ConfigurationError, match="column 'u'.*cast it in the query"):
        run(DeltaSink(path=path), 0, [batch])
    assert DeltaTable(path).to_pyarrow_table().num_rows == 0
    assert DeltaTable(path).transaction_version("w") is None


def test_unsigned_values_widen_into_a_wider_table_column(path):
    DeltaTable.create(path, pa.schema([("id", pa.int64()), ("u", pa.int64())]))
    batch = pa.record_batch(
        {"id": pa.array([1], pa.int64()), "u": pa.array([2**32 - 1], pa.uint32())}
    )
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    assert DeltaTable(path).to_pyarrow_table().column("u").to_pylist() == [2**32 - 1]
