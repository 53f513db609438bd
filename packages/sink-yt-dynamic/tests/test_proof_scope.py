"""A proof belongs to one output table (its path and node id) and one writer id.

Two outputs may share a progress table (fan-out into several tables with one writer id and one
``progress_path``), and a table may be dropped and created again under the same path: neither
may make the sink skip a batch that the table in front of it does not hold.
"""

from __future__ import annotations

import pyarrow as pa
from conftest import OUT, make_sink_for, rows_schema, table_rows

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing import LocalRunner
from eosink_yt_dynamic import create_output_table

SHARED_PROGRESS = "//home/eosink/progress"


def rows(batch: int, n: int = 4) -> list[list[pa.RecordBatch]]:
    first = batch * 100
    return [
        [
            pa.record_batch(
                {
                    "tablet_index": pa.array([0] * n, pa.int64()),
                    "row_index": pa.array(range(first, first + n), pa.int64()),
                    "id": pa.array(range(first, first + n), pa.int64()),
                    "name": pa.array(["x"] * n),
                    "amount": pa.array([1.0] * n),
                }
            )
        ]
    ]


def run(sink, batch: int, *, kind: str = "stream", query_id: str | None = "q"):
    ctx = BatchContext(
        sink=sink.name, writer_id="orders", batch_id=batch, kind=kind, query_id=query_id
    )
    parts = rows(batch)
    return run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts))


def test_fan_out_with_a_shared_progress_path_writes_every_output(yt_emulator, yt):
    """foreach_batch(sink_a, sink_b, writer_id=...) runs each batch into A, then into B."""
    outputs = [f"{OUT}_a", f"{OUT}_b"]
    for path in outputs:
        create_output_table(yt, path, rows_schema())
    sinks = [make_sink_for(yt_emulator, path, progress_path=SHARED_PROGRESS) for path in outputs]
    for batch in (0, 1):
        assert [run(sink, batch).status for sink in sinks] == ["committed", "committed"]
    for path in outputs:
        assert sorted(r["id"] for r in table_rows(yt, path)) == [0, 1, 2, 3, 100, 101, 102, 103]
    # a replay is skipped in both, each on its own proof
    assert [run(sink, 1).status for sink in sinks] == ["skipped", "skipped"]


def test_a_recreated_output_table_does_not_inherit_the_old_proof(yt_emulator, yt):
    """A batch job (versions) reruns version 1 after its output table was dropped and created
    again: the new table holds nothing, so nothing may be skipped."""
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)
    for version in (0, 1):
        assert run(sink, version, kind="batch", query_id=None).status == "committed"
    yt.unmount_table(OUT, sync=True)
    yt.remove(OUT)
    create_output_table(yt, OUT, rows_schema())
    assert run(sink, 1, kind="batch", query_id=None).status == "committed"
    assert sorted(r["id"] for r in table_rows(yt)) == [100, 101, 102, 103]
    assert run(sink, 1, kind="batch", query_id=None).status == "skipped"
