"""The cross-chunk duplicate check does a bounded amount of work per chunk.

Counted, not timed: the rows (and the characters of registered runs) a chunk reads from the
registrations table, at most, for a batch of 10 chunks and one of 40. A check that reads every
earlier registration reads 4x more in the second batch; a bounded one reads the same.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from conftest import make_sink_for

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing import LocalRunner
from eosink_yt_dynamic import YtDynamicSink

KEYS = "//home/eosink/out_eosink_keys"
READS: list[tuple[int, int]] = []  # (rows, characters of runs) per read of the keys table


class CountingClient:
    """The real client; reads of the registrations table are counted."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _count(self, rows) -> list[dict]:
        rows = list(rows)
        READS.append((len(rows), sum(len(r.get("runs") or "") for r in rows)))
        return rows

    def select_rows(self, query: str, **kwargs) -> list[dict]:
        rows = self._client.select_rows(query, **kwargs)
        return self._count(rows) if KEYS in query else list(rows)

    def lookup_rows(self, table: str, keys, **kwargs) -> list[dict]:
        rows = self._client.lookup_rows(table, keys, **kwargs)
        return self._count(rows) if table == KEYS else list(rows)


class CountingSink(YtDynamicSink):
    def client(self) -> Any:
        return CountingClient(super().client())


def chunk_reads(yt_emulator, batch: int, chunks: int) -> tuple[int, int]:
    """The most rows and run characters one chunk read, for a partition of ``chunks`` chunks of
    10 rows with contiguous row indexes (as read from a queue)."""
    n = chunks * 10
    first = (batch + 1) * 10_000  # row indexes of equal length in both batches
    data = pa.record_batch(
        {
            "tablet_index": pa.array([0] * n, pa.int64()),
            "row_index": pa.array(range(first, first + n), pa.int64()),
            "id": pa.array(range(first, first + n), pa.int64()),
            "name": pa.array(["x"] * n),
            "amount": pa.array([1.0] * n),
        }
    )
    options = make_sink_for(yt_emulator, rows_per_transaction=10, create_table=True).options
    sink = CountingSink(options)
    ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=batch)
    READS.clear()
    assert run_batch(sink, ctx, data.schema, LocalRunner([[data]])).status == "committed"
    reads = READS[:chunks]  # the checks' reads; the commit's cleanup reads after them
    assert len(reads) == chunks, reads
    return max(r for r, _ in reads), max(c for _, c in reads)


def test_work_per_chunk_does_not_grow_with_the_chunks_of_a_batch(yt_emulator):
    rows_10, chars_10 = chunk_reads(yt_emulator, 0, 10)
    rows_40, chars_40 = chunk_reads(yt_emulator, 1, 40)
    assert rows_40 <= rows_10 <= 2, (rows_10, rows_40)
    assert chars_40 <= chars_10, (chars_10, chars_40)


def test_a_writer_reading_on_in_order_looks_up_none_of_its_rows(yt_emulator):
    """The check against the writer's own earlier batches reads nothing while each batch's
    rows come after the last batch's (a queue read in order): the proof's spans, one per
    source tablet, tell. A batch reaching back into them looks up only the rows inside."""
    sink = make_sink_for(yt_emulator, create_table=True)
    out = sink.options.path

    def lookups_of_the_output(batch: int, first: int) -> list[int]:
        data = pa.record_batch(
            {
                "tablet_index": pa.array([0] * 10, pa.int64()),
                "row_index": pa.array(range(first, first + 10), pa.int64()),
                "id": pa.array(range(first, first + 10), pa.int64()),
                "name": pa.array(["x"] * 10),
                "amount": pa.array([1.0] * 10),
            }
        )
        yt_emulator.requests.clear()
        ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=batch)
        assert run_batch(sink, ctx, data.schema, LocalRunner([[data]])).status == "committed"
        return [
            e.get("row_count")
            for e in yt_emulator.requests.of("lookup_rows")
            if str(e["params"].get("path")) == out
        ]

    for batch in range(5):
        assert lookups_of_the_output(batch, batch * 10) == []
    assert lookups_of_the_output(5, 45) == [5]  # rows 45..49 again (equal values: allowed)
