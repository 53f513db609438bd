"""End to end with a real kill, Spark's ``update`` output mode in the transactional mode: a
streaming aggregation (per ``id % 7``: count, sum of ids, greatest name) upserted by its key
through foreachBatch into a YT table keyed by it (the emulated proxy, the real client in the
query's process), the query's process group killed (SIGKILL) in the middle of its third batch
and started again from its checkpoint. The killed batch's transaction is never committed (its
pinger died with the driver); the table, read with the client's ``select_rows``, equals the
aggregation computed once over all input: each key's latest row, never a batch's changes
applied twice or lost."""

from __future__ import annotations

import pyarrow as pa

from eosink.testing.killed_query import QueryProcesses, totals_job
from eosink.testing.replay import source_records, totals_of, write_json_source
from eosink_yt_dynamic import create_output_table
from eosink_yt_emulator.kit import sink_options

TABLE = "//home/eosink/user_totals"
SCHEMA = pa.schema(
    [("user_id", pa.int64()), ("n", pa.int64()), ("total", pa.int64()), ("last", pa.string())]
)


def held(yt):
    rows = yt.select_rows(f"* from [{TABLE}]")
    return {r["user_id"]: (r["n"], r["total"], r["last"]) for r in rows}


def test_update_mode_aggregation_killed_mid_batch_and_restarted(tmp_path, yt_emulator):
    yt = yt_emulator.client()
    create_output_table(yt, TABLE, SCHEMA, key=["user_id"])
    write_json_source(tmp_path / "in")
    after_two = totals_of(source_records(tmp_path / "in", 2))
    options = {**sink_options(yt_emulator), "path": TABLE, "mode": "transactional"}
    job = totals_job("yt-dynamic", options, tmp_path / "in")
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert held(yt) == after_two  # two batches committed, the third not at all
        written = [
            r for r in yt_emulator.requests.of("insert_rows") if r["params"]["path"] == TABLE
        ]
        killed_tx = written[-1]["transaction_id"]  # the third batch's: rows written, no commit
        assert killed_tx in yt_emulator.state.txm.active_ids()
        queries.restart(job)
    assert held(yt) == totals_of(source_records(tmp_path / "in", 4))
    assert killed_tx not in [
        r["transaction_id"] for r in yt_emulator.requests.of("commit_transaction")
    ]
