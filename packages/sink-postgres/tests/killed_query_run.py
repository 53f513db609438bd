"""The SIGKILL scenario of the end-to-end tests (test_e2e_postgres_killed*.py), one front door
per test file so that each file's timeout covers one query killed and restarted.

The query's driver process group gets SIGKILL in the middle of a batch: one task of the batch
has staged its rows (its staging table committed), the other stalls inside its COPY; the query
starts again from the same checkpoint. The table, read by plain SQL, holds exactly the source
rows; the proofs one row per batch; the killed attempt's staging table is an orphan no reader
sees, which ``eosink cleanup postgres`` lists and drops.
"""

from __future__ import annotations

import time

from eosink_postgres.sink import PostgresSink
from pg_helpers import admin, read_table, staging_tables

from eosink import clock
from eosink.registry import plugin_manager
from eosink.testing.killed_query import QueryJob, QueryProcesses
from eosink.testing.replay import FILES, assert_exactly, write_json_source

TABLE = "public.orders"


def proofs(url):
    with admin(url) as conn:
        return conn.execute(
            "SELECT writer_id, batch_id, rows FROM eosink.proofs ORDER BY batch_id"
        ).fetchall()


def query_killed_mid_batch_and_restarted(tmp_path, database, door):
    """Run the query, kill it mid-batch, restart it; check the table, proofs and cleanup."""
    expected = write_json_source(tmp_path / "in")
    # the database URL (with its password) travels in the job file, never on a command line
    job = QueryJob(
        sink="postgres",
        door=door,
        sink_options={"url": database, "table": TABLE},
        source_options={"url": database, "path": TABLE},
    )
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert proofs(database) == [("orders", 0, 300), ("orders", 1, 300)]
        assert len(read_table(database, TABLE)) == 600
        orphans = staging_tables(database)
        assert orphans, "the killed attempt's finished task left its staging table behind"
        queries.restart(job)
    assert_exactly((r["id"] for r in read_table(database, TABLE)), expected)
    assert proofs(database) == [("orders", b, 300) for b in range(FILES)]
    # the operator's cleanup: a dry run lists the orphans, --delete drops them
    pm = plugin_manager(PostgresSink(url=database, path=TABLE))
    clock.set_clock(lambda: time.time() + 7200)
    try:
        dry = pm.hook.cleanup_target(older_than_s=3600, delete=False)
        assert sorted(x.path for x in dry.removable) == [f"eosink.{n}" for n in orphans]
        pm.hook.cleanup_target(older_than_s=3600, delete=True)
    finally:
        clock.set_clock(None)
    assert staging_tables(database) == []
    assert pm.hook.verify_target().ok
