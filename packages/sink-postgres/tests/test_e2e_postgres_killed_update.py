"""End to end with a real kill, Spark's ``update`` output mode: a streaming aggregation (per
``id % 7``: count, sum of ids, greatest name) upserted by its key through foreachBatch, the
query's process group killed (SIGKILL) in the middle of its third batch and started again from
its checkpoint. The table, read by plain SQL, equals the aggregation computed once over all
input: each key's latest row, never a batch's changes applied twice or lost."""

from __future__ import annotations

from pg_helpers import read_table

from eosink.testing.killed_query import QueryProcesses, totals_job
from eosink.testing.replay import source_records, totals_of, write_json_source

TABLE = "public.user_totals"


def held(url):
    return {r["user_id"]: (r["n"], r["total"], r["last"]) for r in read_table(url, TABLE)}


def test_update_mode_aggregation_killed_mid_batch_and_restarted(tmp_path, database):
    write_json_source(tmp_path / "in")
    after_two = totals_of(source_records(tmp_path / "in", 2))
    options = {"url": database, "table": TABLE, "mode": "upsert", "key": "user_id"}
    job = totals_job("postgres", options, tmp_path / "in")
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert held(database) == after_two  # two batches committed, the third not at all
        queries.restart(job)
    assert held(database) == totals_of(source_records(tmp_path / "in", 4))
