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


def test_cleanup_leaves_the_registrations_of_another_output_alone(yt_emulator, yt):
    """Two outputs share one keys table (``keys_path``): one's cleanup must not touch the
    other's registrations, which may belong to a batch in flight."""
    from eosink_yt_dynamic.registrations import ensure_keys_table

    shared = "//home/eosink/keys"
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator, keys_path=shared)
    run(sink, 0)
    ensure_keys_table(yt, shared)
    other = {"output_id": "1-2-3-4", "writer_id": "w", "batch_id": 7, "attempt": "a", "slot": "c"}
    yt.insert_rows(shared, [{**other, "runs": None}])

    assert sink.target_status().details["key_registrations"] == 0
    report = sink.cleanup_target(older_than_s=0, delete=True)
    assert report.removable == () and report.kept == ()
    assert [r["output_id"] for r in yt.select_rows(f"output_id from [{shared}]")] == ["1-2-3-4"]
