"""End to end with a real kill: the driver process gets SIGKILL in the middle of a batch.

One task of the batch has written its Parquet file into the table folder, the other stalls;
the whole process group is killed; the query is started again from the same checkpoint. The
table, read by delta-rs, holds exactly the source rows; the Delta log one txn per batch; the
killed attempt's file is an orphan that no reader sees (VACUUM removes it).
"""

from __future__ import annotations

import os

import pytest
from deltalake import DeltaTable
from delta_helpers import txns

from eosink.testing.killed_query import QueryJob, QueryProcesses
from eosink.testing.replay import FILES, assert_exactly, write_json_source


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_query_killed_mid_batch_and_restarted(tmp_path, door):
    expected = write_json_source(tmp_path / "in")
    table = str(tmp_path / "table")
    job = QueryJob(
        sink="delta", door=door, sink_options={"path": table}, source_options={"path": table}
    )
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert txns(table) == [("orders", 0), ("orders", 1)]
        on_disk_before = {
            n for _, _, names in os.walk(table) for n in names if n.endswith(".parquet")
        }
        queries.restart(job)
    assert_exactly(DeltaTable(table).to_pyarrow_table().column("id").to_pylist(), expected)
    assert txns(table) == [("orders", b) for b in range(FILES)]
    in_log = {os.path.basename(u) for u in DeltaTable(table).file_uris()}
    orphans = on_disk_before - in_log
    assert orphans, "the killed attempt left its written file behind"
