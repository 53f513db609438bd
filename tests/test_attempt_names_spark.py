"""Staged names are unique per task attempt on real Spark, not per ``attemptNumber``.

When Spark resubmits a stage (a fetch failure, a lost executor) its tasks run again with
``attemptNumber`` 0, while tasks of the old stage attempt may still be running. Two Spark jobs
over the same DataFrame with the same ``WriteTask`` are exactly that: every task of both has
``attemptNumber`` 0. The later jobs stand for the old stage attempt's tasks: one runs to the
end, one breaks half-way. Under a name derived from ``attemptNumber`` the first rewrites the
file the first job reported (truncated while readers may read it), the second may delete it.
"""

from __future__ import annotations

import os

import pytest
from deltalake import DeltaTable

import eosink
from eosink.plugin import BatchContext
from eosink.protocol import WriteTask, driver_plugins, finish, prepare
from eosink.registry import plugin_manager
from eosink.spark.executors import arrow_schema, spark_run_writes

ROWS = 400
SINKS = {
    "files": {"file_writer": "arrow"},
    "delta": {"file_writer": "arrow"},
}


def break_after_first_batch(batches):
    for n, batch in enumerate(batches):
        if n == 1:
            raise RuntimeError("old stage attempt's task killed half-way")
        yield batch


def read_back(spark, name, path):
    if name == "files":  # Spark's own reader, through the _spark_metadata manifest
        return sorted(r.id for r in spark.read.parquet(path).collect())
    return sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist())


def part_files(path):
    found = {}
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for n in names:
            if n.startswith("part-"):
                st = os.stat(os.path.join(folder, n))
                found[os.path.join(folder, n)] = (st.st_size, st.st_mtime_ns)
    return found


@pytest.mark.parametrize("name", sorted(SINKS))
def test_old_stage_attempt_changes_no_published_file(spark, tmp_path, name):
    path = str(tmp_path / name)
    sink = eosink.sink(name, path=path, **SINKS[name])
    df = spark.range(0, ROWS, numPartitions=2).selectExpr("id", "cast(id as string) as name")
    # two Arrow batches per task, so the broken task has staged something when it breaks
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ROWS // 4))
    ctx = BatchContext(sink=name, writer_id="w", batch_id=0, query_id="q")
    pm = plugin_manager(sink, driver_plugins(()))
    state = prepare(pm, ctx, arrow_schema(df)).state
    task = WriteTask(sink, ctx, state)

    reported = spark_run_writes(df)(task)
    assert len({r.attempt for r in reported}) == len(reported) == 2
    assert finish(pm, ctx, state, reported).status == "committed"
    published = part_files(path)
    assert published

    spark_run_writes(df)(task)
    broken = df.mapInArrow(break_after_first_batch, df.schema)
    with pytest.raises(Exception, match="killed half-way"):
        spark_run_writes(broken)(task)

    now = part_files(path)
    assert {p: now.get(p) for p in published} == published  # none changed, none missing
    assert read_back(spark, name, path) == list(range(ROWS))
