"""The yt-dynamic sink's answers to ``eosink status|verify|cleanup``: the proofs of the table in
front of the path, those of an earlier table at the path as stale, and key registrations."""

from __future__ import annotations

from conftest import OUT, make_sink_for, rows_schema
from test_proof_scope import run

from eosink_yt_dynamic import create_output_table


def test_status_verify_and_cleanup(yt_emulator, yt):
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)
    run(sink, 0)
    run(sink, 1)

    status = sink.target_status()
    assert [(p.writer_id, p.batch_id) for p in status.writers] == [("orders", 1)]
    assert status.details["tablet_state"] == "mounted"
    assert status.details["sources_covered"] == {"orders": {"tablets": 1, "rows": 104}}
    assert status.details["stale_proof_rows"] == 0 and status.details["open_transactions"] == []
    assert sink.verify_target().ok

    yt.unmount_table(OUT, sync=True)
    yt.remove(OUT)
    create_output_table(yt, OUT, rows_schema())  # another table at the path: the proofs are stale
    assert sink.target_status().writers == ()
    dry = sink.cleanup_target(older_than_s=0, delete=False)
    assert [x.kind for x in dry.removable] == ["stale proof row"]
    sink.cleanup_target(older_than_s=0, delete=True)
    assert sink.target_status().details["stale_proof_rows"] == 0

    yt.unmount_table(OUT, sync=True)
    assert sink.verify_target().problems == (f"{OUT} is unmounted, not mounted",)
