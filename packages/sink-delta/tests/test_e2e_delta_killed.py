"""End to end with a real kill: the driver process gets SIGKILL in the middle of a batch.

One task of the batch has written its Parquet file into the table folder, the other stalls;
the whole process group is killed; the query is started again from the same checkpoint. The
table, read by delta-rs, holds exactly the source rows; the Delta log one txn per batch; the
killed attempt's file is an orphan that no reader sees (VACUUM removes it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import killable_query  # the query the test runs in its own process
import pytest
from deltalake import DeltaTable
from delta_helpers import txns

FILES, ROWS_PER_FILE = 4, 300


def start(work, door):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(
        [sys.executable, "-m", killable_query.__name__, str(work), door],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, f"query-{time.monotonic_ns()}.log"), "w"),
        start_new_session=True,
    )


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_query_killed_mid_batch_and_restarted(tmp_path, door):
    os.makedirs(tmp_path / "in")
    expected = []
    for n in range(FILES):
        with open(tmp_path / "in" / f"part-{n}.json", "w") as f:
            for i in range(ROWS_PER_FILE):
                f.write(json.dumps({"id": n * 1000 + i, "name": f"r{n}-{i}"}) + "\n")
                expected.append(n * 1000 + i)
        # the file source takes files in modification-time order: make it the name order
        stamp = time.time() - 100 + n
        os.utime(tmp_path / "in" / f"part-{n}.json", (stamp, stamp))
    (tmp_path / "armed").touch()
    query = start(tmp_path, door)
    deadline = time.monotonic() + 180
    while not (tmp_path / "reached").exists():
        assert query.poll() is None, "the query ended before reaching the stalled batch"
        assert time.monotonic() < deadline, "the query never reached the stalled batch"
        time.sleep(0.2)
    time.sleep(2)  # the other task of the batch finishes writing its file
    os.killpg(query.pid, signal.SIGKILL)
    query.wait()
    table = str(tmp_path / "table")
    assert txns(table) == [("orders", 0), ("orders", 1)]
    on_disk_before = {n for _, _, names in os.walk(table) for n in names if n.endswith(".parquet")}
    (tmp_path / "armed").unlink()
    restarted = start(tmp_path, door)
    assert restarted.wait(timeout=300) == 0
    held = Counter(DeltaTable(table).to_pyarrow_table().column("id").to_pylist())
    assert sorted(held.elements()) == sorted(expected)
    assert txns(table) == [("orders", b) for b in range(FILES)]
    in_log = {os.path.basename(u) for u in DeltaTable(table).file_uris()}
    orphans = on_disk_before - in_log
    assert orphans, "the killed attempt left its written file behind"
