"""Benchmark: rows/s of the sink vs a bare ``insert_rows`` loop over the same rows, on the emulator.

    ./pants run packages/sink-yt-dynamic/tests:bench -- [rows] [partitions]

Both sides start from the same Arrow batches and convert them with ``yt_rows``; the bare loop
then calls ``insert_rows`` once per chunk of ``rows_per_transaction`` rows (no transaction, no
checks), the sink runs the whole protocol (is_committed, init, write per partition with tablet
transactions, commit of the proof) with the duplicate check off, then on. Runs are interleaved
and the best of ``REPEAT`` is kept per variant, to damp the noise of a shared machine.
"""

from __future__ import annotations

import sys
import time

import pyarrow as pa

from eosink import BatchContext, run_batch
from eosink.testing import LocalRunner
from eosink_yt_common import yt_rows
from eosink_yt_dynamic import YtDynamicSink, create_output_table
from eosink_yt_emulator.server import YtEmulator

REPEAT = 3
CHUNK = 50_000


def partitions(total: int, parts: int, batch: int) -> list[list[pa.RecordBatch]]:
    per = total // parts
    out = []
    for p in range(parts):
        start = batch * per
        out.append(
            [
                pa.record_batch(
                    {
                        "tablet_index": pa.array([p] * per, pa.int64()),
                        "row_index": pa.array(range(start, start + per), pa.int64()),
                        "id": pa.array(
                            range(p * 10**9 + start, p * 10**9 + start + per), pa.int64()
                        ),
                        "name": pa.array([f"name-{i % 1000}" for i in range(per)]),
                        "amount": pa.array([i / 4 for i in range(per)], pa.float64()),
                    }
                )
            ]
        )
    return out


def bare(client, path, parts) -> None:
    for batches in parts:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            for offset in range(0, table.num_rows, CHUNK):
                client.insert_rows(path, yt_rows(table.slice(offset, CHUNK)))


def sink_run(emu, path, parts, batch, check: bool, writer: str = "bench") -> None:
    sink = YtDynamicSink(
        proxy=emu.url,
        path=path,
        proxy_discovery=False,
        client_config=emu.client_config(),
        check_duplicates=check,
    )
    ctx = BatchContext(sink=sink.name, writer_id=writer, batch_id=batch)
    outcome = run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts))
    assert outcome.status == "committed", outcome


def main() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    parts_n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    emu = YtEmulator().start()
    client = emu.client()
    schema = partitions(parts_n, parts_n, 0)[0][0].schema
    for name in ("bare", "sink", "checked"):
        create_output_table(client, f"//bench/{name}", schema)
    # warm up: aux tables, connections
    sink_run(emu, "//bench/sink", partitions(parts_n * 10, parts_n, 10_000), 0, False, "warm-up")
    sink_run(emu, "//bench/checked", partitions(parts_n * 10, parts_n, 10_000), 0, True, "warm-up")
    best = {"bare": 1e9, "sink": 1e9, "checked": 1e9}
    for r in range(REPEAT):
        parts = partitions(total, parts_n, r)
        for name in best:
            started = time.perf_counter()
            if name == "bare":
                bare(client, "//bench/bare", parts)
            else:
                sink_run(emu, f"//bench/{name}", parts, r, name == "checked")
            best[name] = min(best[name], time.perf_counter() - started)
    emu.stop()
    rate = {k: total / v for k, v in best.items()}
    print(f"{total} rows in {parts_n} partitions, chunks of {CHUNK}, best of {REPEAT}:")
    print(f"  bare insert_rows loop      {rate['bare']:>10,.0f} rows/s")
    print(
        f"  sink, check off            {rate['sink']:>10,.0f} rows/s  "
        f"(overhead {100 * (best['sink'] / best['bare'] - 1):+.1f}%)"
    )
    print(
        f"  sink, duplicate check on   {rate['checked']:>10,.0f} rows/s  "
        f"(overhead {100 * (best['checked'] / best['bare'] - 1):+.1f}%, "
        f"check costs {100 * (best['checked'] / best['sink'] - 1):+.1f}%)"
    )


if __name__ == "__main__":
    main()
