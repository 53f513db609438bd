"""The yt-static sink's answers to ``eosink status|verify|cleanup``: the proofs per writer, and
the MainTx of a batch in flight (its writer, batch, nested transactions) until cleanup aborts it.
"""

from __future__ import annotations

import pyarrow as pa
from conftest import TABLE
from yt_static_helpers import open_transactions

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner


def rows(ids):
    return pa.record_batch({"id": pa.array(ids, pa.int64()), "name": pa.array(["x"] * len(ids))})


def run(sink, writer, batch_id, ids):
    ctx = BatchContext(sink="yt-static", writer_id=writer, batch_id=batch_id)
    return run_batch(sink, ctx, rows(ids).schema, LocalRunner([[rows(ids)]]))


def test_status_shows_proofs_and_the_open_transaction_of_a_batch_in_flight(make_sink, yt):
    sink = make_sink()
    run(sink, "orders", 0, [1, 2, 3])
    run(sink, "backfill/2026", 4, [4])
    ctx = BatchContext(sink="yt-static", writer_id="orders", batch_id=1)
    state = sink.init(ctx, rows([5]).schema)  # a batch in flight: its MainTx is open
    try:
        status = sink.target_status()
        assert [(p.writer_id, p.batch_id) for p in status.writers] == [
            ("backfill/2026", 4),
            ("orders", 0),
        ]
        assert status.details["row_count"] == 4
        [tx] = status.details["open_transactions"]
        assert (tx["writer_id"], tx["main_tx"], tx["batch_id"]) == ("orders", state.main_tx, 1)
        assert tx["nested"] == 0  # the Init SubTx has committed
        assert sink.verify_target().ok

        young = sink.cleanup_target(older_than_s=3600, delete=True)
        assert not young.removable and len(young.kept) == 1
        assert state.main_tx in open_transactions(yt)
        old = sink.cleanup_target(older_than_s=0, delete=True)
        assert [x.kind for x in old.removable] == ["transaction"]
        assert state.main_tx not in open_transactions(yt)
        assert sink.target_status().details["open_transactions"] == []
    finally:
        sink.abort(ctx, state, [])

    yt.write_table(TABLE, [])  # the rows go, the proofs stay
    problems = sink.verify_target().problems
    assert len(problems) == 2 and "batch 0 committed 3 rows, the table holds 0" in problems[1]
