"""The SIGKILL scenario of the end-to-end tests (test_e2e_postgres_killed*.py), one front door
per test file so that each file's timeout covers one query killed and restarted.

The query's driver process group gets SIGKILL in the middle of a batch: one task of the batch
has staged its rows (its staging table committed), the other stalls inside its COPY; the query
starts again from the same checkpoint. The table, read by plain SQL, holds exactly the source
rows; the proofs one row per batch; the killed attempt's staging table is an orphan no reader
sees, which ``eosink cleanup postgres`` lists and drops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import killable_query  # the query run in its own process
import pytest
from eosink_postgres.sink import PostgresSink
from pg_helpers import admin, read_table, staging_tables

from eosink import clock
from eosink.registry import plugin_manager

FILES, ROWS_PER_FILE = 4, 300


@pytest.fixture
def started():
    """The query processes a test started: killed (their process groups) when it ends, so a
    failing or cancelled test leaves no query stalled behind."""
    processes: list[subprocess.Popen] = []
    yield processes
    for proc in processes:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start(work, door, url, started):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env[killable_query.URL_VARIABLE] = url  # the password stays off the command line
    proc = subprocess.Popen(
        [sys.executable, "-m", killable_query.__name__, str(work), door],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, f"query-{time.monotonic_ns()}.log"), "w"),
        start_new_session=True,
    )
    started.append(proc)
    return proc


def proofs(url):
    with admin(url) as conn:
        return conn.execute(
            "SELECT writer_id, batch_id, rows FROM eosink.proofs ORDER BY batch_id"
        ).fetchall()


def query_killed_mid_batch_and_restarted(tmp_path, database, door, started):
    """Run the query, kill it mid-batch, restart it; check the table, proofs and cleanup."""
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
    query = start(tmp_path, door, database, started)
    deadline = time.monotonic() + 240
    while not (tmp_path / "reached").exists():
        assert query.poll() is None, "the query ended before reaching the stalled batch"
        assert time.monotonic() < deadline, "the query never reached the stalled batch"
        time.sleep(0.2)
    time.sleep(2)  # the other task of the batch finishes staging its rows
    os.killpg(query.pid, signal.SIGKILL)
    query.wait()
    assert proofs(database) == [("orders", 0, 300), ("orders", 1, 300)]
    assert len(read_table(database, killable_query.TABLE)) == 600
    orphans = staging_tables(database)
    assert orphans, "the killed attempt's finished task left its staging table behind"
    (tmp_path / "armed").unlink()
    restarted = start(tmp_path, door, database, started)
    assert restarted.wait(timeout=300) == 0
    held = Counter(r["id"] for r in read_table(database, killable_query.TABLE))
    assert sorted(held.elements()) == sorted(expected)
    assert proofs(database) == [("orders", b, 300) for b in range(FILES)]
    # the operator's cleanup: a dry run lists the orphans, --delete drops them
    pm = plugin_manager(PostgresSink(url=database, path=killable_query.TABLE))
    clock.set_clock(lambda: time.time() + 7200)
    try:
        dry = pm.hook.cleanup_target(older_than_s=3600, delete=False)
        assert sorted(x.path for x in dry.removable) == [f"eosink.{n}" for n in orphans]
        pm.hook.cleanup_target(older_than_s=3600, delete=True)
    finally:
        clock.set_clock(None)
    assert staging_tables(database) == []
    assert pm.hook.verify_target().ok
