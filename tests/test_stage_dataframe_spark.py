"""The core's ``stage_dataframe`` under the files and delta sinks: a crash half-way through
Spark's staging write (the kit's FaultPlugin, as an executor plugin) leaves nothing behind, and
the replay writes the batch once, with the row count the core observed."""

from __future__ import annotations

import os

import pytest
from deltalake import DeltaTable

import eosink
from eosink.plugin import BatchContext
from eosink.testing.faults import FaultPlugin

SINKS = {"files": {"file_writer": "spark"}, "delta": {"file_writer": "spark"}}


def read_back(spark, name, path):
    if name == "files":
        return sorted(r.id for r in spark.read.parquet(path).collect())
    return sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist())


def proof_rows(sink, name):
    ctx = BatchContext(sink=name, writer_id="job", batch_id=1, kind="batch")
    return eosink.registry.plugin_manager(sink).hook.is_committed(ctx=ctx).rows


@pytest.mark.parametrize("name", sorted(SINKS))
def test_crash_mid_staging_then_replay(spark, tmp_path, name):
    path = str(tmp_path / name)
    sink = eosink.sink(name, path=path, **SINKS[name])
    df = spark.range(0, 300, numPartitions=3).selectExpr("id", "cast(id as string) as name")
    crash = FaultPlugin("mid_write", partition=2)
    with pytest.raises(Exception, match="mid-write, partition 2"):
        eosink.write_batch(df, sink, writer_id="job", version=1, executor_plugins=[crash])
    assert os.listdir(os.path.join(path, "_eosink_staging")) == []
    (outcome,) = eosink.write_batch(df, sink, writer_id="job", version=1)
    assert (outcome.status, outcome.rows) == ("committed", 300)
    assert read_back(spark, name, path) == list(range(300))
    assert proof_rows(sink, name) == 300


def test_values_that_share_a_folder_are_staged_once_each(spark, tmp_path):
    """Null, "" and the default folder's own name share a folder; -0.0 and 0.0 sort as equal
    but are two folders: Spark's writer, partitioning by the values, reopens a folder under a
    file name it already wrote (FileAlreadyExistsException). Staged by the folder text, each
    folder is written once per task and every row is there once."""
    import pyarrow.parquet as pq

    from eosink.spark import stage_dataframe

    default = "__HIVE_DEFAULT_PARTITION__"
    df = spark.range(0, 240, 1, 2).selectExpr(
        "id",
        f"element_at(array(null, '', '{default}', 'a'), cast(id % 4 + 1 as int)) as s",
        "element_at(array(cast('-0.0' as double), 0.0D, cast('NaN' as double)),"
        " cast(floor(id / 4) % 3 + 1 as int)) as f",
    )
    stage = tmp_path / "stage"
    with stage_dataframe(df, str(stage), format="parquet", partition_by=["s", "f"]) as staged:
        folders = {f.relpath.rpartition("/")[0] for f in staged.files}
        ids = [i for f in staged.files for i in pq.read_table(stage / f.relpath)["id"].to_pylist()]
    assert staged.rows == 240 and sorted(ids) == list(range(240))
    assert folders == {f"s={s}/f={f}" for s in (default, "a") for f in ("-0.0", "0.0", "NaN")}
