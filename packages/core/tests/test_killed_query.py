"""The killed-query harness of the kit: what reaches the query's process, and the stall."""

from __future__ import annotations

import stat

import pyarrow as pa

from eosink.testing.killable_query import QueryJob, holds
from eosink.testing.killed_query import QueryProcesses

SECRET_URL = "postgresql://writer:s3cret-password@127.0.0.1:5/db"


def test_secrets_travel_in_a_private_job_file_not_on_the_command_line(tmp_path):
    job = QueryJob(
        sink="postgres",
        door="data_source",
        sink_options={"url": SECRET_URL},
        source_options={"url": SECRET_URL},
        checkpoint="s3a://bucket/ckpt",
        spark={"spark.hadoop.fs.s3a.secret.key": "s3cret-password"},
    )
    with QueryProcesses(tmp_path) as queries:
        proc = queries.start(job)
        # the argv the process was started with (its /proc cmdline reads empty once it exits,
        # and this query, without a server, may exit at once)
        command_line = " ".join(map(str, proc.args))
        (job_file,) = tmp_path.glob("job-*.json")
        mode = stat.S_IMODE(job_file.stat().st_mode)
        assert QueryJob.from_json(job_file.read_text()) == job
    assert "s3cret-password" not in command_line
    assert str(job_file) in command_line
    assert mode == 0o600, oct(mode)
    assert proc.poll() is not None  # the harness killed what was still running


def test_a_row_stalls_when_it_holds_every_value_of_the_columns_the_batch_has():
    one_queue = pa.record_batch({"tablet_index": [0, 0, 1], "row_index": [19, 20, 20]})
    stall = {"tablet_index": 0, "row_index": 20, "queue_id": "//q/a"}
    assert holds(one_queue, stall)  # no queue_id column: the other two decide
    two_queues = pa.record_batch(
        {"tablet_index": [0, 0], "row_index": [20, 20], "queue_id": ["//q/b", "//q/b"]}
    )
    assert not holds(two_queues, stall)
    assert not holds(pa.record_batch({"id": [2150]}), {"name": "x"})  # no column in common
    assert holds(pa.record_batch({"id": [1, 2150]}), {"id": 2150})
