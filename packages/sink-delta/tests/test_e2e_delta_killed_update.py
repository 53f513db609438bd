"""End to end with a real kill, Spark's ``update`` output mode into Delta: a streaming
aggregation (per ``id % 7``: count, sum of ids, greatest name) upserted by its key through
foreachBatch (the delta-rs engine: the rewrite of the files holding the batch's keys, the new
rows and the ``txn`` in one Delta commit), the query's process group killed (SIGKILL) in the
middle of its third batch and started again from its checkpoint. The table, read by delta-rs,
equals the aggregation computed once over all input: each key once, its latest row."""

from __future__ import annotations

from deltalake import DeltaTable

from eosink.testing.killed_query import QueryProcesses, totals_job
from eosink.testing.replay import source_records, totals_of, write_json_source


def held(path: str) -> dict[int, tuple]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    keys = [r["user_id"] for r in rows]
    assert len(keys) == len(set(keys)), f"a key held twice: {sorted(keys)}"
    return {r["user_id"]: (r["n"], r["total"], r["last"]) for r in rows}


def test_update_mode_aggregation_killed_mid_batch_and_restarted(tmp_path):
    write_json_source(tmp_path / "in")
    after_two = totals_of(source_records(tmp_path / "in", 2))
    table = str(tmp_path / "totals")
    options = {"path": table, "mode": "upsert", "key": ["user_id"], "engine": "delta-rs"}
    job = totals_job("delta", options, tmp_path / "in")
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert held(table) == after_two  # two batches committed, the third not at all
        queries.restart(job)
    assert held(table) == totals_of(source_records(tmp_path / "in", 4))
