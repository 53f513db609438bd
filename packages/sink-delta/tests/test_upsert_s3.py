"""Keyed upserts on S3 (delta-rs' own object store client against the loopback S3 server): the
touched files are read and rewritten through the store, partition folders included, and a
foreign append of a batch key between plan and commit is replaced."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from delta_helpers import run
from test_upsert import by_key, race_at_rewritten, users

from eosink.crash import set_crash_handler


def test_upserts_on_s3(s3_bucket):
    uri, storage = s3_bucket.uri("table"), s3_bucket.endpoint.object_store_options()
    from eosink_delta.sink import DeltaSink

    def sink():
        return DeltaSink(
            path=uri, storage_options=storage, mode="upsert", key=["user_id"], partition_by=["p"]
        )

    def read() -> dict:
        rows = DeltaTable(uri, storage_options=storage).to_pyarrow_table().to_pylist()
        return {k: (r["p"], r["v"]) for k, r in by_key(rows).items()}

    run(sink(), 0, [users([1, 2, 3], "b0", ["a b", "a b", "c"])])

    def foreign() -> None:
        extra = pa.Table.from_batches([users([3, 9], "foreign", ["c", "c"])])
        write_deltalake(uri, extra, mode="append", storage_options=storage)

    handler, calls = race_at_rewritten(foreign)
    set_crash_handler(handler)
    try:
        assert run(sink(), 1, [users([2, 3], "b1", ["c", "c"])]).status == "committed"
    finally:
        set_crash_handler(None)
    assert calls
    assert read() == {
        1: ("a b", "b0-1"),
        2: ("c", "b1-2"),  # moved out of partition "a b"
        3: ("c", "b1-3"),
        9: ("c", "foreign-9"),
    }
    assert run(sink(), 1, [users([1], "replay", ["c"])]).status == "skipped"
